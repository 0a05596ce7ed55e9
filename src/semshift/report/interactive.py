"""The interactive parts of ``report.html``: sortable, filterable tables that fit the page.

Every report table is rendered here (from the :class:`~semshift.report.tables.Table` model, the
same cells and best values as :meth:`Table.to_html`) with

- clickable column headers that sort the rows (vendored `tablesort
  <https://www.npmjs.com/package/tablesort>`_, MIT, inlined once per page by
  :func:`page_script`): value columns sort numerically on the displayed value (the leading
  number of the cell's text, so CIs and footnote marks do not count; yes / no flags carry 1 / 0
  in ``data-sort``); rows without a value (``err``, ``n/a``) stay last in either direction;
- one filter box per table that keeps the rows whose header (detector, set ...) contains the
  typed text;
- a compact layout for wide tables: tables with many columns are cut into parts of at most
  :data:`MAX_COLUMNS` columns (at column-group boundaries where possible), CIs of such tables
  are hidden behind a "show CIs" box (pure CSS), headers wrap and the row-header column sticks
  to the left when a part still scrolls.

The page's script also carries uPlot and its wiring when the page shows a chart
(:mod:`semshift.report.interactive_charts`). No network: the libraries are read from
``semshift/report/vendor/`` and written into the page.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass
from importlib import resources

from semshift.report.tables import Table
from semshift.report.tables._core import Column

__all__ = ["MAX_COLUMNS", "VENDORED", "interactive_table_html", "page_script", "vendored_js"]

#: Value columns per table part: wider tables are cut into parts (operating point, sanity ...).
MAX_COLUMNS = 20
#: Tables with more value columns than this hide their CIs until "show CIs" is ticked.
CI_SHOWN_UP_TO = 8


@dataclass(frozen=True)
class Vendored:
    """A vendored minified script: file under ``report/vendor/`` and its license."""

    file: str
    package: str
    version: str
    license_file: str


#: The vendored scripts, in page order (see ``vendor/README.md``).
VENDORED = (Vendored("tablesort.min.js", "tablesort", "5.7.1", "LICENSE.tablesort"),)
#: The chart library (with its style sheet ``uPlot.min.css``), inlined when a chart is shown.
UPLOT = Vendored("uPlot.iife.min.js", "uPlot", "1.6.32", "LICENSE.uplot")

# The wiring between tablesort and the report's tables: the only hand-written JavaScript.
_WIRING_JS = """
// semshift: wire the vendored tablesort to the report's tables.
// A cell sorts by its text ("91.2 [90.8, 91.6]": parseFloat reads the displayed value, not the
// CI) or by its data-sort attribute (yes / no flags: 1 / 0); err and n/a read as NaN.
// Tablesort sorts with this comparator and reverses the result for ascending order.
Tablesort.extend('value', function () { return false; }, function (a, b) {
  return (parseFloat(b) || 0) - (parseFloat(a) || 0);
});
document.querySelectorAll('table.sortable').forEach(function (table) {
  var sort = new Tablesort(table);
  // after each sort, rows without a value in the sorted column move last, in order
  table.addEventListener('afterSort', function () {
    if (sort.col === 0) return;
    var body = table.tBodies[0];
    [].slice.call(body.rows).forEach(function (tr) {
      var td = tr.cells[sort.col];
      if (isNaN(parseFloat(td.getAttribute('data-sort') || td.textContent))) {
        body.appendChild(tr);
      }
    });
  });
});
// one filter box per table: keep the rows whose header contains the text (any case)
document.querySelectorAll('figure.table input.filter').forEach(function (box) {
  box.addEventListener('input', function () {
    var q = box.value.trim().toLowerCase();
    box.closest('figure').querySelectorAll('tbody tr').forEach(function (tr) {
      tr.hidden = q !== '' && tr.cells[0].textContent.toLowerCase().indexOf(q) < 0;
    });
  });
});
"""

# The wiring between uPlot and the report's chart containers (interactive_charts.chart_html).
_CHART_JS = """
// semshift: draw each div.chart with the vendored uPlot, one plot per panel of the figure.
// uPlot's own legend toggles a series on click and shows the values under the cursor.
document.querySelectorAll('div.chart').forEach(function (box) {
  var spec = JSON.parse(box.querySelector('script').textContent);
  spec.panels.forEach(function (p) {
    var cat = p.ticks;  // categorical x: positions 0, 1 ... named by ticks
    var name = function (v) { return v == null ? '' : cat ? cat[v] : v.toFixed(3); };
    var series = [{label: p.xlabel || 'x', value: function (u, v) { return name(v); }}];
    p.series.forEach(function (s) {
      series.push({label: s.label, stroke: s.color, width: s.grey ? 1 : 2,
                   dash: s.dash ? [6, 4] : undefined, spanGaps: true,
                   points: {show: !!cat}});
    });
    var axes = [{label: p.xlabel}, {label: p.ylabel}];
    if (cat) {
      axes[0].splits = function () { return cat.map(function (_, i) { return i; }); };
      axes[0].values = function (u, vals) { return vals.map(name); };
    }
    var div = document.createElement('div');
    box.appendChild(div);
    var opts = {title: p.title, width: Math.min(640, box.clientWidth || 640), height: 340,
                series: series, axes: axes,
                scales: {x: {time: false}}};
    if (cat) opts.scales.x.range = [-0.25, cat.length - 0.75];
    new uPlot(opts, [p.x].concat(p.series.map(function (s) { return s.y; })), div);
  });
  // the chart is drawn: fold the static PNG (kept for papers and readers without JS)
  var png = box.parentNode.querySelector('details.png');
  if (png) png.open = false;
});
"""

_CHART_CSS = """
div.chart { display: flex; flex-wrap: wrap; gap: 1rem; }
div.chart .u-legend { font-size: .75rem; max-height: 12rem; overflow-y: auto; }
div.chart .u-legend .u-series { cursor: pointer; }
details.png > summary { font-size: .8rem; color: #555; cursor: pointer; }
"""

#: CSS of the interactive tables (appended to the page's style sheet by ``html.py``).
TABLE_CSS = """
figure.table { overflow: visible; }
div.table-tools { display: flex; gap: 1rem; align-items: center; font-size: .8rem;
                  margin: .2rem 0 .3rem 0; }
div.table-tools input.filter { font: inherit; padding: .1rem .3rem; width: 14rem; }
div.table-part { overflow-x: auto; max-width: 100%; margin-bottom: .6rem; }
figure.table table { border-collapse: separate; border-spacing: 0; font-size: .8rem;
                     font-variant-numeric: tabular-nums; }
figure.table th, figure.table td { padding: .15rem .4rem; }
figure.table thead th { white-space: normal; overflow-wrap: anywhere; vertical-align: bottom;
                        min-width: 2.5rem; max-width: 9rem; }
figure.table thead tr.sort-row th { cursor: pointer; user-select: none; }
figure.table thead th[aria-sort="ascending"]::after { content: " \\25B2"; font-size: .7em; }
figure.table thead th[aria-sort="descending"]::after { content: " \\25BC"; font-size: .7em; }
figure.table tbody th, figure.table thead tr.sort-row th:first-child {
  position: sticky; left: 0; background: #fff; z-index: 1; text-align: left; }
figure.table tbody tr:hover th, figure.table tbody tr:hover td { background: #f4f7fb; }
figure.table.wide table { font-size: .74rem; }
figure.table.wide th, figure.table.wide td { padding: .1rem .3rem; }
figure.table.wide td small { display: block; font-size: .8em; color: #555; }
figure.table:has(input.show-ci:not(:checked)) td small { display: none; }
"""


def vendored_js(item: Vendored) -> str:
    """One vendored script, its banner comment replaced by the name, version and license.

    The banner of a minified file holds the project's URL; the page must hold none, so it is
    swapped for a comment with the full license text (which the license asks to keep).
    """
    folder = resources.files("semshift.report") / "vendor"
    code = (folder / item.file).read_text(encoding="utf-8")
    license_text = (folder / item.license_file).read_text(encoding="utf-8").strip()
    code = re.sub(r"\A\s*/\*!.*?\*/\s*", "", code, count=1, flags=re.S)
    head = f"/*! {item.package} {item.version}, vendored by semshift\n{license_text}\n*/\n"
    return (head + code).replace("</script", "<\\/script")


def page_script(*, tables: bool = True, charts: bool = False) -> str:
    """The ``<script>`` element to put at the end of the page's body: libraries and wiring.

    Parameters
    ----------
    tables : bool, default True
        Include tablesort and the table wiring.
    charts : bool, default False
        Include uPlot and the chart wiring (:mod:`semshift.report.interactive_charts`).
    """
    parts = []
    if tables:
        parts += [vendored_js(v) for v in VENDORED] + [_WIRING_JS]
    if charts:
        parts += [vendored_js(UPLOT), _CHART_JS]
    if not parts:
        return ""
    return "<script>\n" + "\n".join(parts) + "</script>"


def chart_css() -> str:
    """uPlot's style sheet and the report's chart layout (only for pages with charts)."""
    folder = resources.files("semshift.report") / "vendor"
    return (folder / "uPlot.min.css").read_text(encoding="utf-8") + _CHART_CSS


# --------------------------------------------------------------------------- tables
def _parts(columns: list[Column], limit: int = MAX_COLUMNS) -> list[list[int]]:
    """Column indices cut into parts of at most ``limit``: whole groups where they fit,
    consecutive groups (and ungrouped columns) merged while the part stays within ``limit``."""
    runs: list[list[int]] = []
    for j, c in enumerate(columns):
        if c.group is not None and runs and columns[runs[-1][0]].group == c.group:
            runs[-1].append(j)
        else:
            runs.append([j])
    chunks = [run[k : k + limit] for run in runs for k in range(0, len(run), limit)]
    parts: list[list[int]] = []
    for chunk in chunks:
        if parts and len(parts[-1]) + len(chunk) <= limit:
            parts[-1].extend(chunk)
        else:
            parts.append(list(chunk))
    return parts or [[]]


def _cell_html(table: Table, i: int, j: int, bold: bool, wide: bool) -> str:
    """One ``<td>``: its text sorts as it reads (a leading number); flags carry 1 / 0 in
    ``data-sort``; in wide tables the CI goes into a ``<small>`` that CSS can hide."""
    cell, col = table.cells[i][j], table.columns[j]
    text = html.escape(table.text(i, j))
    m = re.fullmatch(r"(\S+) (\[[^\]]*\])(.*)", text) if wide else None
    if m:  # "91.2 [90.8, 91.6]†" -> "91.2† <small>[90.8, 91.6]</small>"
        value, ci, mark = m.groups()
        text = f"{value}{mark} <small>{ci}</small>"
    if bold:
        text = f"<strong>{text}</strong>"
    attrs = ' class="err"' if cell.error is not None else ""
    if col.kind == "flag" and cell.ok:
        attrs += f' data-sort="{int(cell.value >= 0.5)}"'
    return f"<td{attrs}>{text}</td>"


def _breakable(label: str) -> str:
    """An escaped header label that may wrap after ``_``, ``-`` and ``.`` (set names)."""
    return re.sub(r"([_.-])", r"\1<wbr>", html.escape(label))


def _part_html(
    table: Table, cols: list[int], best: list[set[int]], caption: str, wide: bool
) -> str:
    esc = html.escape
    out = ['<div class="table-part">', '<table class="sortable">']
    out.append(f"<caption>{esc(caption)}</caption>")
    out.append("<thead>")
    if any(table.columns[j].group for j in cols):
        top = ["<th></th>"]
        k = 0
        while k < len(cols):
            group = table.columns[cols[k]].group
            span = 1
            while (
                group is not None
                and k + span < len(cols)
                and table.columns[cols[k + span]].group == group
            ):
                span += 1
            top.append(f'<th colspan="{span}">{esc(group)}</th>' if group else "<th></th>")
            k += span
        out.append('<tr class="group-row">' + "".join(top) + "</tr>")
    head = [f"<th>{esc(table.row_header)}</th>"]
    head += [
        f'<th data-sort-method="value">{_breakable(table.columns[j].label)}</th>' for j in cols
    ]
    out.append('<tr class="sort-row" data-sort-method="thead">' + "".join(head) + "</tr>")
    out.append("</thead>")
    out.append("<tbody>")
    for i, label in enumerate(table.rows):
        tds = [f'<th scope="row">{esc(label)}</th>']
        tds += [_cell_html(table, i, j, i in best[j], wide) for j in cols]
        out.append("<tr>" + "".join(tds) + "</tr>")
    out.append("</tbody>")
    out.append("</table>")
    out.append("</div>")
    return "\n".join(out)


def interactive_table_html(table: Table) -> str:
    """A table as an HTML ``<figure>``: filter box, sortable part(s), caption, footnotes.

    Parameters
    ----------
    table : Table

    Returns
    -------
    str
        The figure (``id="table-<key>"``, like :meth:`Table.to_html`); it needs
        :func:`page_script` once in the page to sort and filter.
    """
    esc = html.escape
    best = [table.best(j) for j in range(len(table.columns))]
    parts = _parts(table.columns)
    wide = len(table.columns) > CI_SHOWN_UP_TO
    has_ci = (
        wide
        and table.ci
        and any(
            c.ok and math.isfinite(c.ci_low) and math.isfinite(c.ci_high)
            for row in table.cells
            for c in row
        )
    )
    classes = "table wide" if wide else "table"
    out = [f'<figure class="{classes}" id="table-{esc(table.key)}">']
    what = esc(table.row_header.lower())
    tools = [
        f'<label>Filter {what}: <input type="search" class="filter" '
        f'placeholder="part of a name" aria-label="Filter rows by {what}"></label>'
    ]
    if has_ci:
        tools.append('<label><input type="checkbox" class="show-ci"> show CIs</label>')
    out.append('<div class="table-tools">' + "".join(tools) + "</div>")
    for k, cols in enumerate(parts):
        caption = table.title
        if len(parts) > 1:
            caption += f" ({k + 1}/{len(parts)})"
        out.append(_part_html(table, cols, best, caption, wide))
    out.append(f"<figcaption>{esc(table.caption)}</figcaption>")
    if table.footnotes:
        out.append('<ol class="footnotes">')
        out += [f"<li>{esc(n)}</li>" for n in table.footnotes]
        out.append("</ol>")
    out.append("</figure>")
    return "\n".join(out) + "\n"
