"""GZSL tables (GBU): ts / tr / H and the zero-shot methods' ZSL top-1."""

from __future__ import annotations

from typing import Any

from semshift.report._load import as_results, ordered_unique
from semshift.report.tables._core import (
    _EMPTY,
    Cell,
    Column,
    ResultsLike,
    Table,
    _build,
    _cell,
    _need,
    _rows,
    metric_label,
)

__all__ = ["gzsl_table", "zsl_table"]


def _zsl_method(r: Any) -> str:
    return str(r.detector) if r.detector is not None else "model"


def gzsl_table(results: ResultsLike) -> Table:
    """Generalised zero-shot learning: ts, tr, H and ZSL top-1 (Xian et al.).

    One row per method (``detector``); with several datasets (``set``) the columns are grouped
    by dataset (the paper's Table 2 layout). Rows of several split versions: the table shows
    V2, as the paper's Table 2 does.

    References
    ----------
    .. [1] Xian et al., "Zero-Shot Learning - the Good, the Bad and the Ugly", CVPR 2017.
    """
    res = as_results(results)
    rows = _rows(res, "gzsl")
    _need(rows, "gzsl")
    versions = [str(v) for v in ordered_unique(rows["split"])]
    if len(versions) > 1:
        rows = rows[rows["split"] == ("v2" if "v2" in versions else versions[-1])]
    labels = [str(d) for d in ordered_unique(rows["detector"])] or ["model"]
    present = [m for m in ("ts", "tr", "h", "zsl_top1") if (rows["metric"] == m).any()]
    sets = [str(s) for s in ordered_unique(rows["set"])]
    lookup: dict[tuple[str, str | None, str], Cell] = {}
    for r in rows.itertuples(index=False):
        where = str(r.set) if len(sets) > 1 else None
        lookup.setdefault((_zsl_method(r), where, str(r.metric)), _cell(r))
    groups: list[str | None] = list(sets) if len(sets) > 1 else [None]
    columns = [Column(metric_label(m), group=g) for g in groups for m in present]
    cells = [[lookup.get((lbl, g, m), _EMPTY) for g in groups for m in present] for lbl in labels]
    return _build(
        "gzsl",
        "Generalised zero-shot learning (GBU)",
        "Per-class top-1 accuracy x100: ts = unseen test over all classes, tr = seen test over "
        "all classes, H = harmonic mean, ZSL top-1 = unseen test over unseen classes.",
        "Method",
        labels,
        columns,
        cells,
    )


def zsl_table(results: ResultsLike) -> Table:
    """Zero-shot learning: ZSL top-1 per method, dataset and split version (the paper's
    Table 1 layout: a column per dataset and version, V1 next to V2).

    References
    ----------
    .. [1] Xian et al., "Zero-Shot Learning - A Comprehensive Evaluation of the Good, the Bad
       and the Ugly", TPAMI 2019 (Proposed Split Version 2.0, Table 1).
    """
    res = as_results(results)
    rows = _rows(res, "gzsl")
    rows = rows[rows["metric"] == "zsl_top1"]
    _need(rows, "gzsl ZSL top-1")
    labels = [str(d) for d in ordered_unique(rows["detector"])] or ["model"]
    sets: list[str | None] = [str(s) for s in ordered_unique(rows["set"])]
    versions: list[str | None] = [str(v) for v in sorted(map(str, ordered_unique(rows["split"])))]
    sets, versions = sets or [None], versions or [None]
    lookup: dict[tuple[str, str | None, str | None], Cell] = {}
    for r in rows.itertuples(index=False):
        where = None if r.set is None else str(r.set)
        version = None if r.split is None else str(r.split)
        lookup.setdefault((_zsl_method(r), where, version), _cell(r))
    columns = [
        Column(v.upper() if v else "T1", group=s if len(sets) > 1 or s else None)
        for s in sets
        for v in versions
    ]
    cells = [[lookup.get((lbl, s, v), _EMPTY) for s in sets for v in versions] for lbl in labels]
    return _build(
        "zsl",
        "Zero-shot learning (proposed splits V1 vs V2)",
        "ZSL top-1 x100: per-class top-1 accuracy on unseen test images over the unseen "
        "classes; V1 chooses hyperparameters on train / val sets that hold test_seen images, "
        "V2 on sets without them.",
        "Method",
        labels,
        columns,
        cells,
    )
