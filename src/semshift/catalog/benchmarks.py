"""The seed papers' benchmarks as recipes: which sets, read from which releases, by which lists.

One registry, :data:`BENCHMARKS`, declares each benchmark: its sets (name, role, size from the
shipped lists where they give one), the dataset roots it needs, the published list it is built
from (:func:`~semshift.catalog.lists.published_info`) and that list's
:func:`~semshift.catalog.lists.list_hash`. :func:`benchmark_config` turns a benchmark and the
user's roots into a ``semshift run`` configuration (a dict: this layer does not import the
runner); :func:`check_benchmark` verifies that every file the benchmark lists is on disk.

The configs name a layout and a list *name*, never the images: the selections the release
readers of :mod:`semshift.catalog.layouts` cannot express by parameters are registered here as
layouts (``ssb_split``, ``imagenet21k_list``, ``imagenet1k_subset``, ``imagenet1k_list``), so a
config written today re-runs with ``semshift run``.

>>> from semshift.catalog.benchmarks import get_benchmark, list_benchmarks
>>> list_benchmarks()[:3]
['imagenet-ood', 'isood-imagenet', 'ssb-aircraft']
>>> b = get_benchmark("ssb-imagenet")
>>> [(s.name, s.images) for s in b.sets() if s.role == "ood"]
[('easy', 50000), ('hard', 49000)]
>>> b.roots, b.list_hash
(('imagenet1k', 'imagenet21k'), '59aa5a7f0d817f1a')
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from semshift.catalog.layouts import (
    MissingImagesError,
    check_sample,
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
    PublishedList,
    imagenet_ood_images,
    isood_cells,
    isood_imagenet1k,
    list_hash,
    published_info,
    published_split,
    ssb_imagenet21k_val_files,
)
from semshift.errors import InputError, did_you_mean
from semshift.features.data import ImageSource
from semshift.registry import Registry
from semshift.splits.ssb import ssb_bin_level
from semshift.taxonomy.classlists import ClassList, load_classlist

__all__ = [
    "BENCHMARKS",
    "Benchmark",
    "BenchmarkSet",
    "CheckResult",
    "benchmark_config",
    "benchmark_record",
    "check_benchmark",
    "get_benchmark",
    "list_benchmarks",
    "register_benchmark",
]

Role = Literal["id_train", "id_test", "ood", "covariate"]

#: detectors a benchmark run uses unless told otherwise (cheap, no fitting beyond the head)
DEFAULT_DETECTORS = ("msp", "mls")

#: shown in error messages: how many missing paths are named
_SHOW = 3


@dataclass(frozen=True)
class BenchmarkSet:
    """One set of a benchmark: where its images come from and what it is.

    ``root`` is the key of the dataset root it is read from (``imagenet1k``, ``cub``, ...);
    ``layout`` and ``params`` are the reader of :mod:`semshift.catalog.layouts` that reads it.
    ``images`` and ``classes`` are the sizes the shipped lists fix (None: not fixed by a list,
    e.g. the CUB test images of a class). ``optional`` sets are read only when their root is
    given (the covariate sets of ImageNet-OOD). ``corruption`` (``{name, severity}``): semshift's
    own corruption applied to the images (:mod:`semshift.features.corruptions`).
    """

    name: str
    role: Role
    root: str
    layout: str
    params: Mapping[str, Any]
    images: int | None = None
    classes: int | None = None
    split: str | None = None
    semantic_level: int | None = None
    covariate_level: int | None = None
    optional: bool = False
    corruption: Mapping[str, Any] | None = None

    def source_config(self, root: Path) -> dict[str, Any]:
        """This set's entry in a run config's ``data`` section."""
        out: dict[str, Any] = {
            "layout": {"name": self.layout, "root": str(root), "params": dict(self.params)}
        }
        if self.corruption is not None:
            out["corruption"] = dict(self.corruption)
        if self.role in ("ood", "covariate"):
            out["role"] = self.role
            for key in ("split", "semantic_level", "covariate_level"):
                value = getattr(self, key)
                if value is not None:
                    out[key] = value
        return out


@dataclass(frozen=True)
class Benchmark:
    """A published benchmark: its sets, the roots they need, its lists and its protocols.

    ``build(**options)`` returns the sets; ``options`` are its keyword options with their
    defaults (``medium_as_hard``, ``train_per_class``, ...). Every benchmark also takes
    ``sample``: that many images of each set, evenly spaced over its list
    (:func:`~semshift.catalog.layouts.sample_positions`), for a quick look; a sampled run is
    labelled as such and is not comparable with the literature. ``num_classes`` is the size of
    the classifier's head the benchmark evaluates.
    """

    name: str
    description: str
    published: str
    num_classes: int
    protocols: Mapping[str, Mapping[str, Any]]
    options: Mapping[str, Any]
    build: Callable[..., tuple[BenchmarkSet, ...]]
    needs: str = ""  # what the user must have on disk, in words
    cite: str = ""

    def sets(self, **options: Any) -> tuple[BenchmarkSet, ...]:
        """The benchmark's sets for these options (unknown options raise ``InputError``)."""
        opts = self._options(options)
        sample = check_sample(opts.pop("sample"), "sample")
        sets = self.build(**opts)
        if sample is None:
            return sets
        return tuple(
            dataclasses.replace(
                s,
                params={**s.params, "sample": sample},
                images=None if s.images is None else min(s.images, sample),
            )
            for s in sets
        )

    def _options(self, given: Mapping[str, Any]) -> dict[str, Any]:
        known = {**self.options, "sample": None}
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise InputError(
                f"benchmark {self.name!r} takes no option {', '.join(unknown)}; options: "
                f"{', '.join(known)}"
            )
        return {**known, **given}

    @property
    def roots(self) -> tuple[str, ...]:
        """The root keys the benchmark cannot run without, in first-use order."""
        sets = self.sets()
        return tuple(dict.fromkeys(s.root for s in sets if not s.optional))

    @property
    def optional_roots(self) -> tuple[str, ...]:
        """Root keys of the optional sets (read when given)."""
        sets = self.sets()
        need = set(self.roots)
        return tuple(dict.fromkeys(s.root for s in sets if s.optional and s.root not in need))

    @property
    def info(self) -> PublishedList:
        """The published list the benchmark is built from."""
        return published_info(self.published)

    @property
    def list_hash(self) -> str:
        """:func:`~semshift.catalog.lists.list_hash` of its published list."""
        return list_hash(self.published)


