"""Report figures (matplotlib, Agg): one :class:`matplotlib.figure.Figure` per function.

Figures are built as ``Figure`` objects, never through pyplot's global state, so they are safe
in threads and leave nothing open. Each function returns None when the run has nothing to
show. They stay readable at any detector count (tested at 50): detectors become panels of small
multiples (histograms, heatmaps, pages of 24) or rows (sanity, decomposition); line figures
colour MSP and the best and worst detectors over the others in grey
(:mod:`semshift.report.figure_style`), their legend under the panels. Every shift axis runs
from the smaller to the larger shift (left to right, bottom to top; SSB's splits hard < medium
< easy).

- :func:`level_curves_figure`: AUROC vs semantic shift (graded level means, or the OSR splits
  hard < medium < easy), MSP and the best / worst coloured;
- :func:`grid_heatmap_figures`: per-cell grid heatmaps with the values written in, N/A cells
  grey and hatched;
- :func:`score_histogram_figure`: ID test vs each OOD / covariate set, one panel per detector;
- :func:`oscr_figure`: CCR vs FPR per detector and split, computed from the scores
  (:func:`oscr_curve`), MSP and the best / worst coloured;
- :func:`decomposition_figure`: the AUROC decomposition, one row of three markers per detector;
- :func:`sanity_figure`: AUROC with CI per detector and set against the 0.5 +- delta band;
- :func:`search_sensitivity_figures`: a hyperparameter search's objective against each
  searched hyperparameter (the others at their chosen values), one panel per detector and
  hyperparameter.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.colors import Colormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.text import Text
from matplotlib.transforms import TransformedPatchPath
from numpy.typing import ArrayLike, NDArray

from semshift.errors import InputError
from semshift.report._load import RunData, level_sort_key, ordered_unique
from semshift.report.figure_style import (
    BASELINE_DETECTOR,
    GREY,
    HIGHLIGHT_COLORS,
    highlight_colors,
    pick_highlights,
    shift_order,
)
from semshift.report.tables import metric_direction, metric_label

__all__ = [
    "decomposition_figure",
    "detector_colors",
    "grid_heatmap_figures",
    "level_curves_figure",
    "oscr_curve",
    "oscr_figure",
    "sanity_figure",
    "score_histogram_figure",
    "search_sensitivity_figures",
]

#: Most panels in one small-multiples figure; more detectors continue on another figure.
MAX_PANELS = 24
_NA_GREY = "#d0d0d0"
_LINESTYLES = ("-", "--", "-.", ":")


def detector_colors(detectors: Sequence[str]) -> dict[str, tuple[str, tuple[float, ...]]]:
    """A (linestyle, colour) per detector: 20 distinct colours, then the next line style.

    tab20's strong colours come first, its light partners after, so that up to 10 detectors
    get clearly different colours.
    """
    cmap = colormaps["tab20"]
    order = [*range(0, 20, 2), *range(1, 20, 2)]
    out = {}
    for k, d in enumerate(detectors):
        out[d] = (_LINESTYLES[(k // 20) % len(_LINESTYLES)], tuple(cmap(order[k % 20])))
    return out


def _grid_shape(n: int, max_cols: int = 6) -> tuple[int, int]:
    cols = min(max_cols, max(1, n))
    return math.ceil(n / cols), cols


def _panels(
    nrows: int,
    ncols: int,
    panel: tuple[float, float],
    *,
    left: float = 0.6,
    right: float = 0.3,
    top: float = 0.55,
    bottom: float = 0.5,
    wspace: float = 0.25,
    hspace: float = 0.45,
    share: bool = False,
) -> tuple[Figure, NDArray[Any]]:
    """A figure of nrows x ncols panels of ``panel`` inches with fixed margins in inches.

    A fixed layout, not constrained layout: for 24 panels the layout solver costs seconds.
    """
    w = left + right + ncols * panel[0] * (1 + wspace) - panel[0] * wspace
    h = top + bottom + nrows * panel[1] * (1 + hspace) - panel[1] * hspace
    fig = Figure(figsize=(w, h))
    axes = fig.subplots(
        nrows,
        ncols,
        squeeze=False,
        gridspec_kw={
            "left": left / w,
            "right": 1 - right / w,
            "top": 1 - top / h,
            "bottom": bottom / h,
            "wspace": wspace,
            "hspace": hspace,
        },
        sharex=share,
        sharey=share,
    )
    return fig, axes


def _suptitle(fig: Figure, text: str, fontsize: float = 10.0) -> None:
    """The figure title, wrapped onto more lines where it is wider than the figure."""
    width = fig.get_size_inches()[0] - 0.2
    chars = max(20, int(width * 72.0 / (0.6 * fontsize)))
    wrapped = "\n".join(textwrap.wrap(text, chars))
    if fig.get_layout_engine() is not None:  # the layout engine places the title
        fig.suptitle(wrapped, fontsize=fontsize)
    else:  # fixed margins: hang it from the top edge, whatever the figure's height
        top = 1.0 - 0.08 / fig.get_size_inches()[1]
        fig.suptitle(wrapped, fontsize=fontsize, y=top, va="top")


def _panel_title(ax: Axes, text: str, width: float, fontsize: float = 8.5, **kw: Any) -> None:
    """A panel title that fits ``width`` inches: a smaller font, then shortened with "…"."""
    fit = width * 72.0 / (0.6 * max(len(text), 1))
    size = max(6.0, min(fontsize, fit))
    chars = int(width * 72.0 / (0.6 * size))
    if len(text) > chars:
        head = (chars - 1) // 2
        text = text[:head] + "…" + text[len(text) - (chars - 1 - head) :]
    ax.set_title(text, fontsize=size, pad=2, **kw)


def _ok(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["error"].isna() & np.isfinite(frame["value"].to_numpy(dtype=float))]


# ---------------------------------------------------------------------- highlighted lines
#: Up to this many detectors every line is coloured; beyond, only the highlighted few.
MAX_COLORED = 8


def line_plan(
    detectors: Sequence[str],
    summary: Mapping[str, float],
    direction: str,
    *,
    max_colored: int = MAX_COLORED,
    what: str = "mean",
) -> dict[str, tuple[str, str, str]]:
    """The coloured detectors of a line figure: detector -> (colour, legend label, line style).

    Up to ``max_colored`` detectors all are coloured and labelled by name; beyond, only the
    reference (MSP) and the two best and two worst by ``summary`` (:func:`pick_highlights`),
    labelled with their role and ``what`` value x100, the worst dashed. Detectors left out are
    drawn grey.
    """
    if len(detectors) <= max_colored:
        return {d: (c, d, "-") for d, c in highlight_colors(detectors).items()}
    roles = pick_highlights({d: summary.get(d, math.nan) for d in detectors}, direction)
    colors = highlight_colors(list(roles))
    return {
        d: (
            colors[d],
            f"{d} ({role}, {what} {100.0 * summary.get(d, math.nan):.1f})",
            "--" if role == "worst" else "-",
        )
        for d, role in roles.items()
    }


def _plot_line(
    ax: Axes,
    x: ArrayLike,
    y: ArrayLike,
    d: str,
    plan: Mapping[str, tuple[str, str, str]],
    **kw: Any,
) -> None:
    """One detector's line: coloured and labelled when in ``plan``, else thin grey, below."""
    if d in plan:
        color, label, style = plan[d]
        ax.plot(x, y, style, color=color, linewidth=1.6, zorder=3, label=label, **kw)
    else:
        kw.pop("marker", None)
        ax.plot(x, y, "-", color=GREY, linewidth=0.8, zorder=1, label=f"_{d}", **kw)


