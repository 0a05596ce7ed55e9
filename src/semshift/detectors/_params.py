"""The detectors' parameter constraints now live in :mod:`semshift.params` (one module for
detectors, training methods, recipes and zero-shot methods); this private module re-exports them
for the detector modules written against it."""

from semshift.params import (
    Boolean,
    Constraint,
    Interval,
    ParamConstraints,
    SearchSpace,
    StrOptions,
    describe,
    satisfies,
    validate_params,
)

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
