"""Maximum cosine similarity between the feature and the rows of the head."""

from __future__ import annotations

import numpy as np

from ._base import Detector, Float64Array, Inputs
from ._common import f32, row_blocks
from ._registry import register_detector

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
        w = np.asarray(inputs.head[0], dtype=np.float64)
        norms = np.linalg.norm(w, axis=1, keepdims=True)
        self.unit_weights_ = f32(w / np.where(norms > 0, norms, 1.0))

    def _score(self, inputs: Inputs) -> Float64Array:
        h = inputs.get("features")
        c = self.unit_weights_.shape[0]
        out = np.empty(h.shape[0], dtype=np.float64)
        for sl in row_blocks(h.shape[0], 12 * h.shape[1] + 4 * c):
            hb = np.asarray(h[sl], dtype=np.float64)
            norms = np.linalg.norm(hb, axis=1)
            cos = (f32(hb) @ self.unit_weights_.T).max(axis=1).astype(np.float64)
            out[sl] = cos / np.where(norms > 0, norms, 1.0)
        return out
