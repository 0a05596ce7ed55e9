"""Uncertainty: bootstrap percentile confidence intervals and DeLong's paired AUROC test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtr
from scipy.stats import rankdata

from semshift.errors import InputError, SemshiftError
from semshift.metrics import ranking
from semshift.metrics._validation import as_bool, as_scores, check_both_classes
from semshift.metrics.registry import get_metric

__all__ = [
    "BLOCK_ELEMENTS",
    "BootstrapCI",
    "DeLongResult",
    "bootstrap_ci",
    "delong_mean_test",
    "delong_test",
    "resample_counts",
]

BLOCK_ELEMENTS = 1 << 22  # resampled indices held at once (32 MiB of int64)


@dataclass(frozen=True)
class BootstrapCI:
    """A point estimate with its bootstrap percentile confidence interval.

    Attributes
    ----------
    estimate : float
        The metric on the full data.
    low, high : float
        Percentile interval bounds: the (1 - level) / 2 and (1 + level) / 2 quantiles of the
        resampled metric values (linear interpolation).
    level : float
        Confidence level, e.g. 0.95.
    n_resamples : int
        Number of bootstrap resamples.
    """

    estimate: float
    low: float
    high: float
    level: float
    n_resamples: int


def _strata(
    arrays: tuple[NDArray[Any], ...], stratify: ArrayLike | Literal["auto"] | None, n: int
) -> list[NDArray[np.int64]]:
    """Sample indices of each stratum (one stratum = everything when not stratified)."""
    if isinstance(stratify, str):
        if stratify != "auto":
            raise InputError(f"stratify must be 'auto', None or an array, got {stratify!r}")
        use = arrays[1] if len(arrays) >= 2 and arrays[1].dtype == np.bool_ else None
    else:
        use = None if stratify is None else np.asarray(stratify)
    if use is None:
        return [np.arange(n)]
    if use.ndim != 1 or use.shape[0] != n:
        raise InputError(f"stratify must have one label per sample ({n}), got shape {use.shape}")
    _, inverse = np.unique(use, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.cumsum(np.bincount(inverse))[:-1]
    return list(np.split(order, bounds))


def _index_blocks(
    rng: np.random.Generator, strata: list[NDArray[np.int64]], n_resamples: int
) -> Iterator[list[NDArray[np.int64]]]:
    """Resampled sample indices, per stratum, in blocks of (block, stratum size) matrices."""
    n = sum(s.size for s in strata)
    block = max(1, min(n_resamples, BLOCK_ELEMENTS // max(n, 1)))
    done = 0
    while done < n_resamples:
        b = min(block, n_resamples - done)
        yield [s[rng.integers(0, s.size, size=(b, s.size))] for s in strata]
        done += b


def _auroc_block(
    w_id: NDArray[np.int64],
    w_ood: NDArray[np.int64],
    n_id_lt: NDArray[np.int64],
    n_id_le: NDArray[np.int64],
) -> NDArray[np.float64]:
    """AUROC of every resample from multiplicities over the sorted ID / OOD scores.

    ``w_id`` (b, n1) and ``w_ood`` (b, n0) count how often each sorted score is drawn;
    ``n_id_lt[j]`` / ``n_id_le[j]`` = #ID scores < / <= the j-th OOD score.
    """
    b, n1 = w_id.shape
    n0 = w_ood.shape[1]
    cum = np.zeros((b, n1 + 1))
    np.cumsum(w_id, axis=1, out=cum[:, 1:])
    # resampled ID count below each OOD score, ties counted 1/2
    below = (cum[:, n_id_lt] + cum[:, n_id_le]) * 0.5
    u = n1 * w_ood.sum(axis=1) - np.einsum("ij,ij->i", w_ood, below)
    return u / (n1 * n0)


def resample_counts(idx: NDArray[np.int64], size: int) -> NDArray[np.int64]:
    """Row-wise bincount of an index matrix (b, k) with values in [0, size): resample weights.

    >>> resample_counts(np.array([[0, 0, 2], [1, 2, 2]]), 3).tolist()
    [[2, 0, 1], [0, 1, 2]]
    """
    b = idx.shape[0]
    flat = (idx + size * np.arange(b)[:, None]).ravel()
    return np.bincount(flat, minlength=b * size).reshape(b, size)


def bootstrap_ci(
    metric: str | Callable[..., float],
    *arrays: ArrayLike,
    n_resamples: int = 1000,
    level: float = 0.95,
    stratify: ArrayLike | Literal["auto"] | None = "auto",
    seed: int | None = 0,
) -> BootstrapCI:
    """Bootstrap percentile confidence interval of any per-sample metric.

    Samples are drawn with replacement (all arrays with the same indices). By default ID and
    OOD samples are resampled separately (stratified by ``is_ood``), so every resample keeps
    the original class counts. AUROC has a vectorised path (no loop over resamples: sample
    multiplicities and cumulative counts over the sorted scores); other metrics are evaluated
    once per resample. Both paths draw the same resamples from the same seed.

    Parameters
    ----------
    metric : str or callable
        A registry name (e.g. ``"auroc"``) or a function ``f(*arrays) -> float``.
    *arrays : array_like, each shape (n, ...)
        The metric's inputs, e.g. ``scores, is_ood``; resampled along the first axis.
    n_resamples : int, default 1000
        Number of bootstrap resamples.
    level : float, default 0.95
        Confidence level in (0, 1).
    stratify : "auto", array_like or None, default "auto"
        ``"auto"``: resample within the classes of the second array when it is boolean (the
        ``is_ood`` of ``metric(scores, is_ood, ...)``), otherwise unstratified. An array of
        group labels (n,) stratifies by it; ``None`` resamples all samples together (a
        resample may then lack a class and make the metric fail, which raises).
    seed : int or None, default 0
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    BootstrapCI

    References
    ----------
    .. [1] Efron & Tibshirani, "An Introduction to the Bootstrap", Chapman & Hall 1993,
       ch. 13 (percentile interval).

    Examples
    --------
    >>> import numpy as np
    >>> from semshift.metrics import auroc, bootstrap_ci
    >>> rng = np.random.default_rng(0)
    >>> s = np.r_[rng.normal(1, 1, 200), rng.normal(0, 1, 200)]
    >>> is_ood = np.r_[np.zeros(200, bool), np.ones(200, bool)]
    >>> ci = bootstrap_ci(auroc, s, is_ood, n_resamples=500)
    >>> bool(ci.low < ci.estimate < ci.high), ci.level
    (True, 0.95)
    """
    func = get_metric(metric) if isinstance(metric, str) else metric
    if not callable(func):
        raise InputError(f"metric must be a registry name or a callable, got {metric!r}")
    if not isinstance(n_resamples, int | np.integer) or n_resamples < 1:
        raise InputError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    if not 0.0 < float(level) < 1.0:
        raise InputError(f"level must be in (0, 1), got {level!r}")
    if not arrays:
        raise InputError("bootstrap_ci needs the metric's input arrays")
    arrs = tuple(np.asarray(a) for a in arrays)
    n = arrs[0].shape[0] if arrs[0].ndim else 0
    for i, a in enumerate(arrs):
        if a.ndim == 0 or a.shape[0] != n:
            raise InputError(
                f"array {i} has shape {a.shape}; every array needs the same first dimension {n}"
            )
    estimate = float(func(*arrs))
    strata = _strata(arrs, stratify, n)
    rng = np.random.default_rng(seed)
    is_auroc = func is ranking.auroc or getattr(func, "function", None) is ranking.auroc
    if is_auroc and len(arrs) == 2 and len(strata) == 2 and isinstance(stratify, str):
        stats = _bootstrap_auroc(arrs[0], arrs[1], strata, rng, int(n_resamples))
    else:
        stats = np.empty(int(n_resamples))
        k = 0
        for block in _index_blocks(rng, strata, int(n_resamples)):
            idx = np.concatenate(block, axis=1)
            for row in idx:
                try:
                    stats[k] = func(*(a[row] for a in arrs))
                except SemshiftError as err:
                    raise InputError(
                        f"bootstrap resample {k} made the metric fail ({err}); resample within "
                        f"classes with stratify='auto' or an array of class labels"
                    ) from err
                k += 1
    alpha = (1.0 - float(level)) / 2.0
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    return BootstrapCI(estimate, float(low), float(high), float(level), int(n_resamples))


def _bootstrap_auroc(
    scores: NDArray[Any],
    is_ood: NDArray[Any],
    strata: list[NDArray[np.int64]],
    rng: np.random.Generator,
    n_resamples: int,
) -> NDArray[np.float64]:
    """Vectorised AUROC over resamples (strata = [ID indices, OOD indices])."""
    s = as_scores(scores)
    as_bool(is_ood, "is_ood", s.size)
    id_idx, ood_idx = strata
    # rank of every sample within its class in ascending score order
    rank = np.empty(s.size, dtype=np.int64)
    id_order = id_idx[np.argsort(s[id_idx], kind="stable")]
    ood_order = ood_idx[np.argsort(s[ood_idx], kind="stable")]
    rank[id_order] = np.arange(id_order.size)
    rank[ood_order] = np.arange(ood_order.size)
    sa, sb = s[id_order], s[ood_order]
    n_id_lt = np.searchsorted(sa, sb, side="left")
    n_id_le = np.searchsorted(sa, sb, side="right")
    out = []
    for id_draw, ood_draw in _index_blocks(rng, strata, n_resamples):
        w_id = resample_counts(rank[id_draw], sa.size)
        w_ood = resample_counts(rank[ood_draw], sb.size)
        out.append(_auroc_block(w_id, w_ood, n_id_lt, n_id_le))
    return np.concatenate(out)


@dataclass(frozen=True)
class DeLongResult:
    """Result of DeLong's paired test of two AUROCs on the same samples.

    Attributes
    ----------
    z : float
        (auroc_a - auroc_b) / se.
    p : float
        Two-sided p-value, 2 Phi(-|z|).
    auroc_a, auroc_b : float
        The two AUROCs (ID positive).
    se : float
        Standard error of the difference.
    """

    z: float
    p: float
    auroc_a: float
    auroc_b: float
    se: float


def _structural_components(
    s: NDArray[np.float64], m: NDArray[np.bool_], n1: int, n0: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """DeLong's V10 (rows, n_id) and V01 (rows, n_ood) of each row of scores ``s`` (rows, n)
    from midranks (Sun & Xu); ``m`` marks the OOD samples, n1 ID and n0 OOD of them."""
    x, y = s[:, ~m], s[:, m]
    tz = rankdata(np.concatenate((x, y), axis=1), axis=1)  # midranks
    tx = rankdata(x, axis=1)
    ty = rankdata(y, axis=1)
    return (tz[:, :n1] - tx) / n0, 1.0 - (tz[:, n1:] - ty) / n1


def _delong_result(auc_a: float, auc_b: float, var: float) -> DeLongResult:
    """z and the two-sided p of ``auc_a - auc_b`` with variance ``var`` (z = 0 and p = 1 for
    equal AUROCs with zero variance, z = +-inf otherwise)."""
    diff = auc_a - auc_b
    se = float(np.sqrt(max(var, 0.0)))
    if se > 0:
        z = diff / se
    else:
        z = 0.0 if diff == 0 else float(np.copysign(np.inf, diff))
    p = float(2.0 * ndtr(-abs(z)))
    return DeLongResult(z=float(z), p=p, auroc_a=auc_a, auroc_b=auc_b, se=se)


def delong_test(scores_a: ArrayLike, scores_b: ArrayLike, is_ood: ArrayLike) -> DeLongResult:
    """DeLong's test for the difference of two correlated AUROCs (same samples, two detectors).

    Uses the structural components computed from midranks (Sun & Xu's fast algorithm):
    V10_i = (1/n0) sum_j psi(x_i, y_j) per ID sample, V01_j = (1/n1) sum_i psi(x_i, y_j) per
    OOD sample, psi = 1 / 0.5 / 0 for >, =, <; var(A - B) = c' S10 c / n1 + c' S01 c / n0 with
    c = (1, -1) and S the 2 x 2 sample covariances. When the variance is 0 (identical rankings)
    z = 0 and p = 1 if the AUROCs are equal.

    Parameters
    ----------
    scores_a, scores_b : array_like of float, shape (n,)
        Two detectors' normality scores of the same samples, higher = more in-distribution.
    is_ood : array_like of bool, shape (n,)
        True = OOD; at least two samples of each class.

    Returns
    -------
    DeLongResult

    References
    ----------
    .. [1] DeLong, DeLong & Clarke-Pearson, "Comparing the Areas under Two or More Correlated
       Receiver Operating Characteristic Curves: A Nonparametric Approach", Biometrics 1988.
    .. [2] Sun & Xu, "Fast Implementation of DeLong's Algorithm for Comparing the Areas Under
       Correlated Receiver Operating Characteristic Curves", IEEE SPL 2014.

    Examples
    --------
    >>> from semshift.metrics import delong_test
    >>> r = delong_test([4, 3, 2, 1, 0], [4, 1, 2, 3, 0], [False, False, True, True, True])
    >>> r.auroc_a, r.auroc_b
    (1.0, 0.6666666666666666)
    """
    a = as_scores(scores_a, "scores_a")
    b = as_scores(scores_b, "scores_b")
    m = as_bool(is_ood, "is_ood", a.size)
    if b.size != a.size:
        raise InputError(f"shape mismatch: scores_a has {a.size} elements but scores_b {b.size}")
    n1, n0 = check_both_classes(m, "delong_test")
    if n1 < 2 or n0 < 2:
        raise InputError(f"delong_test needs >= 2 ID and >= 2 OOD samples, got {n1} and {n0}")
    s = np.stack((a, b))  # (2, n)
    v10, v01 = _structural_components(s, m, n1, n0)
    # the AUROCs are the means of v10; take them from the exact integer-count computation
    auc = (ranking.auroc(a, m), ranking.auroc(b, m))
    s10, s01 = np.cov(v10), np.cov(v01)
    c = np.array([1.0, -1.0])
    var = float(c @ s10 @ c / n1 + c @ s01 @ c / n0)
    return _delong_result(float(auc[0]), float(auc[1]), var)


def delong_mean_test(scores_a: ArrayLike, scores_b: ArrayLike, is_ood: ArrayLike) -> DeLongResult:
    """DeLong's test for the difference of two *mean* AUROCs over k paired replicates.

    Replicate r (a training seed, say) gives both detectors' scores of the same n samples:
    ``scores_a[r]`` and ``scores_b[r]``. The statistic is ``mean_r AUROC(a_r) - mean_r
    AUROC(b_r)``, a two-sample U-statistic whose kernel is the mean over replicates of
    ``psi(a_r(x_i), a_r(y_j)) - psi(b_r(x_i), b_r(y_j))``; its DeLong variance is
    ``var(W10) / n1 + var(W01) / n0`` with the structural components averaged the same way,
    ``W10_i = mean_r (V10[a_r]_i - V10[b_r]_i)`` (and W01 over the OOD samples). The samples
    are the unit of pairing: the replicates share them, and the averaging keeps every
    correlation between replicates in the variance. The trained models are held fixed, so the
    test is about these k models on new images, not about a new seed. With k = 1 it is
    :func:`delong_test` (same z and p).

    Parameters
    ----------
    scores_a, scores_b : array_like of float, shape (k, n) or (n,)
        Normality scores, higher = more in-distribution; row r of both on the same samples.
    is_ood : array_like of bool, shape (n,)
        True = OOD; at least two samples of each class.

    Returns
    -------
    DeLongResult
        ``auroc_a`` and ``auroc_b`` are the mean AUROCs over the replicates.

    References
    ----------
    .. [1] DeLong, DeLong & Clarke-Pearson, "Comparing the Areas under Two or More Correlated
       Receiver Operating Characteristic Curves: A Nonparametric Approach", Biometrics 1988.

    Examples
    --------
    >>> from semshift.metrics import delong_mean_test, delong_test
    >>> ood = [False, False, True, True, True]
    >>> a, b = [4, 3, 2, 1, 0], [4, 1, 2, 3, 0]
    >>> delong_mean_test([a], [b], ood).p == delong_test(a, b, ood).p
    True
    >>> delong_mean_test([a, b], [a, b], ood).p  # the same models: no difference
    1.0
    """
    a = np.atleast_2d(np.asarray(scores_a, dtype=np.float64))
    b = np.atleast_2d(np.asarray(scores_b, dtype=np.float64))
    if a.ndim != 2 or a.shape != b.shape or a.shape[0] < 1:
        raise InputError(
            f"delong_mean_test: scores_a and scores_b must have the same shape (k, n), got "
            f"{a.shape} and {b.shape}"
        )
    k, n = a.shape
    rows = [as_scores(r, "scores_a") for r in a] + [as_scores(r, "scores_b") for r in b]
    m = as_bool(is_ood, "is_ood", n)
    n1, n0 = check_both_classes(m, "delong_mean_test")
    if n1 < 2 or n0 < 2:
        raise InputError(f"delong_mean_test needs >= 2 ID and >= 2 OOD samples, got {n1} and {n0}")
    s = np.stack(rows)  # (2k, n)
    v10, v01 = _structural_components(s, m, n1, n0)
    w10 = (v10[:k] - v10[k:]).mean(axis=0)  # exact zeros for identical replicates
    w01 = (v01[:k] - v01[k:]).mean(axis=0)
    var = float(np.var(w10, ddof=1) / n1 + np.var(w01, ddof=1) / n0)
    auc_a = float(np.mean([ranking.auroc(r, m) for r in rows[:k]]))
    auc_b = float(np.mean([ranking.auroc(r, m) for r in rows[k:]]))
    return _delong_result(auc_a, auc_b, var)
