"""OpenImage-O: OpenImages files selected by the shipped list (Wang et al., ViM, CVPR 2022)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from semshift.features.data import ImageSource

from ._common import _check_files, _root, _Rows, sample_positions

#: the folders under ``root`` that may hold the files (OpenOOD v1.5's second), else ``root``
_FOLDERS = ("openimage_o", "images_largescale/openimage_o")


def openimage_o(
    root: str | Path,
    split: Literal["test", "val"] = "test",
    *,
    missing: str = "error",
    sample: int | None = None,
) -> ImageSource:
    """The OpenImage-O images of ``split`` (15,869 ``test`` / 1,763 ``val``), every label -1.

    ``root`` is the folder holding the ``<id>.jpg`` files, or a parent with ``openimage_o/``
    (OpenOOD's ``images_largescale/openimage_o/`` too). Images are in the shipped list's order
    (:func:`semshift.catalog.openimage_o_images`); a listed file that is missing is an error
    naming the count and the first one (``missing="skip"`` leaves them out). ``sample``: that
    many images evenly spaced over the sorted list, the only ones looked for.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from PIL import Image
    >>> from semshift.catalog import openimage_o_images
    >>> tmp = tempfile.TemporaryDirectory()
    >>> d = pathlib.Path(tmp.name) / "openimage_o"; d.mkdir()
    >>> for name in openimage_o_images("val")[:2]:
    ...     Image.new("RGB", (4, 4)).save(d / name)
    >>> src = openimage_o(d.parent, "val", missing="skip")
    >>> len(src), set(src.labels.tolist()), len(src.skipped)
    (2, {-1}, 1761)
    >>> tmp.cleanup()
    """
    from semshift.catalog.lists import openimage_o_images

    layout = "openimage_o"
    base = _root(root, layout)
    names = openimage_o_images(split)
    top = next((base / f for f in _FOLDERS if (base / f).is_dir()), base)
    if sample is not None:
        ordered = sorted(names)
        names = [ordered[i] for i in sample_positions(len(ordered), sample)]
    present, skipped = _check_files(top, names, layout, missing)
    rows = _Rows(top)
    rows.skipped = skipped
    for name in present:
        rows.add(name, -1)
    return rows.source(top, f"openimage-o-{split}", None)
