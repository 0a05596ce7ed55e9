"""The tables protocols declare as data (:class:`~semshift.protocols.registry.ReportSection`),
and the first of them for results of protocols the shipped builders do not know."""

from __future__ import annotations

import math

import pandas as pd

from semshift.errors import InputError
from semshift.protocols.registry import PROTOCOLS, ReportSection
from semshift.report.tables._core import Cell, Column, Table

__all__ = ["declared_table", "section_table"]


def section_table(section: ReportSection, rows: pd.DataFrame) -> Table | None:
    """The :class:`~semshift.report.tables.Table` of a declared section's ``table`` callable.

    Raises
    ------
    InputError
        The callable returned something other than a DataFrame (or None), or a column that is
        not numeric.
    """
    if section.table is None:
        return None
    frame = section.table(rows)
    if frame is None:
        return None
    if not isinstance(frame, pd.DataFrame):
        raise InputError(
            f"report section {section.key!r}: its table callable returned "
            f"{type(frame).__name__}, expected a pandas DataFrame or None"
        )
    try:
        values = frame.to_numpy(dtype=float, na_value=math.nan)
    except (TypeError, ValueError) as exc:
        raise InputError(
            f"report section {section.key!r}: table values must be numeric ({exc})"
        ) from None
    columns = [
        Column(str(c), direction=section.best, kind=section.value_kind) for c in frame.columns
    ]
    labels = [" / ".join(map(str, i)) if isinstance(i, tuple) else str(i) for i in frame.index]
    header = frame.index.name if isinstance(frame.index.name, str) else ""
    cells = [[Cell(float(v)) for v in row] for row in values]
    return Table(section.key, section.title, section.caption, header, columns, labels, cells)


def declared_table(results: pd.DataFrame) -> Table | None:
    """The first table a registered protocol declares (report order) for the rows present in
    ``results`` (a validated tidy table); None when no declared table has rows."""
    present = set(results["protocol"])
    for spec in sorted(PROTOCOLS.values(), key=lambda s: (s.report_order, s.name)):
        for section in spec.sections:
            show_for = section.show_for or spec.rows
            if section.table is None or not present.intersection(show_for):
                continue
            rows = results[results["protocol"].isin(show_for)].reset_index(drop=True)
            table = section_table(section, rows)
            if table is not None:
                return table
    return None
