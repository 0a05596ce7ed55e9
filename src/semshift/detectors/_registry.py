"""The detector registry, filled by :func:`register_detector` where each detector is defined.

One registry holds every detector: the post-hoc ones (``level = "post_hoc"``, fitted and scored
by this package) and the model-level ones (``level = "model"``, computed during feature
extraction; each in its own module, on the base of :mod:`semshift.detectors.model_level`).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, TypeVar

from semshift.errors import InputError, UnknownNameError

from ._base import LEVELS, Detector
from ._params import Constraint, validate_params

__all__ = ["check_params", "get", "get_class", "list_detectors", "register_detector"]

_REGISTRY: dict[str, type[Detector]] = {}
D = TypeVar("D", bound=type[Detector])


def _check_declaration(cls: type[Detector]) -> None:
    """Raise TypeError unless ``cls`` declares its level and a constraint for each parameter."""
    if cls.level not in LEVELS:
        raise TypeError(f"{cls.__name__}: level must be one of {LEVELS}, got {cls.level!r}")
    declared = cls._parameter_constraints
    params = cls.param_names()
    missing = [p for p in params if p not in declared]
    extra = sorted(set(declared) - set(params))
    if missing or extra:
        raise TypeError(
            f"{cls.__name__}: _parameter_constraints must have one entry per keyword "
            f"hyperparameter of __init__; missing {missing}, not a hyperparameter {extra}"
        )
    for param, constraints in declared.items():
        if not constraints or not all(c is None or isinstance(c, Constraint) for c in constraints):
            raise TypeError(
                f"{cls.__name__}: _parameter_constraints[{param!r}] must be a non-empty list of "
                f"Constraint or None, got {constraints!r}"
            )


def register_detector(cls: D) -> D:
    """Class decorator adding a :class:`Detector` subclass to the registry under ``cls.name``.

    Raises
    ------
    ValueError
        The name is empty or already registered.
    TypeError
        Unknown ``level``, or ``_parameter_constraints`` does not declare exactly the keyword
        hyperparameters of ``__init__``.
    """
    name = cls.name
    if not name or name in _REGISTRY:
        raise ValueError(f"detector name {name!r} is empty or already registered")
    _check_declaration(cls)
    _REGISTRY[name] = cls
    return cls


def list_detectors(level: str | None = None) -> list[str]:
    """Names of the registered detectors, sorted.

    Parameters
    ----------
    level : {"post_hoc", "model"} or None, default None
        Only the detectors of this level: ``"post_hoc"`` (fitted and scored on stored logits
        and features) or ``"model"`` (computed during feature extraction: odin, rankfeat, lts, ...).
        None: every detector.

    Raises
    ------
    InputError
        Unknown level.

    Examples
    --------
    >>> from semshift import detectors
    >>> detectors.list_detectors(level="model")
    ['lts', 'mc_dropout', 'odin', 'rankfeat']
    """
    if level is None:
        return sorted(_REGISTRY)
    if level not in LEVELS:
        raise InputError(f"unknown detector level {level!r}; known: {', '.join(LEVELS)}")
    return sorted(name for name, cls in _REGISTRY.items() if cls.level == level)


def get_class(name: str) -> type[Detector]:
    """The detector class registered as ``name`` (of either level).

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


def check_params(name: str, params: Mapping[str, Any]) -> None:
    """Check hyperparameter names and values for the detector ``name``; build nothing.

    Checks against the class's declared ``_parameter_constraints`` only, so a configuration can
    be validated before any feature is extracted or loaded. Checks that depend on the data (k
    against the number of training rows, a percentile that keeps no activation of D) happen
    in ``fit``.

    Parameters
    ----------
    name : str
        A name from :func:`list_detectors` (either level).
    params : mapping of str to object
        Hyperparameters to check; those not given keep their defaults, which are valid.

    Raises
    ------
    UnknownNameError
        Unknown detector name (the message lists the known ones).
    InputError
        A hyperparameter the detector does not have (the message lists the accepted ones), or
        a value outside its constraints (the message names the detector, the parameter, what
        it accepts and the value given).

    Examples
    --------
    >>> from semshift import detectors
    >>> detectors.check_params("knn", {"k": 10})
    >>> detectors.check_params("knn", {"k": 0})
    Traceback (most recent call last):
    ...
    semshift.errors.InputError: knn: k must be an integer >= 1, got 0
    """
    cls = get_class(name)
    accepted = cls.param_names()
    unknown = sorted(set(params) - set(accepted), key=str)
    if unknown:
        raise InputError(
            f"{name} has no hyperparameter {', '.join(map(str, unknown))}; "
            f"accepted: {', '.join(accepted) or '(none)'}"
        )
    validate_params(name, cls._parameter_constraints, params)


def get(name: str, **params: Any) -> Detector:
    """Instantiate the detector ``name`` with checked keyword hyperparameters.

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
        A hyperparameter the detector does not have, or a value it does not accept (see
        :func:`check_params`).

    Examples
    --------
    >>> from semshift import detectors
    >>> detectors.get("knn", k=10)
    KNN(k=10, backend='auto')
    """
    check_params(name, params)
    return get_class(name)(**params)
