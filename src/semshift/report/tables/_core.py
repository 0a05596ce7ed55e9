"""The table model (:class:`Table`, :class:`Column`, :class:`Cell`), metric labels and the
helpers every protocol's table builder shares."""

from __future__ import annotations

import html
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import pandas as pd

from semshift.errors import InputError
from semshift.report._load import ordered_unique

__all__ = ["Cell", "Column", "Table", "metric_label"]


Direction = Literal["max", "min"]
Kind = Literal["percent", "r", "flag", "score"]
ResultsLike: TypeAlias = pd.DataFrame | str | os.PathLike[str]

#: Display names of the metrics in the results table.
_LABELS = {
    "accuracy": "Acc",
    "acc": "Acc",
    "auroc": "AUROC",
    "fpr95": "FPR@95",
    "fpr95_ood_recall": "FPR@95 (OOD recall)",
    "fpr95_openood": "FPR@95 (OpenOOD)",
    "auroc_openood": "AUROC (OpenOOD)",
    "aupr_in_openood": "AUPR-In (OpenOOD)",
    "aupr_out_openood": "AUPR-Out (OpenOOD)",
    "aupr_in": "AUPR-In",
    "aupr_out": "AUPR-Out",
    "aupr_in_trapezoid": "AUPR-In (trapezoid)",
    "aupr_out_trapezoid": "AUPR-Out (trapezoid)",
    "oscr": "OSCR",
    "oscr_arpl": "OSCR (ARPL)",
    "detection_error": "Det. error",
    "macro_f1": "Macro-F1",
    "miou": "mIoU",
    "aurc": "AURC",
    "eaurc": "e-AURC",
    "augrc": "AUGRC",
    "ts": "ts",
    "tr": "tr",
    "h": "H",
    "zsl_top1": "ZSL top-1",
}
_LOWER_IS_BETTER = {
    "fpr95",
    "fpr95_ood_recall",
    "fpr95_openood",
    "detection_error",
    "aurc",
    "eaurc",
    "augrc",
}
_HIGHER_IS_BETTER = {
    "accuracy",
    "acc",
    "auroc",
    "aupr_in",
    "aupr_out",
    "aupr_in_trapezoid",
    "aupr_out_trapezoid",
    "auroc_openood",
    "aupr_in_openood",
    "aupr_out_openood",
    "oscr",
    "oscr_arpl",
    "macro_f1",
    "miou",
    "ts",
    "tr",
    "h",
    "zsl_top1",
}
_MISSING = "n/a"
_ERROR = "err"


def metric_label(metric: str) -> str:
    """Display name of a results metric (``fpr95`` -> ``FPR@95``)."""
    return _LABELS.get(metric, metric)


def metric_direction(metric: str) -> Direction:
    """``"min"`` for lower-is-better metrics (FPR@95, detection error, AURC ...), else ``"max"``."""
    if metric in _LOWER_IS_BETTER:
        return "min"
    if metric in _HIGHER_IS_BETTER:
        return "max"
    try:
        from semshift.metrics import get_metric

        return "max" if get_metric(metric).higher_is_better else "min"
    except (KeyError, ValueError):
        return "max"


@dataclass(frozen=True)
class Column:
    """One table column.

    Attributes
    ----------
    label : str
        Header (under ``group`` when that is set).
    group : str or None
        Header spanning consecutive columns with the same group (HTML); prefixed in Markdown.
    direction : {"max", "min"} or None
        Which value is best (bold); None marks nothing.
    kind : {"percent", "r", "flag", "score"}
        ``percent``: x100, one decimal; ``r``: two decimals (a correlation); ``flag``: yes / no;
        ``score``: a value in score units (a threshold), four significant digits.
    """

    label: str
    group: str | None = None
    direction: Direction | None = "max"
    kind: Kind = "percent"

    @property
    def full_label(self) -> str:
        """``group label`` (or the label alone)."""
        return f"{self.group} {self.label}" if self.group else self.label


@dataclass(frozen=True)
class Cell:
    """One table cell: a fraction with an optional CI, or an error.

    Attributes
    ----------
    value : float
        NaN when not available.
    ci_low, ci_high : float
        NaN when no CI was computed.
    error : str or None
        The one-line error of the detector / set behind this cell.
    mark : str
        A suffix shown after the value (a footnote symbol).
    """

    value: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    error: str | None = None
    mark: str = ""

    @property
    def ok(self) -> bool:
        """True when the cell holds a finite value and no error."""
        return self.error is None and math.isfinite(self.value)


