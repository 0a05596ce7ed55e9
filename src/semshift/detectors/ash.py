"""Activation shaping (ASH-B, ASH-P, ASH-S): prune all but the largest activations per sample.

For each sample, ``k = D - round(D * percentile / 100)`` activations are kept (the public
code's rounding, NumPy half-to-even); ties at the k-th value keep the lowest unit indices.
The score is ``Energy(W h' + b)``. The methods assume non-negative (post-ReLU) features.
"""

from __future__ import annotations

import numpy as np

from semshift.errors import InputError

from ._base import Inputs, check_real
from ._common import F32, topk_mask
from ._head import HeadEnergyDetector
from ._registry import register_detector

__all__ = ["AshB", "AshP", "AshS", "n_kept"]


def n_kept(n_features: int, percentile: float) -> int:
    """Number of activations ASH/SCALE keep: ``D - round(D * percentile / 100)``."""
    return n_features - int(np.round(n_features * percentile / 100.0))


class _Ash(HeadEnergyDetector):
    def __init__(self, *, percentile: float = 90.0) -> None:
        self.percentile = percentile

    def _check_params(self) -> None:
        check_real(self.name, "percentile", self.percentile, low=0.0, high=100.0, high_open=True)

    def _fit(self, inputs: Inputs) -> None:
        super()._fit(inputs)
        d = self.weight_.shape[1]
        self.k_ = n_kept(d, float(self.percentile))
        if self.k_ < 1:
            raise InputError(
                f"{self.name}.fit: percentile {self.percentile} keeps no activation of D = {d}; "
                "lower the percentile"
            )

    def _kept(self, h: F32) -> tuple[F32, np.ndarray]:
        mask = topk_mask(h, self.k_)
        return np.where(mask, h, np.float32(0)), mask


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

    def _transform(self, h: F32) -> F32:
        return self._kept(h)[0]


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

    def _transform(self, h: F32) -> F32:
        fill = (h.sum(axis=1, dtype=np.float64) / self.k_).astype(np.float32)
        return np.where(topk_mask(h, self.k_), fill[:, None], np.float32(0))


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

    def _transform(self, h: F32) -> F32:
        kept, _ = self._kept(h)
        return kept * np.exp(sharpening_ratio(h, kept)).astype(np.float32)[:, None]


def sharpening_ratio(h: F32, kept: F32) -> np.ndarray:
    """``s / s_kept`` per row in float64 (0 where s_kept = 0), for ASH-S and SCALE."""
    s = h.sum(axis=1, dtype=np.float64)
    s_kept = kept.sum(axis=1, dtype=np.float64)
    safe = np.where(s_kept != 0, s_kept, 1.0)
    return np.where(s_kept != 0, s / safe, 0.0)
