"""OpenMax: Weibull-recalibrated logits with an explicit "unknown" class."""

from __future__ import annotations

from numbers import Integral
from typing import ClassVar

import numpy as np

from semshift.errors import InputError

from ._base import Inputs, require_class_counts
from ._common import F64, class_sums, logsumexp, row_blocks
from ._params import Interval, ParamConstraints
from ._registry import register_detector
from .logit import LogitDetector

__all__ = ["OpenMax"]


def weibull_fit_loc0(x: F64, valid: np.ndarray) -> tuple[F64, F64]:
    """Maximum-likelihood two-parameter Weibull (location 0) of each row of ``x``, at once.

    The MLE of :func:`scipy.stats.weibull_min.fit` with ``floc=0``, solved exactly: the shape k
    is the root of ``sum(y^k ln y) / sum(y^k) - 1/k - mean(ln y)`` (increasing in k; y = x /
    max x), found by Newton steps kept inside a bisection bracket, all rows together; then
    ``scale = max x * mean(y^k)^(1/k)``.

    Parameters
    ----------
    x : float64 array (m, t)
        Positive samples per row; entries where ``valid`` is False are ignored.
    valid : bool array (m, t)
        At least two valid, not all equal, samples per row.

    Returns
    -------
    shape, scale : float64 arrays (m,)
    """
    top = np.where(valid, x, -np.inf).max(axis=1)
    lny = np.where(valid, np.log(np.where(valid, x, 1.0) / top[:, None]), 0.0)  # <= 0
    n = valid.sum(axis=1)
    mean_ln = lny.sum(axis=1) / n  # < 0 when not all equal

    def terms(k: F64) -> tuple[F64, F64, F64]:
        w = np.where(valid, np.exp(k[:, None] * lny), 0.0)
        s0 = w.sum(axis=1)
        s1 = (w * lny).sum(axis=1) / s0
        s2 = (w * lny * lny).sum(axis=1) / s0
        return s0, s1, s2

    # f(k) -> -inf as k -> 0 and -> -mean_ln > 0 as k -> inf: one root, bracketed
    lo, hi = np.full(x.shape[0], 1e-6), np.full(x.shape[0], 1e6)
    k = np.clip(1.2 / np.maximum(np.sqrt(np.maximum(lny.var(axis=1), 1e-300)), 1e-12), 1e-3, 1e3)
    for _ in range(200):
        _, s1, s2 = terms(k)
        f = s1 - 1.0 / k - mean_ln
        lo = np.where(f < 0, k, lo)
        hi = np.where(f > 0, k, hi)
        step = f / (s2 - s1 * s1 + 1.0 / (k * k))
        nxt = k - step
        nxt = np.where((nxt > lo) & (nxt < hi), nxt, np.sqrt(lo * hi))  # bisect (in log k)
        if np.all(np.abs(nxt - k) <= 1e-14 * k):
            k = nxt
            break
        k = nxt
    s0, _, _ = terms(k)
    return k, top * (s0 / n) ** (1.0 / k)


