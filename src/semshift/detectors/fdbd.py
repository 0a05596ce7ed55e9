"""fDBD: average distance to the decision boundaries, normalised by distance to the mean."""

from __future__ import annotations

import numpy as np

from semshift.errors import InputError

from ._base import Detector, Float64Array, Inputs
from ._common import column_mean, rowwise_blocks
from ._registry import register_detector

__all__ = ["FDBD"]

_EPS = 1e-12


@register_detector
class FDBD(Detector):
    """fDBD score; higher = more in-distribution.

    ``mean over c != yhat of |(W_yhat - W_c) h + (b_yhat - b_c)| / ||W_yhat - W_c||``, divided
    by ``||h - mean_train(h)||``; yhat = argmax z. The numerator is ``z_yhat - z_c``, so the
    test logits are used directly, with the (C, C) matrix of row distances of W computed once.
    docs/methods.md#fdbd: the mean over the C - 1 classes (the public code sums them: a constant
    factor). A feature exactly at the training mean has its norm floored at 1e-12.

    Attributes
    ----------
    mean_feature_ : float64 array (D,)
        Mean training feature.
    boundary_norms_ : float64 array (C, C)
        ``||W_i - W_j||`` (infinite on the diagonal so that c = yhat contributes 0).

    Raises
    ------
    InputError
        (fit) Fewer than 2 classes, or two identical rows of W.

    References
    ----------
    .. [1] L. Liu and Y. Qin, "Fast Decision Boundary based Out-of-Distribution Detector",
       ICML 2024.
    """

    name = "fdbd"
    fit_requires = frozenset({"features", "head"})
    score_requires = frozenset({"features", "logits"})

    def __init__(self) -> None:
        pass

    def _fit(self, inputs: Inputs) -> None:
        w = np.asarray(inputs.head[0], dtype=np.float64)
        if w.shape[0] < 2:
            raise InputError("fdbd.fit: the head must have at least 2 classes")
        sq = (w**2).sum(axis=1)
        d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (w @ w.T), 0.0)
        np.fill_diagonal(d2, np.inf)
        tiny = d2 <= 1e-12 * (sq[:, None] + sq[None, :])
        if tiny.any():
            i, j = np.argwhere(tiny)[0]
            raise InputError(
                f"fdbd.fit: rows {i} and {j} of the head W are identical, so the distance to "
                "their decision boundary is undefined"
            )
        self.boundary_norms_ = np.sqrt(d2)
        self.mean_feature_ = column_mean(inputs.get("features"))

    def _score(self, inputs: Inputs) -> Float64Array:
        h, z = inputs.get("features"), inputs.get("logits")
        n_classes = z.shape[1]
        out = np.empty(h.shape[0], dtype=np.float64)
        # every step is row-wise
        for sl in rowwise_blocks(h.shape[0], 8 * h.shape[1] + 32 * n_classes, h, z):
            zb = np.asarray(z[sl], dtype=np.float64)
            pred = zb.argmax(axis=1)
            gaps = zb.max(axis=1, keepdims=True) - zb
            mean_dist = (gaps / self.boundary_norms_[pred]).sum(axis=1) / (n_classes - 1)
            norm = np.linalg.norm(np.asarray(h[sl], dtype=np.float64) - self.mean_feature_, axis=1)
            out[sl] = mean_dist / np.maximum(norm, _EPS)
        return out
