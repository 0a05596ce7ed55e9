"""SCALE: energy of the head applied to features scaled by an ASH-S style sharpening factor."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ._base import Inputs
from ._common import F64
from ._head import scaled_energy, shared_head_product, sharpening_factor
from ._params import SearchSpace
from ._registry import register_detector
from .ash import _Ash

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
    #: OpenOOD v1.5's sweep (configs/postprocessors/scale.yml)
    search_space: ClassVar[SearchSpace] = {"percentile": (65.0, 70.0, 75.0, 80.0, 85.0, 90.0, 95.0)}

    def __init__(self, *, percentile: float = 85.0) -> None:
        self.percentile = percentile

    def _logits(self, inputs: Inputs) -> F64:
        z = shared_head_product(inputs, self.weight_, self._head_token).astype(np.float64)
        z *= sharpening_factor(inputs, self.k_)[:, None]
        z += self.bias_
        return z

    def _score(self, inputs: Inputs) -> F64:
        # the logits of _logits, formed and reduced one cache-sized block at a time
        product = shared_head_product(inputs, self.weight_, self._head_token)
        return scaled_energy(product, sharpening_factor(inputs, self.k_), self.bias_)
