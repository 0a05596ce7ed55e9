"""SYNC: classifiers of any class synthesised from phantom classes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from semshift.params import Interval
from semshift.training.zsl.ranking import feature_scale
from semshift.training.zsl.registry import ZSLMethod, register_zsl_method

__all__ = ["SYNC", "phantom_weights"]

F64 = NDArray[np.float64]


def phantom_weights(S: F64, B: F64, bandwidth2: float) -> F64:
    """``s_cr = exp(-||a_c - b_r||^2 / sigma^2) / sum_r' exp(-||a_c - b_r'||^2 / sigma^2)``:
    the weights (C, R) that synthesise class c's classifier from the phantom classifiers."""
    d2 = (S * S).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2.0 * S @ B.T
    logits = -np.maximum(d2, 0.0) / bandwidth2
    logits -= logits.max(axis=1, keepdims=True)
    w = np.exp(logits)
    return w / w.sum(axis=1, keepdims=True)


@register_zsl_method
class SYNC(ZSLMethod):
    """Synthesised classifiers: ``w_c = sum_r s_cr v_r`` over R phantom classes.

    The phantom classes sit at the seen classes' embeddings (``b_r = a_r``, R = seen classes,
    the paper's setting); the phantom classifiers ``V`` (R, d) minimise the one-versus-other
    squared hinge loss of the synthesised seen-class classifiers,

    ``(1/n) sum_n sum_c max(0, 1 - y_nc x_n^T w_c)^2 + (lam / 2) ||V||_F^2``,

    ``y_nc = +1`` for the image's class and -1 otherwise, by L-BFGS on the vectorised loss and
    gradient. A class with embedding ``s`` (seen or unseen) gets the classifier
    ``sum_r s_r(s) v_r`` (:func:`phantom_weights`); its score is ``x^T w``.

    Parameters
    ----------
    lam : float
        L2 weight on the phantom classifiers; grid 10^-4 .. 10^-1.
    sigma : float
        Kernel bandwidth, as a multiple of the mean squared distance between seen-class
        embeddings (sigma^2 = sigma * mean d^2); grid 0.25, 0.5, 1, 2.
    max_iter : int
        L-BFGS iterations.

    References
    ----------
    .. [1] Changpinyo, S., Chao, W.-L., Gong, B. and Sha, F., "Synthesized classifiers for
       zero-shot learning", CVPR 2016, eq. 2-5 (one-versus-other loss).

    Notes
    -----
    Departures: the phantom classes stay at the seen embeddings (the paper optionally learns
    them by alternating optimisation); features are divided by their mean L2 norm; the
    bandwidth is relative to the embeddings' spread so one grid serves attributes and text.
    """

    name = "sync"
    title = "SYNC"
    reference = "Changpinyo et al., CVPR 2016"
    order = 12
    constraints: ClassVar[Mapping[str, Any]] = {
        "lam": [Interval(Real, 0.0, None, closed="neither")],
        "sigma": [Interval(Real, 0.0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
    }
    grid: ClassVar[Mapping[str, Sequence[Any]]] = {
        "lam": (1e-4, 1e-3, 1e-2, 1e-1),
        "sigma": (0.25, 0.5, 1.0, 2.0),
    }

    def __init__(self, lam: float = 1e-3, sigma: float = 1.0, max_iter: int = 200) -> None:
        self.lam = lam
        self.sigma = sigma
        self.max_iter = max_iter

    def _fit(self, X: F64, y: NDArray[np.int64], S: F64) -> None:
        from scipy.optimize import minimize

        self.scale_ = feature_scale(X)
        Xs = X / self.scale_
        n, d = Xs.shape
        C = S.shape[0]
        sq = (S * S).sum(1)
        diff2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * S @ S.T, 0.0)
        np.fill_diagonal(diff2, 0.0)
        spread = float(diff2.sum() / max(C * (C - 1), 1)) or 1.0
        self.phantoms_ = S.copy()
        self.bandwidth2_ = self.sigma * spread
        A = phantom_weights(S, self.phantoms_, self.bandwidth2_)  # (C, R)
        sign = -np.ones((n, C))
        sign[np.arange(n), y] = 1.0

        def loss(v: F64) -> tuple[float, F64]:
            V = v.reshape(C, d)
            scores = Xs @ (A @ V).T  # (n, C)
            h = np.maximum(0.0, 1.0 - sign * scores)
            G = (-2.0 / n) * sign * h  # dL/dscores
            grad = A.T @ (G.T @ Xs) + self.lam * V
            return float((h * h).sum() / n + 0.5 * self.lam * (V * V).sum()), grad.ravel()

        res = minimize(
            loss,
            np.zeros(C * d),
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": self.max_iter},
        )
        self.V_ = res.x.reshape(C, d)

    def _scores(self, X: F64, S: F64) -> F64:
        W = phantom_weights(S, self.phantoms_, self.bandwidth2_) @ self.V_
        return (X / self.scale_) @ W.T
