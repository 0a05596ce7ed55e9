"""Distance-binned regression (ImageNet-OOD Fig. 3 left, Appendix C).

Images of a shifted set are sorted by their distance to the nearest ID image in a reference
feature space, cut into equal-count subsets, and the AUROC of the ID set against each subset is
regressed on the subset's mean distance by ordinary least squares. Pieces, each usable alone:

- :func:`kth_neighbour_distance`: Euclidean distance of each query to its k-th nearest reference
  row (optionally on L2-normalised rows), computed in blocks;
- :func:`equal_count_bins`: the subset of each sample, sizes differing by at most one;
- :func:`auroc_by_group`: AUROC of one ID score set against every subset at once;
- :func:`ols_fit`: OLS slope and intercept with standard errors and t-distribution CIs;
- :func:`distance_bins`: the subsets' mean distance, AUROC and size, for one detector.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from semshift.errors import InputError
from semshift.metrics._validation import as_scores, check_finite, check_same_length

__all__ = [
    "OLSFit",
    "auroc_by_group",
    "distance_bins",
    "equal_count_bins",
    "intervals_overlap",
    "kth_neighbour_distance",
    "ols_fit",
]

#: Query rows per block of :func:`kth_neighbour_distance` (a block x reference distance matrix).
_BLOCK_ROWS = 256


def _matrix(x: ArrayLike, name: str) -> NDArray[np.float64]:
    arr = np.asarray(x)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.number):
        raise InputError(f"{name} must be a real-valued matrix, got dtype {arr.dtype}")
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise InputError(f"{name} must be a non-empty 2-D array (rows, dims), got {arr.shape}")
    out = arr.astype(np.float64, copy=False)
    check_finite(out, name)
    return out


def _unit(x: NDArray[np.float64]) -> NDArray[np.float64]:
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norm > 0, norm, 1.0)


def kth_neighbour_distance(
    queries: ArrayLike,
    reference: ArrayLike,
    k: int = 1,
    *,
    normalize: bool = True,
    block_rows: int = _BLOCK_ROWS,
) -> NDArray[np.float64]:
    """Euclidean distance of each query row to its ``k``-th nearest reference row.

    Parameters
    ----------
    queries : array_like, shape (n, d)
    reference : array_like, shape (m, d)
        The ID images' features (m >= k).
    k : int, default 1
        Which neighbour (1 = the nearest).
    normalize : bool, default True
        L2-normalise every row first (distances then lie in [0, 2]); a zero row stays zero.
    block_rows : int
        Queries per block: memory is ``block_rows x m`` float64.

    Returns
    -------
    ndarray of float64, shape (n,)

    Raises
    ------
    InputError
        Not 2-D, empty, non-finite, different widths, or ``k`` outside 1..m.

    Examples
    --------
    >>> kth_neighbour_distance([[0.0, 3.0]], [[0.0, 0.0], [4.0, 3.0]], normalize=False)
    array([3.])
    >>> kth_neighbour_distance([[0.0, 3.0]], [[0.0, 0.0], [4.0, 3.0]], k=2, normalize=False)
    array([4.])
    """
    q = _matrix(queries, "queries")
    r = _matrix(reference, "reference")
    if q.shape[1] != r.shape[1]:
        raise InputError(
            f"queries have {q.shape[1]} features but reference has {r.shape[1]}; both must come "
            "from one feature space"
        )
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= r.shape[0]:
        raise InputError(f"k must be an integer in 1..{r.shape[0]} (reference rows), got {k!r}")
    if block_rows < 1:
        raise InputError(f"block_rows must be >= 1, got {block_rows}")
    if normalize:
        q, r = _unit(q), _unit(r)
    r_sq = np.einsum("ij,ij->i", r, r)
    r_t = np.ascontiguousarray(r.T)
    out = np.empty(q.shape[0], dtype=np.float64)
    for start in range(0, q.shape[0], block_rows):
        b = q[start : start + block_rows]
        # |b|^2 + |r|^2 - 2 b.r, with |b|^2 (constant along a row) added after the selection
        part = b @ r_t
        part *= -2.0
        part += r_sq
        kth = part.min(axis=1) if k == 1 else np.partition(part, k - 1, axis=1)[:, k - 1]
        kth += np.einsum("ij,ij->i", b, b)
        out[start : start + b.shape[0]] = np.sqrt(np.maximum(kth, 0.0))
    return out


def equal_count_bins(distances: ArrayLike, n_bins: int) -> NDArray[np.int64]:
    """The subset (0 = nearest) of each sample: sorted by distance, cut into ``n_bins`` runs.

    Samples are ordered by distance (ties by position, so the result is deterministic) and the
    ``i``-th of ``n`` in that order goes to subset ``floor(i * n_bins / n)``: subset sizes
    differ by at most one.

    Raises
    ------
    InputError
        Bad distances, or ``n_bins`` not in 1..n.

    Examples
    --------
    >>> equal_count_bins([0.9, 0.1, 0.5, 0.3, 0.7], 2).tolist()
    [1, 0, 0, 0, 1]
    """
    d = as_scores(distances, "distances")
    n = d.size
    if isinstance(n_bins, bool) or not isinstance(n_bins, int | np.integer) or not 1 <= n_bins:
        raise InputError(f"n_bins must be an integer >= 1, got {n_bins!r}")
    if n_bins > n:
        raise InputError(f"n_bins = {n_bins} exceeds the {n} samples; use at most {n} subsets")
    order = np.argsort(d, kind="stable")
    bins = np.empty(n, dtype=np.int64)
    bins[order] = (np.arange(n, dtype=np.int64) * int(n_bins)) // n
    return bins


def auroc_by_group(
    id_scores: ArrayLike, ood_scores: ArrayLike, groups: ArrayLike, n_groups: int
) -> NDArray[np.float64]:
    """AUROC of the ID scores against each group of OOD scores, all groups at once.

    Each OOD score counts the ID scores above it (ties: half), read off the sorted ID scores;
    a group's AUROC is the sum over its members divided by ``n_id x size`` (the Mann-Whitney
    statistic, equal to :func:`semshift.metrics.auroc` on the pair). Higher score = more ID.

    Parameters
    ----------
    id_scores : array_like, shape (n_id,)
    ood_scores : array_like, shape (n,)
    groups : array_like of int, shape (n,)
        Group of each OOD score, in ``0 .. n_groups - 1``.
    n_groups : int

    Returns
    -------
    ndarray of float64, shape (n_groups,)
        NaN for an empty group.

    Examples
    --------
    >>> auroc_by_group([3.0, 2.0], [2.5, 0.0, 2.0], [0, 1, 1], 2).tolist()
    [0.5, 0.875]
    """
    ids = np.sort(as_scores(id_scores, "id_scores"))
    ood = as_scores(ood_scores, "ood_scores")
    g = np.asarray(groups)
    if g.ndim != 1 or not np.issubdtype(g.dtype, np.integer):
        raise InputError(f"groups must be a 1-D integer array, got dtype {g.dtype}, {g.shape}")
    check_same_length(ood_scores=ood, groups=g)
    if g.size and (g.min() < 0 or g.max() >= n_groups):
        raise InputError(f"groups must lie in 0..{n_groups - 1}, got {g.min()}..{g.max()}")
    below = np.searchsorted(ids, ood, side="left")
    upto = np.searchsorted(ids, ood, side="right")
    wins = (ids.size - upto) + 0.5 * (upto - below)
    sums = np.bincount(g, weights=wins, minlength=n_groups)
    sizes = np.bincount(g, minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sizes > 0, sums / (ids.size * sizes), np.nan)


@dataclass(frozen=True)
class OLSFit:
    """An ordinary least-squares line ``y = intercept + slope x`` with its uncertainty.

    ``*_se`` are the usual standard errors (residual variance on ``n - 2`` degrees of freedom);
    ``*_ci`` the two-sided ``level`` intervals ``estimate +- t_{(1+level)/2, n-2} se``.
    """

    slope: float
    intercept: float
    slope_se: float
    intercept_se: float
    slope_ci: tuple[float, float]
    intercept_ci: tuple[float, float]
    r2: float
    n: int
    level: float


def ols_fit(x: ArrayLike, y: ArrayLike, *, level: float = 0.95) -> OLSFit:
    """OLS line of ``y`` on ``x`` with standard errors and t-distribution CIs.

    Raises
    ------
    InputError
        Fewer than 3 points, lengths differ, non-finite values, all ``x`` equal, or ``level``
        outside (0, 1).

    Examples
    --------
    >>> f = ols_fit([0.0, 1.0, 2.0, 3.0], [1.0, 3.0, 5.0, 7.0])
    >>> f.slope, f.intercept, f.slope_se
    (2.0, 1.0, 0.0)
    """
    xs = as_scores(x, "x")
    ys = as_scores(y, "y")
    n = check_same_length(x=xs, y=ys)
    if n < 3:
        raise InputError(f"an OLS fit with CIs needs at least 3 points, got {n}")
    if not 0.0 < float(level) < 1.0:
        raise InputError(f"level must be in (0, 1), got {level!r}")
    dx = xs - xs.mean()
    sxx = float(dx @ dx)
    if sxx == 0.0:
        raise InputError("every x is equal: the slope of an OLS fit is undefined")
    slope = float(dx @ (ys - ys.mean())) / sxx
    intercept = float(ys.mean() - slope * xs.mean())
    resid = ys - (intercept + slope * xs)
    s2 = float(resid @ resid) / (n - 2)
    slope_se = float(np.sqrt(s2 / sxx))
    intercept_se = float(np.sqrt(s2 * (1.0 / n + xs.mean() ** 2 / sxx)))
    t = float(stats.t.ppf(0.5 + float(level) / 2.0, n - 2))
    dy = ys - ys.mean()
    syy = float(dy @ dy)
    r2 = 1.0 - float(resid @ resid) / syy if syy > 0 else float("nan")
    return OLSFit(
        slope=slope,
        intercept=intercept,
        slope_se=slope_se,
        intercept_se=intercept_se,
        slope_ci=(slope - t * slope_se, slope + t * slope_se),
        intercept_ci=(intercept - t * intercept_se, intercept + t * intercept_se),
        r2=r2,
        n=n,
        level=float(level),
    )


def intervals_overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """True when the closed intervals ``a`` and ``b`` share a point.

    >>> intervals_overlap((0.0, 1.0), (1.0, 2.0)), intervals_overlap((0.0, 1.0), (1.5, 2.0))
    (True, False)
    """
    return bool(max(a[0], b[0]) <= min(a[1], b[1]))


def distance_bins(
    id_scores: ArrayLike, ood_scores: ArrayLike, distances: ArrayLike, n_bins: int
) -> pd.DataFrame:
    """The equal-count distance subsets of one shifted set and the ID set's AUROC against each.

    Parameters
    ----------
    id_scores : array_like, shape (n_id,)
        Normality scores of the ID set (higher = more ID).
    ood_scores, distances : array_like, shape (n,)
        Scores of the shifted set's images and their distance to the nearest ID image.
    n_bins : int
        Subsets (:func:`equal_count_bins`).

    Returns
    -------
    pandas.DataFrame
        One row per subset, nearest first: ``bin``, ``mean_distance``, ``auroc``, ``n``.

    Examples
    --------
    >>> df = distance_bins([1.0, 1.0], [2.0, 0.0, 0.5, 3.0], [0.0, 1.0, 0.75, 0.25], 2)
    >>> df.to_dict("list")
    {'bin': [0, 1], 'mean_distance': [0.125, 0.875], 'auroc': [0.0, 1.0], 'n': [2, 2]}
    """
    d = as_scores(distances, "distances")
    scores = as_scores(ood_scores, "ood_scores")
    check_same_length(ood_scores=scores, distances=d)
    bins = equal_count_bins(d, n_bins)
    sizes = np.bincount(bins, minlength=n_bins)
    mean_d = np.bincount(bins, weights=d, minlength=n_bins) / sizes
    return pd.DataFrame(
        {
            "bin": np.arange(n_bins, dtype=np.int64),
            "mean_distance": mean_d,
            "auroc": auroc_by_group(id_scores, scores, bins, n_bins),
            "n": sizes.astype(np.int64),
        }
    )
