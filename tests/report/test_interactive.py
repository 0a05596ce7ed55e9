"""The interactive report tables in headless Chromium: header clicks sort the rows (both
directions, err / n/a last), the filter box hides rows, wide tables fit a 1,400 px page, no
console error, no URL in the page, the size bound kept with the script inlined.

Clicks and typing are real input events (DevTools ``Input.dispatchMouseEvent`` /
``Input.insertText``), not calls of ``element.click()``.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from tests.report._cdp import Browser
from tests.report.conftest import make_run

from semshift.report import write_report
from semshift.report.blocks import Paragraph, Report, Section
from semshift.report.gallery import DEFAULT_MAX_REPORT_BYTES
from semshift.report.html import render_html
from semshift.report.interactive import MAX_COLUMNS, _parts, page_script
from semshift.report.interactive_charts import GRID_POINTS, chart_json
from semshift.report.tables import Table
from semshift.report.tables._core import Cell, Column

WIDTH = 1400


class Page:
    """One tab of ``browser`` showing ``url`` at a ``width`` px wide viewport."""

    def __init__(self, browser: Browser, url: str, width: int = WIDTH) -> None:
        self.b = browser
        self.target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.s = browser.call("Target.attachToTarget", {"targetId": self.target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime"):
            browser.call(f"{domain}.enable", session=self.s)
        browser.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
            session=self.s,
        )
        browser.call("Page.navigate", {"url": url}, session=self.s)
        browser.wait_event("Page.loadEventFired", self.s)

    def js(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        got = self.b.call(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=self.s
        )
        assert "exceptionDetails" not in got, got
        return got["result"].get("value")

    def click(self, selector: str) -> None:
        """A real left click in the middle of the element (scrolled into view first)."""
        box = self.js(
            f"(() => {{ const e = document.querySelector({selector!r}); "
            "e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect(); "
            "return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.b.call(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": box[0], "y": box[1], "button": "left", "clickCount": 1},
                session=self.s,
            )

    def type(self, selector: str, text: str) -> None:
        """Click into an input and type ``text`` (replacing what is there)."""
        self.click(selector)
        self.js(f"document.querySelector({selector!r}).select()")
        self.b.call("Input.insertText", {"text": text}, session=self.s)

    def rows(self, table: str) -> list[list[str]]:
        """The visible rows of a table, top to bottom, as their cells' texts."""
        return list(
            self.js(
                f"[...document.querySelectorAll({table + ' tbody tr'!r})]"
                ".filter(r => !r.hidden && r.offsetParent !== null)"
                ".map(r => [...r.cells].map(c => c.textContent))"
            )
        )

    def close(self) -> None:
        self.b.call("Target.closeTarget", {"targetId": self.target})


def _value(text: str) -> float:
    """The displayed value of a cell: its leading number (NaN for err / n/a)."""
    m = re.match(r"-?\d+(\.\d+)?(e[-+]\d+)?", text)
    return float(m.group(0)) if m else math.nan


