"""The file selections the benchmarks need that the release readers do not express, registered
as layouts: SSB's splits of the fine-grained sets, ImageNet-21K lists, ImageNet-1K subsets and
lists."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from semshift.catalog.layouts import (
    MissingImagesError,
    cub200,
    fgvc_aircraft,
    imagenet1k,
    imagenet21k,
    is_image_name,
    open_layout,
    register_layout,
    sample_positions,
    stanford_cars,
)
from semshift.catalog.lists import (
    imagenet_ood_images,
    isood_cells,
    isood_imagenet1k,
    published_split,
    ssb_imagenet21k_val_files,
)
from semshift.errors import InputError
from semshift.features.data import ImageSource
from semshift.taxonomy.classlists import ClassList, load_classlist

from ._base import _SHOW, IMAGENET1K_VAL_IMAGES, _bin_classes

_FINE: dict[str, Callable[..., ImageSource]] = {
    "ssb-cub": cub200, "ssb-scars": stanford_cars, "ssb-aircraft": fgvc_aircraft,
}  # fmt: skip


def _relabel(
    src: ImageSource,
    keep: Sequence[int],
    labels: Sequence[int],
    classes: ClassList | None,
    kind: str,
) -> ImageSource:
    """The samples at ``keep`` with new labels and classes."""
    return dataclasses.replace(
        src.take(keep, kind), labels=np.asarray(labels, np.int64), classes=classes
    )


#: What to do about images a benchmark lists and the disk lacks (a benchmark cannot skip them).
_COMPLETE = "complete the download (a benchmark reads every image its lists name)"


@register_layout("ssb_split")
def ssb_split(
    root: str | Path,
    benchmark: str,
    bin: str,
    split: str = "test",
    *,
    medium_as_hard: bool = True,
) -> ImageSource:
    """The images of one bin of a published fine-grained SSB split, read from its release.

    Parameters
    ----------
    root : str or Path
        The release root: CUB-200-2011 (``ssb-cub``), Stanford Cars (``ssb-scars``) or
        FGVC-Aircraft (``ssb-aircraft``), as their readers in :mod:`semshift.catalog.layouts`
        accept it.
    benchmark : {"ssb-cub", "ssb-scars", "ssb-aircraft"}
    bin : {"known", "easy", "medium", "hard"}
    split : str
        The release's split (``train`` / ``test``); SSB takes its unknown classes from ``test``.
    medium_as_hard : bool
        Merge Medium into Hard, as SSB's evaluation does (default).

    Returns
    -------
    ImageSource
        ``known``: label = position of the class in the split's known list (the classifier's
        output index; classes = the known classes). Other bins: label -1.
    """
    reader = _FINE.get(benchmark)
    if reader is None:
        raise InputError(f"ssb_split: benchmark={benchmark!r}: use {', '.join(_FINE)}")
    wanted = _bin_classes(benchmark, bin, medium_as_hard)
    try:
        src = reader(root, split)
    except MissingImagesError as err:  # no `missing: skip` here: the lists fix the images
        raise InputError(f"{err.fact}; {_COMPLETE}") from None
    position = {c: k for k, c in enumerate(wanted)}
    keep = [i for i, lab in enumerate(src.labels.tolist()) if str(lab) in position]
    if not keep:
        raise InputError(f"ssb_split: {benchmark} {split} under {root} has no image of bin {bin}")
    if bin != "known":
        return _relabel(src, keep, [-1] * len(keep), None, f"{src.kind}-ssb-{bin}")
    labels = [position[str(int(src.labels[i]))] for i in keep]
    full = src.classes
    ids = tuple(full.ids[int(c)] if full is not None else c for c in wanted)
    names = tuple(full.names[int(c)] for c in wanted) if full and full.names else None
    cl = ClassList(
        f"{benchmark}-known", ids, names, f"published:{benchmark}", tuple(range(1, len(ids) + 1))
    )
    return _relabel(src, keep, labels, cl, f"{src.kind}-ssb-known")


def _list_selection(
    listing: str, sample: int | None = None
) -> tuple[Literal["files", "wnids"], list[str]]:
    """What a list name selects from ImageNet-21K: image files (``sample`` of them, evenly
    spaced over the sorted list, when given), or whole class folders."""
    kind, items = _list_items(listing)
    if kind == "files" and sample is not None:
        items = sorted(items)
        items = [items[i] for i in sample_positions(len(items), sample).tolist()]
    return kind, items


def _list_items(listing: str) -> tuple[Literal["files", "wnids"], list[str]]:
    head, _, tail = listing.partition(":")
    if listing == "imagenet-ood":
        return "files", imagenet_ood_images()
    if head == "ssb-imagenet" and tail in ("easy", "hard"):
        files = ssb_imagenet21k_val_files()
        wnids = published_split("ssb-imagenet").bins[tail]
        return "files", [f"{w}/{f}" for w in wnids for f in files[w]]
    if head == "ssb-imagenet-fall11" and tail in ("easy", "hard"):
        return "wnids", list(published_split(head).bins[tail])
    if head == "isood":
        cells = isood_cells()
        if tail in cells:
            return "files", cells[tail]
    raise InputError(
        f"unknown ImageNet-21K list {listing!r}; use imagenet-ood, ssb-imagenet:easy|hard, "
        "ssb-imagenet-fall11:easy|hard or isood:cov_<i>_sem_<j>"
    )


@register_layout("imagenet21k_list")
def imagenet21k_list(
    root: str | Path,
    listing: str,
    release: str = "winter21",
    split: str = "val",
    *,
    missing: str = "error",
    sample: int | None = None,
) -> ImageSource:
    """ImageNet-21K images selected by a shipped list named ``listing`` (every label -1).

    ``imagenet-ood`` (31,802 files of the whole release), ``ssb-imagenet:easy`` /
    ``ssb-imagenet:hard`` (SSB's 21K-P winter21 validation files of the bin's classes),
    ``ssb-imagenet-fall11:easy`` / ``:hard`` (every image of the bin's class folders) and
    ``isood:cov_<i>_sem_<j>`` (an IS-OOD cell). ``root``, ``release`` and ``split`` as in
    :func:`~semshift.catalog.layouts.imagenet21k`. Missing files raise one ``InputError`` with
    their number and the first few paths. ``sample``: that many images evenly spaced over the
    sorted list (:func:`~semshift.catalog.layouts.sample_positions`), the only ones read.
    """
    kind, items = _list_selection(listing, sample)
    if kind == "wnids":
        src = imagenet21k(root, release, split, wnids=items)
        if sample is None or sample >= len(src):
            return src
        return src.take(sample_positions(len(src), sample), kind=f"{src.kind}-sample{sample}")
    try:
        src = imagenet21k(root, release, split, files=items, missing="skip")
    except InputError as err:
        if "no images found" not in str(err):
            raise
        lost = sorted(items)  # every listed image is missing: say so the same way
    else:
        if not src.skipped or missing != "error":
            return src
        lost = [n for n, _ in src.skipped]
    raise InputError(
        f"imagenet21k_list {listing}: {len(lost)} of {len(items)} listed images missing under "
        f"{root}, first: {', '.join(lost[:_SHOW])}"
    )


def _count_21k_list(
    root: Path,
    listing: str,
    release: str = "winter21",
    split: str = "val",
    sample: int | None = None,
    **_ignored: Any,
) -> int:
    """How many images of a shipped 21K list are present: one ``os.scandir`` per folder.

    What :func:`imagenet21k_list` verifies before it builds the image source, without building
    it (``check_benchmark`` reads 99,000 to 523,000 listed files this way). Missing files raise
    the same one-line ``InputError``; a class folder outside the release's 21K-P class list
    too.
    """
    kind, items = _list_selection(listing, sample)
    if kind == "wnids":
        return len(open_layout("imagenet21k_list", root, listing=listing, release=release,
                               split=split, sample=sample))  # fmt: skip
    sub = f"imagenet21k_{split}"
    p_tree = (root / sub).is_dir()
    tree = root / sub if p_tree else root
    by_folder: dict[str, list[str]] = {}
    for item in items:
        folder, _, name = item.removeprefix("./").removeprefix(f"{sub}/").rpartition("/")
        by_folder.setdefault(folder, []).append(name)
    if p_tree:
        release_list = {"winter21": "imagenet21k-p-winter21", "fall11": "imagenet21k-p"}
        if release not in release_list:
            raise InputError(f"imagenet21k_list: release={release!r}: use winter21 or fall11")
        known = set(load_classlist(release_list[release]).ids)
        bad = next((w for w in by_folder if w not in known), None)
        if bad is not None:
            raise InputError(
                f"imagenet21k_list {listing}: {bad} is not a class of ImageNet-21K-P {release}"
            )
    lost: list[str] = []
    for folder, names in by_folder.items():
        try:
            with os.scandir(tree / folder) as entries:
                have = {e.name for e in entries}
        except OSError:
            have = set()
        lost.extend(f"{folder}/{n}" for n in names if n not in have)
    if lost:
        lost.sort()
        raise InputError(
            f"imagenet21k_list {listing}: {len(lost)} of {len(items)} listed images missing "
            f"under {root}, first: {', '.join(lost[:_SHOW])}"
        )
    return len(items)


@register_layout("imagenet1k_subset")
def imagenet1k_subset(
    root: str | Path, per_class: int = 50, *, sample: int | None = None
) -> ImageSource:
    """``per_class`` ImageNet-1K training images of every class, chosen deterministically.

    In each ``train/<wnid>/`` folder (or the Kaggle ``ILSVRC/Data/CLS-LOC/train/``) the image
    names are sorted and ``per_class`` of them taken at evenly spaced positions
    (``numpy.linspace(0, n - 1, per_class)`` rounded down), so the same release gives the same
    subset on every machine. One ``os.scandir`` per class folder, no ``stat`` per file.
    ``sample``: that many of the ``1000 * per_class`` images, evenly spaced over the
    class-major order; only the class folders they fall in are read.

    Returns
    -------
    ImageSource
        Labels = index in the shipped ``imagenet1k`` list; names ``train/<wnid>/<file>``.
    """
    if isinstance(per_class, bool) or not isinstance(per_class, int) or per_class < 1:
        raise InputError(f"imagenet1k_subset: per_class={per_class!r}: use a positive integer")
    base = Path(root)
    top = next(
        (t for t in (base, base / "ILSVRC" / "Data" / "CLS-LOC") if (t / "train").is_dir()), None
    )
    if top is None:
        raise InputError(
            f"imagenet1k_subset: no train/ folder under {base} (nor ILSVRC/Data/CLS-LOC)"
        )
    cl = load_classlist("imagenet1k")
    train = top / "train"
    prefix = os.path.join(str(top.resolve()), "train", "")  # joined by hand: no join per file
    # the (class, pick) pairs: every class's per_class picks, or a sample of them
    flat = sample_positions(len(cl.ids) * per_class, sample)
    wanted: dict[int, list[int]] = {}
    for k, j in zip((flat // per_class).tolist(), (flat % per_class).tolist(), strict=True):
        wanted.setdefault(k, []).append(j)
    paths: list[str] = []
    names: list[str] = []
    labels: list[int] = []
    lost: list[str] = []
    for k, picks_wanted in wanted.items():
        wnid = cl.ids[k]
        try:
            with os.scandir(train / wnid) as entries:
                found = sorted(e.name for e in entries if is_image_name(e.name))
        except OSError:
            lost.append(f"train/{wnid}/")
            continue
        if len(found) < per_class:
            raise InputError(
                f"imagenet1k_subset: {train / wnid} holds {len(found)} images, fewer than "
                f"per_class={per_class}"
            )
        picks = np.linspace(0, len(found) - 1, per_class).astype(np.int64)
        for j in picks[picks_wanted].tolist():
            rel = f"train/{wnid}/{found[j]}"
            names.append(rel)
            paths.append(f"{prefix}{wnid}{os.sep}{found[j]}")
            labels.append(k)
    if lost:
        raise InputError(
            f"imagenet1k_subset: {len(lost)} of {len(wanted)} class folders missing under {top}, "
            f"first: {', '.join(lost[:_SHOW])}"
        )
    groups = {"class_id": [n.split("/")[1] for n in names]}
    kind = "imagenet1k-train-subset" + (f"-sample{sample}" if sample is not None else "")
    return ImageSource(top, kind, paths, names, np.asarray(labels, np.int64), cl, groups)


def _in1k_listing(listing: str) -> list[str]:
    """File names (without folder) of a shipped ImageNet-1K list: ``val`` or ``isood:test|val``."""
    if listing == "val":
        return [f"ILSVRC2012_val_{k:08d}.JPEG" for k in range(1, IMAGENET1K_VAL_IMAGES + 1)]
    head, _, kind = listing.partition(":")
    if head != "isood" or kind not in ("test", "val"):
        raise InputError(f"imagenet1k_list: listing={listing!r}: use val, isood:test or isood:val")
    return [p.rsplit("/", 1)[-1] for p in isood_imagenet1k(kind)]  # type: ignore[arg-type]


@register_layout("imagenet1k_list")
def imagenet1k_list(
    root: str | Path, listing: str = "val", *, sample: int | None = None
) -> ImageSource:
    """The ImageNet-1K validation images of a list: ``val`` (all 50,000, as released) or IS-OOD's
    ``isood:test`` (45,000) / ``isood:val`` (5,000).

    The lists name files ``ILSVRC2012_val_N.JPEG``; the val folder may be flat or in class
    folders (read by :func:`~semshift.catalog.layouts.imagenet1k`), an image is matched by its
    file name. Every listed image must be present. ``sample``: that many images evenly spaced
    over the sorted list, the only ones that must be present. Labels as that reader gives them.
    """
    names = sorted(_in1k_listing(listing))
    if sample is not None:
        names = [names[i] for i in sample_positions(len(names), sample).tolist()]
    wanted = set(names)
    src = imagenet1k(root, "val")
    keep = [i for i, n in enumerate(src.names) if n.rsplit("/", 1)[-1] in wanted]
    if len(keep) < len(wanted):
        have = {src.names[i].rsplit("/", 1)[-1] for i in keep}
        lost = sorted(wanted - have)
        raise InputError(
            f"imagenet1k_list {listing}: {len(lost)} of {len(wanted)} listed images missing "
            f"under {root}, first: {', '.join(lost[:_SHOW])}"
        )
    tag = listing.replace(":", "-") + (f"-sample{sample}" if sample is not None else "")
    return src.take(keep, kind=f"{src.kind}-{tag}")
