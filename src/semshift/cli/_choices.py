"""The names options take from a registry, for their ``--help``.

The detector registry is imported with the command anyway (it is cheap), so detector names are
listed from it. The other registries import pandas, scipy or PyTorch (from 0.2 to 3 s), which
every ``semshift`` call would pay at start-up; their names are written out here, and
``tests/test_cli_help.py`` keeps each list equal to its registry (a new name fails there until
it is added here).
"""

from __future__ import annotations

from collections.abc import Iterable

#: ``semshift.protocols``: the protocols ``semshift evaluate`` runs on stores alone (``on_stores``)
EVALUATE_PROTOCOLS = ("osr", "newclass_failure", "generalisation", "operating_point")
#: ``semshift.metrics``: the ranking metrics, inputs (scores, is_ood)
RANKING_METRICS = (
    "auroc", "fpr95", "aupr_in", "aupr_out", "aupr_in_openood", "aupr_in_trapezoid",
    "aupr_out_openood", "aupr_out_trapezoid", "auroc_openood", "detection_error",
    "fpr95_ood_recall", "fpr95_openood",
)  # fmt: skip
#: ``semshift.training.methods``: the training methods (``semshift train --method``)
TRAINING_METHODS = ("ce", "logitnorm", "oe", "arpl", "arpl_cs")
#: ``semshift.training.zsl``: the zero-shot methods, in the paper's order
ZSL_METHODS = ("conse", "latem", "ale", "devise", "sje", "eszsl", "sync", "sae")
#: ``semshift.catalog.benchmarks``: the seed papers' benchmarks
BENCHMARKS = (
    "imagenet-ood", "isood-imagenet", "ssb-aircraft", "ssb-cub", "ssb-imagenet",
    "ssb-imagenet-fall11", "ssb-scars",
)  # fmt: skip
#: ``semshift.features.corruptions``: the ImageNet-C corruptions semshift applies itself
CORRUPTIONS = (
    "gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "gaussian_blur",
    "contrast", "brightness", "saturate", "jpeg", "pixelate",
)  # fmt: skip
#: ``semshift.taxonomy.classlists``: the shipped class lists
CLASS_LISTS = ("imagenet1k", "imagenet21k-p", "imagenet21k-p-winter21")


def listed(names: Iterable[str], last: str = "or") -> str:
    """``a, b or c``: names for a help string."""
    items = list(names)
    if len(items) < 2:
        return "".join(items)
    return f"{', '.join(items[:-1])} {last} {items[-1]}"


def detectors(level: str | None = None) -> str:
    """The registered detectors (of one level), listed from the registry."""
    from semshift.detectors import list_detectors

    return ", ".join(list_detectors(level=level))
