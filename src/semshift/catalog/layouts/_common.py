"""What every reader shares: image-name scanning, root and marker lookup, the row builder, the
missing-images error and the class-list helpers (WordNet ids, the ImageNet-1K label order)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from semshift.errors import InputError, UnknownNameError
from semshift.features.data import IMAGE_EXTENSIONS, ImageSource
from semshift.taxonomy.classlists import ClassList, load_classlist
from semshift.textio import read_text

_VAL_IMAGE = re.compile(r"^ILSVRC2012_val_(\d{8})$")


_DEVKIT = "ILSVRC2012_devkit_t12"


_21K_RELEASES = {"winter21": "imagenet21k-p-winter21", "fall11": "imagenet21k-p"}


_EXT_CASES = tuple({e for x in IMAGE_EXTENSIONS for e in (x, x.upper())})


def is_image_name(name: str) -> bool:
    """Whether a file name has an image extension (any case): one C-level ``endswith`` for the
    usual spellings, the lower-cased suffix otherwise."""
    if name.endswith(_EXT_CASES):
        return True
    dot = name.rfind(".")
    return dot > 0 and name[dot:].lower() in IMAGE_EXTENSIONS


def _scan(folder: Path) -> tuple[list[str], list[str]]:
    """(sorted sub-folder names, sorted image file names) of ``folder``: one ``os.scandir``.

    ``DirEntry.is_dir`` reads the entry type the scan already returned, so no file is stat-ed.
    Hidden entries are ignored.
    """
    dirs: list[str] = []
    images: list[str] = []
    try:
        with os.scandir(folder) as entries:
            for e in entries:
                if e.name.startswith("."):
                    continue
                if e.is_dir():
                    dirs.append(e.name)
                elif is_image_name(e.name):
                    images.append(e.name)
    except OSError as err:
        raise InputError(f"cannot list folder {folder}: {err.strerror or err}") from None
    return sorted(dirs), sorted(images)


def _root(root: str | Path, layout: str) -> Path:
    base = Path(root)
    if not base.is_dir():
        raise InputError(f"{layout} root {base} does not exist or is not a folder")
    return base


def _locate(root: str | Path, layout: str, marker: str, candidates: Sequence[str]) -> Path:
    """The first ``root/<candidate>`` that holds ``marker`` (a file or folder).

    Raises an :class:`InputError` naming every place looked at and the expected layout.
    """
    base = _root(root, layout)
    for cand in candidates:
        top = base / cand if cand else base
        if (top / marker).exists():
            return top
    looked = ", ".join(str((base / c / marker) if c else base / marker) for c in candidates)
    raise InputError(f"{layout}: {marker} not found (looked for {looked})")


def _read_lines(path: Path, layout: str) -> list[tuple[int, str]]:
    """(line number, stripped line) of the non-empty lines of a release's text file."""
    if not path.is_file() and not path.exists():
        raise InputError(f"{layout}: {path} not found")
    text = read_text(path, f"{layout}:")
    return [(i, ln.strip()) for i, ln in enumerate(text.splitlines(), 1) if ln.strip()]


class _Rows:
    """Samples collected by a reader, in order."""

    def __init__(self, top: Path) -> None:
        self.top = str(top.resolve())  # resolved once; files are joined to it (no stat per file)
        self._prefix = os.path.join(self.top, "")
        self.paths: list[str] = []
        self.names: list[str] = []
        self.labels: list[int] = []
        self.groups: dict[str, list[Any]] = {}
        self.skipped: list[tuple[str, str]] = []

    def add(self, name: str, label: int, **groups: Any) -> None:
        self.paths.append(self._prefix + (name if os.sep == "/" else name.replace("/", os.sep)))
        self.names.append(name)
        self.labels.append(label)
        for key, value in groups.items():
            self.groups.setdefault(key, []).append(value)

    def source(self, root: Path, kind: str, classes: ClassList | None) -> ImageSource:
        if not self.paths:
            raise InputError(f"{kind}: no images found under {root}")
        return ImageSource(
            root,
            kind,
            self.paths,
            self.names,
            np.asarray(self.labels, np.int64),
            classes,
            groups=self.groups,
            skipped=self.skipped,
        )