@register_detector
class OpenMax(LogitDetector):
    """OpenMax: ``-P(unknown)`` after Weibull recalibration of the top logits.

    Fit: the mean logit vector (MAV) mu_c of the correctly classified training samples of each
    class; their Euclidean distances to mu_c; a two-parameter Weibull (location fixed at 0,
    the maximum-likelihood fit of :func:`scipy.stats.weibull_min.fit` with ``floc=0``, solved
    for all classes at once by :func:`weibull_fit_loc0`) on the ``tail_size`` largest
    distances per class.

    Score: for the ``alpha`` largest logits, at rank r = 1..alpha (class c_r),
    ``w = 1 - ((alpha - r + 1) / alpha) * WeibullCDF_c(||z - mu_c||)``; other classes keep
    w = 1. ``z'_c = z_c w_c``, ``z_unknown = sum_c z_c (1 - w_c)``; the score is minus the
    softmax probability of the unknown class over ``[z', z_unknown]``. Higher = more
    in-distribution. Per docs/methods.md#openmax, a real class is never relabelled as
    "unknown" (OpenOOD's implementation does that; not copied).

    Parameters
    ----------
    alpha : int, default 3
        Number of top classes recalibrated (capped at C).
    tail_size : int, default 20
        Number of largest training distances the Weibull is fitted to.

    Attributes
    ----------
    mav_ : float64 array (C, C)
        Mean logit vector per class.
    weibull_shape_, weibull_scale_ : float64 arrays (C,)
        Fitted Weibull parameters per class.

    Raises
    ------
    InputError
        (fit) A class has fewer than 2 correctly classified training samples, or its tail
        distances are all equal so no Weibull can be fitted.

    References
    ----------
    .. [1] A. Bendale and T. E. Boult, "Towards Open Set Deep Networks", CVPR 2016.
    """

    name = "openmax"
    fit_requires = frozenset({"logits", "labels"})
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "alpha": [Interval(Integral, 1, None, closed="left")],
        "tail_size": [Interval(Integral, 2, None, closed="left")],  # a Weibull needs 2 points
    }

    def __init__(self, *, alpha: int = 3, tail_size: int = 20) -> None:
        self.alpha = alpha
        self.tail_size = tail_size

    def _fit(self, inputs: Inputs) -> None:
        z, y = inputs.get("logits"), inputs.get("labels")
        n_classes = int(z.shape[1])
        correct = np.argmax(z, axis=1) == y
        lab = np.where(correct, y, -1)
        counts = np.bincount(y[correct], minlength=n_classes)
        require_class_counts(
            "openmax.fit", counts, "correctly classified training samples", minimum=2
        )
        self.mav_ = class_sums(z, lab, n_classes) / counts[:, None]
        rows = np.flatnonzero(correct)
        dist = np.empty(rows.size, dtype=np.float64)
        for sl in row_blocks(rows.size, 16 * n_classes):
            r = rows[sl]
            dist[sl] = np.linalg.norm(np.asarray(z[r], dtype=np.float64) - self.mav_[y[r]], axis=1)
        # Sort by (class, distance) once; each class's tail is the end of its run.
        order = np.lexsort((dist, y[rows]))
        ends = np.cumsum(counts)
        sizes = np.minimum(counts, self.tail_size)
        # tails as rows of a padded (C, tail) matrix, the largest distance last
        cols = np.arange(int(self.tail_size))
        take = ends[:, None] - sizes[:, None] + np.minimum(cols, sizes[:, None] - 1)
        tails = dist[order[take]]
        valid = cols[None, :] < sizes[:, None]
        top, low = tails.max(axis=1), np.where(valid, tails, np.inf).min(axis=1)
        flat = np.flatnonzero(top - low <= 1e-12 * np.maximum(top, 1.0))
        if flat.size:
            c = int(flat[0])
            raise InputError(
                f"openmax.fit: the {int(sizes[c])} largest training distances of class {c} are "
                "all equal, so no Weibull tail can be fitted; give more varied training data"
            )
        shape, scale = weibull_fit_loc0(tails, valid)
        self.weibull_shape_ = shape
        self.weibull_scale_ = scale

    def _block_row_bytes(self, n_classes: int) -> int:
        return (40 + 16 * min(int(self.alpha), n_classes)) * n_classes

    def _score_block(self, z: F64) -> F64:
        n_classes = z.shape[1]
        a = min(int(self.alpha), n_classes)
        top = np.argpartition(-z, a - 1, axis=1)[:, :a]
        top = np.take_along_axis(top, np.argsort(-np.take_along_axis(z, top, 1), axis=1), 1)
        ztop = np.take_along_axis(z, top, axis=1)  # (n, a), rank 1 first
        dist = np.linalg.norm(z[:, None, :] - self.mav_[top], axis=2)
        cdf = -np.expm1(-((dist / self.weibull_scale_[top]) ** self.weibull_shape_[top]))
        ranks = np.arange(1, a + 1)
        w = 1.0 - ((a - ranks + 1) / a) * cdf
        z_new = z.copy()
        np.put_along_axis(z_new, top, ztop * w, axis=1)
        z_unknown = (ztop * (1.0 - w)).sum(axis=1)
        full = np.concatenate([z_new, z_unknown[:, None]], axis=1)
        return -np.exp(z_unknown - logsumexp(full))
