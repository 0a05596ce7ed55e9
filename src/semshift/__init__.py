"""semshift: measure classifiers and OOD detectors under semantic vs covariate shift.

Convention for the whole package: a detector score is a *normality* score (higher = more
in-distribution) and metrics take ``(scores, is_ood)`` with ``is_ood`` a boolean array.
"""

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    """``__version__``, read from the installed metadata on first use: importing
    :mod:`importlib.metadata` costs 40 ms, which a light command (``semshift taxonomy show``)
    does not pay."""
    if name != "__version__":
        raise AttributeError(f"module 'semshift' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        value = version("semshift")
    except PackageNotFoundError:  # pragma: no cover - a source tree without install
        value = "0.0.0"
    globals()["__version__"] = value
    return value
