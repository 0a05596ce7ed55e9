"""OpenMax: Weibull-recalibrated logits with an explicit "unknown" class.

Method reference: docs/methods.md#openmax (and its row in
docs/methods.md#departures-from-the-released-code).
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import ClassVar

import numpy as np

from semshift.errors import InputError

from ._base import Inputs, require_class_counts
from ._common import F64, class_sums, logsumexp, row_blocks
from ._params import Interval, ParamConstraints, SearchSpace, StrOptions
from ._registry import register_detector
from .logit import LogitDetector

__all__ = ["WEIBULL_FITS", "OpenMax", "weibull_fit_libmr", "weibull_fit_loc0"]

#: The Weibull tail fits of :class:`OpenMax` (its ``weibull`` hyperparameter).
WEIBULL_FITS = ("libmr", "mle")


def _weibull_mle_log(lny: F64, valid: np.ndarray, top: F64) -> tuple[F64, F64]:
    """Two-parameter Weibull MLE (location 0) of rows given ``lny = ln(x / top)`` (<= 0).

    The shape k is the root of ``sum(y^k ln y) / sum(y^k) - 1/k - mean(ln y)`` (increasing in
    k; y = x / top), found by Newton steps kept inside a bisection bracket, all rows together;
    then ``scale = top * mean(y^k)^(1/k)``. Taking ``ln y`` as input lets a caller compute it
    without cancellation when the samples sit far from 0 (the libMR shift).
    """
    lny = np.where(valid, lny, 0.0)
    n = valid.sum(axis=1)
    mean_ln = lny.sum(axis=1) / n  # < 0 when not all equal

    def terms(k: F64) -> tuple[F64, F64, F64]:
        w = np.where(valid, np.exp(k[:, None] * lny), 0.0)
        s0 = w.sum(axis=1)
        s1 = (w * lny).sum(axis=1) / s0
        s2 = (w * lny * lny).sum(axis=1) / s0
        return s0, s1, s2

    # f(k) -> -inf as k -> 0 and -> -mean_ln > 0 as k -> inf: one root, bracketed. The bracket
    # is wide because shifted tails (libMR) have shapes in the thousands to millions.
    sd = np.sqrt(np.maximum(((lny - mean_ln[:, None]) ** 2 * valid).sum(axis=1) / n, 1e-300))
    k = 1.2 / np.maximum(sd, 1e-300)  # the shape whose log-data spread matches (Gumbel sd)
    lo, hi = np.full(lny.shape[0], 1e-8), np.full(lny.shape[0], 1e16)
    k = np.clip(k, 1e-6, 1e15)
    for _ in range(300):
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
    lny = np.where(valid, np.log(np.where(valid, x, 1.0) / top[:, None]), 0.0)
    return _weibull_mle_log(lny, valid, top)


def weibull_fit_libmr(
    tails: F64, valid: np.ndarray, translate_amount: float = 1.0
) -> tuple[F64, F64, F64]:
    """libMR's ``FitHigh`` of each row of ``tails``, at once: shape, scale and small score.

    What ``libmr.MR(translate_amount=T).fit_high(tail, len(tail))`` computes (libMR's
    ``MetaRecognition::EvtGeneric``; pytorch-ood's ``LibNotMR.fit_high`` with T = 10000):
    ``FitHigh`` sets ``sign = +1`` (larger is "more extreme", nothing is negated) and drops no
    score; ``small_score`` is the smallest value of the tail; the tail is translated to
    ``x + T - small_score`` (so its smallest value becomes T > 0) and a two-parameter Weibull
    with location 0 is fitted to it by maximum likelihood (libMR's ``weibull_fit`` stops its
    root search at a tolerance of 1e-6; here the likelihood equation is solved exactly, and
    libMR's parameters agree to about 1e-5 relative). The w-score of a distance d is then
    ``WeibullCDF(d + T - small_score)``, and 0 where that argument is negative (libMR's
    ``weibull_cdf``).

    Parameters
    ----------
    tails : float64 array (m, t)
        Tail samples per row; entries where ``valid`` is False are ignored.
    valid : bool array (m, t)
        At least two valid, not all equal, samples per row.
    translate_amount : float > 0, default 1.0
        libMR's ``translate_amount`` T: 1 in the PyPI ``libmr`` 0.1.9 that OpenOOD installs
        (``libmr.MR()``), 10000 in pytorch-ood's ``LibNotMR`` and older libMR sources.

    Returns
    -------
    shape, scale : float64 arrays (m,)
        Weibull parameters of the translated tail.
    small_score : float64 array (m,)
        The smallest tail value of each row.
    """
    small = np.where(valid, tails, np.inf).min(axis=1)
    big = np.where(valid, tails, -np.inf).max(axis=1)
    top = big - small + translate_amount  # the largest translated value
    # ln(translated / top) = log1p((x - big) / top), free of the cancellation of ln(x + T)
    lny = np.log1p(np.where(valid, tails - big[:, None], 0.0) / top[:, None])
    shape, scale = _weibull_mle_log(lny, valid, top)
    return shape, scale, small


@register_detector
class OpenMax(LogitDetector):
    """OpenMax: ``-P(unknown)`` after Weibull recalibration of the top logits.

    Fit: the mean logit vector (MAV) mu_c of the correctly classified training samples of each
    class; their Euclidean distances to mu_c; a Weibull fitted to the ``tail_size`` largest
    distances per class, for all classes at once:

    - ``weibull="libmr"`` (default): libMR's ``FitHigh``, as OpenOOD runs it (and ImageNet-OOD
      through OpenOOD): the tail is translated by ``translate_amount - min(tail)`` before a
      two-parameter (location 0) maximum-likelihood Weibull fit, and a test distance d is
      translated the same way before its CDF (0 below the translated origin); see
      :func:`weibull_fit_libmr`. ``translate_amount=1.0`` is what the PyPI ``libmr`` 0.1.9
      that OpenOOD installs uses (``libmr.MR()``); ``10000`` reproduces pytorch-ood's
      ``LibNotMR`` (and the older libMR sources it follows). The two translations give
      visibly different scores (Spearman about 0.97 between them).
    - ``weibull="mle"``: the maximum-likelihood two-parameter Weibull of the untranslated
      distances (:func:`scipy.stats.weibull_min.fit` with ``floc=0``, :func:`weibull_fit_loc0`),
      semshift's earlier default, a departure from every reference code: its scores rank
      test samples close to, but not as, the reference (Spearman 0.988 against libMR's fit
      with translation 1, 0.995 with 10000, on the agreement test's data, against 0.9999).

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
    weibull : {"libmr", "mle"}, default "libmr"
        The tail fit (above). Departure from the reference code only with ``"mle"``.
    translate_amount : float > 0, default 1.0
        libMR's translation of the tail (``weibull="libmr"`` only; ignored with ``"mle"``).

    Attributes
    ----------
    mav_ : float64 array (C, C)
        Mean logit vector per class.
    weibull_shape_, weibull_scale_ : float64 arrays (C,)
        Fitted Weibull parameters per class (of the translated tail with ``"libmr"``).
    weibull_shift_ : float64 array (C,)
        Added to a distance before its Weibull CDF: ``translate_amount - min(tail)`` with
        ``"libmr"``, 0 with ``"mle"``.

    Raises
    ------
    InputError
        (fit) A class has fewer than 2 correctly classified training samples, or its tail
        distances are all equal so no Weibull can be fitted.

    References
    ----------
    .. [1] A. Bendale and T. E. Boult, "Towards Open Set Deep Networks", CVPR 2016.
    .. [2] W. J. Scheirer, A. Rocha, R. Micheals and T. E. Boult, "Meta-Recognition: The
       Theory and Practice of Recognition Score Analysis", TPAMI 2011 (libMR).
    """

    name = "openmax"
    fit_requires = frozenset({"logits", "labels"})
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "alpha": [Interval(Integral, 1, None, closed="left")],
        "tail_size": [Interval(Integral, 2, None, closed="left")],  # a Weibull needs 2 points
        "weibull": [StrOptions(WEIBULL_FITS)],
        "translate_amount": [Interval(Real, 0, None, closed="neither")],
    }
    #: tail sizes and revised top classes around the released defaults (20 and 3; alpha
    #: above C fails in fit)
    search_space: ClassVar[SearchSpace] = {
        "alpha": (1, 2, 3, 5, 10),
        "tail_size": (10, 20, 50, 100),
    }

    def __init__(
        self,
        *,
        alpha: int = 3,
        tail_size: int = 20,
        weibull: str = "libmr",
        translate_amount: float = 1.0,
    ) -> None:
        self.alpha = alpha
        self.tail_size = tail_size
        self.weibull = weibull
        self.translate_amount = translate_amount

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
        if self.weibull == "libmr":
            translate = float(self.translate_amount)
            shape, scale, small = weibull_fit_libmr(tails, valid, translate)
            shift = translate - small
        else:
            shape, scale = weibull_fit_loc0(tails, valid)
            shift = np.zeros(n_classes)
        self.weibull_shape_ = shape
        self.weibull_scale_ = scale
        self.weibull_shift_ = shift

    def _block_row_bytes(self, n_classes: int) -> int:
        return (40 + 16 * min(int(self.alpha), n_classes)) * n_classes

    def _score_block(self, z: F64) -> F64:
        n_classes = z.shape[1]
        a = min(int(self.alpha), n_classes)
        top = np.argpartition(-z, a - 1, axis=1)[:, :a]
        top = np.take_along_axis(top, np.argsort(-np.take_along_axis(z, top, 1), axis=1), 1)
        ztop = np.take_along_axis(z, top, axis=1)  # (n, a), rank 1 first
        dist = np.linalg.norm(z[:, None, :] - self.mav_[top], axis=2)
        # libMR's weibull_cdf is 0 for a negative (translated) argument
        t = np.maximum(dist + self.weibull_shift_[top], 0.0)
        with np.errstate(over="ignore"):  # (t / scale)^k -> inf: the CDF is 1
            cdf = -np.expm1(-((t / self.weibull_scale_[top]) ** self.weibull_shape_[top]))
        ranks = np.arange(1, a + 1)
        w = 1.0 - ((a - ranks + 1) / a) * cdf
        z_new = z.copy()
        np.put_along_axis(z_new, top, ztop * w, axis=1)
        z_unknown = (ztop * (1.0 - w)).sum(axis=1)
        full = np.concatenate([z_new, z_unknown[:, None]], axis=1)
        return -np.exp(z_unknown - logsumexp(full))
