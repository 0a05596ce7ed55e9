"""One parameter-constraint system for detectors, training methods, recipes and zero-shot methods:
hyperparameter constraints declared beside the parameters, as scikit-learn's
``_parameter_constraints``, so a configuration is checked before any work starts.

Each detector class declares ``_parameter_constraints: dict[str, list[Constraint | None]]``,
one entry per keyword hyperparameter of its ``__init__``; a value is valid when it satisfies
at least one constraint of its list (``None`` in a list means the value ``None`` is allowed).
Every constraint describes itself in words (``str(constraint)``), which is what error messages
say. :func:`validate_params` checks a mapping of values against such a declaration.

>>> from numbers import Integral
>>> str(Interval(Integral, 1, None, closed="left"))
'an integer >= 1'
>>> validate_params("knn", {"k": [Interval(Integral, 1, None, closed="left")]}, {"k": 0})
Traceback (most recent call last):
...
semshift.errors.ParamError: knn: k must be an integer >= 1, got 0
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from numbers import Integral, Real
from typing import Any, Literal

import numpy as np

from semshift.errors import ParamError

__all__ = [
    "Boolean",
    "Constraint",
    "Interval",
    "ParamConstraints",
    "SearchSpace",
    "StrOptions",
    "describe",
    "satisfies",
    "validate_params",
]

Closed = Literal["left", "right", "both", "neither"]


class Constraint:
    """A set of accepted values that says in words what it accepts (``str(constraint)``)."""

    def is_satisfied_by(self, value: object) -> bool:  # pragma: no cover - abstract
        """Whether ``value`` is accepted."""
        raise NotImplementedError

    def __str__(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self}>"

    def examples_outside(self) -> list[Any]:
        """A few values this constraint refuses (the generated rejection tests use them); a
        new kind of constraint defined in a detector's module lists its own."""
        raise NotImplementedError(f"{type(self).__name__} lists no values it refuses")


#: The type of a class's ``_parameter_constraints``: hyperparameter name -> accepted values.
ParamConstraints = dict[str, list[Constraint | None]]
#: The type of a class's ``search_space``: hyperparameter name -> candidates, in search order.
SearchSpace = dict[str, tuple[Any, ...]]


def _is_bool(value: object) -> bool:
    return isinstance(value, bool | np.bool_)


def _number(value: float, integral: bool) -> str:
    return str(int(value)) if integral else f"{value:g}"


class Interval(Constraint):
    """Real numbers or integers in an interval.

    Parameters
    ----------
    type : numbers.Integral or numbers.Real
        ``Integral`` accepts Python and NumPy integers; ``Real`` also accepts floats. Booleans
        are never numbers here.
    left, right : float or None
        Bounds; None means unbounded (and open) on that side, so infinity is accepted only as
        a closed bound given explicitly (``right=math.inf, closed="right"``). NaN is never in
        an interval.
    closed : {"left", "right", "both", "neither"}
        Which bounds belong to the interval.

    Examples
    --------
    >>> from numbers import Real
    >>> c = Interval(Real, 0, 100, closed="left")
    >>> str(c), c.is_satisfied_by(0), c.is_satisfied_by(100.0)
    ('a number in [0, 100)', True, False)
    """

    def __init__(
        self, type: type, left: float | None, right: float | None, *, closed: Closed
    ) -> None:
        if type not in (Integral, Real):
            raise TypeError(f"Interval type must be numbers.Integral or numbers.Real, got {type}")
        if closed not in ("left", "right", "both", "neither"):
            raise ValueError(f"Interval closed must be left, right, both or neither, got {closed}")
        if left is not None and right is not None and left > right:
            raise ValueError(f"Interval bounds are reversed: left {left} > right {right}")
        self.type, self.left, self.right, self.closed = type, left, right, closed

    def is_satisfied_by(self, value: object) -> bool:
        if _is_bool(value) or not isinstance(value, self.type):
            return False
        v = float(value)
        if math.isnan(v):
            return False
        lo = -math.inf if self.left is None else self.left
        hi = math.inf if self.right is None else self.right
        left_in = v >= lo if self.closed in ("left", "both") and self.left is not None else v > lo
        right_in = (
            v <= hi if self.closed in ("right", "both") and self.right is not None else v < hi
        )
        return left_in and right_in

    def __str__(self) -> str:
        integral = self.type is Integral
        what = "an integer" if integral else "a number"
        left_closed = self.closed in ("left", "both")
        right_closed = self.closed in ("right", "both")
        lo, hi = self.left, self.right
        if lo is not None and hi is not None:
            lb, rb = ("[" if left_closed else "("), ("]" if right_closed else ")")
            return f"{what} in {lb}{_number(lo, integral)}, {_number(hi, integral)}{rb}"
        if lo is not None:
            return f"{what} {'>=' if left_closed else '>'} {_number(lo, integral)}"
        if hi is not None:
            return f"{what} {'<=' if right_closed else '<'} {_number(hi, integral)}"
        return what if integral else "a finite number"


class StrOptions(Constraint):
    """One string out of a fixed set.

    Parameters
    ----------
    options : iterable of str
        The accepted strings; listed in messages in the given order (sorted if a set).

    Examples
    --------
    >>> str(StrOptions(("auto", "numpy", "faiss")))
    "one of 'auto', 'numpy', 'faiss'"
    """

    def __init__(self, options: Iterable[str]) -> None:
        ordered = sorted(options) if isinstance(options, set | frozenset) else list(options)
        if not ordered or not all(isinstance(o, str) for o in ordered):
            raise TypeError(f"StrOptions needs one or more strings, got {options!r}")
        self.options: tuple[str, ...] = tuple(dict.fromkeys(ordered))

    def is_satisfied_by(self, value: object) -> bool:
        return isinstance(value, str) and value in self.options

    def __str__(self) -> str:
        return "one of " + ", ".join(repr(o) for o in self.options)


class Boolean(Constraint):
    """``True`` or ``False`` (a Python or NumPy boolean; not 0 or 1)."""

    def is_satisfied_by(self, value: object) -> bool:
        return _is_bool(value)

    def __str__(self) -> str:
        return "a boolean (true or false)"


def describe(constraints: Iterable[Constraint | None]) -> str:
    """The constraints of one parameter in words: ``"an integer >= 1 or None"``."""
    words = [("None" if c is None else str(c)) for c in constraints]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _shown(value: object) -> str:
    """``repr`` of a value, NumPy scalars shown as the Python value (``0``, not ``np.int64(0)``)."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def satisfies(constraints: Iterable[Constraint | None], value: object) -> bool:
    """Whether ``value`` satisfies at least one of ``constraints``."""
    return any(value is None if c is None else c.is_satisfied_by(value) for c in constraints)


def validate_params(
    owner: str,
    constraints: Mapping[str, Iterable[Constraint | None]],
    params: Mapping[str, Any],
) -> None:
    """Check each value of ``params`` against the constraints declared for its name.

    Names without a declaration are not checked here (the caller rejects unknown names with
    the list of accepted ones).

    Raises
    ------
    ParamError
        An :class:`~semshift.errors.InputError` whose ``key`` is the parameter: one line naming
        the owner, the parameter, what it accepts and the value given:
        ``"knn: k must be an integer >= 1, got 0"``.
    """
    for name, value in params.items():
        declared = constraints.get(name)
        if declared is None:
            continue
        declared = list(declared)
        if not satisfies(declared, value):
            raise ParamError(
                name, f"{owner}: {name} must be {describe(declared)}, got {_shown(value)}"
            )
