"""The names options take from a registry, for their ``--help``.

The registries import NumPy, pandas, SciPy or PyTorch (the detectors alone take 0.5 s), which
every ``semshift`` call would pay at start-up, ``--help`` included: typer builds every
command's help when it builds the command. Their shipped names are written out here, and
``tests/test_cli_help.py`` and ``tests/test_light_commands.py`` keep each list equal to its
registry (a new name fails there until it is added here).

Plugins still show: :func:`names` lists from the registry itself when it is already imported
(something registered in this process) or when an installed package has an entry point in its
group (importing the registry then costs only those who installed a plugin). The help strings
call it inside the commands' annotations, which typer evaluates when it builds the command.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

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
ZSL_METHODS = ("dap", "iap", "conse", "cmt", "cmt_star", "sse", "latem", "ale", "devise", "sje",
               "eszsl", "sync", "sae", "gfzsl")  # fmt: skip
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
#: ``semshift.detectors``: the post-hoc detectors (fitted and scored on stored features), sorted
POST_HOC_DETECTORS = (
    "arpl", "ash_b", "ash_p", "ash_s", "cadref", "caref", "cfood", "dice", "energy", "entropy",
    "fdbd", "gen", "gmm", "gradnorm", "grood", "klm", "knn", "lts", "mahalanobis", "max_cosine",
    "mcm", "mls", "msp", "nci", "neco", "nnguide", "openmax", "pnml", "react", "relation",
    "residual", "rmd", "scale", "she", "temp_scaling", "vim", "vra", "weighted_ebo",
)  # fmt: skip
#: ``semshift.detectors``: the model-level detectors (computed during extraction), sorted
MODEL_DETECTORS = (
    "adascale_a", "adascale_l", "gradnorm_kl", "gram", "iodin", "mahalanobis_odin", "mc_dropout",
    "mds_ensemble", "multi_mahalanobis", "nac", "odin", "rankfeat",
)  # fmt: skip


@dataclass(frozen=True)
class _Source:
    builtin: tuple[str, ...]  # the shipped names, written out above
    module: str  # the registry's module
    live: Callable[[ModuleType], Iterable[str]]  # its names, from the imported module
    group: str  # its entry-point group


def _on_stores(m: Any) -> list[str]:
    return [n for n in m.list_protocols() if m.get_protocol(n).on_stores]


def _ranking(m: Any) -> list[str]:
    return list(m.list_metrics(inputs=("scores", "is_ood")))


_SOURCES = {
    "evaluate_protocols": _Source(
        EVALUATE_PROTOCOLS, "semshift.protocols", _on_stores, "semshift.protocols"
    ),
    "ranking_metrics": _Source(RANKING_METRICS, "semshift.metrics", _ranking, "semshift.metrics"),
    "training_methods": _Source(
        TRAINING_METHODS,
        "semshift.training.methods",
        lambda m: m.list_methods(),
        "semshift.training_methods",
    ),
    "zsl_methods": _Source(
        ZSL_METHODS,
        "semshift.training.zsl.registry",
        lambda m: m.list_zsl_methods(),
        "semshift.zsl_methods",
    ),
    "detectors": _Source(
        tuple(sorted(POST_HOC_DETECTORS + MODEL_DETECTORS)),
        "semshift.detectors",
        lambda m: m.list_detectors(),
        "semshift.detectors",
    ),
    "model_detectors": _Source(
        MODEL_DETECTORS,
        "semshift.detectors",
        lambda m: m.list_detectors(level="model"),
        "semshift.detectors",
    ),
    "benchmarks": _Source(
        BENCHMARKS,
        "semshift.catalog.benchmarks",
        lambda m: m.list_benchmarks(),
        "semshift.benchmarks",
    ),
}


@functools.cache
def _plugin_groups() -> frozenset[str]:
    """The entry-point groups installed packages declare: one scan per process, as the
    registries load their entry points once."""
    from importlib.metadata import entry_points

    return frozenset(entry_points().groups)


def _has_plugins(group: str) -> bool:
    return group in _plugin_groups()


def names(kind: str) -> tuple[str, ...]:
    """The names of one registry-backed option (a key of ``_SOURCES``), plugins included.

    The shipped names, unless the registry is already imported or a plugin is installed in its
    entry-point group: then the registry's own list, in its order."""
    src = _SOURCES[kind]
    if src.module in sys.modules or _has_plugins(src.group):
        live = list(src.live(importlib.import_module(src.module)))
        shipped = [n for n in src.builtin if n in live]  # the written-out order first
        return tuple(shipped + [n for n in live if n not in src.builtin])
    return src.builtin


def listed_names(kind: str) -> str:
    """:func:`names` of one option, as :func:`listed` writes them."""
    return listed(names(kind))


def listed(names: Iterable[str], last: str = "or") -> str:
    """``a, b or c``: names for a help string."""
    items = list(names)
    if len(items) < 2:
        return "".join(items)
    return f"{', '.join(items[:-1])} {last} {items[-1]}"


def detectors(level: str | None = None) -> str:
    """The detectors (every one, or the model-level ones: ``level="model"``), plugins included,
    sorted as the registry lists them."""
    if level not in (None, "model"):
        raise ValueError(f"detectors(level=...) takes None or 'model', got {level!r}")
    return ", ".join(sorted(names("detectors" if level is None else "model_detectors")))