def _plan_legend(fig: Figure, plan: Mapping[str, tuple[str, str, str]], n_detectors: int) -> None:
    """A legend under the panels: the coloured detectors, then one grey entry for the rest."""
    handles = [
        Line2D([], [], color=c, linewidth=1.6, linestyle=ls)  # type: ignore[arg-type]
        for c, _, ls in plan.values()
    ]
    labels = [lbl for _, lbl, _ in plan.values()]
    rest = n_detectors - len(plan)
    if rest > 0:
        handles.append(Line2D([], [], color=GREY, linewidth=0.8))
        labels.append(f"{rest} other detector{'s' if rest > 1 else ''}")
    if handles:
        ncol = min(len(handles), 3 if max(map(len, labels)) > 18 else 4)
        fig.legend(handles, labels, loc="outside lower center", ncol=ncol, fontsize=7.5)


def _mean_by_detector(frames: Iterable[pd.DataFrame]) -> dict[str, float]:
    both = pd.concat([f[["detector", "value"]] for f in frames], ignore_index=True)
    means = both.groupby("detector", sort=False)["value"].mean()
    return {str(d): float(v) for d, v in means.items()}


# ---------------------------------------------------------------------- AUROC vs level
def level_curves_figure(
    results: pd.DataFrame, metric: str = "auroc", *, max_colored: int = MAX_COLORED
) -> Figure | None:
    """AUROC (``metric``) vs semantic shift, one line per detector, smaller shift on the left.

    Panels: the graded grid's semantic level means (``<metric>.level_mean``, level 1 first)
    and the OSR splits (hard < medium < easy: SSB's Hard bin is the smallest semantic shift),
    whichever are present. With more than ``max_colored`` detectors only MSP and the two best
    and two worst by their mean ``metric`` over the figure's points are coloured, the others
    grey (:func:`line_plan`). None when neither panel has data.
    """
    panels: list[tuple[str, pd.DataFrame, str]] = []
    graded = _ok(results[results["protocol"] == "graded"])
    lm = graded[
        (graded["metric"] == f"{metric}.level_mean")
        & graded["semantic_level"].notna()
        & graded["covariate_level"].isna()
        & graded["detector"].notna()
    ]
    if not lm.empty:
        panels.append(("Graded grid: mean over covariate levels", lm, "semantic_level"))
    osr = _ok(results[results["protocol"] == "osr"])
    osr = osr[(osr["metric"] == metric) & osr["detector"].notna()].copy()
    if not osr.empty:
        osr["_level"] = [
            s if s is not None else t for s, t in zip(osr["split"], osr["set"], strict=True)
        ]
        panels.append(("Open-set splits", osr, "_level"))
    if not panels:
        return None
    detectors = [str(d) for d in ordered_unique(d for _, f, _ in panels for d in f["detector"])]
    summary = _mean_by_detector(f for _, f, _ in panels)
    plan = line_plan(detectors, summary, metric_direction(metric), max_colored=max_colored)
    fig = Figure(figsize=(4.0 * len(panels) + 0.6, 4.2), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (title, frame, col) in zip(axes, panels, strict=True):
        levels = shift_order(frame[col])
        pos = {lvl: k for k, lvl in enumerate(levels)}
        by_det = {str(d): g for d, g in frame.groupby("detector", sort=False)}
        for d in sorted(detectors, key=lambda d: d in plan):  # grey first, coloured on top
            sub = by_det.get(d)
            if sub is None:
                continue
            pts = sorted(
                (pos[str(v)], float(y)) for v, y in zip(sub[col], sub["value"], strict=True)
            )
            x, y = [p[0] for p in pts], [100.0 * p[1] for p in pts]
            _plot_line(ax, x, y, d, plan, marker="o", markersize=3)
        ax.set_xticks(range(len(levels)), levels)
        ax.set_xlim(-0.25, len(levels) - 0.75)
        if col == "semantic_level":
            ax.set_xlabel("semantic level (smaller → larger shift)", fontsize=8)
        else:
            ax.set_xlabel("SSB split (hard = smallest shift)", fontsize=8)
        ax.set_ylabel(f"{metric_label(metric)} x100", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
    _plan_legend(fig, plan, len(detectors))
    _suptitle(fig, f"{metric_label(metric)} vs semantic shift (smaller → larger)", fontsize=10)
    return fig


# ---------------------------------------------------------------------- grid heatmaps
def grid_heatmap_figures(results: pd.DataFrame, metric: str = "auroc") -> list[Figure]:
    """Per-cell heatmaps of a grid metric, one panel per detector (pages of 24 panels).

    Rows = semantic level, columns = covariate level; cells without a value (N/A: fewer OOD
    samples than ``min_count``) are grey and hatched; a detector whose grid failed shows "err".
    """
    graded = results[results["protocol"] == "graded"]
    cells = graded[
        (graded["metric"] == metric)
        & graded["semantic_level"].notna()
        & graded["covariate_level"].notna()
    ]
    if cells.empty:
        return []
    sem = sorted((str(v) for v in ordered_unique(cells["semantic_level"])), key=level_sort_key)
    cov = sorted((str(v) for v in ordered_unique(cells["covariate_level"])), key=level_sort_key)
    si = {v: k for k, v in enumerate(sem)}
    ci = {v: k for k, v in enumerate(cov)}
    detectors = [str(d) for d in ordered_unique(graded["detector"])]
    grids: dict[str, NDArray[np.float64]] = {}
    for d in detectors:
        g = np.full((len(sem), len(cov)), np.nan)
        sub = _ok(cells[cells["detector"] == d])
        g[
            [si[str(v)] for v in sub["semantic_level"]],
            [ci[str(v)] for v in sub["covariate_level"]],
        ] = sub["value"].to_numpy(dtype=float)
        grids[d] = g
    finite = np.concatenate([g[np.isfinite(g)] for g in grids.values()] or [np.zeros(0)])
    vmin, vmax = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if vmax <= vmin:
        vmin, vmax = vmin - 0.01, vmax + 0.01
    name = "viridis" if metric_direction(metric) == "max" else "viridis_r"
    cmap = colormaps[name].with_extremes(bad=_NA_GREY)
    errs = graded["error"]
    bad = graded[errs.notna() & ~errs.fillna("").str.startswith("n/a")]
    failed = {str(d) for d in bad["detector"]}
    figures = []
    panel = (max(1.6, 0.36 * len(cov) + 0.2), max(1.4, 0.26 * len(sem) + 0.2))
    size = 7.5 if len(cov) <= 5 else 6.5
    for start in range(0, len(detectors), MAX_PANELS):
        page = detectors[start : start + MAX_PANELS]
        nrows, ncols = _grid_shape(len(page))
        # not shared axes: sharing costs a second per page; the inner tick labels are hidden
        fig, axes = _panels(nrows, ncols, panel, left=0.75, right=1.15, bottom=0.6)
        image = None
        for k, ax in enumerate(axes.flat):
            if k >= len(page):
                ax.set_axis_off()
                continue
            d = page[k]
            g = grids[d]
            image = ax.imshow(
                np.ma.masked_invalid(100.0 * g),
                cmap=cmap,
                vmin=100.0 * vmin,
                vmax=100.0 * vmax,
                origin="lower",
                aspect="auto",
                interpolation="nearest",
            )
            _annotate_cells(ax, g, (vmin, vmax), cmap, size)
            if not np.isfinite(g).any() and d in failed:
                ax.text(0.5, 0.5, "err", transform=ax.transAxes, ha="center", va="center")
            _panel_title(
                ax, d, panel[0] * 1.2, 9.0, fontweight="bold" if d == BASELINE_DETECTOR else None
            )
            ax.set_xticks(range(len(cov)), cov, fontsize=8)
            ax.set_yticks(range(len(sem)), sem, fontsize=8)
            bottom, first = k >= len(page) - ncols, k % ncols == 0
            ax.tick_params(length=2, pad=1, labelbottom=bottom, labelleft=first)
            if first:
                ax.set_ylabel("semantic level", fontsize=8)
            if bottom:
                ax.set_xlabel("covariate level", fontsize=8)
        if image is not None:
            w, h = fig.get_size_inches()
            cax = fig.add_axes((1 - 0.85 / w, 0.6 / h, 0.12 / w, 1 - 1.15 / h))
            cbar = fig.colorbar(image, cax=cax)
            cbar.set_label(f"{metric_label(metric)} x100", fontsize=8)
            cbar.ax.tick_params(labelsize=7.5)
        part = f" ({start // MAX_PANELS + 1})" if len(detectors) > MAX_PANELS else ""
        _suptitle(
            fig,
            f"{metric_label(metric)} x100 per grid cell{part}; grey hatched = N/A",
            fontsize=10,
        )
        figures.append(fig)
    return figures


def _annotate_cells(
    ax: Axes,
    g: NDArray[np.float64],
    limits: tuple[float, float],
    cmap: Colormap,
    size: float,
) -> None:
    """Write each cell's value x100 into a heatmap, black or white by the cell's lightness;
    hatch the cells without one (N/A)."""
    ii, jj = np.nonzero(np.isfinite(g))
    span = max(limits[1] - limits[0], 1e-12)
    rgb = cmap(np.clip((g[ii, jj] - limits[0]) / span, 0.0, 1.0))[:, :3].reshape(-1, 3)
    light = rgb @ np.array([0.299, 0.587, 0.114]) > 0.5
    clip = TransformedPatchPath(ax.patch)  # one clip path for all (Axes.text makes one each)
    for i, j, is_light in zip(ii, jj, light, strict=True):
        t = Text(
            float(j),
            float(i),
            f"{100.0 * float(g[i, j]):.0f}",
            ha="center",
            va="center",
            fontsize=size,
            color="black" if is_light else "white",
        )
        t.set_clip_path(clip)
        ax.add_artist(t)
    for i, j in zip(*np.nonzero(~np.isfinite(g)), strict=True):
        ax.add_patch(
            Rectangle(
                (j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///", edgecolor="#888888", linewidth=0
            )
        )


# ---------------------------------------------------------------------- histograms
def _score_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if c.startswith("score:")]


def score_histogram_figures(
    run: RunData, *, max_sets: int = 8, bins: int = 40, sets: Sequence[str] | None = None
) -> list[Figure]:
    """Normality-score histograms, one panel per detector: ID test (grey) vs each other set.

    Sets beyond ``max_sets`` are pooled by role into one curve ("other OOD (k sets)").
    Densities are normalised per set; non-finite scores are left out.
    """
    if "id_test" not in run.score_files:
        return []
    id_frame = run.read_scores("id_test")
    detectors = [c[len("score:") :] for c in _score_columns(id_frame)]
    if not detectors:
        return []
    names = [s for s in (sets if sets is not None else run.score_files) if s != "id_test"]
    curves: list[tuple[str, dict[str, NDArray[np.float64]]]] = []
    pooled: dict[str, list[pd.DataFrame]] = {}
    wanted = ["role", *(f"score:{d}" for d in detectors)]
    for k, name in enumerate(names):
        frame = run.read_scores(name, wanted)
        if k < max_sets:
            curves.append((name, {d: _col(frame, d) for d in detectors}))
        else:
            role = str(frame["role"].iloc[0]) if len(frame) and "role" in frame else "other"
            pooled.setdefault(role, []).append(frame)
    for role, frames in pooled.items():
        both = pd.concat(frames, ignore_index=True)
        curves.append((f"other {role} ({len(frames)} sets)", {d: _col(both, d) for d in detectors}))
    cmap = colormaps["tab10"]
    figures = []
    for start in range(0, len(detectors), MAX_PANELS):
        page = detectors[start : start + MAX_PANELS]
        nrows, ncols = _grid_shape(len(page))
        fig, axes = _panels(
            nrows, ncols, (1.9, 1.1), left=0.2, right=2.0, bottom=0.35, wspace=0.12, hspace=0.5
        )
        for k, ax in enumerate(axes.flat):
            if k >= len(page):
                ax.set_axis_off()
                continue
            d = page[k]
            id_s = _col(id_frame, d)
            every = [id_s, *(c[d] for _, c in curves)]
            parts = [v for v in every if v.size]  # a failed detector has no finite score
            finite = np.concatenate(parts) if parts else np.empty(0)
            if finite.size == 0:
                ax.text(0.5, 0.5, "no finite scores", transform=ax.transAxes, ha="center")
                _panel_title(ax, d, 1.9 * 1.1, fontsize=8.0)
                continue
            lo, hi = float(finite.min()), float(finite.max())
            if hi <= lo:
                lo, hi = lo - 0.5, hi + 0.5
            edges = np.linspace(lo, hi, bins + 1)
            if id_s.size:
                dens, _ = np.histogram(id_s, bins=edges, density=True)
                ax.stairs(dens, edges, fill=True, color="#bbbbbb", label="id_test")
            for c_k, (name, c) in enumerate(curves):
                if c[d].size:
                    dens, _ = np.histogram(c[d], bins=edges, density=True)
                    ax.stairs(dens, edges, color=cmap(c_k % 10), linewidth=1.0, label=name)
            _panel_title(ax, d, 1.9 * 1.1, fontsize=8.0)
            ax.tick_params(labelsize=7, length=2, pad=1)
            ax.set_yticks([])
        handles = [Patch(color="#bbbbbb", label="id_test")] + [
            Patch(edgecolor=cmap(k % 10), fill=False, label=name)
            for k, (name, _) in enumerate(curves)
        ]
        fig.legend(
            handles=handles,
            loc="upper right",
            bbox_to_anchor=(1.0, 1 - 0.5 / fig.get_size_inches()[1]),
            fontsize=7,
            frameon=False,
        )
        part = f" ({start // MAX_PANELS + 1})" if len(detectors) > MAX_PANELS else ""
        _suptitle(fig, f"Normality scores: ID test vs each set{part}", fontsize=10)
        figures.append(fig)
    return figures


def score_histogram_figure(run: RunData, **kwargs: object) -> Figure | None:
    """The first page of :func:`score_histogram_figures` (None when there are no scores)."""
    figs = score_histogram_figures(run, **kwargs)  # type: ignore[arg-type]
    return figs[0] if figs else None


def _col(frame: pd.DataFrame, detector: str) -> NDArray[np.float64]:
    name = f"score:{detector}"
    if name not in frame.columns:
        return np.zeros(0)
    v = frame[name].to_numpy(dtype=np.float64)
    return v[np.isfinite(v)]


# ---------------------------------------------------------------------- OSCR
def oscr_curve(
    scores: ArrayLike, is_ood: ArrayLike, correct: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The exact OSCR curve: (FPR, CCR) at every distinct threshold, from (0, 0).

    Accepting the samples with score >= t, CCR(t) = #{correct known, s >= t} / N_known and
    FPR(t) = #{unknown, s >= t} / N_unknown. Points are taken at every distinct score (tied
    samples enter together), so the trapezoid area under the curve equals the exact OSCR
    (:func:`semshift.metrics.oscr`, ties counted one half) and the last point is
    (1, closed-set accuracy).

    Parameters
    ----------
    scores : array_like of float, shape (n,)
        Normality scores, higher = more in-distribution; finite.
    is_ood : array_like of bool, shape (n,)
        True = unknown sample.
    correct : array_like of bool, shape (n,)
        True = known sample classified correctly (False for unknowns).

    Returns
    -------
    fpr, ccr : ndarray of float64, shape (m + 1,)
        m = number of distinct scores; both start at 0 and are non-decreasing.

    Raises
    ------
    InputError
        Lengths differ, scores are not finite, a class is empty, or ``correct`` marks an unknown.

    References
    ----------
    .. [1] Dhamija, Guenther & Boult, "Reducing Network Agnostophobia", NeurIPS 2018.

    Examples
    --------
    >>> fpr, ccr = oscr_curve([0.9, 0.8, 0.7, 0.2], [False, False, True, True],
    ...                       [True, False, False, False])
    >>> fpr.tolist(), ccr.tolist()
    ([0.0, 0.0, 0.0, 0.5, 1.0], [0.0, 0.5, 0.5, 0.5, 0.5])
    """
    s = np.asarray(scores, dtype=np.float64).ravel()
    m = np.asarray(is_ood, dtype=bool).ravel()
    c = np.asarray(correct, dtype=bool).ravel()
    if not (s.size == m.size == c.size):
        raise InputError(
            f"oscr_curve: scores, is_ood and correct must have one length, got "
            f"{s.size}, {m.size}, {c.size}"
        )
    bad = np.flatnonzero(~np.isfinite(s))
    if bad.size:
        raise InputError(f"oscr_curve: {bad.size} non-finite score(s), first at index {bad[0]}")
    n_unknown = int(m.sum())
    n_known = s.size - n_unknown
    if n_known == 0 or n_unknown == 0:
        raise InputError(
            f"oscr_curve: needs known and unknown samples, got {n_known} known, {n_unknown} unknown"
        )
    if (c & m).any():
        raise InputError(
            f"oscr_curve: correct is True for an unknown sample (index "
            f"{int(np.flatnonzero(c & m)[0])}); it must mark correctly classified knowns"
        )
    order = np.argsort(-s, kind="stable")
    ss = s[order]
    ends = np.r_[np.flatnonzero(ss[1:] != ss[:-1]), ss.size - 1]
    ccr = np.r_[0.0, np.cumsum(c[order])[ends] / n_known]
    fpr = np.r_[0.0, np.cumsum(m[order])[ends] / n_unknown]
    return fpr, ccr


def _thin(
    x: NDArray[np.float64], y: NDArray[np.float64], n: int = 400
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """At most about ``n`` points of a curve for drawing, first and last kept."""
    if x.size <= n:
        return x, y
    idx = np.unique(np.r_[np.linspace(0, x.size - 1, n).astype(np.int64), x.size - 1])
    return x[idx], y[idx]


def oscr_splits(results: pd.DataFrame) -> dict[str, list[str]]:
    """OSR split -> the OOD set names pooled in it (from the ``set`` column, joined by ``+``)."""
    osr = results[(results["protocol"] == "osr") & results["detector"].notna()]
    out: dict[str, list[str]] = {}
    for split, set_name in zip(osr["split"], osr["set"], strict=True):
        if set_name is None:
            continue
        label = str(split if split is not None else set_name)
        for name in str(set_name).split("+"):
            if name not in out.setdefault(label, []):
                out[label].append(name)
    return {k: out[k] for k in sorted(out, key=level_sort_key)}


def oscr_figure(run: RunData, *, max_colored: int = MAX_COLORED) -> Figure | None:
    """OSCR curves (CCR vs FPR) per detector, one panel per OSR split, from ``scores/``.

    Known correct = ``label == pred`` on id_test; unknowns = the OOD sets of the split. Panels
    run from the smallest to the largest semantic shift (hard < medium < easy). A detector with
    non-finite scores on a split is left out of that panel (its error is in the tables). With
    more than ``max_colored`` detectors only MSP and the two best and two worst by their mean
    area under the OSCR curve are coloured, the others grey (:func:`line_plan`).
    """
    splits = oscr_splits(run.results)
    if not splits or "id_test" not in run.score_files:
        return None
    splits = {k: [n for n in v if n in run.score_files] for k, v in splits.items()}
    splits = {k: splits[k] for k in shift_order(splits) if splits[k]}
    if not splits:
        return None
    id_frame = run.read_scores("id_test")
    detectors = [c[len("score:") :] for c in _score_columns(id_frame)]
    correct_id = id_frame["label"].to_numpy() == id_frame["pred"].to_numpy()
    curves: dict[str, dict[str, tuple[NDArray[np.float64], NDArray[np.float64]]]] = {}
    areas: dict[str, list[float]] = {}
    for split, names in splits.items():
        wanted = [f"score:{d}" for d in detectors]
        ood = pd.concat([run.read_scores(n, wanted) for n in names], ignore_index=True)
        curves[split] = {}
        for d in detectors:
            col = f"score:{d}"
            if col not in ood.columns:
                continue
            s = np.r_[id_frame[col].to_numpy(dtype=np.float64), ood[col].to_numpy(dtype=np.float64)]
            if not np.isfinite(s).all():
                continue
            m = np.r_[np.zeros(len(id_frame), bool), np.ones(len(ood), bool)]
            c = np.r_[correct_id, np.zeros(len(ood), bool)]
            fpr, ccr = oscr_curve(s, m, c)
            areas.setdefault(d, []).append(float(np.sum(np.diff(fpr) * (ccr[1:] + ccr[:-1]) / 2)))
            curves[split][d] = _thin(fpr, ccr)
    summary = {d: float(np.mean(v)) for d, v in areas.items()}
    plan = line_plan(detectors, summary, "max", max_colored=max_colored, what="OSCR")
    nrows, ncols = _grid_shape(len(splits), max_cols=3)
    fig = Figure(figsize=(3.4 * ncols + 0.6, 3.2 * nrows + 1.2), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for k, ax in enumerate(axes.flat):
        if k >= len(splits):
            ax.set_axis_off()
            continue
        split, names = list(splits.items())[k]
        for d in sorted(curves[split], key=lambda d: d in plan):  # grey first, coloured on top
            _plot_line(ax, *curves[split][d], d, plan)
        ax.set_xlim(0, 1.01)
        ax.set_ylim(0, 1.02)  # a curve at CCR = 1 stays visible
        ax.set_xlabel("FPR (unknowns accepted)", fontsize=8)
        ax.set_ylabel("CCR", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.set_title(f"{split}: {'+'.join(names)}", fontsize=9)
        ax.grid(alpha=0.3)
    _plan_legend(fig, plan, len(detectors))
    _suptitle(
        fig,
        "OSCR curves, smaller → larger semantic shift (endpoint = closed-set accuracy)",
        fontsize=10,
    )
    return fig


# ---------------------------------------------------------------------- decomposition
_DECOMP_BARS = (
    ("auroc", "ID vs OOD"),
    ("auroc_correct", "correct ID vs OOD"),
    ("auroc_incorrect", "incorrect ID vs OOD"),
)


def decomposition_figure(results: pd.DataFrame) -> Figure | None:
    """Per detector (one row each, best ID-vs-OOD AUROC first): the AUROC of all ID, correct ID
    and incorrect ID test samples vs OOD as three markers joined by a grey span; MSP's label is
    bold. The legend sits under the axes, clear of the title."""
    rows = _ok(results[(results["protocol"] == "decomposition") & results["detector"].notna()])
    if rows.empty:
        return None
    value = {(str(r.detector), str(r.metric)): float(r.value) for r in rows.itertuples()}
    detectors = [str(d) for d in ordered_unique(rows["detector"])]
    first = {d: value.get((d, "auroc"), math.nan) for d in detectors}
    detectors.sort(key=lambda d: -first[d] if math.isfinite(first[d]) else math.inf)
    n = len(detectors)
    fig = Figure(figsize=(6.4, 0.2 * n + 1.6), layout="constrained")
    ax = fig.subplots()
    y = np.arange(n)
    vals = np.array([[value.get((d, m), np.nan) for m, _ in _DECOMP_BARS] for d in detectors])
    with np.errstate(all="ignore"):
        lo, hi = np.nanmin(vals, axis=1), np.nanmax(vals, axis=1)
    ax.hlines(y, 100.0 * lo, 100.0 * hi, color=GREY, linewidth=2.0, zorder=1)
    markers = ("o", "^", "v")
    for k, (_metric, label) in enumerate(_DECOMP_BARS):
        ax.plot(
            100.0 * vals[:, k],
            y,
            markers[k],
            color=HIGHLIGHT_COLORS[k],
            markersize=4.5,
            linestyle="none",
            zorder=3,
            label=label,
        )
    ax.set_yticks(y, detectors, fontsize=7.5)
    for lbl in ax.get_yticklabels():
        if lbl.get_text() == BASELINE_DETECTOR:
            lbl.set_fontweight("bold")
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xlabel("AUROC x100", fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    ax.set_xlim(0, 100)
    ax.axvline(50, color="#888888", linewidth=0.8, linestyle=":")
    ax.grid(axis="x", alpha=0.3)
    ax.grid(axis="y", alpha=0.15)
    fig.legend(loc="outside lower center", ncol=3, fontsize=7.5)
    _suptitle(fig, "AUROC decomposition (ImageNet-OOD eq. 2), best detector first", fontsize=10)
    return fig


# ---------------------------------------------------------------------- sanity
def sanity_figure(results: pd.DataFrame, delta: float = 0.05) -> Figure | None:
    """AUROC with CI per detector, one panel per set, one marker per random model (seed).

    Panels follow :func:`~semshift.report.figure_style.shift_order` (SSB splits hard < medium
    < easy); the seeds' legend sits under the panels.

    The grey band is 0.5 +- ``delta``; detectors the runner flagged have red labels.
    """
    rows = results[(results["protocol"] == "sanity") & results["detector"].notna()]
    au = _ok(rows[rows["metric"] == "auroc"])
    if au.empty:
        return None
    detectors = [str(d) for d in ordered_unique(rows["detector"])]
    sets = shift_order(au["set"])
    seeds = sorted((str(s) for s in ordered_unique(au["split"])), key=level_sort_key)
    flag_rows = _ok(rows[rows["metric"] == "flagged"])
    flagged = {
        str(d) for d, v in zip(flag_rows["detector"], flag_rows["value"], strict=True) if v >= 0.5
    }
    n = len(detectors)
    ncols = min(len(sets), 4)
    nrows = math.ceil(len(sets) / ncols)
    fig = Figure(figsize=(2.6 * ncols + 1.4, (0.22 * n + 1.2) * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    cmap = colormaps["tab10"]
    ypos = {d: k for k, d in enumerate(detectors)}
    for k, ax in enumerate(axes.flat):
        if k >= len(sets):
            ax.set_axis_off()
            continue
        s = sets[k]
        ax.axvspan(0.5 - delta, 0.5 + delta, color="#e6e6e6", zorder=0)
        ax.axvline(0.5, color="#888888", linewidth=0.8)
        sub = au[au["set"] == s]
        for j, seed in enumerate(seeds):
            ss = sub[sub["split"] == seed]
            if ss.empty:
                continue
            off = (j - (len(seeds) - 1) / 2) * min(0.15, 0.6 / max(len(seeds), 1))
            y = np.array([ypos[str(d)] for d in ss["detector"]]) + off
            x = ss["value"].to_numpy(dtype=float)
            lo = ss["ci_low"].to_numpy(dtype=float)
            hi = ss["ci_high"].to_numpy(dtype=float)
            has = np.isfinite(lo) & np.isfinite(hi)
            # a percentile interval need not contain the point value (few resamples): the bar
            # is drawn from the value to each bound, never a negative length
            err = np.vstack([np.where(has, np.maximum(x - lo, 0.0), 0.0),
                             np.where(has, np.maximum(hi - x, 0.0), 0.0)])  # fmt: skip
            ax.errorbar(
                x,
                y,
                xerr=err,
                fmt="o",
                markersize=3,
                color=cmap(j % 10),
                linewidth=0.9,
                capsize=0,
                label=seed,
            )
        ax.set_xlim(0, 1)
        ax.set_ylim(n - 0.5, -0.5)
        ax.set_yticks(range(n), detectors if k % ncols == 0 else [""] * n, fontsize=7)
        if k % ncols == 0:
            for lbl in ax.get_yticklabels():
                if lbl.get_text() in flagged:
                    lbl.set_color("#c00000")
        ax.set_title(s, fontsize=9)
        ax.set_xlabel("AUROC")
        ax.grid(axis="x", alpha=0.3)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if handles:
        fig.legend(
            handles, labels, loc="outside lower center", ncol=min(len(handles), 6), fontsize=7.5
        )
    _suptitle(
        fig,
        f"Random-model sanity check: AUROC with CI; band 0.5 ± {delta:g}; red = flagged",
        fontsize=10,
    )
    return fig


# ---------------------------------------------------------------------- hyperparameter search
def search_sensitivity_figures(sensitivity: pd.DataFrame) -> list[Figure]:
    """Objective vs candidate, one panel per searched (detector, hyperparameter).

    ``sensitivity`` is a run's ``search_sensitivity.csv``
    (:func:`semshift.protocols.search.sensitivity_frame`): per panel the candidates in the
    order tried, the other hyperparameters at their chosen values (named under the title).
    The chosen candidate is the red dot; a candidate that failed (its fit or score raised on
    the validation data) is a grey cross at the bottom. Empty list when there is nothing.
    """
    if sensitivity is None or sensitivity.empty:
        return []
    pairs = zip(sensitivity["detector"], sensitivity["parameter"], strict=True)
    keys = list(dict.fromkeys(pairs))
    objective = str(sensitivity["objective"].iloc[0])
    figures = []
    for start in range(0, len(keys), MAX_PANELS):
        page = keys[start : start + MAX_PANELS]
        nrows, ncols = _grid_shape(len(page), max_cols=4)
        fig, axes = _panels(nrows, ncols, (2.3, 1.4), left=0.6, bottom=0.6, hspace=0.9)
        for k, ax in enumerate(axes.flat):
            if k >= len(page):
                ax.set_axis_off()
                continue
            det, param = page[k]
            part = sensitivity[
                (sensitivity["detector"] == det) & (sensitivity["parameter"] == param)
            ]
            x = np.arange(len(part))
            y = part["value"].to_numpy(dtype=float)
            ok = np.isfinite(y)
            ax.plot(x[ok], y[ok], "-o", color="#1f77b4", markersize=3, linewidth=1.0)
            chosen = part["chosen"].to_numpy(dtype=bool) & ok
            ax.plot(x[chosen], y[chosen], "o", color="#c00000", markersize=6, zorder=3)
            if ok.any():
                lo, hi = float(y[ok].min()), float(y[ok].max())
                pad = max(hi - lo, 1e-3) * 0.15
                ax.set_ylim(lo - 2 * pad, hi + pad)
                if (~ok).any():
                    at = np.full(int((~ok).sum()), lo - 1.5 * pad)
                    ax.plot(x[~ok], at, "x", color="#888888", markersize=5)
            labels = [str(c) for c in part["candidate"]]
            ax.set_xticks(x, labels, fontsize=6, rotation=45 if len(labels) > 5 else 0)
            ax.tick_params(axis="y", labelsize=6, length=2, pad=1)
            others = str(part["others"].iloc[0]) if len(part) else ""
            title = f"{det}: {param}" + (f"\n{others}" if others and others != "nan" else "")
            ax.set_title(title, fontsize=7, pad=2)
            if k % ncols == 0:
                ax.set_ylabel(metric_label(objective), fontsize=7)
        _suptitle(
            fig,
            f"Hyperparameter sensitivity on validation data ({metric_label(objective)})",
            fontsize=10,
        )
        figures.append(fig)
    return figures
