"""Split builders and split manifests."""

from semshift.splits.manifest import SplitManifest
from semshift.splits.ssb import PRESETS, SSBResult, build_ssb_split

__all__ = ["PRESETS", "SSBResult", "SplitManifest", "build_ssb_split"]