class MissingImagesError(InputError):
    """Listed images are not on disk. ``str()`` adds what to do (complete the download, or
    leave them out with the layout parameter ``missing: skip``); :attr:`fact` is the finding
    alone, for callers whose users cannot skip (a benchmark check)."""

    def __init__(self, fact: str) -> None:
        super().__init__(
            f"{fact}; complete the download, or leave them out with the layout parameter "
            "missing: skip (in a run config, `layout: {params: {missing: skip}}`; in Python, "
            "missing='skip')"
        )
        self.fact = fact


def _check_files(
    top: Path, rels: Iterable[str], layout: str, missing: str
) -> tuple[list[str], list[tuple[str, str]]]:
    """Split ``rels`` (``/``-separated, relative to ``top``) into present and missing files.

    Each distinct folder is scanned once. ``missing="error"`` raises on the first missing file
    (with the count); ``"skip"`` returns them as ``(name, reason)``.
    """
    if missing not in ("error", "skip"):
        raise InputError(f"missing={missing!r}: use 'error' or 'skip'")
    rels = list(rels)
    listing: dict[str, set[str]] = {}
    present: list[str] = []
    absent: list[str] = []
    for rel in rels:
        folder, _, name = rel.rpartition("/")
        if folder not in listing:
            try:
                with os.scandir(top / folder if folder else top) as entries:
                    listing[folder] = {e.name for e in entries}
            except OSError:
                listing[folder] = set()
        (present if name in listing[folder] else absent).append(rel)
    if absent and missing == "error":
        raise MissingImagesError(
            f"{layout}: {len(absent)} of {len(rels)} listed images are missing under {top}, "
            f"first {absent[0]}"
        )
    return present, [(rel, "listed image not found") for rel in absent]


def _shipped(name: str) -> ClassList:
    return load_classlist(name)


def _as_classlist(classes: ClassList | str | Path | None) -> ClassList | None:
    if classes is None or isinstance(classes, ClassList):
        return classes
    return load_classlist(classes)


def _wnid_index(cl: ClassList) -> dict[str, int]:
    return {cid: k for k, cid in enumerate(cl.ids)}


def _wnid_tree(
    base: Path,
    prefix: str,
    rows: _Rows,
    label_of: Callable[[str], int],
    layout: str,
    folders: Sequence[str] | None = None,
    **groups: Any,
) -> None:
    """Add ``base/<class>/<image>`` (names ``prefix<class>/<image>``) to ``rows``.

    ``folders`` restricts the classes (default: every sub-folder). An empty class folder, a
    requested folder that does not exist, and images directly in ``base`` are errors.
    """
    dirs, loose = _scan(base)
    if loose:
        raise InputError(
            f"{layout}: {base} holds images directly ({loose[0]}, ...); expected only "
            "class folders <class>/<image>"
        )
    if folders is not None:
        have = set(dirs)
        lost = [f for f in folders if f not in have]
        if lost:
            raise InputError(
                f"{layout}: {len(lost)} class folders missing under {base}, first {lost[0]}"
            )
        dirs = sorted(set(folders))
    if not dirs:
        raise InputError(f"{layout}: {base} has no class folders <class>/<image>")
    for d in dirs:
        _, images = _scan(base / d)
        if not images:
            raise InputError(f"{layout}: class folder {base / d} has no images")
        label = label_of(d)
        for img in images:
            rows.add(f"{prefix}{d}/{img}", label, class_id=d, **groups)


def _in1k_label_of(cl: ClassList, layout: str, where: Path) -> Callable[[str], int]:
    index = _wnid_index(cl)

    def label_of(wnid: str) -> int:
        try:
            return index[wnid]
        except KeyError:
            raise UnknownNameError(
                f"{layout}: class folder {where / wnid} is not an ImageNet-1K wnid "
                f"(shipped list {cl.name!r}); is this the right root?"
            ) from None

    return label_of


def sample_positions(n: int, sample: int | None) -> NDArray[np.int64]:
    """Positions of ``sample`` items evenly spaced over ``n`` (every position when ``sample`` is
    None or at least ``n``): ``floor(linspace(0, n - 1, sample))``, distinct and increasing.

    >>> sample_positions(10, 4).tolist()
    [0, 3, 6, 9]
    """
    if sample is None or sample >= n:
        return np.arange(n, dtype=np.int64)
    return np.floor(np.linspace(0, n - 1, sample)).astype(np.int64)
