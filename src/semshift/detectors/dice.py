"""DICE: energy of a head sparsified to its largest expected contributions."""

from __future__ import annotations

from numbers import Real
from typing import ClassVar

import numpy as np

from ._base import Inputs
from ._common import column_mean, f32
from ._head import HeadEnergyDetector
from ._params import Interval, ParamConstraints, SearchSpace
from ._registry import register_detector
from ._shared import digest

__all__ = ["Dice"]


@register_detector
class Dice(HeadEnergyDetector):
    """DICE score ``Energy(W_masked h + b)``; higher = more in-distribution.

    V = W * mean_train(h) (each class row multiplied element-wise by the mean training
    feature); weights whose V is above the ``percentile``-th percentile of all C x D entries of
    V are kept, the others zeroed. No N x C x D "vote" tensor is formed (OpenOOD's form):
    ``W_masked h`` is one matrix product.

    Parameters
    ----------
    percentile : float, default 90
        Sparsity: percentage of weights zeroed.

    Attributes
    ----------
    mean_feature_ : float64 array (D,)
        Mean training feature.
    mask_ : bool array (C, D)
        Kept weights.

    References
    ----------
    .. [1] Y. Sun and Y. Li, "DICE: Leveraging Sparsification for Out-of-Distribution
       Detection", ECCV 2022.
    """

    name = "dice"
    fit_requires = frozenset({"features", "head"})
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "percentile": [Interval(Real, 0, 100, closed="both")]
    }
    #: the sparsities p of the paper's ablation (Sun and Li, ECCV 2022, fig. 4)
    search_space: ClassVar[SearchSpace] = {"percentile": (10.0, 30.0, 50.0, 70.0, 90.0)}

    def __init__(self, *, percentile: float = 90.0) -> None:
        self.percentile = percentile

    def _fit(self, inputs: Inputs) -> None:
        super()._fit(inputs)
        w = np.asarray(inputs.head[0], dtype=np.float64)
        self.mean_feature_ = column_mean(inputs.get("features"))
        contrib = w * self.mean_feature_
        self.mask_ = contrib > np.percentile(contrib, float(self.percentile))
        self.weight_ = f32(np.where(self.mask_, w, 0.0))
        self._head_token = digest(self.weight_)  # the masked head: never shared as W
