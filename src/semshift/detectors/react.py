"""ReAct: energy of the head applied to activations clipped at an ID percentile."""

from __future__ import annotations

from numbers import Real
from typing import ClassVar

import numpy as np

from ._base import Inputs
from ._common import F32, exact_percentile
from ._head import HeadEnergyDetector
from ._params import Interval, ParamConstraints, SearchSpace
from ._registry import register_detector

__all__ = ["ReAct"]


@register_detector
class ReAct(HeadEnergyDetector):
    """ReAct score ``Energy(W min(h, c) + b)``; higher = more in-distribution.

    c is the ``percentile``-th percentile of all ID training activations (every entry of the
    training feature matrix), computed exactly in blocks (equal to ``np.percentile``).

    Parameters
    ----------
    percentile : float, default 90
        Percentile of the training activations used as the clipping threshold.

    Attributes
    ----------
    threshold_ : float
        The clipping threshold c.

    References
    ----------
    .. [1] Y. Sun, C. Guo and Y. Li, "ReAct: Out-of-distribution Detection With Rectified
       Activations", NeurIPS 2021.
    """

    name = "react"
    fit_requires = frozenset({"features", "head"})
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "percentile": [Interval(Real, 0, 100, closed="both")]
    }
    #: OpenOOD v1.5's sweep (configs/postprocessors/react.yml)
    search_space: ClassVar[SearchSpace] = {"percentile": (85.0, 90.0, 95.0, 99.0)}

    def __init__(self, *, percentile: float = 90.0) -> None:
        self.percentile = percentile

    def _fit(self, inputs: Inputs) -> None:
        super()._fit(inputs)
        self.threshold_ = exact_percentile(inputs.get("features"), float(self.percentile))

    def _transform(self, h: F32) -> F32:
        return np.minimum(h, np.float32(self.threshold_))
