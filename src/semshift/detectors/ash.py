"""Activation shaping (ASH-B, ASH-P, ASH-S): prune all but the largest activations per sample.

For each sample, ``k = D - round(D * percentile / 100)`` activations are kept (the public
code's rounding, NumPy half-to-even); ties at the k-th value keep the lowest unit indices.
The score is ``Energy(W h' + b)``. The methods assume non-negative (post-ReLU) features.
"""

from __future__ import annotations

from numbers import Real
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from semshift.errors import InputError

from ._base import Inputs
from ._common import F32, F64, f32
from ._head import (
    HeadEnergyDetector,
    scaled_energy,
    shared_kept_sums,
    shared_topk,
    sharpening_factor,
)
from ._params import Interval, ParamConstraints, SearchSpace
from ._registry import register_detector

__all__ = ["AshB", "AshP", "AshS", "n_kept"]


def n_kept(n_features: int, percentile: float) -> int:
    """Number of activations ASH/SCALE keep: ``D - round(D * percentile / 100)``."""
    return n_features - int(np.round(n_features * percentile / 100.0))


class _Ash(HeadEnergyDetector):
    # 100 would prune every activation; a percentile that keeps none of D is refused in _fit
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "percentile": [Interval(Real, 0, 100, closed="left")]
    }
    #: OpenOOD v1.5's sweep (configs/postprocessors/ash.yml)
    search_space: ClassVar[SearchSpace] = {"percentile": (65.0, 70.0, 75.0, 80.0, 85.0, 90.0, 95.0)}

    def __init__(self, *, percentile: float = 90.0) -> None:
        self.percentile = percentile

    def _fit(self, inputs: Inputs) -> None:
        super()._fit(inputs)
        d = self.weight_.shape[1]
        self.k_ = n_kept(d, float(self.percentile))
        if self.k_ < 1:
            raise InputError(
                f"{self.name}.fit: percentile {self.percentile} keeps no activation of D = {d}; "
                "lower the percentile"
            )

    def _kept_product(self, inputs: Inputs, mask: NDArray[np.bool_] | None = None) -> F32:
        """``h' @ W.T`` (n, C) float32 of the pruned features (the top k kept), shared by
        ash_p and ash_s fitted with the same head and k (``mask``: the top-k mask if the
        caller has it)."""

        def compute() -> F32:
            h = f32(inputs.get("features"))
            top = shared_topk(inputs, self.k_) if mask is None else mask
            return np.where(top, h, np.float32(0)) @ self.weight_.T

        return inputs.share(("ash_kept_product", self._head_token, self.k_), compute)


@register_detector
class AshP(_Ash):
    """ASH-P: keep the top ``100 - percentile`` % activations, zero the rest.

    Score ``Energy(W h' + b)``; higher = more in-distribution.

    Parameters
    ----------
    percentile : float, default 90
        Percentage of activations pruned per sample.

    References
    ----------
    .. [1] A. Djurisic, N. Bozanic, A. Ashok and R. Liu, "Extremely Simple Activation Shaping
       for Out-of-Distribution Detection", ICLR 2023.
    """

    name = "ash_p"

    def _logits(self, inputs: Inputs) -> F32:
        return self._kept_product(inputs) + self.bias_.astype(np.float32)


@register_detector
class AshB(_Ash):
    """ASH-B: kept activations set to ``s / k`` (s = sum of h before pruning), others zero.

    Score ``Energy(W h' + b)``; higher = more in-distribution.

    Parameters
    ----------
    percentile : float, default 90
        Percentage of activations pruned per sample.

    References
    ----------
    .. [1] A. Djurisic, N. Bozanic, A. Ashok and R. Liu, "Extremely Simple Activation Shaping
       for Out-of-Distribution Detection", ICLR 2023.
    """

    name = "ash_b"

    def _logits(self, inputs: Inputs) -> F32:
        mask = shared_topk(inputs, self.k_)  # selected once (also without SharedResults)
        s, _ = shared_kept_sums(inputs, self.k_, mask)
        fill = (s / self.k_).astype(np.float32)
        pruned = np.where(mask, fill[:, None], np.float32(0))
        z = pruned @ self.weight_.T
        z += self.bias_.astype(np.float32)
        return z


@register_detector
class AshS(_Ash):
    """ASH-S: kept activations multiplied by ``exp(s / s_kept)``, others zero.

    s is the sum of h before pruning and s_kept the sum of the kept activations (a sample with
    s_kept = 0 gets factor 1). Score ``Energy(W h' + b)``; higher = more in-distribution.

    Parameters
    ----------
    percentile : float, default 90
        Percentage of activations pruned per sample.

    References
    ----------
    .. [1] A. Djurisic, N. Bozanic, A. Ashok and R. Liu, "Extremely Simple Activation Shaping
       for Out-of-Distribution Detection", ICLR 2023.
    """

    name = "ash_s"

    def _logits(self, inputs: Inputs) -> F64:
        # W (h' e^r) = e^r (W h'): the pruned product is shared with ash_p
        z = self._kept_product(inputs).astype(np.float64)
        z *= sharpening_factor(inputs, self.k_)[:, None]
        z += self.bias_
        return z

    def _score(self, inputs: Inputs) -> F64:
        # the logits of _logits, formed and reduced one cache-sized block at a time
        mask = shared_topk(inputs, self.k_)  # selected once (also without SharedResults)
        factor = sharpening_factor(inputs, self.k_, mask)
        return scaled_energy(self._kept_product(inputs, mask), factor, self.bias_)
