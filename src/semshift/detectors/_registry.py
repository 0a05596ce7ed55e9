"""The detector registry, filled by :func:`register_detector` where each detector is defined."""

from __future__ import annotations

import difflib
from typing import Any, TypeVar

from semshift.errors import InputError, UnknownNameError

from ._base import Detector

__all__ = ["get", "get_class", "list_detectors", "register_detector"]

_REGISTRY: dict[str, type[Detector]] = {}
D = TypeVar("D", bound=type[Detector])


def register_detector(cls: D) -> D:
    """Class decorator adding a :class:`Detector` subclass to the registry under ``cls.name``."""
    name = cls.name
    if not name or name in _REGISTRY:
        raise ValueError(f"detector name {name!r} is empty or already registered")
    _REGISTRY[name] = cls
    return cls


def list_detectors() -> list[str]:
    """Names of every registered detector, sorted."""
    return sorted(_REGISTRY)


def get_class(name: str) -> type[Detector]:
    """The detector class registered as ``name``.

    Raises
    ------
    UnknownNameError
        No detector has this name; the message lists close matches and every known name.
    """
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        close = difflib.get_close_matches(str(name), _REGISTRY, n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise UnknownNameError(
            f"unknown detector {name!r}.{hint} Known detectors: {', '.join(list_detectors())}"
        ) from None


def get(name: str, **params: Any) -> Detector:
    """Instantiate the detector ``name`` with keyword hyperparameters.

    Parameters
    ----------
    name : str
        A name from :func:`list_detectors`.
    **params
        Hyperparameters; those not given keep the paper defaults.

    Returns
    -------
    Detector
        Unfitted detector.

    Raises
    ------
    UnknownNameError
        Unknown detector name (the message lists the known ones).
    InputError
        A hyperparameter the detector does not have (the message lists the accepted ones).

    Examples
    --------
    >>> from semshift import detectors
    >>> detectors.get("knn", k=10)
    KNN(k=10, backend='auto')
    """
    cls = get_class(name)
    accepted = cls.param_names()
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise InputError(
            f"detector {name!r} has no hyperparameter {', '.join(unknown)}; "
            f"accepted: {', '.join(accepted) or '(none)'}"
        )
    return cls(**params)
