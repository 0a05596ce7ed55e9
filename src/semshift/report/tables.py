"""Result tables in the seed papers' layouts, rendered to Markdown, HTML and rich.

Every builder takes the tidy results table (docs/design/run.md; a DataFrame, a run's output
directory or its ``results.parquet``) and returns a :class:`Table`. Values are fractions in the
results and are shown x100 with one decimal; the best value of each column is bold (highest for
AUROC / AUPR / OSCR / accuracy / F1 / H, lowest for FPR@95 and other lower-is-better metrics;
the caption says which); a bootstrap CI is shown as ``91.2 [90.8, 91.6]``; a cell whose
detector or set failed shows ``err`` and the error is listed under the table.

Builders: :func:`osr_table` (SSB Table 1), :func:`osr_metrics_table`,
:func:`newclass_failure_table` (ImageNet-OOD Table 1), :func:`decomposition_table`
(ImageNet-OOD Table 4), :func:`graded_level_table` and :func:`graded_trend_table` (IS-OOD),
:func:`operating_point_overview_table` and :func:`operating_point_table` (the rejection
threshold), :func:`sanity_table`, :func:`generalisation_table` (SOOD), :func:`gzsl_table` (GBU)
and :func:`headline_table` (the one the CLI prints). :func:`search_table` takes a hyperparameter
search's ``search.csv`` instead: the values chosen per detector.
"""

from __future__ import annotations

import html
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import pandas as pd

from semshift.errors import InputError
from semshift.report._load import as_results, level_sort_key, ordered_unique

__all__ = [
    "Cell",
    "Column",
    "Table",
    "decomposition_table",
    "generalisation_table",
    "graded_level_table",
    "graded_metrics",
    "graded_trend_table",
    "gzsl_table",
    "headline_table",
    "metric_label",
    "newclass_failure_table",
    "operating_point_detectors",
    "operating_point_overview_table",
    "operating_point_table",
    "osr_metrics_table",
    "osr_table",
    "sanity_table",
    "search_table",
    "zsl_table",
]

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


# ---------------------------------------------------------------------- helpers
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


# ---------------------------------------------------------------------- OSR
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


# ---------------------------------------------------------------------- ImageNet-OOD
def newclass_failure_table(
    results: ResultsLike, *, metric: str = "auroc", ci: bool = True
) -> Table:
    """ImageNet-OOD Table 1: new-class and failure detection, one row per detector.

    Column groups ``New-class detection`` and ``Failure detection`` (those present); in each,
    one column per covariate set (``<set> vs OOD``) and ``ID vs OOD`` (the ``id_test`` rows).

    References
    ----------
    .. [1] Yang et al., "ImageNet-OOD: Deciphering Modern Out-of-Distribution Detection
       Algorithms", ICLR 2024, Table 1.
    """
    res = as_results(results)
    rows = _rows(res, ("newclass", "failure"))
    errs = {p: _ErrorIndex(rows[rows["protocol"] == p]) for p in ("newclass", "failure")}
    rows = rows[((rows["metric"] == metric) | rows["metric"].isna()) & rows["detector"].notna()]
    _need(rows, "newclass / failure")
    sets = [str(s) for s in ordered_unique(rows["set"])]
    sets = [s for s in sets if s != "id_test"] + (["id_test"] if "id_test" in sets else [])
    lookup = _lookup(rows, ("detector", "protocol", "set"))
    groups = [
        (p, name)
        for p, name in (("newclass", "New-class detection"), ("failure", "Failure detection"))
        if (rows["protocol"] == p).any()
    ]
    columns, keys = [], []
    for p, name in groups:
        for s in sets:
            label = "ID vs OOD" if s == "id_test" else f"{s} vs OOD"
            columns.append(Column(label, group=name, direction=metric_direction(metric)))
            keys.append((p, s))
    detectors = _detectors(rows)
    cells = [[lookup.get((d, p, s)) or errs[p].get(d, s) for p, s in keys] for d in detectors]
    return _build(
        "newclass_failure",
        f"New-class vs failure detection, {metric_label(metric)} (ImageNet-OOD Table 1)",
        f"{metric_label(metric)} x100 of each covariate-shift set and of ID test against the "
        "pooled semantic OOD. New-class: positives = every image of a known class. Failure: "
        "positives = correctly classified images; negatives = misclassified ones and OOD.",
        "Detector",
        detectors,
        columns,
        cells,
        ci=ci,
    )


_DECOMPOSITION = (
    ("acc", "Acc"),
    ("auroc", "AUROC ID vs OOD"),
    ("auroc_correct", "AUROC correct vs OOD"),
    ("auroc_incorrect", "AUROC incorrect vs OOD"),
    ("auroc_correct_vs_incorrect", "AUROC correct vs incorrect"),
)


def decomposition_table(results: ResultsLike, *, ci: bool = True) -> Table:
    """ImageNet-OOD Table 4: the AUROC decomposition over correct and incorrect ID samples.

    AUROC = acc x AUROC(correct vs OOD) + (1 - acc) x AUROC(incorrect vs OOD).

    References
    ----------
    .. [1] Yang et al., ImageNet-OOD, ICLR 2024, eq. 2 and Table 4.
    """
    res = as_results(results)
    rows = _rows(res, "decomposition")
    rows = rows[rows["detector"].notna()]
    _need(rows, "decomposition")
    errs = _ErrorIndex(rows)
    lookup = _lookup(rows, ("detector", "metric"))
    present = set(rows["metric"])
    metrics = [(m, label) for m, label in _DECOMPOSITION if m in present]
    columns = [Column(label, direction=None if m == "acc" else "max") for m, label in metrics]
    detectors = _detectors(rows)
    cells = [[lookup.get((d, m)) or errs.get(d, None) for m, _ in metrics] for d in detectors]
    return _build(
        "decomposition",
        "AUROC decomposition (ImageNet-OOD Table 4)",
        "ID test vs pooled OOD, x100: AUROC = Acc x AUROC(correct vs OOD) + (1 - Acc) x "
        "AUROC(incorrect vs OOD).",
        "Detector",
        detectors,
        columns,
        cells,
        ci=ci,
    )


