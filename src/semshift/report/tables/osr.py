"""Open-set recognition tables (SSB Table 1 and the other ranking metrics)."""

from __future__ import annotations

from semshift.report._load import as_results, level_sort_key, ordered_unique
from semshift.report.tables._core import (
    _EMPTY,
    Cell,
    Column,
    ResultsLike,
    Table,
    _build,
    _cell,
    _detectors,
    _ErrorIndex,
    _need,
    _rows,
    _split_label,
    _title_case,
    metric_direction,
    metric_label,
)

__all__ = ["osr_metrics_table", "osr_table"]


_OSR_MAIN = ("auroc", "oscr")


def osr_splits(results: ResultsLike) -> list[str]:
    """The OSR splits present (the ``split`` column, else the set), easy < medium < hard."""
    res = as_results(results)
    rows = _rows(res, "osr")
    rows = rows[rows["detector"].notna()]
    labels = {_split_label(r) for r in rows.itertuples(index=False)}
    return sorted(labels, key=level_sort_key)


def osr_table(results: ResultsLike, *, ci: bool = True) -> Table:
    """SSB Table 1: closed-set accuracy, AUROC and OSCR per split, one row per detector.

    Parameters
    ----------
    results : DataFrame or path
        Tidy results with ``osr`` rows.
    ci : bool, default True
        Show bootstrap CIs where the results have them.

    Returns
    -------
    Table
        Columns ``Acc``, then ``AUROC <split>`` and ``OSCR <split>`` for every split present
        (easy < medium < hard, then others by name).

    References
    ----------
    .. [1] Vaze et al., "Open-Set Recognition: a Good Closed-Set Classifier is All You Need?",
       ICLR 2022, Table 1.
    """
    res = as_results(results)
    rows = _rows(res, "osr")
    _need(rows, "osr")
    acc_rows = rows[(rows["metric"] == "accuracy") & rows["detector"].isna()]
    acc = _cell(next(acc_rows.itertuples(index=False))) if len(acc_rows) else _EMPTY
    errs = _ErrorIndex(rows)
    with_det = rows[rows["detector"].notna()]
    main = with_det[with_det["metric"].isin(_OSR_MAIN) | with_det["metric"].isna()]
    splits = osr_splits(main)
    lookup: dict[tuple[str, str, str], Cell] = {}
    for r in main.itertuples(index=False):
        lookup.setdefault((str(r.detector), str(r.metric), _split_label(r)), _cell(r))
    detectors = _detectors(main)
    columns = [Column("Acc", direction=None)]
    keys: list[tuple[str, str]] = []
    for metric in _OSR_MAIN:
        for split in splits:
            columns.append(Column(_title_case(split), group=metric_label(metric)))
            keys.append((metric, split))
    cells = [[acc] + [lookup.get((d, m, s)) or errs.get(d, s) for m, s in keys] for d in detectors]
    sets = ordered_unique(
        f"{_split_label(r)} = {r.set}"
        for r in main.itertuples(index=False)
        if r.split is not None and r.set is not None and r.set != r.split
    )
    extra = (
        "Acc is the closed-set accuracy of the classifier on id_test (the same for every detector)."
    )
    if sets:
        extra += " Splits: " + "; ".join(sets) + "."
    return _build(
        "osr",
        "Open-set recognition (SSB Table 1)",
        "Closed-set accuracy, AUROC (known vs unknown) and OSCR per split, x100.",
        "Detector",
        detectors,
        columns,
        cells,
        extra,
        ci,
    )


def osr_metrics_table(results: ResultsLike, *, ci: bool = True, fpr_note: str = "") -> Table | None:
    """The OSR ranking metrics other than AUROC and OSCR (FPR@95, AUPR-In/Out ...), per split.

    Returns None when the results have no such rows. ``fpr_note`` is appended to the caption
    (the FPR@95 convention).
    """
    res = as_results(results)
    rows = _rows(res, "osr")
    errs = _ErrorIndex(rows)
    rows = rows[rows["detector"].notna() & ~rows["metric"].isin((*_OSR_MAIN, "accuracy"))]
    metrics = [str(m) for m in ordered_unique(rows["metric"])]
    if not metrics:
        return None
    splits = osr_splits(rows)
    lookup: dict[tuple[str, str, str], Cell] = {}
    for r in rows.itertuples(index=False):
        lookup.setdefault((str(r.detector), str(r.metric), _split_label(r)), _cell(r))
    columns, keys = [], []
    for metric in metrics:
        for split in splits:
            columns.append(
                Column(
                    _title_case(split),
                    group=metric_label(metric),
                    direction=metric_direction(metric),
                )
            )
            keys.append((metric, split))
    detectors = _detectors(rows)
    cells = [[lookup.get((d, m, s)) or errs.get(d, s) for m, s in keys] for d in detectors]
    return _build(
        "osr_metrics",
        "Open-set recognition: further ranking metrics",
        "Known vs unknown per split, x100.",
        "Detector",
        detectors,
        columns,
        cells,
        fpr_note,
        ci,
    )
