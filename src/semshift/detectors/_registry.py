"""The detector registry, filled by :func:`register_detector` where each detector is defined.

One registry holds every detector: the post-hoc ones (``level = "post_hoc"``, fitted and scored
by this package) and the model-level ones (``level = "model"``, computed during feature
extraction; each in its own module, on the base of :mod:`semshift.detectors.model_level`).
:data:`DETECTORS` is a :class:`semshift.registry.Registry`; another package adds detectors
without editing semshift through the ``semshift.detectors`` entry-point group: an entry point
naming a module that applies :func:`register_detector` where its classes are defined, or naming a
:class:`Detector` subclass (checked as :func:`register_detector` checks it, registered under its
``name``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from semshift.errors import InputError
from semshift.registry import Registry

from ._base import LEVELS, Detector
from ._params import Constraint, validate_params

__all__ = [
    "DETECTORS",
    "check_params",
    "check_search_space",
    "get",
    "get_class",
    "get_search_space",
    "list_detectors",
    "register_detector",
]

D = TypeVar("D", bound=type[Detector])


def _adopt(name: str, cls: Any) -> None:
    """Register the class a ``semshift.detectors`` entry point names."""
    if not (isinstance(cls, type) and issubclass(cls, Detector)):
        raise TypeError(f"entry point {name!r} names {cls!r}, not a Detector subclass")
    register_detector(cls)


#: Every detector class, by name (both levels).
DETECTORS: Registry[type[Detector]] = Registry(
    "detector", entry_points="semshift.detectors", adopt=_adopt
)


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
    space = cls.search_space
    if space and cls.level != "post_hoc":
        raise TypeError(
            f"{cls.__name__}: a model-level detector is computed during feature extraction and "
            "declares no search_space"
        )
    for param, candidates in space.items():
        if param not in declared:
            raise TypeError(f"{cls.__name__}: search_space[{param!r}] is not a hyperparameter")
        if not isinstance(candidates, tuple) or not candidates:
            raise TypeError(
                f"{cls.__name__}: search_space[{param!r}] must be a non-empty tuple of candidates"
            )
        try:
            _check_candidates(cls.name or cls.__name__, param, candidates, declared[param])
        except InputError as err:
            raise TypeError(f"{cls.__name__}: search_space: {err}") from None


def _check_candidates(
    owner: str, param: str, candidates: Sequence[Any], constraints: Sequence[Constraint | None]
) -> None:
    """Raise :class:`InputError` for a candidate outside the constraints or given twice."""
    seen: set[str] = set()
    for value in candidates:
        validate_params(owner, {param: constraints}, {param: value})
        key = repr(value.item() if isinstance(value, np.generic) else value)
        if key in seen:
            raise InputError(f"{owner}: candidate {key} of {param} is given twice")
        seen.add(key)


def register_detector(cls: D) -> D:
    """Class decorator adding a :class:`Detector` subclass to the registry under ``cls.name``.

    Raises
    ------
    InputError
        The name is empty.
    DuplicateNameError
        The name is already registered (an InputError, so also a ValueError).
    TypeError
        Unknown ``level``, ``_parameter_constraints`` does not declare exactly the keyword
        hyperparameters of ``__init__``, or a ``search_space`` candidate is not a value its
        hyperparameter accepts (or a model-level detector declares a search space).
    """
    _check_declaration(cls)
    DETECTORS.add(cls.name, cls)
    return cls


def list_detectors(level: str | None = None) -> list[str]:
    """Names of the registered detectors, sorted.

    Parameters
    ----------
    level : {"post_hoc", "model"} or None, default None
        Only the detectors of this level: ``"post_hoc"`` (fitted and scored on stored logits
        and features) or ``"model"`` (computed during feature extraction: odin, rankfeat, ...).
        None: every detector.

    Raises
    ------
    InputError
        Unknown level.

    Examples
    --------
    >>> from semshift import detectors
    >>> detectors.list_detectors(level="model")[:4]
    ['adascale_a', 'adascale_l', 'gradnorm_kl', 'gram']
    """
    if level is None:
        return DETECTORS.names()
    if level not in LEVELS:
        raise InputError(f"unknown detector level {level!r}; known: {', '.join(LEVELS)}")
    return DETECTORS.names(where=lambda name, cls: cls.level == level)


def get_class(name: str) -> type[Detector]:
    """The detector class registered as ``name`` (of either level).

    Raises
    ------
    UnknownNameError
        No detector has this name; the message lists close matches and every known name.
    """
    return DETECTORS[name]


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
    semshift.errors.ParamError: knn: k must be an integer >= 1, got 0
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


def get_search_space(name: str) -> dict[str, tuple[Any, ...]]:
    """The search space the detector ``name`` declares: hyperparameter -> candidates, in order.

    Empty for detectors with nothing to tune and for model-level detectors (their
    hyperparameters are fixed when the features are extracted).

    Raises
    ------
    UnknownNameError
        Unknown detector name (the message lists the known ones).

    Examples
    --------
    >>> from semshift import detectors
    >>> detectors.get_search_space("react")
    {'percentile': (85.0, 90.0, 95.0, 99.0)}
    >>> detectors.get_search_space("msp")
    {}
    """
    return dict(get_class(name).search_space)


def check_search_space(
    name: str,
    space: Mapping[str, Sequence[Any]] | None = None,
    *,
    fixed: Mapping[str, Any] | None = None,
) -> dict[str, tuple[Any, ...]]:
    """The candidates a search of ``name`` tries, checked before any work.

    Parameters
    ----------
    name : str
        A post-hoc detector from :func:`list_detectors`.
    space : mapping of str to sequence, optional
        Candidates per hyperparameter replacing the declared ``search_space`` (any
        hyperparameter of the detector may be given, in the order to try). None: the declared
        space, less the hyperparameters in ``fixed``.
    fixed : mapping, optional
        Hyperparameters fixed by the caller; they are not searched.

    Returns
    -------
    dict of str to tuple
        Hyperparameter -> candidates, in search order.

    Raises
    ------
    UnknownNameError
        Unknown detector name.
    InputError
        A model-level detector (computed during feature extraction: nothing to search on
        stored scores), a hyperparameter the detector does not have, a candidate it does not
        accept, a candidate given twice, a hyperparameter both fixed and searched, or nothing
        left to search.

    Examples
    --------
    >>> from semshift import detectors
    >>> detectors.check_search_space("knn", {"k": [1, 10, 50]})
    {'k': (1, 10, 50)}
    >>> detectors.check_search_space("knn", {"k": [0, 10]})
    Traceback (most recent call last):
    ...
    semshift.errors.ParamError: knn: k must be an integer >= 1, got 0
    """
    cls = get_class(name)
    if cls.level != "post_hoc":
        raise InputError(
            f"{name} is a model-level detector: it is computed during feature extraction, so its "
            "hyperparameters cannot be searched on stored scores; fix them in the detector list "
            f"instead (e.g. {name}:PARAM=VALUE)"
        )
    fixed = dict(fixed or {})
    if space is None:
        out = {p: tuple(c) for p, c in cls.search_space.items() if p not in fixed}
        if not out:
            why = "its searched hyperparameters are fixed" if cls.search_space else "no space"
            raise InputError(
                f"{name} has nothing to search ({why}); give candidates (e.g. {name}:PARAM=V1,V2) "
                "or leave it out of the search"
            )
        return out
    accepted = cls.param_names()
    unknown = sorted(set(space) - set(accepted), key=str)
    if unknown:
        raise InputError(
            f"{name} has no hyperparameter {', '.join(map(str, unknown))}; "
            f"accepted: {', '.join(accepted) or '(none)'}"
        )
    both = sorted(set(space) & set(fixed))
    if both:
        raise InputError(
            f"{name}: {', '.join(both)} is both fixed ({both[0]}={fixed[both[0]]!r}) and "
            "searched; remove one of the two"
        )
    if not space:
        raise InputError(f"{name}: no hyperparameter to search was given")
    out = {}
    for param, candidates in space.items():
        values = (
            tuple(candidates)
            if isinstance(candidates, Sequence) and not isinstance(candidates, str)
            else (candidates,)
        )
        if not values:
            raise InputError(f"{name}: {param} has no candidate; give one or more values")
        _check_candidates(name, param, values, cls._parameter_constraints[param])
        out[param] = values
    return out