# ---------------------------------------------------------------------------------------------
# layouts the benchmarks need (file selections the release readers do not express)
# ---------------------------------------------------------------------------------------------

_FINE: dict[str, Callable[..., ImageSource]] = {
    "ssb-cub": cub200, "ssb-scars": stanford_cars, "ssb-aircraft": fgvc_aircraft,
}  # fmt: skip


def _bin_classes(benchmark: str, bin: str, medium_as_hard: bool) -> list[str]:
    """Class ids of one bin of a published SSB split; ``known`` is the known classes."""
    man = published_split(benchmark)
    if bin == "known":
        return list(man.known)
    bins = dict(man.bins)
    if medium_as_hard and "medium" in bins:
        bins["hard"] = [*bins.pop("medium"), *bins.get("hard", [])]
    if bin not in bins:
        raise InputError(
            f"{benchmark}: no bin {bin!r}; bins: known, {', '.join(bins)}"
            + (
                " (medium is merged into hard: pass medium_as_hard=false)"
                if bin == "medium"
                else ""
            )
        )
    return list(bins[bin])


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


#: ImageNet-1K's 50,000 validation images, as released (``ILSVRC2012_val_00000001`` ...)
IMAGENET1K_VAL_IMAGES = 50_000


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


# ---------------------------------------------------------------------------------------------
# the benchmarks
# ---------------------------------------------------------------------------------------------

_FINE_ROOT = {"ssb-cub": "cub", "ssb-scars": "scars", "ssb-aircraft": "aircraft"}


def _fine_sets(bench: str) -> Callable[..., tuple[BenchmarkSet, ...]]:
    def build(*, medium_as_hard: bool) -> tuple[BenchmarkSet, ...]:
        man = published_split(bench)
        root = _FINE_ROOT[bench]
        p = {"benchmark": bench}
        known = len(man.known)
        sets = [
            BenchmarkSet("id_train", "id_train", root, "ssb_split",
                         {**p, "bin": "known", "split": "train"}, classes=known),
            BenchmarkSet("id_test", "id_test", root, "ssb_split",
                         {**p, "bin": "known", "split": "test"}, classes=known),
        ]  # fmt: skip
        bins = ["easy", "hard"] if medium_as_hard else list(man.bins)
        for b in bins:
            level = ssb_bin_level(b, bins)
            n = len(_bin_classes(bench, b, medium_as_hard))
            params = {**p, "bin": b, "split": "test", "medium_as_hard": medium_as_hard}
            sets.append(
                BenchmarkSet(b, "ood", root, "ssb_split", params, classes=n, split=b,
                             semantic_level=level)
            )  # fmt: skip
        return tuple(sets)

    return build


