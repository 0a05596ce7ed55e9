"""Graded shift: per-cell metrics over a (semantic level x covariate level) grid and the
level correlation / sensitivity of IS-OOD (Long et al., eq. 5-6)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from semshift.errors import InputError
from semshift.metrics._validation import as_scores, check_same_length
from semshift.metrics.many import MetricArg, evaluate_many

__all__ = ["level_means", "level_trend", "shift_grid"]


def _as_levels(x: ArrayLike, name: str) -> NDArray[np.int64]:
    arr = np.asarray(x)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise InputError(f"{name} must hold integer shift levels, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise InputError(f"{name} must be 1-D (one level per OOD sample), got shape {arr.shape}")
    return arr.astype(np.int64, copy=False)


def _axis_levels(
    present: NDArray[np.int64], given: Sequence[int] | None, name: str
) -> NDArray[np.int64]:
    if given is None:
        return np.unique(present)
    lv = np.asarray(given, dtype=np.int64)
    if lv.ndim != 1 or lv.size == 0 or np.unique(lv).size != lv.size:
        raise InputError(f"levels for {name} must be a non-empty list of distinct integers")
    missing = np.setdiff1d(present, lv)
    if missing.size:
        raise InputError(
            f"{name} holds level(s) {missing.tolist()} not in the given levels {lv.tolist()}"
        )
    return lv


def shift_grid(
    id_scores: ArrayLike,
    ood_scores: ArrayLike,
    sem_level: ArrayLike,
    cov_level: ArrayLike,
    metric: MetricArg = "auroc",
    min_count: int = 10,
    *,
    levels: tuple[Sequence[int] | None, Sequence[int] | None] | None = None,
) -> pd.DataFrame:
    """Evaluate a detector on every (semantic level, covariate level) cell of OOD samples.

    Every cell's OOD scores are ranked against the same ID scores (sorted once, see
    :func:`semshift.metrics.evaluate_many`). Cells with fewer than ``min_count`` OOD samples are
    N/A: their value is NaN (their ``n_ood`` is still reported).

    Parameters
    ----------
    id_scores : array_like of float, shape (n_id,)
        Scores of the ID test set, higher = more in-distribution.
    ood_scores : array_like of float, shape (m,)
        Scores of the OOD samples.
    sem_level, cov_level : array_like of int, shape (m,)
        Semantic and covariate shift level of each OOD sample.
    metric : str or callable, default "auroc"
        A registry name of a ``(scores, is_ood)`` metric or a callable ``f(scores, is_ood)``.
    min_count : int, default 10
        Minimum number of OOD samples for a cell to be evaluated (IS-OOD uses 10).
    levels : (sequence of int or None, sequence of int or None), optional
        The level values of each axis, in order; default: the levels present. Giving them
        keeps empty levels in the grid; a sample whose level is not listed raises.

    Returns
    -------
    pandas.DataFrame
        One row per cell, semantic-major: ``sem_level``, ``cov_level``, ``n_ood``, ``metric``,
        ``value`` (NaN for N/A cells). ``df.pivot(index="sem_level", columns="cov_level",
        values="value")`` gives the heat map for :func:`level_trend`.

    References
    ----------
    .. [1] Long et al., "Rethinking the Evaluation of Out-of-Distribution Detection: A Sorites
       Paradox" (IS-OOD), NeurIPS 2024 Datasets and Benchmarks.

    Examples
    --------
    >>> from semshift.metrics import shift_grid
    >>> df = shift_grid([2.0, 3.0], [0.0, 2.5, 1.0], [1, 2, 1], [1, 1, 1], min_count=1)
    >>> df[["sem_level", "n_ood", "value"]].to_numpy().tolist()
    [[1.0, 2.0, 1.0], [2.0, 1.0, 0.5]]
    """
    if not isinstance(min_count, int | np.integer) or min_count < 1:
        raise InputError(f"min_count must be a positive integer, got {min_count!r}")
    ids = as_scores(id_scores, "id_scores")
    ood = as_scores(ood_scores, "ood_scores")
    sem = _as_levels(sem_level, "sem_level")
    cov = _as_levels(cov_level, "cov_level")
    check_same_length(ood_scores=ood, sem_level=sem, cov_level=cov)
    given_sem, given_cov = levels if levels is not None else (None, None)
    sem_lv = _axis_levels(sem, given_sem, "sem_level")
    cov_lv = _axis_levels(cov, given_cov, "cov_level")
    # cell index of every OOD sample, semantic-major, in the order of the given levels
    sem_pos = np.argsort(sem_lv)[np.searchsorted(np.sort(sem_lv), sem)]
    cov_pos = np.argsort(cov_lv)[np.searchsorted(np.sort(cov_lv), cov)]
    cell = sem_pos * cov_lv.size + cov_pos
    counts = np.bincount(cell, minlength=sem_lv.size * cov_lv.size)
    name = metric if isinstance(metric, str) else getattr(metric, "__name__", repr(metric))
    values = np.full(counts.size, np.nan)
    ok = counts[cell] >= min_count
    if ok.any():
        table = evaluate_many(ids, ood[ok], [metric], groups=cell[ok])
        values[table["subset"].to_numpy(dtype=np.int64)] = table["value"].to_numpy()
    return pd.DataFrame(
        {
            "sem_level": np.repeat(sem_lv, cov_lv.size),
            "cov_level": np.tile(cov_lv, sem_lv.size),
            "n_ood": counts,
            "metric": name,
            "value": values,
        }
    )


def _as_grid(values: ArrayLike | pd.DataFrame) -> NDArray[np.float64]:
    if isinstance(values, pd.DataFrame):
        needed = {"sem_level", "cov_level", "value"}
        if not needed <= set(values.columns):
            raise InputError(f"a DataFrame grid needs columns {sorted(needed)}")
        piv = values.pivot(index="sem_level", columns="cov_level", values="value")
        return piv.to_numpy(dtype=np.float64)
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim not in (1, 2) or arr.size == 0:
        raise InputError(f"values must be a non-empty 1-D or 2-D array, got shape {arr.shape}")
    if np.isinf(arr).any():
        raise InputError("values contain inf; use NaN for N/A cells")
    return arr


def level_means(values: ArrayLike | pd.DataFrame) -> dict[str, NDArray[np.float64]]:
    """Per-level means of a grid: the mean over the other axis of the non-N/A cells.

    Parameters
    ----------
    values : array_like of float, shape (n_sem, n_cov), or a :func:`shift_grid` DataFrame
        Cell values, NaN = N/A.

    Returns
    -------
    dict
        ``{"semantic": (n_sem,), "covariate": (n_cov,)}``; NaN for a level with no valid cell.

    Examples
    --------
    >>> from semshift.metrics import level_means
    >>> level_means([[0.9, 0.8], [0.7, float("nan")]])["semantic"]
    array([0.85, 0.7 ])
    """
    grid = _as_grid(values)
    if grid.ndim != 2:
        raise InputError(f"level_means needs a 2-D grid, got shape {grid.shape}")
    valid = ~np.isnan(grid)
    sums = np.where(valid, grid, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        sem = sums.sum(axis=1) / valid.sum(axis=1)
        cov = sums.sum(axis=0) / valid.sum(axis=0)
    return {"semantic": sem, "covariate": cov}


def _trend(x: NDArray[np.float64], pos: NDArray[np.float64]) -> tuple[float, float, int]:
    keep = ~np.isnan(x)
    x, pos = x[keep], pos[keep]
    n = int(x.size)
    if n < 2:
        return float("nan"), float("nan"), n
    dx, dp = x - x.mean(), pos - pos.mean()
    sxp, spp, sxx = float(dx @ dp), float(dp @ dp), float(dx @ dx)
    corr = sxp / np.sqrt(sxx * spp) if sxx > 0 else float("nan")
    return corr, abs(sxp) / spp, n


def level_trend(
    values: ArrayLike | pd.DataFrame,
    levels: tuple[ArrayLike, ArrayLike] | ArrayLike | None = None,
) -> pd.DataFrame:
    """Correlation and sensitivity of a metric to the shift level (IS-OOD eq. 5-6).

    For a 2-D grid of cell values (semantic level i x covariate level j, NaN = N/A), the level
    mean x_i is the mean over the other axis of the non-N/A cells. Then, per axis,

    - correlation = Pearson r between x_i and the level position i = 1..n;
    - sensitivity = |sum (x_i - mean x)(i - (n + 1) / 2)| / sum (i - (n + 1) / 2)^2, the
      absolute least-squares slope of x on i.

    A level whose cells are all N/A is left out (with its position); with fewer than two
    levels left, or constant level means, the correlation is NaN.

    Parameters
    ----------
    values : array_like of float, shape (n_sem, n_cov) or (n,), or a :func:`shift_grid` frame
        Cell values (2-D), or already computed level means of one axis (1-D).
    levels : pair of array_like, or array_like, optional
        Level positions per axis (a pair for a 2-D grid, one array for 1-D input); default
        1..n, as in the paper.

    Returns
    -------
    pandas.DataFrame
        Columns ``axis`` ("semantic", "covariate"; or "level" for 1-D input),
        ``correlation``, ``sensitivity``, ``n_levels`` (levels used).

    References
    ----------
    .. [1] Long et al., IS-OOD, NeurIPS 2024 Datasets and Benchmarks, eq. 5-6.

    Examples
    --------
    >>> from semshift.metrics import level_trend
    >>> t = level_trend([[0.9, 0.8], [0.7, 0.6]])
    >>> t.round(6).to_numpy().tolist()
    [['semantic', -1.0, 0.2, 2], ['covariate', -1.0, 0.1, 2]]
    """
    grid = _as_grid(values)
    if grid.ndim == 1:
        pos = (
            np.arange(1.0, grid.size + 1)
            if levels is None
            else _positions(cast(ArrayLike, levels), grid.size)
        )
        axes = [("level", grid, pos)]
    else:
        means = level_means(grid)
        if levels is None:
            ps, pc = np.arange(1.0, grid.shape[0] + 1), np.arange(1.0, grid.shape[1] + 1)
        else:
            if not (isinstance(levels, tuple | list) and len(levels) == 2):
                raise InputError("levels for a 2-D grid must be a pair (semantic, covariate)")
            ps, pc = _positions(levels[0], grid.shape[0]), _positions(levels[1], grid.shape[1])
        axes = [("semantic", means["semantic"], ps), ("covariate", means["covariate"], pc)]
    rows = [(name, *_trend(x, p)) for name, x, p in axes]
    return pd.DataFrame(rows, columns=["axis", "correlation", "sensitivity", "n_levels"])


def _positions(levels: ArrayLike, n: int) -> NDArray[np.float64]:
    pos = np.asarray(levels, dtype=np.float64)
    if pos.shape != (n,) or not np.isfinite(pos).all():
        raise InputError(f"level positions must be {n} finite numbers, got shape {pos.shape}")
    return pos