_EMPTY = Cell()


def _number(x: float, kind: Kind) -> str:
    if kind == "score":
        return f"{x + 0.0:.4g}"
    if kind == "r":
        return f"{round(x, 2) + 0.0:.2f}"
    return f"{round(x * 100.0, 1) + 0.0:.1f}"


def format_cell(cell: Cell, kind: Kind = "percent", ci: bool = True) -> str:
    """The text of a cell: ``91.2``, ``91.2 [90.8, 91.6]``, ``yes``, ``err`` or ``n/a``."""
    if cell.error is not None:
        return _ERROR
    if not math.isfinite(cell.value):
        return _MISSING
    if kind == "flag":
        return ("yes" if cell.value >= 0.5 else "no") + cell.mark
    text = _number(cell.value, kind)
    if ci and math.isfinite(cell.ci_low) and math.isfinite(cell.ci_high):
        text += f" [{_number(cell.ci_low, kind)}, {_number(cell.ci_high, kind)}]"
    return text + cell.mark


def _display_value(cell: Cell, kind: Kind) -> float:
    """The value as displayed (rounded), so that equal-looking cells tie for best."""
    if kind == "score":
        return cell.value
    return round(cell.value, 2) if kind == "r" else round(cell.value * 100.0, 1)


@dataclass
class Table:
    """A rendered-ready result table.

    Attributes
    ----------
    key : str
        Short identifier (``osr``, ``newclass_failure`` ...), used for HTML anchors.
    title : str
    caption : str
        What the values are and which direction is best.
    row_header : str
        Header of the row-label column (``Detector``, ``Set`` ...).
    columns : list of Column
    rows : list of str
        Row labels.
    cells : list of list of Cell
        ``cells[i][j]`` for row i, column j.
    footnotes : list of str
        Error messages (one per failing detector / set) and other notes.
    ci : bool
        Show CIs where present.
    """

    key: str
    title: str
    caption: str
    row_header: str
    columns: list[Column]
    rows: list[str]
    cells: list[list[Cell]]
    footnotes: list[str] = field(default_factory=list)
    ci: bool = True

    def __post_init__(self) -> None:
        if len(self.cells) != len(self.rows) or any(
            len(r) != len(self.columns) for r in self.cells
        ):
            raise InputError(
                f"table {self.key!r}: cells must be {len(self.rows)} rows x "
                f"{len(self.columns)} columns"
            )

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, columns), the row-label column not counted."""
        return len(self.rows), len(self.columns)

    def text(self, i: int, j: int) -> str:
        """Displayed text of cell (i, j), without bold."""
        return format_cell(self.cells[i][j], self.columns[j].kind, self.ci)

    def best(self, j: int) -> set[int]:
        """Row indices of the best value(s) of column j (empty when nothing to compare)."""
        col = self.columns[j]
        if col.direction is None or col.kind == "flag":
            return set()
        vals = {
            i: _display_value(row[j], col.kind) for i, row in enumerate(self.cells) if row[j].ok
        }
        if len(vals) < 2 or len(set(vals.values())) < 2:
            return set()
        target = max(vals.values()) if col.direction == "max" else min(vals.values())
        return {i for i, v in vals.items() if v == target}

    def is_best(self, i: int, j: int) -> bool:
        """True when cell (i, j) is (one of) the best of its column."""
        return i in self.best(j)

    def values(self) -> pd.DataFrame:
        """The cell values as fractions (NaN for missing / error), rows x full column labels."""
        data = [[c.value if c.ok else math.nan for c in row] for row in self.cells]
        return pd.DataFrame(
            data,
            index=pd.Index(self.rows, name=self.row_header),
            columns=[c.full_label for c in self.columns],
        )

    def _best_sets(self) -> list[set[int]]:
        return [self.best(j) for j in range(len(self.columns))]

    # ------------------------------------------------------------------ renderers
    def to_markdown(self) -> str:
        """GitHub-flavoured Markdown: a bold title line, the table, the caption, footnotes."""
        best = self._best_sets()
        head = [self.row_header, *(c.full_label for c in self.columns)]
        lines = [f"**{_md(self.title)}**", ""]
        lines.append("| " + " | ".join(_md(h) for h in head) + " |")
        lines.append("|" + "|".join([":---"] + ["---:"] * len(self.columns)) + "|")
        for i, label in enumerate(self.rows):
            out = [_md(label)]
            for j in range(len(self.columns)):
                text = _md(self.text(i, j))
                out.append(f"**{text}**" if i in best[j] else text)
            lines.append("| " + " | ".join(out) + " |")
        lines += ["", f"*{_md(self.caption)}*"]
        for k, note in enumerate(self.footnotes, 1):
            lines.append(f"{'' if k > 1 else chr(10)}{k}. {_md(note)}")
        return "\n".join(lines) + "\n"

    def to_html(self) -> str:
        """An HTML ``<figure>`` with the table (two header rows when columns are grouped)."""
        best = self._best_sets()
        esc = html.escape
        out = [f'<figure class="table" id="table-{esc(self.key)}">', "<table>"]
        out.append(f"<caption>{esc(self.title)}</caption>")
        out.append("<thead>")
        grouped = any(c.group for c in self.columns)
        if grouped:
            out.append("<tr>")
            out.append(f'<th rowspan="2">{esc(self.row_header)}</th>')
            for group, span in _group_spans(self.columns):
                if group is None:
                    out.append(f'<th rowspan="2">{esc(self.columns[span[0]].label)}</th>')
                else:
                    out.append(f'<th colspan="{len(span)}">{esc(group)}</th>')
            out.append("</tr>")
            out.append("<tr>")
            out += [f"<th>{esc(c.label)}</th>" for c in self.columns if c.group]
            out.append("</tr>")
        else:
            out.append("<tr>")
            out.append(f"<th>{esc(self.row_header)}</th>")
            out += [f"<th>{esc(c.label)}</th>" for c in self.columns]
            out.append("</tr>")
        out.append("</thead>")
        out.append("<tbody>")
        for i, label in enumerate(self.rows):
            tds = [f'<th scope="row">{esc(label)}</th>']
            for j in range(len(self.columns)):
                text = esc(self.text(i, j))
                cls = ' class="err"' if self.cells[i][j].error is not None else ""
                tds.append(
                    f"<td{cls}><strong>{text}</strong></td>"
                    if i in best[j]
                    else f"<td{cls}>{text}</td>"
                )
            out.append("<tr>" + "".join(tds) + "</tr>")
        out.append("</tbody>")
        out.append("</table>")
        out.append(f"<figcaption>{esc(self.caption)}</figcaption>")
        if self.footnotes:
            out.append('<ol class="footnotes">')
            out += [f"<li>{esc(n)}</li>" for n in self.footnotes]
            out.append("</ol>")
        out.append("</figure>")
        return "\n".join(out) + "\n"

    def to_rich(self) -> Any:
        """A :class:`rich.table.Table` (best values bold) for printing in a terminal."""
        from rich.markup import escape
        from rich.table import Table as RichTable

        best = self._best_sets()
        notes = "\n".join(f"{k}. {n}" for k, n in enumerate(self.footnotes, 1))
        caption = self.caption + ("\n" + notes if notes else "")
        rt = RichTable(title=self.title, caption=escape(caption), caption_justify="left")
        rt.add_column(self.row_header, justify="left", no_wrap=True)
        for c in self.columns:
            rt.add_column(escape(c.full_label), justify="right")
        for i, label in enumerate(self.rows):
            row = [escape(label)]
            for j in range(len(self.columns)):
                text = escape(self.text(i, j))
                row.append(f"[bold]{text}[/bold]" if i in best[j] else text)
            rt.add_row(*row)
        return rt

    def __str__(self) -> str:
        return self.to_markdown()


def _group_spans(columns: Sequence[Column]) -> list[tuple[str | None, list[int]]]:
    """Consecutive runs of columns sharing a group (ungrouped columns are runs of one)."""
    spans: list[tuple[str | None, list[int]]] = []
    for j, c in enumerate(columns):
        if c.group is not None and spans and spans[-1][0] == c.group:
            spans[-1][1].append(j)
        else:
            spans.append((c.group, [j]))
    return spans


def _md(text: str) -> str:
    """Escape a Markdown table cell."""
    out = text.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*")
    return out.replace("\n", " ")


def _rows(results: pd.DataFrame, protocol: str | Iterable[str]) -> pd.DataFrame:
    names = {protocol} if isinstance(protocol, str) else set(protocol)
    return results[results["protocol"].isin(names)]


def is_na_note(error: str | None) -> bool:
    """True for the runner's "n/a: ..." rows (a grid cell with too few samples): not a failure."""
    return error is not None and error.startswith("n/a")