def _in1k_id(train_per_class: int, test: BenchmarkSet | None = None) -> list[BenchmarkSet]:
    train = BenchmarkSet(
        "id_train", "id_train", "imagenet1k", "imagenet1k_subset",
        {"per_class": train_per_class}, images=1000 * train_per_class, classes=1000,
    )  # fmt: skip
    val = BenchmarkSet(
        "id_test", "id_test", "imagenet1k", "imagenet1k_list", {"listing": "val"},
        images=IMAGENET1K_VAL_IMAGES, classes=1000,
    )  # fmt: skip
    return [train, test or val]


def _ssb_imagenet(bench: str, release: str) -> Callable[..., tuple[BenchmarkSet, ...]]:
    """SSB ImageNet: the known classes are all 1,000 ImageNet-1K classes for both releases.

    The fall11 pickle's ``known_classes`` holds 991 wnids: exactly the ImageNet-1K classes
    present in ImageNet-21K-P fall11. The released loader (osr_closed_set_all_you_need,
    ``data/imagenet.py``, ``get_image_net_datasets``) never reads them: it trains and tests
    on the whole ImageNet-1K, as this benchmark does.
    """

    def build(*, train_per_class: int) -> tuple[BenchmarkSet, ...]:
        man = published_split(bench)
        files = ssb_imagenet21k_val_files() if release == "winter21" else {}
        sets = _in1k_id(train_per_class)
        for b in ("easy", "hard"):
            level = ssb_bin_level(b, ("easy", "hard"))
            wnids = man.bins[b]
            n = sum(len(files[w]) for w in wnids) if files else None
            sets.append(
                BenchmarkSet(b, "ood", "imagenet21k", "imagenet21k_list",
                             {"listing": f"{bench}:{b}", "release": release, "split": "val"},
                             images=n, classes=len(wnids), split=b, semantic_level=level)
            )  # fmt: skip
        return tuple(sets)

    return build


def _corruption_sets(corruptions: Sequence[str]) -> list[BenchmarkSet]:
    """ImageNet-1K val with semshift's own corruptions, one set per ``name:severity``."""
    from semshift.features.corruptions import CORRUPTIONS, SEVERITIES

    out: list[BenchmarkSet] = []
    seen: set[str] = set()
    for item in corruptions:
        name, sep, sev = str(item).partition(":")
        if not sep or not sev.isdigit() or int(sev) not in SEVERITIES:
            raise InputError(f"corruption {item!r}: expected NAME:SEVERITY with severity 1..5")
        if name not in CORRUPTIONS:
            raise InputError(
                f"corruption {item!r}: unknown corruption {name!r}"
                f"{did_you_mean(name, CORRUPTIONS)}; known: {', '.join(CORRUPTIONS)}"
            )
        set_name = f"corrupt-{name}-{sev}"
        if set_name in seen:
            raise InputError(f"corruption {item!r} given twice")
        seen.add(set_name)
        out.append(
            BenchmarkSet(set_name, "covariate", "imagenet1k", "imagenet1k_list",
                         {"listing": "val"}, images=IMAGENET1K_VAL_IMAGES, classes=1000,
                         covariate_level=int(sev),
                         corruption={"name": name, "severity": int(sev)})
        )  # fmt: skip
    return out


def _imagenet_ood(
    *, train_per_class: int, c_by_severity: bool, corruptions: Sequence[str]
) -> tuple[BenchmarkSet, ...]:
    images = imagenet_ood_images()
    sets = _in1k_id(train_per_class)
    sets.append(
        BenchmarkSet("imagenet-ood", "ood", "imagenet21k", "imagenet21k_list",
                     {"listing": "imagenet-ood"}, images=len(images),
                     classes=len({p.split("/", 1)[0] for p in images}), split="imagenet-ood")
    )  # fmt: skip
    for name, root in (("imagenet-r", "imagenet_r"), ("imagenet-sketch", "imagenet_sketch")):
        sets.append(BenchmarkSet(name, "covariate", root, root, {}, optional=True))
    if c_by_severity:
        for sev in range(1, 6):
            sets.append(
                BenchmarkSet(f"imagenet-c-{sev}", "covariate", "imagenet_c", "imagenet_c",
                             {"severity": sev}, optional=True, covariate_level=sev)
            )  # fmt: skip
    else:
        sets.append(BenchmarkSet("imagenet-c", "covariate", "imagenet_c", "imagenet_c", {},
                                 optional=True))  # fmt: skip
    sets.extend(_corruption_sets(corruptions))
    return tuple(sets)


