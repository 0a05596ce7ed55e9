"""The zero-shot methods' former constraint classes, kept importable from
:mod:`semshift.training.zsl.registry` for one release (with a ``DeprecationWarning``); the methods
declare their constraints with :mod:`semshift.params`, as detectors and training methods do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from semshift.errors import InputError

__all__ = ["Choice", "Interval"]


@dataclass(frozen=True)
class Interval:
    """A numeric constraint: ``low < x`` (``<=`` when ``closed_low``), ``x <= high``;
    ``integer`` asks for an int."""

    low: float | None = None
    high: float | None = None
    closed_low: bool = False
    integer: bool = False

    def check(self, name: str, value: Any) -> None:
        kind = "an integer" if self.integer else "a number"
        ok_type = (
            isinstance(value, int | np.integer)
            if self.integer
            else (isinstance(value, int | float | np.integer | np.floating))
        )
        if isinstance(value, bool) or not ok_type or not np.isfinite(value):
            raise InputError(f"{name} must be {kind}, got {value!r}")
        if self.low is not None and (
            value < self.low or (value == self.low and not self.closed_low)
        ):
            rel = ">=" if self.closed_low else ">"
            raise InputError(f"{name} must be {rel} {self.low}, got {value!r}")
        if self.high is not None and value > self.high:
            raise InputError(f"{name} must be <= {self.high}, got {value!r}")


@dataclass(frozen=True)
class Choice:
    """One of a fixed set of values."""

    values: tuple[Any, ...]

    def check(self, name: str, value: Any) -> None:
        if value not in self.values:
            raise InputError(
                f"{name} must be one of {', '.join(map(repr, self.values))}, got {value!r}"
            )


LegacyConstraint = Interval | Choice
