"""Image lists in OpenOOD's format (``path label`` per line) read against a root folder."""

from __future__ import annotations

from pathlib import Path

from semshift.errors import InputError
from semshift.features.data import ImageSource
from semshift.taxonomy.classlists import ClassList

from ._common import _as_classlist, _check_files, _read_lines, _root, _Rows


def openood_list(
    path: str | Path,
    root: str | Path,
    *,
    classes: ClassList | str | Path | None = None,
    ood: bool = False,
    missing: str = "error",
) -> ImageSource:
    """An OpenOOD-style image list: ``<path> [<label>]`` per line, paths relative to ``root``.

    As OpenOOD's ``ImglistDataset`` reads it: each line is split at its first space (so paths
    hold no spaces); the rest is an integer label (absent = -1). Unlike
    :func:`~semshift.features.data.file_list`, paths are relative to the data root (OpenOOD's
    ``data_dir``), not the list's folder. A leading ``./`` is dropped (the IS-OOD lists write
    ``./imagenet21k_val/<wnid>/<file>``).

    Parameters
    ----------
    path : str or Path
        The list file.
    root : str or Path
        The data root the paths are relative to.
    classes : ClassList, name or file, optional
        Labels index into it (checked to be in range).
    ood : bool
        Every image is OOD: labels -1 whatever the list says (OpenOOD's OOD lists carry
        placeholder labels).
    missing : {"error", "skip"}

    Returns
    -------
    ImageSource
        In list order; names as in the list (without ``./``).
    """
    layout = "openood_list"
    lst = Path(path)
    top = _root(root, f"{layout} data")
    cl = _as_classlist(classes)
    entries: list[tuple[str, int]] = []
    seen: dict[str, int] = {}
    for lineno, line in _read_lines(lst, layout):
        rel, _, extra = line.partition(" ")
        rel = rel.removeprefix("./")
        if rel.startswith("/") or not rel:
            raise InputError(f"{lst}, line {lineno}: path {rel!r} must be relative to {top}")
        extra = extra.strip()
        label = -1
        if extra and not ood:
            if not extra.lstrip("-").isdigit():
                raise InputError(f"{lst}, line {lineno}: label {extra!r} is not an integer")
            label = int(extra)
            n = len(cl) if cl is not None else None
            if label < -1 or (n is not None and label >= n):
                rng = f"[-1, {n})" if n is not None else ">= -1"
                raise InputError(f"{lst}, line {lineno}: label {label} is not in {rng}")
        if rel in seen:
            raise InputError(f"{lst}, line {lineno}: {rel} already listed on line {seen[rel]}")
        seen[rel] = lineno
        entries.append((rel, label))
    present, skipped = _check_files(top, [r for r, _ in entries], layout, missing)
    ok = set(present)
    rows = _Rows(top)
    rows.skipped = skipped
    for rel, label in entries:
        if rel in ok:
            rows.add(rel, label)
    return rows.source(lst, "openood-list", cl)
