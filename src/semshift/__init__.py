"""semshift: measure classifiers and OOD detectors under semantic vs covariate shift.

Convention for the whole package: a detector score is a *normality* score (higher = more
in-distribution) and metrics take ``(scores, is_ood)`` with ``is_ood`` a boolean array.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("semshift")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

__all__ = ["__version__"]
