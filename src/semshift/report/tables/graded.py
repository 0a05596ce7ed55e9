"""IS-OOD graded-grid tables: level means and trends per metric."""

from __future__ import annotations

from typing import Literal

from semshift.errors import InputError
from semshift.report._load import as_results, level_sort_key, ordered_unique
from semshift.report.tables._core import (
    Column,
    ResultsLike,
    Table,
    _build,
    _detectors,
    _ErrorIndex,
    _lookup,
    _need,
    _rows,
    _title_case,
    metric_direction,
    metric_label,
)

__all__ = ["graded_level_table", "graded_metrics", "graded_trend_table"]


def graded_metrics(results: ResultsLike) -> list[str]:
    """The grid metrics of the ``graded`` rows (``auroc``, ``fpr95`` ...), in first-seen order."""
    res = as_results(results)
    rows = _rows(res, "graded")
    # metrics with at least one value (the runner's error-only "cells" rows are not metrics)
    rows = rows[rows["value"].notna()]
    names = [str(m).split(".", 1)[0] for m in rows["metric"] if m is not None]
    return [str(m) for m in ordered_unique(names)]


def graded_level_table(
    results: ResultsLike,
    *,
    metric: str = "auroc",
    axis: Literal["semantic", "covariate"] = "semantic",
    ci: bool = True,
) -> Table:
    """Per-level means of a grid metric along one axis, one row per detector (IS-OOD).

    Reads the ``<metric>.level_mean`` rows with only the ``axis`` level set.
    """
    if axis not in ("semantic", "covariate"):
        raise InputError(f"axis must be 'semantic' or 'covariate', got {axis!r}")
    res = as_results(results)
    rows = _rows(res, "graded")
    level_col = f"{axis}_level"
    other = "covariate_level" if axis == "semantic" else "semantic_level"
    errs = _ErrorIndex(rows)
    all_detectors = _detectors(rows[rows["detector"].notna()])
    rows = rows[
        (rows["metric"] == f"{metric}.level_mean")
        & rows[level_col].notna()
        & rows[other].isna()
        & rows["detector"].notna()
    ]
    _need(rows, f"graded {metric}.level_mean ({axis})")
    levels = sorted((str(v) for v in ordered_unique(rows[level_col])), key=level_sort_key)
    lookup = _lookup(rows, ("detector", level_col))
    detectors = all_detectors
    direction = metric_direction(metric)
    columns = [
        Column(lvl, group=f"{_title_case(axis)} level", direction=direction) for lvl in levels
    ]
    cells = [[lookup.get((d, lvl)) or errs.get(d, None) for lvl in levels] for d in detectors]
    return _build(
        f"graded_{metric}_{axis}",
        f"{metric_label(metric)} per {axis} level (IS-OOD)",
        f"Mean {metric_label(metric)} x100 over the non-N/A cells of each {axis} level.",
        "Detector",
        detectors,
        columns,
        cells,
        ci=ci,
    )


def graded_trend_table(results: ResultsLike, *, metric: str = "auroc", ci: bool = True) -> Table:
    """Correlation and sensitivity of a grid metric to each shift axis (IS-OOD eq. 5-6)."""
    res = as_results(results)
    rows = _rows(res, "graded")
    names = (f"{metric}.correlation", f"{metric}.sensitivity")
    errs = _ErrorIndex(rows)
    all_detectors = _detectors(rows[rows["detector"].notna()])
    rows = rows[rows["metric"].isin(names) & rows["detector"].notna()]
    _need(rows, f"graded {metric}.correlation / sensitivity")
    lookup = _lookup(rows, ("detector", "metric", "split"))
    axes = [a for a in ("semantic", "covariate") if (rows["split"] == a).any()]
    columns, keys = [], []
    for a in axes:
        columns.append(Column("r", group=_title_case(a), direction=None, kind="r"))
        keys.append((names[0], a))
        columns.append(Column("sens.", group=_title_case(a), direction=None))
        keys.append((names[1], a))
    detectors = all_detectors
    cells = [[lookup.get((d, m, a)) or errs.get(d, None) for m, a in keys] for d in detectors]
    return _build(
        f"graded_{metric}_trend",
        f"Shift-level correlation and sensitivity of {metric_label(metric)} (IS-OOD)",
        f"r = Pearson correlation of the level means of {metric_label(metric)} with the level "
        f"(1..n); sens. = absolute least-squares slope of the level means, x100 "
        f"({metric_label(metric)} points per level). No best marked: the desirable sign depends "
        "on the axis.",
        "Detector",
        detectors,
        columns,
        cells,
        ci=ci,
    )
