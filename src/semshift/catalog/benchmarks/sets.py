"""The sets of each shipped benchmark, built from its published lists and options."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from semshift.catalog.lists import _ISOOD_CELLS, list_counts, published_split
from semshift.errors import InputError, did_you_mean
from semshift.splits.levels import ssb_bin_level

from ._base import IMAGENET1K_VAL_IMAGES, BenchmarkSet, _bin_classes

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
        # images per class, counted from the shipped lists (catalog.lists.count_lists)
        files = list_counts()["ssb-imagenet21k-val"] if release == "winter21" else {}
        sets = _in1k_id(train_per_class)
        for b in ("easy", "hard"):
            level = ssb_bin_level(b, ("easy", "hard"))
            wnids = man.bins[b]
            n = sum(files[w] for w in wnids) if files else None
            sets.append(
                BenchmarkSet(b, "ood", "imagenet21k", "imagenet21k_list",
                             {"listing": f"{bench}:{b}", "release": release, "split": "val"},
                             images=n, classes=len(wnids), split=b, semantic_level=level)
            )  # fmt: skip
        return tuple(sets)

    return build


def _corruption_sets(corruptions: Sequence[str]) -> list[BenchmarkSet]:
    """ImageNet-1K val with semshift's own corruptions, one set per ``name:severity``."""
    if not corruptions:  # the default: the corruptions' module (NumPy) is not needed
        return []
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
    counts = list_counts()  # counted from the shipped lists (catalog.lists.count_lists)
    ood = counts["imagenet-ood"]
    sets = _in1k_id(train_per_class)
    sets.append(
        BenchmarkSet("imagenet-ood", "ood", "imagenet21k", "imagenet21k_list",
                     {"listing": "imagenet-ood"}, images=ood["images"],
                     classes=ood["classes"], split="imagenet-ood")
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
    sets.append(
        BenchmarkSet("openimage-o", "ood", "openimage_o", "openimage_o", {"split": "test"},
                     images=counts["openimage-o"]["test"], split="openimage-o", optional=True)
    )  # fmt: skip
    return tuple(sets)


def _isood(*, train_per_class: int) -> tuple[BenchmarkSet, ...]:
    counts = list_counts()["isood-imagenet"]  # counted from the shipped lists
    test = BenchmarkSet(
        "id_test", "id_test", "imagenet1k", "imagenet1k_list", {"listing": "isood:test"},
        images=counts["test_imagenet"], classes=1000,
    )  # fmt: skip
    sets = _in1k_id(train_per_class, test)
    for cell in _ISOOD_CELLS:
        files = counts[cell]
        if not files:
            continue  # IS-OOD leaves three cells empty: nothing to measure there
        _, cov, _, sem = cell.split("_")
        sets.append(
            BenchmarkSet(cell, "ood", "imagenet21k", "imagenet21k_list",
                         {"listing": f"isood:{cell}", "release": "winter21", "split": "val"},
                         images=files, semantic_level=int(sem), covariate_level=int(cov))
        )  # fmt: skip
    return tuple(sets)
