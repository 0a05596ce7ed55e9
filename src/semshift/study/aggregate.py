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


def model_values(results: pd.DataFrame) -> pd.DataFrame:
    """One value per (group, model): the mean over the model's seeds of its finite values.

    Returns columns ``GROUP_COLUMNS``, ``model``, ``value``, ``n_seeds`` and ``n_failed`` (seeds
    whose row is an error or NaN). Null keys (no detector, no split) stay null.
    """
    if results.empty:
        return pd.DataFrame(columns=[*GROUP_COLUMNS, "model", "value", "n_seeds", "n_failed"])
    keys = [*_keys(results), "model"]
    frame = results[[*keys, "value"]].copy()
    for k in keys:  # groupby drops null keys: give them a sentinel, restored below
        frame[k] = frame[k].astype(object).where(frame[k].notna(), _NULL)
    ok = np.isfinite(frame["value"].to_numpy(np.float64))
    frame["_ok"] = ok
    frame["_v"] = np.where(ok, frame["value"].to_numpy(np.float64), 0.0)
    g = frame.groupby(keys, sort=False)
    out = g.agg(_sum=("_v", "sum"), n_seeds=("_ok", "sum"), _rows=("_ok", "size")).reset_index()
    with np.errstate(invalid="ignore", divide="ignore"):
        out["value"] = out["_sum"] / out["n_seeds"].where(out["n_seeds"] > 0)
    out["n_failed"] = out["_rows"] - out["n_seeds"]
    out = out.drop(columns=["_sum", "_rows"])
    for k in keys:
        out[k] = _restore(out[k])
    return out


#: the stand-in for a null key while grouping (groupby drops nulls; no real key is this)
_NULL = "\x00null"


def _restore(column: pd.Series) -> pd.Series:
    values = column.astype(object)
    return values.where(values != _NULL, None)


def _matrix(values: pd.DataFrame, models: Sequence[str]) -> tuple[pd.DataFrame, NDArray]:
    """(groups, models) matrix of values (NaN where a model has none), and the group keys."""
    keys = _keys(values)
    frame = values.copy()
    for k in keys:
        frame[k] = frame[k].astype(object).where(frame[k].notna(), _NULL)
    groups = frame[keys].drop_duplicates().reset_index(drop=True)
    gid = pd.MultiIndex.from_frame(groups).get_indexer(pd.MultiIndex.from_frame(frame[keys]))
    mid = pd.Index(list(models)).get_indexer(frame["model"])
    mat = np.full((len(groups), len(models)), np.nan)
    mat[gid, mid] = frame["value"].to_numpy(np.float64)
    for k in keys:
        groups[k] = _restore(groups[k])
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

    Returns
    -------
    DataFrame
        ``GROUP_COLUMNS``, ``mean``, ``sd`` (ddof 1), ``ci_low``, ``ci_high``, ``n_models``,
        ``n_failed`` (model-seeds without a value), one row per group in first-seen order.
    """
    if not 0 < level < 1:
        raise InputError(f"aggregate_over_models: level must be in (0, 1), got {level}")
    per_model = model_values(results)
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


def detector_ranks(results: pd.DataFrame) -> pd.DataFrame:
    """Rank of each detector among the study's detectors, per model and group.

    Rank 1 is the best value (the metric's direction); ties share the average rank; a detector
    without a value in a group has no rank there. Rows without a detector (accuracy) are left
    out.

    Returns
    -------
    DataFrame
        ``model``, ``GROUP_COLUMNS``, ``value`` and ``rank``.
    """
    per_model = model_values(results)
    per_model = per_model[per_model["detector"].notna() & np.isfinite(per_model["value"])]
    if per_model.empty:
        return per_model.assign(rank=pd.Series(dtype=float))
    per_model = per_model.copy()
    higher = _direction(per_model["metric"])
    per_model["_key"] = np.where(higher, -per_model["value"], per_model["value"])
    keys = [k for k in _keys(per_model) if k != "detector"] + ["model"]
    frame = per_model.copy()
    for k in keys:
        frame[k] = frame[k].astype(object).where(frame[k].notna(), _NULL)
    per_model["rank"] = frame.groupby(keys, sort=False)["_key"].rank(method="average")
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
    rows = results[results["protocol"] == protocol] if "protocol" in results else results[:0]
    if rows.empty:
        return empty
    per_model = model_values(rows)
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
    n = np.isfinite(y).sum(axis=1)
    out = groups.copy()
    out["n_models"] = n
    for name in ("pearson", "spearman", "pearson_low", "pearson_high", "spearman_low",
                 "spearman_high"):  # fmt: skip
        out[name] = np.nan
    full = n == len(models)  # correlations over the models that have both values
    alpha = (1 - level) / 2
    idx = _draws(len(models), n_resamples, seed) if n_resamples > 0 else None
    for g in range(len(groups)):
        have = np.isfinite(y[g]) & np.isfinite(x[g])
        if have.sum() < 3:
            continue
        xs, ys = x[g, have], y[g, have]
        out.loc[g, "pearson"] = float(_pearson(xs, ys))
        out.loc[g, "spearman"] = float(_pearson(_ranks(xs), _ranks(ys)))
        if idx is None or not full[g]:
            draw = None if idx is None else _draws(int(have.sum()), n_resamples, seed)
        else:
            draw = idx
        if draw is None:
            continue
        bx, by = xs[draw], ys[draw]  # (resamples, m)
        p = _pearson(bx, by)
        s = _pearson(_ranks(bx), _ranks(by))
        for name, vals in (("pearson", p), ("spearman", s)):
            vals = vals[np.isfinite(vals)]
            if len(vals):
                out.loc[g, f"{name}_low"], out.loc[g, f"{name}_high"] = np.quantile(
                    vals, [alpha, 1 - alpha]
                )
    return out.reset_index(drop=True)[columns], points