def _isood(*, train_per_class: int) -> tuple[BenchmarkSet, ...]:
    test = BenchmarkSet(
        "id_test", "id_test", "imagenet1k", "imagenet1k_list", {"listing": "isood:test"},
        images=len(isood_imagenet1k("test")), classes=1000,
    )  # fmt: skip
    sets = _in1k_id(train_per_class, test)
    for cell, files in isood_cells().items():
        if not files:
            continue  # IS-OOD leaves three cells empty: nothing to measure there
        _, cov, _, sem = cell.split("_")
        sets.append(
            BenchmarkSet(cell, "ood", "imagenet21k", "imagenet21k_list",
                         {"listing": f"isood:{cell}", "release": "winter21", "split": "val"},
                         images=len(files), semantic_level=int(sem), covariate_level=int(cov))
        )  # fmt: skip
    return tuple(sets)


_IN_NEEDS = (
    "ImageNet-1K (ILSVRC2012) train/ and val/ (val as class folders, or flat with Kaggle's "
    "LOC_val_solution.csv or the devkit)"
)


def _adopt(name: str, benchmark: Any) -> None:
    """Register the :class:`Benchmark` a ``semshift.benchmarks`` entry point names."""
    register_benchmark(benchmark)


#: name -> benchmark (a :class:`semshift.registry.Registry`), filled by
#: :func:`register_benchmark`; other packages add benchmarks through the ``semshift.benchmarks``
#: entry-point group (a module calling :func:`register_benchmark`, or a :class:`Benchmark`).
BENCHMARKS: Registry[Benchmark] = Registry(
    "benchmark", entry_points="semshift.benchmarks", adopt=_adopt
)


def register_benchmark(benchmark: Benchmark) -> Benchmark:
    """Add ``benchmark`` to :data:`BENCHMARKS` under its name and return it.

    Checks what can be checked without the data: a :class:`Benchmark`, a lower-case name
    without spaces, a positive class count, protocols and options as mappings, a callable
    ``build``, and a published list semshift ships (``published``).

    Raises
    ------
    DuplicateNameError
        The name is registered already.
    InputError
        Any of the checks above fails (the message names the benchmark and the field).
    """
    if not isinstance(benchmark, Benchmark):
        raise InputError(f"register_benchmark takes a Benchmark, got {type(benchmark).__name__}")
    name = benchmark.name
    BENCHMARKS.check_new(name)
    if name != name.strip().lower() or " " in name:
        raise InputError(f"benchmark {name!r}: use a lower-case name without spaces")
    n = benchmark.num_classes
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError(f"benchmark {name!r}: num_classes must be a positive integer, got {n!r}")
    for field_name in ("protocols", "options"):
        if not isinstance(getattr(benchmark, field_name), Mapping):
            raise InputError(f"benchmark {name!r}: {field_name} must be a mapping")
    if not benchmark.protocols:
        raise InputError(f"benchmark {name!r}: name at least one protocol")
    if not callable(benchmark.build):
        raise InputError(f"benchmark {name!r}: build must be callable")
    if "sample" in benchmark.options:
        raise InputError(f"benchmark {name!r}: 'sample' is every benchmark's option already")
    published_info(benchmark.published)  # UnknownNameError for a list semshift does not ship
    return BENCHMARKS.add(name, benchmark)