# ---------------------------------------------------------------------- IS-OOD graded grid
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


# ---------------------------------------------------------------------- operating point
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


# ---------------------------------------------------------------------- sanity
def _outside_band(cell: Cell, delta: float) -> bool:
    """True when the CI (or the value, without a CI) lies entirely outside 0.5 +- delta."""
    lo, hi = (cell.ci_low, cell.ci_high) if math.isfinite(cell.ci_low) else (cell.value, cell.value)
    return bool(hi < 0.5 - delta or lo > 0.5 + delta)


def sanity_table(results: ResultsLike, *, delta: float = 0.05, ci: bool = True) -> Table:
    """Random-model sanity check (ImageNet-OOD section 4.2), one row per detector.

    For each set, the AUROC of the random-init model (seed) furthest from 0.5, with its CI,
    marked ``†`` when that CI lies outside 0.5 +- ``delta``; last column: the runner's
    ``flagged`` verdict.
    """
    res = as_results(results)
    rows = _rows(res, "sanity")
    rows = rows[rows["detector"].notna()]
    _need(rows, "sanity")
    errs = _ErrorIndex(rows)
    au = rows[rows["metric"] == "auroc"]
    sets = sorted((str(s) for s in ordered_unique(au["set"])), key=level_sort_key)
    worst: dict[tuple[str, str], Cell] = {}
    seeds = ordered_unique(au["split"])
    for r in au.itertuples(index=False):
        key = (str(r.detector), str(r.set))
        cell = _cell(r)
        prev = worst.get(key)
        if prev is None or (prev.error is None and cell.error is not None):
            worst[key] = cell
        elif cell.ok and (not prev.ok or abs(cell.value - 0.5) > abs(prev.value - 0.5)):
            worst[key] = cell
    worst = {
        k: Cell(
            c.value, c.ci_low, c.ci_high, c.error, "†" if c.ok and _outside_band(c, delta) else ""
        )
        for k, c in worst.items()
    }
    flags = _lookup(rows[rows["metric"] == "flagged"], ("detector",))
    detectors = _detectors(rows)
    columns = [Column(s, group="AUROC", direction=None) for s in sets]
    has_flag = bool(flags)
    if has_flag:
        columns.append(Column("Flagged", direction=None, kind="flag"))
    cells = [
        [worst.get((d, s)) or errs.get(d, s) for s in sets]
        + ([flags.get((d,), _EMPTY)] if has_flag else [])
        for d in detectors
    ]
    return _build(
        "sanity",
        "Random-model sanity check (ImageNet-OOD section 4.2)",
        f"AUROC x100 of the detectors on {len(seeds)} randomly initialised model(s); per set the "
        f"model furthest from 0.5 is shown. † = its CI lies outside 0.5 ± {delta:g}; a "
        "well-behaved detector gives about 50 everywhere. No best marked.",
        "Detector",
        detectors,
        columns,
        cells,
        ci=ci,
    )


# ---------------------------------------------------------------------- SOOD, GZSL
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
        )
        if (rows["metric"] == m).any()
    ]
    columns = [Column(label, direction=None) for _, label in metrics]
    cells = [[lookup.get((s, m), _EMPTY) for m, _ in metrics] for s in sets]
    return _build(
        "generalisation",
        "Generalisation under covariate shift (SOOD)",
        "Accuracy and macro-F1 x100 per set; drop = (ID - set) / ID x100, relative. No best "
        "marked: the rows are sets of one classifier.",
        "Set",
        sets,
        columns,
        cells,
    )


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


# ---------------------------------------------------------------------- headline
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


def headline_table(results: ResultsLike, *, ci: bool = False) -> Table:
    """The table the CLI prints: the OSR table when present, else the first protocol's table.

    CIs are hidden by default to keep it narrow in a terminal.
    """
    res = as_results(results)
    present = set(res["protocol"])
    if "osr" in present:
        return osr_table(res, ci=ci)
    if present & {"newclass", "failure"}:
        return newclass_failure_table(res, ci=ci)
    if "decomposition" in present:
        return decomposition_table(res, ci=ci)
    if "graded" in present:
        # no cell with a value (every cell n/a, e.g. too small): the AUROC table shows the n/a
        metric = next(iter(graded_metrics(res)), "auroc")
        return graded_level_table(res, metric=metric, ci=ci)
    if "operating_point" in present:
        return operating_point_overview_table(res, ci=ci)
    if "sanity" in present:
        return sanity_table(res, ci=ci)
    if "generalisation" in present:
        return generalisation_table(res)
    if "gzsl" in present:
        return gzsl_table(res)
    raise InputError(
        "results have no rows of a known protocol (osr, newclass, failure, decomposition, graded, "
        f"operating_point, sanity, generalisation, gzsl); found {sorted(present)}"
    )
