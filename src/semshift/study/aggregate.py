"""A study's numbers: the tidy table of every cell, means over models, ranks and the
accuracy-vs-detection relation across models.

All of it is vectorised over groups: the bootstrap over models draws one matrix of model
indices per call (``n_resamples x n_models``, the same for every group, so intervals of two
detectors are paired) and evaluates every group of a block at once. Models are drawn in sorted
label order, so the numbers do not depend on the order of the rows.

Conventions
-----------
- A model's value is the mean over its seeds; the statistics across models then weigh every
  model once, whatever its seed count.
- ``n_models`` counts models with a finite value; a group with one model has ``sd`` and CI NaN.
- Error rows (``value`` NaN) are left out and counted in ``n_failed``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from semshift.errors import InputError

__all__ = [
    "CELL_COLUMNS",
    "GROUP_COLUMNS",
    "accuracy_relation",
    "aggregate_over_models",
    "detector_ranks",
    "mean_ranks",
    "model_values",
]

#: the columns a study adds in front of a run's tidy results
CELL_COLUMNS = ("model", "dataset", "seed")
#: what identifies one number of a run (all tidy-result keys but the value columns)
GROUP_COLUMNS = (
    "dataset", "protocol", "set", "split", "semantic_level", "covariate_level", "detector",
    "metric",
)  # fmt: skip
#: groups evaluated together in the bootstrap (bounds memory: block x resamples x models)
_BLOCK = 256


def _keys(frame: pd.DataFrame) -> list[str]:
    return [c for c in GROUP_COLUMNS if c in frame.columns]


def _groups(frame: pd.DataFrame, keys: Sequence[str]) -> tuple[NDArray[np.int64], pd.DataFrame]:
    """Group number of every row (first-seen order) and the groups' keys, nulls kept as None.

    Each key column is factorised (a null is a value of its own), the codes combined into one
    integer per row, and that integer made dense: no Python loop over rows or groups.
    """
    if not len(frame):
        return np.zeros(0, np.int64), pd.DataFrame(columns=list(keys))
    codes, sizes = [], []
    for k in keys:
        c, uniques = pd.factorize(frame[k], use_na_sentinel=False)
        codes.append(c.astype(np.int64))
        sizes.append(max(1, len(uniques)))
    flat = np.ravel_multi_index(codes, sizes) if codes else np.zeros(len(frame), np.int64)
    _, first, inverse = np.unique(flat, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # unique ids -> first-seen rank
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    groups = frame.iloc[first[order]][list(keys)].reset_index(drop=True)
    for k in keys:
        column = groups[k].astype(object)
        groups[k] = column.where(column.notna(), None)
    return rank[inverse.ravel()], groups


def model_values(results: pd.DataFrame) -> pd.DataFrame:
    """One value per (group, model): the mean over the model's seeds of its finite values.

    Returns columns ``GROUP_COLUMNS``, ``model``, ``value``, ``n_seeds`` and ``n_failed`` (seeds
    whose row is an error or NaN). Null keys (no detector, no split) stay null.
    """
    if results.empty:
        return pd.DataFrame(columns=[*GROUP_COLUMNS, "model", "value", "n_seeds", "n_failed"])
    keys = [*_keys(results), "model"]
    gid, out = _groups(results, keys)
    value = results["value"].to_numpy(np.float64)
    ok = np.isfinite(value)
    n = len(out)
    total = np.bincount(gid, weights=np.where(ok, value, 0.0), minlength=n)
    n_seeds = np.bincount(gid, weights=ok, minlength=n).astype(np.int64)
    rows = np.bincount(gid, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        out["value"] = total / np.where(n_seeds > 0, n_seeds, np.nan)
    out["n_seeds"] = n_seeds
    out["n_failed"] = rows - n_seeds
    return out


def _matrix(values: pd.DataFrame, models: Sequence[str]) -> tuple[pd.DataFrame, NDArray]:
    """(groups, models) matrix of values (NaN where a model has none), and the group keys."""
    gid, groups = _groups(values, _keys(values))
    mid = pd.Index(list(models)).get_indexer(values["model"])
    mat = np.full((len(groups), len(models)), np.nan)
    mat[gid, mid] = values["value"].to_numpy(np.float64)
    return groups, mat


def _draws(n_models: int, n_resamples: int, seed: int) -> NDArray[np.int64]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, n_models, size=(n_resamples, n_models))


def aggregate_over_models(
    results: pd.DataFrame,
    *,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    values: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Mean, standard deviation and a bootstrap CI over models, per group.

    Parameters
    ----------
    results : DataFrame
        A study's tidy table (:data:`CELL_COLUMNS` + a run's result columns).
    n_resamples : int
        Bootstrap resamples of the models (0: no CI).
    level : float
        Two-sided level of the percentile interval.
    seed : int
        Seed of the model draws (one draw matrix for every group: paired intervals).
    values : DataFrame, optional
        :func:`model_values` of ``results``, when already computed.

    Returns
    -------
    DataFrame
        ``GROUP_COLUMNS``, ``mean``, ``sd`` (ddof 1), ``ci_low``, ``ci_high``, ``n_models``,
        ``n_failed`` (model-seeds without a value), one row per group in first-seen order.
    """
    if not 0 < level < 1:
        raise InputError(f"aggregate_over_models: level must be in (0, 1), got {level}")
    per_model = model_values(results) if values is None else values
    models = sorted(set(per_model["model"]))  # the draws index models in this order
    groups, mat = _matrix(per_model, models)
    _, failed = _matrix(per_model.assign(value=per_model["n_failed"].astype(float)), models)
    ok = np.isfinite(mat)
    n = ok.sum(axis=1)
    x0 = np.where(ok, mat, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = x0.sum(axis=1) / np.where(n > 0, n, np.nan)
        dev = np.where(ok, mat - mean[:, None], 0.0)
        sd = np.sqrt((dev**2).sum(axis=1) / np.where(n > 1, n - 1, np.nan))
    low = np.full(len(groups), np.nan)
    high = np.full(len(groups), np.nan)
    if n_resamples > 0 and len(models) > 1:
        idx = _draws(len(models), n_resamples, seed)
        alpha = (1 - level) / 2
        for lo in range(0, len(groups), _BLOCK):
            sl = slice(lo, lo + _BLOCK)
            s = x0[sl][:, idx].sum(axis=2)  # (block, resamples)
            c = ok[sl][:, idx].sum(axis=2)
            with np.errstate(invalid="ignore", divide="ignore"):
                m = s / np.where(c > 0, c, np.nan)
            q = np.nanquantile(m, [alpha, 1 - alpha], axis=1) if m.size else np.zeros((2, 0))
            low[sl], high[sl] = q[0], q[1]
        few = n < 2
        low[few] = high[few] = np.nan
    out = groups.copy()
    out["mean"], out["sd"], out["ci_low"], out["ci_high"] = mean, sd, low, high
    out["n_models"] = n.astype(np.int64)
    out["n_failed"] = np.nansum(failed, axis=1).astype(np.int64)
    return out


def _direction(metrics: pd.Series) -> NDArray[np.bool_]:
    """Per row: whether a higher value of its metric is better (unknown metrics: higher)."""
    from semshift.metrics import get_metric

    def higher(name: str) -> bool:
        try:
            return bool(get_metric(name).higher_is_better)
        except (KeyError, ValueError):
            return True

    table = {m: higher(str(m)) for m in pd.unique(metrics)}
    return metrics.map(table).to_numpy(bool)


def detector_ranks(results: pd.DataFrame, *, values: pd.DataFrame | None = None) -> pd.DataFrame:
    """Rank of each detector among the study's detectors, per model and group.

    Rank 1 is the best value (the metric's direction); ties share the average rank; a detector
    without a value in a group has no rank there. Rows without a detector (accuracy) are left
    out.

    Returns
    -------
    DataFrame
        ``model``, ``GROUP_COLUMNS``, ``value`` and ``rank``.
    """
    per_model = model_values(results) if values is None else values
    per_model = per_model[per_model["detector"].notna() & np.isfinite(per_model["value"])]
    if per_model.empty:
        return per_model.assign(rank=pd.Series(dtype=float))
    per_model = per_model.copy()
    higher = _direction(per_model["metric"])
    per_model["_key"] = np.where(higher, -per_model["value"], per_model["value"])
    keys = [k for k in _keys(per_model) if k != "detector"] + ["model"]
    gid, _ = _groups(per_model, keys)
    per_model["rank"] = per_model["_key"].groupby(gid, sort=False).rank(method="average")
    return per_model.drop(columns=["_key", "n_seeds", "n_failed"])


def mean_ranks(ranks: pd.DataFrame, by: Sequence[str] = ("dataset", "protocol", "metric")):
    """Mean rank of each detector over models and the groups not in ``by`` (the sets, say).

    Returns ``by``, ``detector``, ``mean_rank``, ``n`` (ranks averaged), sorted best first
    within each ``by`` group.
    """
    keys = [*by, "detector"]
    if ranks.empty:
        return pd.DataFrame(columns=[*keys, "mean_rank", "n"])
    out = ranks.groupby(keys, sort=False, dropna=False)["rank"].agg(["mean", "size"])
    out = out.reset_index().rename(columns={"mean": "mean_rank", "size": "n"})
    return out.sort_values([*by, "mean_rank", "detector"], kind="stable").reset_index(drop=True)


def _pearson(x: NDArray, y: NDArray) -> NDArray:
    """Row-wise Pearson correlation of (..., m) arrays."""
    xm = x - x.mean(axis=-1, keepdims=True)
    ym = y - y.mean(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (xm * ym).sum(-1) / np.sqrt((xm**2).sum(-1) * (ym**2).sum(-1))


def _ranks(a: NDArray) -> NDArray:
    from scipy.stats import rankdata

    return rankdata(a, axis=-1, method="average")


def accuracy_relation(
    results: pd.DataFrame,
    *,
    metrics: Sequence[str] = ("auroc", "oscr"),
    protocol: str = "osr",
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    values: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """SSB's claim across models: closed-set accuracy against each detector's AUROC / OSCR.

    Per (dataset, set, detector, metric): Pearson and Spearman correlations over the study's
    models, each with a percentile bootstrap CI over models (one draw matrix for all groups;
    a resample with a constant side gives NaN and is left out of the quantiles).

    Returns
    -------
    relation : DataFrame
        ``dataset``, ``set``, ``split``, ``detector``, ``metric``, ``n_models``, ``pearson``,
        ``pearson_low``, ``pearson_high``, ``spearman``, ``spearman_low``, ``spearman_high``.
    points : DataFrame
        ``dataset``, ``model``, ``accuracy``, ``set``, ``split``, ``detector``, ``metric``,
        ``value``: what a scatter plot draws.
    """
    columns = [
        "dataset", "set", "split", "detector", "metric", "n_models", "pearson", "pearson_low",
        "pearson_high", "spearman", "spearman_low", "spearman_high",
    ]  # fmt: skip
    empty = (
        pd.DataFrame(columns=columns),
        pd.DataFrame(
            columns=["dataset", "model", "accuracy", "set", "split", "detector", "metric", "value"]
        ),
    )
    if values is not None:
        per_model = values[values["protocol"] == protocol]
    else:
        rows = results[results["protocol"] == protocol] if "protocol" in results else results[:0]
        per_model = model_values(rows)
    if per_model.empty:
        return empty
    acc = per_model[(per_model["metric"] == "accuracy") & per_model["detector"].isna()]
    acc = acc[["dataset", "model", "value"]].rename(columns={"value": "accuracy"})
    det = per_model[per_model["metric"].isin(list(metrics)) & per_model["detector"].notna()]
    points = det.merge(acc, on=["dataset", "model"], how="inner")
    points = points[np.isfinite(points["value"]) & np.isfinite(points["accuracy"])]
    if points.empty:
        return empty
    keys = ["dataset", "set", "split", "detector", "metric"]
    points = points[["dataset", "model", "accuracy", *keys[1:], "value"]].reset_index(drop=True)
    models = sorted(set(points["model"]))
    groups, y = _matrix(points.assign(value=points["value"]), models)
    _, x = _matrix(points.assign(value=points["accuracy"]), models)
    groups = groups[[k for k in keys if k in groups.columns]]
    both = np.isfinite(y) & np.isfinite(x)
    n = both.sum(axis=1)
    stats = np.full((len(groups), 6), np.nan)  # pearson, spearman, then low / high of each
    alpha = (1 - level) / 2
    full = np.flatnonzero(n == len(models))  # every model: one vectorised pass
    if len(full) and len(models) >= 3:
        stats[full] = _correlations(x[full], y[full], n_resamples, seed, alpha)
    for g in np.flatnonzero((n >= 3) & (n < len(models))):  # groups some models lack
        have = both[g]
        stats[g] = _correlations(x[g, have][None], y[g, have][None], n_resamples, seed, alpha)[0]
    out = groups.copy()
    out["n_models"] = n
    names = ("pearson", "spearman", "pearson_low", "pearson_high", "spearman_low",
             "spearman_high")  # fmt: skip
    for k, name in enumerate(names):
        out[name] = stats[:, k]
    return out.reset_index(drop=True)[columns], points


def _correlations(
    x: NDArray, y: NDArray, n_resamples: int, seed: int, alpha: float
) -> NDArray[np.float64]:
    """Pearson, Spearman and their percentile bootstrap bounds for (groups, models) arrays:
    columns pearson, spearman, pearson_low, pearson_high, spearman_low, spearman_high."""
    out = np.full((len(x), 6), np.nan)
    out[:, 0] = _pearson(x, y)
    out[:, 1] = _pearson(_ranks(x), _ranks(y))
    if n_resamples < 1:
        return out
    draw = _draws(x.shape[1], n_resamples, seed)
    bx, by = x[:, draw], y[:, draw]  # (groups, resamples, models)
    for k, (px, py) in enumerate(((bx, by), (_ranks(bx), _ranks(by)))):
        r = _pearson(px, py)  # NaN where a side is constant in a resample
        with np.errstate(all="ignore"):
            if np.isfinite(r).any():
                q = np.nanquantile(r, [alpha, 1 - alpha], axis=1)
                out[:, 2 + 2 * k], out[:, 3 + 2 * k] = q[0], q[1]
    return out
