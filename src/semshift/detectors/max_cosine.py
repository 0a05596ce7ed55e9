"""Maximum cosine similarity between the feature and the rows of the head."""

from __future__ import annotations

import numpy as np

from ._base import Detector, Float64Array, Inputs
from ._common import F64, cache_blocks, f32, prepare_head
from ._head import shared_head_product
from ._registry import register_detector
from ._shared import digest

__all__ = ["MaxCosine"]


@register_detector
class MaxCosine(Detector):
    """Maximum cosine similarity ``max_c cos(h, W_c)``; higher = more in-distribution.

    A zero feature (or head row) has cosine 0 by convention.

    Attributes
    ----------
    unit_weights_ : float32 array (C, D)
        Head rows scaled to unit norm.

    References
    ----------
    .. [1] Z. Zhang and X. Xiang, "Decoupling MaxLogit for Out-of-Distribution Detection",
       CVPR 2023 (cosine similarity part of MaxLogit).
    """

    name = "max_cosine"
    fit_requires = frozenset({"head"})
    score_requires = frozenset({"features"})

    def __init__(self) -> None:
        pass

    def _fit(self, inputs: Inputs) -> None:
        self._weight, _ = prepare_head(*inputs.head)
        self._head_token = digest(self._weight)
        norms = np.linalg.norm(self._weight.astype(np.float64), axis=1)
        self._inv_norms = 1.0 / np.where(norms > 0, norms, 1.0)
        self.unit_weights_ = f32(self._weight * self._inv_norms[:, None])

    def _score(self, inputs: Inputs) -> Float64Array:
        # cos(h, W_c) = (W h)_c / (||W_c|| ||h||): the product W h is shared with scale
        h = inputs.get("features")
        prod = shared_head_product(inputs, self._weight, self._head_token)
        best = (prod * self._inv_norms.astype(np.float32)).max(axis=1).astype(np.float64)
        return best / _nonzero(_row_norms(h))


def _nonzero(norms: F64) -> F64:
    return np.where(norms > 0, norms, 1.0)


def _row_norms(h: np.ndarray) -> F64:
    """``np.linalg.norm`` of the rows of ``h`` in float64, in cache-sized blocks where the rows
    are C-contiguous (row-wise: the same values as one block)."""
    if not h.flags.c_contiguous:
        return np.linalg.norm(np.asarray(h, dtype=np.float64), axis=1)
    out = np.empty(h.shape[0], dtype=np.float64)
    for sl in cache_blocks(h.shape[0], 16 * int(h.shape[1])):
        out[sl] = np.linalg.norm(np.asarray(h[sl], dtype=np.float64), axis=1)
    return out
