"""ImageNet-1K's covariate and OOD variants: ImageNet-R, ImageNet-Sketch, ImageNet-O and
ImageNet-C (by corruption and severity)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from semshift.errors import InputError
from semshift.features.data import ImageSource

from ._common import _in1k_label_of, _root, _Rows, _scan, _shipped, _wnid_tree


def _in1k_variant(root: str | Path, layout: str, candidates: Sequence[str]) -> ImageSource:
    base = _root(root, layout)
    top = base
    for cand in candidates:
        if (base / cand).is_dir():
            top = base / cand
            break
    cl = _shipped("imagenet1k")
    rows = _Rows(top)
    _wnid_tree(top, "", rows, _in1k_label_of(cl, layout, top), layout)
    return rows.source(top, layout, cl)


def imagenet_r(root: str | Path) -> ImageSource:
    """ImageNet-R (``imagenet-r/<wnid>/*.jpg``, 200 classes), labels = ImageNet-1K indices.

    The 200 wnids are mapped to their index in the shipped ``imagenet1k`` list (so a 1,000-way
    classifier's prediction is compared directly; restrict the logits to the 200 classes
    elsewhere if wanted). ``root`` is ``imagenet-r/`` or its parent. Group ``class_id`` = wnid.
    """
    return _in1k_variant(root, "imagenet_r", ("imagenet-r",))


def imagenet_sketch(root: str | Path) -> ImageSource:
    """ImageNet-Sketch (``sketch/<wnid>/*.JPEG``, 1,000 classes), labels = ImageNet-1K indices.

    ``root`` is ``sketch/`` (as ImageNet-Sketch.zip unpacks) or its parent.
    """
    return _in1k_variant(root, "imagenet_sketch", ("sketch", "imagenet-sketch"))


def imagenet_o(root: str | Path) -> ImageSource:
    """ImageNet-O (``imagenet-o/<wnid>/*.jpg``): every image is OOD (label -1).

    Labels index into the shipped ``imagenet1k`` list (all -1); the wnid of each image's folder
    is kept in the group column ``class_id``. ``root`` is ``imagenet-o/`` or its parent.
    """
    layout = "imagenet_o"
    base = _root(root, layout)
    top = base / "imagenet-o" if (base / "imagenet-o").is_dir() else base
    rows = _Rows(top)
    _wnid_tree(top, "", rows, lambda _: -1, layout)
    return rows.source(top, layout, _shipped("imagenet1k"))


def imagenet_c(
    root: str | Path,
    corruption: str | Sequence[str] | None = None,
    severity: int | Sequence[int] | None = None,
) -> ImageSource:
    """ImageNet-C (``<corruption>/<severity>/<wnid>/*.JPEG``), labels = ImageNet-1K indices.

    Parameters
    ----------
    root : str or Path
        The folder holding the corruption folders (``gaussian_noise/``, ``fog/``, ...) as the
        released tars unpack.
    corruption : str or sequence of str, optional
        Default: every corruption folder present.
    severity : int or sequence of int (1..5), optional
        Default: every severity folder present.

    Returns
    -------
    ImageSource
        Ordered by corruption, severity, wnid, file; names
        ``<corruption>/<severity>/<wnid>/<file>``; groups ``corruption`` (str), ``severity``
        (int) and ``class_id`` (wnid).
    """
    layout = "imagenet_c"
    top = _root(root, layout)
    have, _ = _scan(top)
    if corruption is None:
        chosen = have
    else:
        chosen = sorted({corruption} if isinstance(corruption, str) else set(corruption))
        lost = [c for c in chosen if c not in have]
        if lost:
            raise InputError(
                f"{layout}: corruption folder {top / lost[0]} not found "
                f"(present: {', '.join(have) or 'none'})"
            )
    if not chosen:
        raise InputError(f"{layout}: {top} has no corruption folders <corruption>/<severity>/")
    wanted = (
        None if severity is None else {severity} if isinstance(severity, int) else set(severity)
    )
    if wanted is not None and not wanted <= {1, 2, 3, 4, 5}:
        raise InputError(f"{layout}: severity {sorted(wanted)} must be in 1..5")
    cl = _shipped("imagenet1k")
    rows = _Rows(top)
    for corr in chosen:
        levels, _ = _scan(top / corr)
        bad = [lv for lv in levels if lv not in {"1", "2", "3", "4", "5"}]
        if bad or not levels:
            raise InputError(
                f"{layout}: {top / corr} should hold severity folders 1..5"
                + (f", not {bad[0]!r}" if bad else "")
            )
        use = [int(lv) for lv in levels] if wanted is None else sorted(wanted)
        lost_lv = [s for s in use if str(s) not in levels]
        if lost_lv:
            raise InputError(f"{layout}: severity folder {top / corr / str(lost_lv[0])} not found")
        for sev in sorted(use):
            where = top / corr / str(sev)
            _wnid_tree(
                where,
                f"{corr}/{sev}/",
                rows,
                _in1k_label_of(cl, layout, where),
                layout,
                corruption=corr,
                severity=sev,
            )
    return rows.source(top, layout, cl)