for _benchmark in (
    *(
        Benchmark(
            bench,
            f"SSB {title}: known classes train/test, unknown Easy / Hard from test",
            bench,
            len(published_split(bench).known),
            {"osr": {}},
            {"medium_as_hard": True},
            _fine_sets(bench),
            needs=needs,
            cite="Vaze et al., Open-Set Recognition: a Good Closed-Set "
            "Classifier is All You Need?, ICLR 2022 (Table 1)",
        )
        for bench, title, needs in (
            ("ssb-cub", "CUB-200-2011", "cub: CUB_200_2011/ (images.txt, images/, ...)"),
            (
                "ssb-scars",
                "Stanford Cars",
                "scars: the folder release car_data/car_data/{train,test}/<class>/",
            ),
            ("ssb-aircraft", "FGVC-Aircraft", "aircraft: fgvc-aircraft-2013b/"),
        )
    ),
    Benchmark(
        "ssb-imagenet",
        "SSB ImageNet: ImageNet-1K train subset / val; unknown Easy / Hard = "
        "SSB's ImageNet-21K-P winter21 val files",
        "ssb-imagenet",
        1000,
        {"osr": {}},
        {"train_per_class": 50},
        _ssb_imagenet("ssb-imagenet", "winter21"),
        needs=f"imagenet1k: {_IN_NEEDS}; imagenet21k: ImageNet-21K-P winter21 "
        "(imagenet21k_val/<wnid>/)",
        cite="Vaze et al., ICLR 2022 (Table 1)",
    ),
    Benchmark(
        "ssb-imagenet-fall11",
        "SSB ImageNet, fall11 lists: every 21K-P fall11 val image of the Easy / Hard classes; "
        "known = all 1,000 ImageNet-1K classes, as the released loader used them",
        "ssb-imagenet-fall11",
        1000,
        {"osr": {}},
        {"train_per_class": 50},
        _ssb_imagenet("ssb-imagenet-fall11", "fall11"),
        needs=f"imagenet1k: {_IN_NEEDS}; imagenet21k: ImageNet-21K-P fall11 "
        "(imagenet21k_val/<wnid>/)",
        cite="Vaze et al., ICLR 2022",
    ),
    Benchmark(
        "imagenet-ood",
        "ImageNet-OOD: ImageNet-1K val vs 31,802 ImageNet-21K images; "
        "ImageNet-R / Sketch / C as covariate sets when given",
        "imagenet-ood",
        1000,
        {"newclass_failure": {}, "osr": {}},
        {"train_per_class": 50, "c_by_severity": False, "corruptions": ()},
        _imagenet_ood,
        needs=f"imagenet1k: {_IN_NEEDS}; imagenet21k: the whole ImageNet-21K release "
        "(<wnid>/<wnid>_N.JPEG, fall11_whole or winter21_whole); optional imagenet_r, "
        "imagenet_sketch, imagenet_c",
        cite="Yang et al., ImageNet-OOD: Deciphering Modern "
        "Out-of-Distribution Detection Algorithms, ICLR 2024 (Table 1)",
    ),
    Benchmark(
        "isood-imagenet",
        "IS-OOD: ImageNet-1K test list vs the 61 non-empty cells cov_i_sem_j of ImageNet-21K val",
        "isood-imagenet",
        1000,
        {"graded": {}},
        {"train_per_class": 50},
        _isood,
        needs=f"imagenet1k: {_IN_NEEDS}; imagenet21k: ImageNet-21K-P winter21 "
        "(imagenet21k_val/<wnid>/)",
        cite="Long et al., Rethinking the Evaluation of "
        "Out-of-Distribution Detection: A Sorites Paradox, NeurIPS 2024 (IS-OOD)",
    ),
):
    register_benchmark(_benchmark)


def list_benchmarks() -> list[str]:
    """Names of the registered benchmarks, sorted."""
    return BENCHMARKS.names()


def get_benchmark(name: str) -> Benchmark:
    """The registry entry of a benchmark; unknown names raise ``UnknownNameError``."""
    return BENCHMARKS[name]


def _roots(bench: Benchmark, roots: Mapping[str, str | Path]) -> dict[str, Path]:
    """The given roots, checked against what the benchmark reads."""
    need, extra = bench.roots, bench.optional_roots
    unknown = sorted(set(roots) - set(need) - set(extra))
    if unknown:
        raise InputError(
            f"benchmark {bench.name}: unknown root {unknown[0]!r}; it reads "
            f"{', '.join((*need, *extra))}"
        )
    lost = [k for k in need if k not in roots]
    if lost:
        raise InputError(f"benchmark {bench.name} needs --root {lost[0]}=PATH ({bench.needs})")
    out: dict[str, Path] = {}
    for key, value in roots.items():
        path = Path(value).expanduser()
        if not path.is_dir():
            raise InputError(f"benchmark {bench.name}: root {key}={path} is not a folder")
        out[key] = path.resolve()
    return out


def _used(
    bench: Benchmark, roots: Mapping[str, Path], options: Mapping[str, Any]
) -> list[BenchmarkSet]:
    return [s for s in bench.sets(**options) if s.root in roots]