def _cell(row: Any) -> Cell:
    return Cell(
        value=float(row.value),
        ci_low=float(row.ci_low),
        ci_high=float(row.ci_high),
        error=None if is_na_note(row.error) else row.error,
    )


def _lookup(frame: pd.DataFrame, keys: Sequence[str]) -> dict[tuple[Any, ...], Cell]:
    """First row per key tuple -> Cell (the runner writes one row per key)."""
    out: dict[tuple[Any, ...], Cell] = {}
    for row in frame.itertuples(index=False):
        key = tuple(getattr(row, k) for k in keys)
        out.setdefault(key, _cell(row))
    return out


def _detectors(frame: pd.DataFrame) -> list[str]:
    return [str(d) for d in ordered_unique(frame["detector"])]


class _ErrorIndex:
    """Error rows without a metric (``protocols.tidy.error_row``): they stand for every metric.

    A row without a detector covers every detector; a row without a set covers every set.
    """

    def __init__(self, rows: pd.DataFrame) -> None:
        self.items = [
            (r.detector, r.set, r.split, Cell(error=str(r.error)))
            for r in rows.itertuples(index=False)
            if r.metric is None and r.error is not None and not is_na_note(r.error)
        ]

    def get(self, detector: str | None, where: str | None) -> Cell:
        for d, s, sp, cell in self.items:
            if d is not None and detector is not None and d != detector:
                continue
            if where is not None and s is not None:
                if where not in (s, sp) and where not in s.split("+"):
                    continue
            return cell
        return _EMPTY


