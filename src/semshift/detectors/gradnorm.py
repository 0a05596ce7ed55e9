"""GradNorm in closed form for a linear head."""

from __future__ import annotations

import numpy as np

from ._base import Detector, Float64Array, Inputs
from ._registry import register_detector
from .logit import shared_softmax

__all__ = ["GradNorm"]


@register_detector
class GradNorm(Detector):
    """GradNorm score ``||h||_1 * sum_c |C p_c - 1|``; higher = more in-distribution.

    For a linear head the gradient of ``sum_c -log p_c`` with respect to W is
    ``(C p - 1) h^T``, whose entry-wise L1 norm is the score: no backward pass needed. The
    paper's loss is the KL divergence to the uniform distribution, i.e. this loss divided by C,
    so the value equals the paper's up to the constant factor C.

    References
    ----------
    .. [1] R. Huang, A. Geng and Y. Li, "On the Importance of Gradients for Detecting
       Distributional Shifts in the Wild", NeurIPS 2021.
    """

    name = "gradnorm"
    score_requires = frozenset({"features", "logits"})

    def __init__(self) -> None:
        pass

    def _score(self, inputs: Inputs) -> Float64Array:
        h, p = inputs.get("features"), shared_softmax(inputs)
        l1 = np.abs(h).sum(axis=1, dtype=np.float64)
        return l1 * np.abs(p.shape[1] * p - 1.0).sum(axis=1)
