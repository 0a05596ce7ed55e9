"""Split builders and split manifests.

Each builder module (``ssb``, ``sample``, ``cleaning``, ``superclass``, ``graded``, ``zsl``)
registers its builder in :mod:`semshift.splits.registry` when imported. The registry imports
them (:func:`import_builders`) on its first lookup or listing, so reading a manifest
(:mod:`semshift.splits.manifest`) imports no builder, and the names below load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from semshift.lazy import lazy_names

if TYPE_CHECKING:
    from semshift.splits.manifest import SplitManifest
    from semshift.splits.registry import (
        BuildContext,
        SplitBuilder,
        build_split,
        get_builder,
        list_builders,
        validate_params,
    )
    from semshift.splits.ssb import PRESETS, SSBResult, build_ssb_split, ssb_bin_level

#: the builder modules, each registering its builder when imported
BUILDER_MODULES = ("ssb", "sample", "cleaning", "superclass", "graded", "zsl")

#: public name -> the module that defines it (imported on first use)
_LAZY = {
    "SplitManifest": "manifest",
    "BuildContext": "registry",
    "SplitBuilder": "registry",
    "build_split": "registry",
    "get_builder": "registry",
    "list_builders": "registry",
    "validate_params": "registry",
    "PRESETS": "ssb",
    "SSBResult": "ssb",
    "build_ssb_split": "ssb",
    "ssb_bin_level": "ssb",
}


def import_builders() -> None:
    """Import every builder module of semshift (each registers its builder)."""
    for name in BUILDER_MODULES:
        importlib.import_module(f"{__name__}.{name}")


__getattr__, __dir__ = lazy_names(__name__, {n: f".{m}" for n, m in _LAZY.items()})

__all__ = [
    "PRESETS",
    "BuildContext",
    "SSBResult",
    "SplitBuilder",
    "SplitManifest",
    "build_split",
    "build_ssb_split",
    "get_builder",
    "import_builders",
    "list_builders",
    "ssb_bin_level",
    "validate_params",
]
