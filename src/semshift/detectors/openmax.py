"""OpenMax: Weibull-recalibrated logits with an explicit "unknown" class."""

from __future__ import annotations

import warnings

import numpy as np
import scipy.stats

from semshift.errors import InputError

from ._base import Inputs, check_int, require_class_counts
from ._common import F64, class_sums, logsumexp, row_blocks
from ._registry import register_detector
from .logit import LogitDetector

__all__ = ["OpenMax"]


@register_detector
class OpenMax(LogitDetector):
    """OpenMax: ``-P(unknown)`` after Weibull recalibration of the top logits.

    Fit: the mean logit vector (MAV) mu_c of the correctly classified training samples of each
    class; their Euclidean distances to mu_c; a two-parameter Weibull (location fixed at 0,
    :func:`scipy.stats.weibull_min.fit`) on the ``tail_size`` largest distances per class.

    Score: for the ``alpha`` largest logits, at rank r = 1..alpha (class c_r),
    ``w = 1 - ((alpha - r + 1) / alpha) * WeibullCDF_c(||z - mu_c||)``; other classes keep
    w = 1. ``z'_c = z_c w_c``, ``z_unknown = sum_c z_c (1 - w_c)``; the score is minus the
    softmax probability of the unknown class over ``[z', z_unknown]``. Higher = more
    in-distribution. Following REFERENCE, the prediction is never a real class relabelled as
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

    def __init__(self, *, alpha: int = 3, tail_size: int = 20) -> None:
        self.alpha = alpha
        self.tail_size = tail_size

    def _check_params(self) -> None:
        check_int("openmax", "alpha", self.alpha)
        check_int("openmax", "tail_size", self.tail_size, minimum=2)

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
        shape = np.empty(n_classes)
        scale = np.empty(n_classes)
        for c in range(n_classes):  # one small scipy fit per class
            tail = dist[order[max(ends[c] - self.tail_size, ends[c] - counts[c]) : ends[c]]]
            if np.ptp(tail) <= 1e-12 * max(float(tail.max()), 1.0):
                raise InputError(
                    f"openmax.fit: the {tail.size} largest training distances of class {c} are "
                    "all equal, so no Weibull tail can be fitted; give more varied training data"
                )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                shape[c], _, scale[c] = scipy.stats.weibull_min.fit(tail, floc=0.0)
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