@pytest.fixture(scope="module")
def browser(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    profile = tmp_path_factory.mktemp("chromium_interactive") / "profile"
    profile.mkdir()
    with Browser(chromium, profile) as b:
        yield b


@pytest.fixture(scope="module")
def report(run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("interactive") / "out"
    shutil.copytree(run_dir, out)
    paths = write_report(out, formats=("html",))
    assert paths.html is not None
    return paths.html


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run with 40 detectors (long names, one failing)."""
    names = [f"detector_{k:02d}_with_a_long_name" for k in range(39)] + ["broken"]
    out = make_run(tmp_path_factory.mktemp("many") / "out", detectors=names, bootstrap=20)
    paths = write_report(out, formats=("html",))
    assert paths.html is not None
    return paths.html


def test_header_clicks_sort_numerically_both_ways_errors_last(
    browser: Browser, report: Path
) -> None:
    page = Page(browser, report.resolve().as_uri())
    table = "#table-osr table"
    before = page.rows(table)
    names = [r[0] for r in before]
    assert sorted(names) == ["broken", "energy", "knn", "msp"]
    # the AUROC "Hard" column: broken failed there (err)
    heads = page.js(
        f"[...document.querySelectorAll({table + ' tr.sort-row th'!r})].map(h => h.textContent)"
    )
    col = heads.index("Hard")  # AUROC (the first group)
    selector = f"{table} tr.sort-row th:nth-child({col + 1})"
    page.click(selector)
    up = page.rows(table)
    assert page.js(f"document.querySelector({selector!r}).getAttribute('aria-sort')") == (
        "ascending"
    )
    values = [_value(r[col]) for r in up]
    assert up[-1][0] == "broken" and up[-1][col] == "err"
    assert values[:-1] == sorted(values[:-1]) and len(set(values[:-1])) == 3
    assert any("[" in r[col] for r in up)  # CIs shown, not taken for the value
    page.click(selector)
    down = page.rows(table)
    values = [_value(r[col]) for r in down]
    assert down[-1][0] == "broken"
    assert values[:-1] == sorted(values[:-1], reverse=True)
    assert [r[0] for r in down[:-1]] == [r[0] for r in up[:-1]][::-1]
    assert [r[0] for r in down] != names  # the rows really moved
    # the row-header column sorts by name
    page.click(f"{table} tr.sort-row th:first-child")
    assert [r[0] for r in page.rows(table)] == sorted(names)
    page.click(f"{table} tr.sort-row th:first-child")
    assert [r[0] for r in page.rows(table)] == sorted(names, reverse=True)
    page.close()


def test_filter_box_keeps_the_matching_rows(browser: Browser, report: Path) -> None:
    page = Page(browser, report.resolve().as_uri())
    table = "#table-osr table"
    page.type("#table-osr input.filter", "EN")  # any case: energy, brokEN
    assert sorted(r[0] for r in page.rows(table)) == ["broken", "energy"]
    page.type("#table-osr input.filter", "knn")
    assert [r[0] for r in page.rows(table)] == ["knn"]
    # other tables are not filtered
    assert len(page.rows("#table-newclass_failure table")) == 4
    page.type("#table-osr input.filter", " ")
    assert len(page.rows(table)) == 4
    # filtering and sorting together
    page.type("#table-osr input.filter", "n")  # energy, knn, broken
    page.click(f"{table} tr.sort-row th:first-child")
    assert [r[0] for r in page.rows(table)] == ["broken", "energy", "knn"]
    page.close()


def test_no_console_errors_and_no_url(browser: Browser, report: Path) -> None:
    result = browser.check_page(report.resolve().as_uri())
    assert result.console_errors == []
    text = report.read_text(encoding="utf-8")
    assert text.count("<script>") == 1 and "<script src" not in text
    assert not re.search(r"(src|href)\s*=\s*\"(?!data:|#)", text)
    assert not re.search(r"https?://", text)  # not even in comments: the banner is replaced
    assert "Permission is hereby granted" in text  # the library's license travels with it


def test_many_detectors_fit_1400px_and_stay_within_the_size_bound(
    browser: Browser, many: Path
) -> None:
    page = Page(browser, many.resolve().as_uri())
    assert page.js("document.documentElement.scrollWidth") <= WIDTH
    assert page.js("window.innerWidth") == WIDTH
    scrolling = page.js(
        "[...document.querySelectorAll('div.table-part')]"
        ".filter(d => d.scrollWidth > d.clientWidth).map(d => d.parentNode.id)"
    )
    assert scrolling == []
    assert len(page.rows("#table-osr table")) == 40
    page.type("#table-osr input.filter", "_07_")
    assert [r[0] for r in page.rows("#table-osr table")] == ["detector_07_with_a_long_name"]
    page.close()
    assert browser.check_page(many.resolve().as_uri()).console_errors == []
    size = many.stat().st_size
    assert size <= DEFAULT_MAX_REPORT_BYTES
    assert len(page_script().encode()) < 12_000  # the inlined table library and wiring
    assert len(page_script(tables=False, charts=True).encode()) < 60_000  # uPlot


def _wide_table(n_sets: int = 19, n_rows: int = 12) -> Table:
    """Two column groups of ``n_sets`` long-named sets each, with CIs (like the operating
    point and sanity tables of a real study)."""
    sets = [f"font_dejavu-sans-mono_{k}" for k in range(n_sets)]
    columns = [Column("Threshold", direction=None, kind="score")]
    columns += [Column(s, group=g) for g in ("Rejected", "Accepted & wrong") for s in sets]
    cells = [
        [Cell(1.0 + i)] + [Cell(0.5 + 0.01 * i, 0.45, 0.6) for _ in range(2 * n_sets)]
        for i in range(n_rows)
    ]
    cells[3][5] = Cell(error="RuntimeError: boom")
    return Table(
        key="wide",
        title="A wide table",
        caption="Many columns.",
        row_header="Detector",
        columns=columns,
        rows=[f"detector_{i:02d}_with_a_long_name" for i in range(n_rows)],
        cells=cells,
    )


def test_a_wide_table_is_cut_into_parts_that_fit(browser: Browser, tmp_path: Path) -> None:
    table = _wide_table()
    report = Report("wide", Paragraph("intro"), [Section("s", "S", [table])], [], {})
    path = tmp_path / "wide.html"
    path.write_text(render_html(report), encoding="utf-8")
    page = Page(browser, path.as_uri())
    assert page.js("document.querySelectorAll('#table-wide table').length") == 2
    assert page.js("document.documentElement.scrollWidth") <= WIDTH
    assert page.js(
        "[...document.querySelectorAll('div.table-part')]"
        ".every(d => d.scrollWidth <= d.clientWidth)"
    )
    # CIs are hidden in wide tables until "show CIs" is ticked
    first = "#table-wide table tbody tr:first-child td:nth-child(3)"
    assert page.js(f"document.querySelector({first!r}).innerText.trim()") == "50.0"
    page.click("#table-wide input.show-ci")
    assert page.js(f"document.querySelector({first!r}).innerText").split() == [
        "50.0",
        "[45.0,",
        "60.0]",
    ]
    # each part sorts on its own; the err row goes last
    col = 7  # Rejected, the sixth set: row 3 has an error there
    page.click(f"#table-wide table tr.sort-row th:nth-child({col})")
    rows = page.rows("#table-wide div.table-part:nth-child(2) table")
    assert rows[-1][0] == "detector_03_with_a_long_name" and rows[-1][col - 1] == "err"
    page.close()


def test_parts_follow_column_groups() -> None:
    table = _wide_table()
    parts = _parts(table.columns)
    assert [len(p) for p in parts] == [20, 19]  # Threshold + Rejected; Accepted & wrong
    assert all(len(p) <= MAX_COLUMNS for p in _parts(_wide_table(n_sets=45).columns))
    assert sum(len(p) for p in _parts(_wide_table(n_sets=45).columns)) == 91
    small = [Column("a"), Column("b", group="g"), Column("c", group="g")]
    assert _parts(small) == [[0, 1, 2]]


def test_level_and_oscr_charts_toggle_series_and_read_values_on_hover(
    browser: Browser, report: Path
) -> None:
    page = Page(browser, report.resolve().as_uri())
    charts = "#osr figure.interactive"
    assert page.js(f"document.querySelectorAll({charts!r}).length") == 2
    # level curves: grid and OSR panels; OSCR: one panel per split
    assert page.js(f"document.querySelectorAll({charts + ' div.chart canvas'!r}).length") == 5
    # the PNGs stay in the page, folded once the charts are drawn
    folded = page.js(
        f"[...document.querySelectorAll({charts + ' details.png'!r})]"
        ".map(d => !d.open && d.querySelector('img').naturalWidth > 0)"
    )
    assert folded == [True, True]
    # the OSR panel of the level curves: the second plot of the first chart
    plot = "#chart-level_curves > div:nth-of-type(2)"
    legend = f"{plot} .u-legend tr.u-series"
    names = page.js(
        f"[...document.querySelectorAll({legend + ' .u-label'!r})].map(r => r.textContent)"
    )
    assert names[1:] == ["msp", "energy", "knn", "broken"]
    # a click on a legend entry hides the series, a second one shows it again
    entry = f"{legend}:nth-child(2)"
    page.click(f"{entry} th")
    assert page.js(f"document.querySelector({entry!r}).classList.contains('u-off')")
    page.click(f"{entry} th")
    assert not page.js(f"document.querySelector({entry!r}).classList.contains('u-off')")
    # hovering the middle of the panel reads the "medium" values into the legend
    box = page.js(
        f"(() => {{ const e = document.querySelector({plot + ' .u-over'!r}); "
        "e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect(); "
        "return [r.x + r.width / 2, r.y + r.height / 2]; })()"
    )
    page.b.call(
        "Input.dispatchMouseEvent",
        {"type": "mouseMoved", "x": box[0], "y": box[1]},
        session=page.s,
    )
    shown = page.js(
        f"[...document.querySelectorAll({legend + ' .u-value'!r})].map(v => v.textContent)"
    )
    assert shown[0] == "medium"
    results = pd.read_parquet(report.parent / "results.parquet")
    osr = results[(results["protocol"] == "osr") & (results["metric"] == "auroc")]
    for name, text in zip(["msp", "energy", "knn", "broken"], shown[1:], strict=True):
        row = osr[(osr["detector"] == name) & (osr["set"] == "medium")]
        assert float(text) == pytest.approx(100.0 * float(row["value"].iloc[0]), abs=0.01)
    page.close()


def test_chart_data_and_fallbacks(report: Path, tmp_path: Path) -> None:
    figures = report.parent / "figures"
    data = json.loads(chart_json(figures / "oscr_curves.png") or "{}")
    assert [p["title"] for p in data["panels"]] == ["hard: hard", "medium: medium", "easy: easy"]
    for panel in data["panels"]:
        assert panel["ticks"] is None and len(panel["x"]) == GRID_POINTS
        assert panel["x"][0] == 0.0 and panel["x"][-1] == 1.0
        for s in panel["series"]:
            ys = [y for y in s["y"] if y is not None]
            assert ys == sorted(ys) and 0.0 <= ys[0] and ys[-1] <= 1.0  # CCR rises with FPR
    # no chart for other figures, nor for a PNG outside a run folder: the PNG alone
    assert chart_json(figures / "decomposition.png") is None
    lonely = tmp_path / "figures" / "level_curves.png"
    lonely.parent.mkdir()
    shutil.copy(figures / "level_curves.png", lonely)
    assert chart_json(lonely) is None
    text = report.read_text(encoding="utf-8")
    assert text.count('<details class="png" open>') == 2
