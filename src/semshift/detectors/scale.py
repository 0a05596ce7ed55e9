"""SCALE: energy of the head applied to features scaled by an ASH-S style sharpening factor."""

from __future__ import annotations

import numpy as np

from ._common import F32, F64, topk_mask
from ._registry import register_detector
from .ash import _Ash, sharpening_ratio

__all__ = ["Scale"]


@register_detector
class Scale(_Ash):
    """SCALE score ``Energy(W (h exp(r)) + b)`` with ``r = s / s_kept``; higher = more ID.

    s is the sum of h and s_kept the sum of its top ``100 - percentile`` % activations (as in
    ASH-S); h itself is *not* pruned. Since ``W (h e^r) = e^r (W h)``, the logits are
    ``e^r (W h) + b``.

    Parameters
    ----------
    percentile : float, default 85
        Percentage of activations left out of s_kept.

    References
    ----------
    .. [1] K. Xu, R. Chen, G. Franchi and A. Yao, "Scaling for Training Time and Post-hoc
       Out-of-distribution Detection Enhancement", ICLR 2024.
    """

    name = "scale"

    def __init__(self, *, percentile: float = 85.0) -> None:
        self.percentile = percentile

    def _logits(self, h: F32) -> F64:
        kept = np.where(topk_mask(h, self.k_), h, np.float32(0))
        factor = np.exp(sharpening_ratio(h, kept))
        z = (h @ self.weight_.T).astype(np.float64)
        z *= factor[:, None]
        z += self.bias_
        return z