def _split_label(row: Any) -> str:
    return str(row.split if row.split is not None else row.set)


def _title_case(label: str) -> str:
    return label[:1].upper() + label[1:] if label.islower() else label


class _Errors:
    """Collect the errors behind ``err`` cells as footnotes: one per row and distinct message."""

    def __init__(self) -> None:
        self.cols: dict[tuple[str, str], list[str]] = {}

    def add(self, cells: Iterable[tuple[str, str, Cell]]) -> None:
        for row, col, cell in cells:
            if cell.error is not None:
                self.cols.setdefault((row, cell.error), []).append(col)

    @property
    def notes(self) -> list[str]:
        return [f"err: {row} ({', '.join(cols)}): {msg}" for (row, msg), cols in self.cols.items()]


def _caption(columns: Sequence[Column], what: str, extra: str = "", n_rows: int = 2) -> str:
    """``what``; the best-direction statement for the columns (with 2+ rows); ``extra``."""
    parts = [what]
    ranked = [c for c in columns if n_rows >= 2]
    hi = ordered_unique(c.group or c.label for c in ranked if c.direction == "max")
    lo = ordered_unique(c.group or c.label for c in ranked if c.direction == "min")
    if hi or lo:
        bits = []
        if hi:
            bits.append("highest for " + ", ".join(hi))
        if lo:
            bits.append("lowest for " + ", ".join(lo))
        parts.append("Best per column in bold (" + "; ".join(bits) + ").")
    if extra:
        parts.append(extra)
    return " ".join(parts)


def _build(
    key: str,
    title: str,
    what: str,
    row_header: str,
    rows: Sequence[str],
    columns: Sequence[Column],
    cells: list[list[Cell]],
    extra: str = "",
    ci: bool = True,
    notes: Sequence[str] = (),
) -> Table:
    errors = _Errors()
    for label, row in zip(rows, cells, strict=True):
        errors.add((label, c.full_label, cell) for c, cell in zip(columns, row, strict=True))
    return Table(
        key=key,
        title=title,
        caption=_caption(columns, what, extra, len(rows)),
        row_header=row_header,
        columns=list(columns),
        rows=list(rows),
        cells=cells,
        footnotes=[*errors.notes, *notes],
        ci=ci,
    )


def _need(frame: pd.DataFrame, what: str) -> None:
    if frame.empty:
        raise InputError(f"results have no {what} rows; this table needs the {what} protocol")
