"""The hyperparameter-search table (the values a search chose per detector)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from semshift.errors import InputError
from semshift.report.tables._core import Cell, Column, Table, _build, metric_direction, metric_label

__all__ = ["search_table"]


def search_table(
    trials: pd.DataFrame,
    *,
    defaults: Mapping[str, float | None] | None = None,
    val_ood: str | None = None,
) -> Table:
    """The hyperparameters a search chose per detector, and the objective on validation data.

    Parameters
    ----------
    trials : DataFrame
        ``search.csv`` of a run (columns ``detector, trial, parameter, candidate, objective,
        value, chosen, error``; :func:`semshift.report.read_search_table`).
    defaults : mapping of str to float, optional
        Detector -> the objective at its default hyperparameters (a column when given).
    val_ood : str, optional
        The validation OOD set, named in the caption.

    Returns
    -------
    Table
        One row per detector, labelled with the chosen values (``knn: k=10``).
    """
    if trials.empty:
        raise InputError("search table: no combination was tried")
    objective = str(trials["objective"].iloc[0])
    label = metric_label(objective)
    rows: list[str] = []
    cells: list[list[Cell]] = []
    notes: list[str] = []
    for det, part in trials.groupby("detector", sort=False):
        chosen = part[part["chosen"]]
        pairs = zip(chosen["parameter"], chosen["candidate"], strict=True)
        values = ", ".join(f"{p}={c}" for p, c in pairs)
        rows.append(f"{det}: {values}")
        per_trial = part.drop_duplicates("trial")
        n = len(per_trial)
        failed = per_trial[per_trial["error"].notna()]
        row = [Cell(float(chosen["value"].iloc[0]) if len(chosen) else math.nan)]
        if defaults is not None:
            d = defaults.get(str(det))
            row.append(Cell(math.nan if d is None else float(d)))
        row += [Cell(float(n)), Cell(float(len(failed)))]
        cells.append(row)
        if len(failed):
            notes.append(
                f"{det}: {len(failed)} of {n} combinations failed and were not chosen, e.g. "
                f"{failed['error'].iloc[0]}"
            )
    columns = [Column(f"{label} chosen", direction=None)]
    if defaults is not None:
        columns.append(Column(f"{label} default", direction=None))
    columns += [
        Column("Tried", direction=None, kind="score"),
        Column("Failed", direction=None, kind="score"),
    ]
    on = "the ID validation set vs the validation OOD set" + (f" {val_ood!r}" if val_ood else "")
    better = "highest" if metric_direction(objective) == "max" else "lowest"
    what = (
        f"Hyperparameters chosen on {on} (never on test data): {label} x100 there at the chosen "
        f"values{' and at the defaults' if defaults is not None else ''}. The {better} value "
        "wins; a tie goes to the first combination in declared order."
    )
    title = "Hyperparameter search"
    return _build("search", title, what, "Detector: chosen", rows, columns, cells, notes=notes)
