"""Split builders and split manifests.

Each builder module (``ssb``, ``cleaning``, ``superclass``, ``graded``, ``zsl``) registers its
builder in :mod:`semshift.splits.registry` when imported; they are imported here, so importing
anything under ``semshift.splits`` (the registry included) registers every builder.
"""

from semshift.splits import cleaning, graded, sample, superclass, zsl  # noqa: F401  (registration)
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

__all__ = [
    "PRESETS",
    "BuildContext",
    "SSBResult",
    "SplitBuilder",
    "SplitManifest",
    "build_split",
    "build_ssb_split",
    "get_builder",
    "list_builders",
    "ssb_bin_level",
    "validate_params",
]
