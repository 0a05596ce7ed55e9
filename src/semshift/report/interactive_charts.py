"""Interactive charts of ``report.html``: the level-curve and OSCR figures drawn in the page by
the vendored `uPlot <https://www.npmjs.com/package/uplot>`_ (MIT): a click on a legend entry
hides or shows a series, the legend reads the values under the cursor.

The numbers are those of the PNG: the figure is rebuilt by its own builder in
:mod:`semshift.report.figures` from the run folder the PNG was saved in (``<run>/figures/<name>
.png``, next to ``results.parquet``) and its lines are read back (:func:`figure_panels`), so the
chart and the static figure cannot disagree. A figure whose run folder cannot be read, or whose
builder fails, keeps its PNG alone. The PNG always stays in the page (in a ``<details>``, open
until the chart is drawn) for papers and for readers without JavaScript.
"""

from __future__ import annotations

import functools
import html
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

__all__ = ["CHARTS", "GRID_POINTS", "ChartPanel", "chart_json", "figure_panels"]

#: Points per series on a continuous x axis (OSCR): the curves are interpolated onto one grid.
GRID_POINTS = 101


def _level_curves(root: Path) -> Figure | None:
    from semshift.report import figures as F
    from semshift.report._load import load_run

    return F.level_curves_figure(load_run(root).results)


def _oscr_curves(root: Path) -> Figure | None:
    from semshift.report import figures as F
    from semshift.report._load import load_run

    return F.oscr_figure(load_run(root))


#: PNG name (without ``.png``) -> the builder of its figure from the run folder.
CHARTS: dict[str, Callable[[Path], Figure | None]] = {
    "level_curves": _level_curves,
    "oscr_curves": _oscr_curves,
}


@dataclass(frozen=True)
class ChartPanel:
    """One panel (matplotlib axes) as chart data.

    Attributes
    ----------
    title, xlabel, ylabel : str
    x : list of float
        The x values shared by every series (positions 0, 1 ... when ``ticks`` is set).
    ticks : list of str or None
        Names of categorical x positions (semantic levels, splits); None for a numeric axis.
    series : list of dict
        ``label``, ``color`` (hex), ``dash`` (bool), ``grey`` (a line drawn grey in the PNG,
        not highlighted), ``y`` (floats or None where the series has no point).
    """

    title: str
    xlabel: str
    ylabel: str
    x: list[float]
    ticks: list[str] | None
    series: list[dict[str, Any]]


def _num(v: float) -> float | None:
    return round(float(v), 4) if math.isfinite(v) else None


def _panel(ax: Axes) -> ChartPanel | None:
    lines = [ln for ln in ax.get_lines() if np.asarray(ln.get_xdata()).size]
    if not lines:
        return None
    xs = [np.asarray(ln.get_xdata(), dtype=np.float64) for ln in lines]
    ys = [np.asarray(ln.get_ydata(), dtype=np.float64) for ln in lines]
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    # level curves plot at positions 0, 1 ... named by the tick labels; OSCR at rates in [0, 1]
    categorical = (
        bool(ticks)
        and all(t for t in ticks)
        and all(np.all(x == np.round(x)) and x.min() >= 0 and x.max() < len(ticks) for x in xs)
    )
    if categorical:
        grid = np.arange(len(ticks), dtype=np.float64)
        values: list[list[float | None]] = []
        for x, y in zip(xs, ys, strict=True):
            at = {int(a): b for a, b in zip(x, y, strict=True)}
            values.append([_num(at[k]) if k in at else None for k in range(len(ticks))])
    else:
        lo = min(float(x.min()) for x in xs)
        hi = max(float(x.max()) for x in xs)
        grid = np.linspace(lo, hi, GRID_POINTS)
        values = [
            [_num(v) for v in np.interp(grid, x, y, left=math.nan, right=math.nan)]
            for x, y in zip(xs, ys, strict=True)
        ]
    series = []
    for ln, points in zip(lines, values, strict=True):
        label = str(ln.get_label())
        grey = label.startswith("_")
        series.append(
            {
                "label": label.lstrip("_"),
                "color": to_hex(ln.get_color()),
                "dash": ln.get_linestyle() in ("--", "dashed"),
                "grey": grey,
                "y": points,
            }
        )
    series.sort(key=lambda s: bool(s["grey"]))  # highlighted series first in the legend
    return ChartPanel(
        title=ax.get_title(),
        xlabel=ax.get_xlabel(),
        ylabel=ax.get_ylabel(),
        x=[float(round(v, 4)) for v in grid],
        ticks=ticks if categorical else None,
        series=series,
    )


def figure_panels(fig: Figure) -> list[ChartPanel]:
    """The line panels of a matplotlib figure: one per axes with lines, in figure order."""
    return [p for p in (_panel(ax) for ax in fig.axes) if p is not None]


@functools.lru_cache(maxsize=16)
def _cached(png: str, stamp: tuple[int, ...]) -> str | None:
    path = Path(png)
    build = CHARTS[path.stem]
    try:
        fig = build(path.parent.parent)
    except Exception:  # an optional view: the PNG stays, whatever went wrong
        return None
    if fig is None:
        return None
    panels = figure_panels(fig)
    if not panels:
        return None
    return json.dumps(
        {"panels": [p.__dict__ for p in panels]}, separators=(",", ":"), allow_nan=False
    )


def chart_json(png: Path) -> str | None:
    """The chart data (JSON) of a saved figure, or None when it has no interactive view.

    Parameters
    ----------
    png : Path
        ``<run>/figures/<name>.png``; ``<name>`` must be a key of :data:`CHARTS` and the run
        folder must hold ``results.parquet``.

    Returns
    -------
    str or None
        ``{"panels": [ChartPanel fields ...]}``; cached per run folder state, so rendering the
        page twice (the gallery's size fitting) builds the figure once.
    """
    root = png.parent.parent
    results = root / "results.parquet"
    if png.stem not in CHARTS or png.parent.name != "figures" or not results.is_file():
        return None
    scores = root / "scores"
    stamp = (
        results.stat().st_mtime_ns,
        scores.stat().st_mtime_ns if scores.is_dir() else 0,
        png.stat().st_mtime_ns if png.is_file() else 0,
    )
    return _cached(str(png.resolve()), stamp)


def chart_html(data: str, key: str, title: str) -> str:
    """The chart's container (``id="chart-<key>"``): its data as a JSON script, drawn by the
    page's wiring."""
    safe = data.replace("</", "<\\/")
    esc = html.escape
    return (
        f'<div class="chart" id="chart-{esc(key, quote=True)}" role="img" '
        f'aria-label="{esc(title, quote=True)} (interactive)">'
        '<script type="application/json">' + safe + "</script></div>"
    )
