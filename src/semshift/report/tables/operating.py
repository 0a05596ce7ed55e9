"""Operating-point tables: the rejection threshold's rates per set and level."""

from __future__ import annotations

import pandas as pd

from semshift.report._load import as_results, level_sort_key, ordered_unique
from semshift.report.tables._core import (
    _EMPTY,
    Column,
    Direction,
    ResultsLike,
    Table,
    _build,
    _cell,
    _detectors,
    _lookup,
    _need,
    _rows,
    format_cell,
)

__all__ = ["operating_point_detectors", "operating_point_overview_table", "operating_point_table"]


_OP = "operating_point"
_OP_RATES = (("rejection_rate", "Rejected"), ("accepted_wrong_rate", "Accepted & wrong"))


def operating_point_detectors(results: ResultsLike) -> list[str]:
    """The detectors of the ``operating_point`` rows, in first-seen order."""
    rows = _rows(as_results(results), _OP)
    return _detectors(rows[rows["detector"].notna()])


def _op_keys(rows: pd.DataFrame) -> list[tuple[str, str | None, str | None]]:
    """(set, semantic level, covariate level) of the rate rows: id_test, the other sets in
    first-seen order, then the semantic and the covariate levels in level order."""
    rates = rows[rows["metric"].isin([m for m, _ in _OP_RATES])]
    keys = ordered_unique(
        (r.set, r.semantic_level, r.covariate_level) for r in rates.itertuples(index=False)
    )
    sets = [k for k in keys if k[1] is None and k[2] is None]
    sets = [k for k in sets if k[0] == "id_test"] + [k for k in sets if k[0] != "id_test"]
    sem = sorted((k for k in keys if k[1] is not None), key=lambda k: level_sort_key(str(k[1])))
    cov = sorted(
        (k for k in keys if k[1] is None and k[2] is not None),
        key=lambda k: level_sort_key(str(k[2])),
    )
    return [*sets, *sem, *cov]


def _op_label(key: tuple[str, str | None, str | None]) -> str:
    name, sem, cov = key
    if sem is not None:
        return f"semantic level {sem} ({name})"
    if cov is not None:
        return f"covariate level {cov} ({name})"
    return str(name)


def _recall_text(recall: float | None) -> str:
    return "the configured share" if recall is None else f"{100.0 * recall:g}%"


def operating_point_table(
    results: ResultsLike, detector: str, *, recall: float | None = None, ci: bool = True
) -> Table:
    """What one detector's rejection threshold does on each set and shift level.

    Rows: id_test, every other set, then every semantic and covariate level (the sets pooled
    at that level in brackets); columns: ``Rejected`` (score < t) and ``Accepted & wrong``
    (accepted although OOD or misclassified, as a fraction of all rows), x100. The caption
    gives the threshold t with its CI and where it was chosen (the ``threshold`` row's
    ``split``).

    Parameters
    ----------
    results : DataFrame or path
        Tidy results with ``operating_point`` rows.
    detector : str
        The detector.
    recall : float, optional
        The ID recall of the threshold (``protocols.operating_point.recall`` of the run), for
        the caption.
    ci : bool, default True
        Show bootstrap CIs where the results have them.
    """
    res = as_results(results)
    rows = _rows(res, _OP)
    rows = rows[rows["detector"] == detector]
    _need(rows, f"operating_point ({detector})")
    keys = _op_keys(rows)
    lookup = _lookup(rows, ("set", "semantic_level", "covariate_level", "metric"))
    columns = [Column(label, direction=None) for _, label in _OP_RATES]
    cells = [[lookup.get((*k, m), _EMPTY) for m, _ in _OP_RATES] for k in keys]
    thr_rows = rows[rows["metric"] == "threshold"]
    how = f"the largest t keeping {_recall_text(recall)} of the calibration scores"
    if len(thr_rows):
        r = next(thr_rows.itertuples(index=False))
        where = f"chosen on {r.split or r.set}"
        thr = _cell(r)
        if thr.error is not None:
            head = f"No threshold ({thr.error})."
        else:
            head = f"Threshold t = {format_cell(thr, 'score', ci)} (score units), {where}: {how}."
    else:
        head = f"Threshold: {how}."
    id_split = ordered_unique(
        r.split
        for r in rows.itertuples(index=False)
        if r.set == "id_test" and r.metric != "threshold" and r.split is not None
    )
    extra = f" The id_test row is measured on {id_split[0]}." if id_split else ""
    return _build(
        f"operating_point_{detector}",
        f"Operating point: {detector}",
        f"{head} Rule: accept when score >= t. Rejected = rows with score < t; accepted & wrong "
        "= rows accepted although OOD or misclassified, as a share of all rows; x100. Level "
        f"rows pool the sets in brackets.{extra}",
        "Set",
        [_op_label(k) for k in keys],
        columns,
        cells,
        ci=ci,
    )


def operating_point_overview_table(
    results: ResultsLike, *, recall: float | None = None, ci: bool = False
) -> Table:
    """Every detector's threshold and, per set, the rejected and accepted-and-wrong shares.

    One row per detector; columns ``Threshold`` (score units), then ``Rejected`` and
    ``Accepted & wrong`` per set (x100; lowest accepted & wrong in bold). Shift-level rows are
    in :func:`operating_point_table`. CIs are hidden by default to keep the table narrow.
    """
    res = as_results(results)
    rows = _rows(res, _OP)
    rows = rows[rows["detector"].notna()]
    _need(rows, "operating_point")
    sets = [k for k in _op_keys(rows) if k[1] is None and k[2] is None]
    lookup = _lookup(rows, ("detector", "set", "semantic_level", "covariate_level", "metric"))
    thresholds = _lookup(rows[rows["metric"] == "threshold"], ("detector",))
    columns = [Column("Threshold", direction=None, kind="score")]
    keys: list[tuple[tuple[str, str | None, str | None], str]] = []
    for metric, label in _OP_RATES:
        for k in sets:
            direction: Direction | None = "min" if metric == "accepted_wrong_rate" else None
            columns.append(Column(str(k[0]), group=label, direction=direction))
            keys.append((k, metric))
    detectors = _detectors(rows)
    cells = [
        [thresholds.get((d,), _EMPTY)] + [lookup.get((d, *k, m), _EMPTY) for k, m in keys]
        for d in detectors
    ]
    return _build(
        "operating_point",
        "Operating point: what the rejection rule catches",
        f"Per detector, accept when score >= t, t = the largest threshold keeping "
        f"{_recall_text(recall)} of the calibration scores (score units). Rejected = rows with "
        "score < t; accepted & wrong = rows accepted although OOD or misclassified, as a share "
        "of all rows of the set; x100.",
        "Detector",
        detectors,
        columns,
        cells,
        ci=ci,
    )
