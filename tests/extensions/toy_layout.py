"""A toy dataset layout in one module: a release with ``classes.txt`` and one CSV per split
(``<split>.csv``: ``file,class`` rows, files relative to ``images/``).

:func:`register` adds the reader (a package would apply ``register_layout`` on import, through
the ``semshift.layouts`` entry-point group).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from semshift.catalog.layouts import LAYOUTS, register_layout
from semshift.errors import InputError
from semshift.features.data import ImageSource
from semshift.taxonomy.classlists import load_classlist

NAME = "toy_csv_release"


def read(root: str | Path, split: str = "test") -> ImageSource:
    """The images of ``split`` listed in ``root/<split>.csv``, labels in ``classes.txt`` order."""
    root = Path(root)
    listing = root / f"{split}.csv"
    if not listing.is_file():
        raise InputError(f"{NAME}: no {listing.name} in {root}")
    classes = load_classlist(root / "classes.txt")
    position = {c: i for i, c in enumerate(classes.ids)}
    with listing.open(newline="") as f:
        rows = list(csv.reader(f))
    names = [r[0] for r in rows]
    labels = np.array([position[r[1]] for r in rows], dtype=np.int64)
    paths = [str(root / "images" / n) for n in names]
    missing = [n for n, p in zip(names, paths, strict=True) if not Path(p).is_file()]
    if missing:
        raise InputError(f"{NAME}: {len(missing)} listed image(s) missing, first {missing[0]}")
    return ImageSource(root=root, kind=NAME, paths=paths, names=names, labels=labels,
                       classes=classes)  # fmt: skip


def register() -> None:
    register_layout(NAME)(read)


def unregister() -> None:
    LAYOUTS.remove(NAME)