def benchmark_record(
    name: str, conventions: str = "exact", sample: int | None = None
) -> dict[str, Any]:
    """What a run records of its benchmark: ``{name, list_hash, fpr_convention}``, and
    ``sample`` (images per set) when the run measured a sample, not the published sets."""
    bench = get_benchmark(name)
    if conventions not in ("exact", "openood"):
        raise InputError(f"conventions={conventions!r}: use exact or openood")
    out: dict[str, Any] = {
        "name": bench.name, "list_hash": bench.list_hash, "fpr_convention": conventions,
    }  # fmt: skip
    if check_sample(sample, "sample") is not None:
        out["sample"] = sample
    return out


def benchmark_config(
    name: str,
    *,
    roots: Mapping[str, str | Path],
    model: Mapping[str, Any],
    out: str | Path,
    detectors: Sequence[str | Mapping[str, Any]] = DEFAULT_DETECTORS,
    conventions: str = "exact",
    **options: Any,
) -> dict[str, Any]:
    """A ``semshift run`` configuration (a dict) running benchmark ``name``.

    Parameters
    ----------
    name : str
        A registered benchmark (:func:`list_benchmarks`).
    roots : mapping of root key to folder
        The releases on disk, by the keys the benchmark reads (``Benchmark.roots``, plus
        ``optional_roots`` when present); made absolute.
    model : mapping
        The config's ``model:`` section (``name``, ``weights``, ...); ``num_classes`` defaults
        to the benchmark's.
    out : path
        The run's output folder.
    detectors : sequence
        Detector names or ``{name, params}`` entries.
    conventions : {"exact", "openood"}
    **options
        The benchmark's options (``medium_as_hard``, ``train_per_class``, ``sample``, ...).

    Returns
    -------
    dict
        Its ``name`` records the benchmark, its list hash, the FPR convention and the sample
        size when sampled (:func:`benchmark_record` gives them as a mapping).
    """
    bench = get_benchmark(name)
    rec = benchmark_record(name, conventions, options.get("sample"))
    paths = _roots(bench, roots)
    data: dict[str, Any] = {"sets": {}}
    for s in _used(bench, paths, options):
        entry = s.source_config(paths[s.root])
        if s.role in ("id_train", "id_test"):
            data[s.role] = entry
        else:
            data["sets"][s.name] = entry
    m = dict(model)
    m.setdefault("num_classes", bench.num_classes)
    return {
        "name": f"{rec['name']} (lists {rec['list_hash']}, fpr {rec['fpr_convention']})"
        + (
            f" SAMPLE of {rec['sample']} images per set: not the published benchmark"
            if "sample" in rec
            else ""
        ),
        "output": str(Path(out).expanduser().resolve()),
        "model": m,
        "data": data,
        "detectors": [d if isinstance(d, str) else dict(d) for d in detectors],
        "protocols": {k: dict(v) for k, v in bench.protocols.items()},
        "conventions": conventions,
        "report": {"formats": ["html", "md"]},
    }


@dataclass(frozen=True)
class CheckResult:
    """What :func:`check_benchmark` found: images per set, in the benchmark's order."""

    name: str
    list_hash: str
    counts: dict[str, int] = field(default_factory=dict)
    expected: dict[str, int | None] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def check_benchmark(name: str, roots: Mapping[str, str | Path], **options: Any) -> CheckResult:
    """Verify that every image benchmark ``name`` lists is present under ``roots``.

    Each set is read by the layout its run would use (one ``os.scandir`` per folder, no
    ``stat`` per file), except the ImageNet-21K lists, whose files are verified against one
    scan per folder without building the image source the run builds; optional sets are
    checked when their root is given.

    Raises
    ------
    InputError
        A root missing, unknown or not a folder; or missing files: one line with the set, the
        number missing and the first few paths.
    """
    bench = get_benchmark(name)
    t0 = time.perf_counter()
    paths = _roots(bench, roots)
    counts: dict[str, int] = {}
    expected: dict[str, int | None] = {}
    for s in _used(bench, paths, options):
        try:
            if s.layout == "imagenet21k_list":
                n = _count_21k_list(paths[s.root], **s.params)
            else:
                n = len(open_layout(s.layout, paths[s.root], **s.params))
        except MissingImagesError as err:  # a benchmark reads every listed image
            raise InputError(f"benchmark {name}, set {s.name}: {err.fact}; {_COMPLETE}") from None
        except InputError as err:
            raise InputError(f"benchmark {name}, set {s.name}: {err}") from None
        counts[s.name] = n
        expected[s.name] = s.images
        if s.images is not None and n != s.images:
            raise InputError(
                f"benchmark {name}, set {s.name}: {n} images read, the list has {s.images}"
            )
    return CheckResult(name, bench.list_hash, counts, expected, time.perf_counter() - t0)
