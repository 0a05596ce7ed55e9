"""SOOD's generalisation table: accuracy and macro-F1 under covariate shift."""

from __future__ import annotations

from semshift.report._load import as_results, ordered_unique
from semshift.report.tables._core import (
    _EMPTY,
    Column,
    ResultsLike,
    Table,
    _build,
    _lookup,
    _need,
    _rows,
)

__all__ = ["generalisation_table"]


def generalisation_table(results: ResultsLike) -> Table:
    """SOOD-style generalisation: accuracy and macro-F1 per set and the relative drop from ID.

    References
    ----------
    .. [1] Bacchin et al., "SOOD-ImageNet", 2024.
    """
    res = as_results(results)
    rows = _rows(res, "generalisation")
    _need(rows, "generalisation")
    sets = [str(s) for s in ordered_unique(rows["set"])]
    sets = (["id_test"] if "id_test" in sets else []) + [s for s in sets if s != "id_test"]
    lookup = _lookup(rows, ("set", "metric"))
    metrics = [
        (m, label)
        for m, label in (
            ("accuracy", "Acc"),
            ("macro_f1", "Macro-F1"),
            ("accuracy.relative_drop", "Acc drop"),
            ("macro_f1.relative_drop", "Macro-F1 drop"),
            ("accuracy.delta_easy_hard", "Acc Δ Easy→Hard"),
            ("macro_f1.delta_easy_hard", "Macro-F1 Δ Easy→Hard"),
        )
        if (rows["metric"] == m).any()
    ]
    columns = [Column(label, direction=None) for _, label in metrics]
    cells = [[lookup.get((s, m), _EMPTY) for m, _ in metrics] for s in sets]
    return _build(
        "generalisation",
        "Generalisation under covariate shift (SOOD)",
        "Accuracy and macro-F1 x100 per set; drop = (ID - set) / ID x100, relative; Δ Easy→Hard "
        "= (Hard - Easy) / Easy x100, SOOD's Delta (negative when Hard is worse), on the Hard "
        "set's row. No best marked: the rows are sets of one classifier.",
        "Set",
        sets,
        columns,
        cells,
    )
