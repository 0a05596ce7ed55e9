"""Report figures (matplotlib, Agg): one :class:`matplotlib.figure.Figure` per function.

Figures are built as ``Figure`` objects, never through pyplot's global state, so they are safe
in threads and leave nothing open. Each function returns None when the run has nothing to
show. Sizes are chosen for up to 24-26 detectors and 64 grid cells: detectors become panels of
small multiples (histograms, heatmaps) or rows (sanity, decomposition), never one crowded plot.

- :func:`level_curves_figure`: AUROC vs semantic level per detector (graded level means, or the
  OSR splits in the order easy < medium < hard);
- :func:`grid_heatmap_figures`: per-cell grid heatmaps, N/A cells grey and hatched;
- :func:`score_histogram_figure`: ID test vs each OOD / covariate set, one panel per detector;
- :func:`oscr_figure`: CCR vs FPR per detector and split, computed from the scores
  (:func:`oscr_curve`);
- :func:`decomposition_figure`: the AUROC decomposition as grouped bars;
- :func:`sanity_figure`: AUROC with CI per detector and set against the 0.5 +- delta band;
- :func:`search_sensitivity_figures`: a hyperparameter search's objective against each
  searched hyperparameter (the others at their chosen values), one panel per detector and
  hyperparameter.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from numpy.typing import ArrayLike, NDArray

from semshift.errors import InputError
from semshift.report._load import RunData, level_sort_key, ordered_unique
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


def _legend(fig: Figure, ax: Axes, n: int) -> None:
    """Legend right of ``ax`` with every labelled line of the figure (once per label)."""
    if n == 0:
        return
    handles: dict[str, Any] = {}
    for a in fig.axes:
        for line in a.get_lines():
            label = str(line.get_label())
            if not label.startswith("_"):
                handles.setdefault(label, line)
    ax.legend(
        list(handles.values()),
        list(handles),
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        fontsize=7,
        ncol=1 if n <= 14 else 2,
        frameon=False,
    )


def _ok(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["error"].isna() & np.isfinite(frame["value"].to_numpy(dtype=float))]


# ---------------------------------------------------------------------- AUROC vs level
def level_curves_figure(results: pd.DataFrame, metric: str = "auroc") -> Figure | None:
    """AUROC (``metric``) vs semantic level, one line per detector.

    Panels: the graded grid's semantic level means (``<metric>.level_mean``) and the OSR splits
    (easy < medium < hard), whichever are present. None when neither is.
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
    detectors = ordered_unique(d for _, f, _ in panels for d in f["detector"])
    style = detector_colors(detectors)
    fig = Figure(figsize=(4.2 * len(panels) + 1.8, 3.4), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (title, frame, col) in zip(axes, panels, strict=True):
        levels = sorted((str(v) for v in ordered_unique(frame[col])), key=level_sort_key)
        pos = {lvl: k for k, lvl in enumerate(levels)}
        for d in detectors:
            sub = frame[frame["detector"] == d]
            if sub.empty:
                continue
            pts = sorted(
                (pos[str(v)], float(y)) for v, y in zip(sub[col], sub["value"], strict=True)
            )
            ls, color = style[d]
            ax.plot(
                [p[0] for p in pts],
                [100.0 * p[1] for p in pts],
                ls,
                color=color,
                marker="o",
                markersize=3,
                linewidth=1.2,
                label=d,
            )
        ax.set_xticks(range(len(levels)), levels)
        ax.set_xlabel("semantic level" if col == "semantic_level" else "split")
        ax.set_ylabel(f"{metric_label(metric)} x100")
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
    _legend(fig, axes[-1], len(detectors))
    fig.suptitle(f"{metric_label(metric)} vs semantic shift level", fontsize=10)
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
    figures = []
    for start in range(0, len(detectors), MAX_PANELS):
        page = detectors[start : start + MAX_PANELS]
        nrows, ncols = _grid_shape(len(page))
        fig, axes = _panels(nrows, ncols, (1.5, 1.5), left=0.7, right=1.1, share=True)
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
            for i, j in zip(*np.nonzero(~np.isfinite(g)), strict=True):
                ax.add_patch(
                    Rectangle(
                        (j - 0.5, i - 0.5),
                        1,
                        1,
                        fill=False,
                        hatch="///",
                        edgecolor="#888888",
                        linewidth=0,
                    )
                )
            errs = graded["error"]
            failed = graded[
                (graded["detector"] == d) & errs.notna() & ~errs.fillna("").str.startswith("n/a")
            ]
            if not np.isfinite(g).any() and not failed.empty:
                ax.text(0.5, 0.5, "err", transform=ax.transAxes, ha="center", va="center")
            ax.set_title(d, fontsize=8, pad=2)
            ax.set_xticks(range(len(cov)), cov, fontsize=6)
            ax.set_yticks(range(len(sem)), sem, fontsize=6)
            ax.tick_params(length=2, pad=1)
            if k % ncols == 0:
                ax.set_ylabel("semantic", fontsize=7)
            if k >= len(page) - ncols:
                ax.set_xlabel("covariate", fontsize=7)
                ax.xaxis.set_tick_params(labelbottom=True)
        if image is not None:
            w, h = fig.get_size_inches()
            cax = fig.add_axes((1 - 0.85 / w, 0.5 / h, 0.12 / w, 1 - 1.05 / h))
            cbar = fig.colorbar(image, cax=cax)
            cbar.set_label(f"{metric_label(metric)} x100", fontsize=8)
            cbar.ax.tick_params(labelsize=7)
        part = f" ({start // MAX_PANELS + 1})" if len(detectors) > MAX_PANELS else ""
        fig.suptitle(f"{metric_label(metric)} per grid cell{part}; grey hatched = N/A", fontsize=10)
        figures.append(fig)
    return figures


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
                ax.set_title(d, fontsize=8)
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
            ax.set_title(d, fontsize=8, pad=2)
            ax.tick_params(labelsize=6, length=2, pad=1)
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
        fig.suptitle(f"Normality scores: ID test vs each set{part}", fontsize=10)
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


def oscr_figure(run: RunData) -> Figure | None:
    """OSCR curves (CCR vs FPR) per detector, one panel per OSR split, from ``scores/``.

    Known correct = ``label == pred`` on id_test; unknowns = the OOD sets of the split. A
    detector with non-finite scores on a split is left out of that panel (its error is in the
    tables).
    """
    splits = oscr_splits(run.results)
    if not splits or "id_test" not in run.score_files:
        return None
    splits = {k: [n for n in v if n in run.score_files] for k, v in splits.items()}
    splits = {k: v for k, v in splits.items() if v}
    if not splits:
        return None
    id_frame = run.read_scores("id_test")
    detectors = [c[len("score:") :] for c in _score_columns(id_frame)]
    correct_id = id_frame["label"].to_numpy() == id_frame["pred"].to_numpy()
    style = detector_colors(detectors)
    nrows, ncols = _grid_shape(len(splits), max_cols=3)
    fig = Figure(figsize=(3.6 * ncols + 1.8, 3.3 * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for k, ax in enumerate(axes.flat):
        if k >= len(splits):
            ax.set_axis_off()
            continue
        split, names = list(splits.items())[k]
        wanted = [f"score:{d}" for d in detectors]
        ood = pd.concat([run.read_scores(n, wanted) for n in names], ignore_index=True)
        for d in detectors:
            col = f"score:{d}"
            if col not in ood.columns:
                continue
            s = np.r_[id_frame[col].to_numpy(dtype=np.float64), ood[col].to_numpy(dtype=np.float64)]
            if not np.isfinite(s).all():
                continue
            m = np.r_[np.zeros(len(id_frame), bool), np.ones(len(ood), bool)]
            c = np.r_[correct_id, np.zeros(len(ood), bool)]
            fpr, ccr = _thin(*oscr_curve(s, m, c))
            ls, color = style[d]
            ax.plot(fpr, ccr, ls, color=color, linewidth=1.1, label=d)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("FPR (unknowns accepted)")
        ax.set_ylabel("CCR")
        ax.set_title(f"{split}: {'+'.join(names)}", fontsize=9)
        ax.grid(alpha=0.3)
    _legend(fig, axes.flat[min(len(splits), ncols) - 1], len(detectors))
    fig.suptitle("OSCR curves (endpoint = closed-set accuracy)", fontsize=10)
    return fig


# ---------------------------------------------------------------------- decomposition
_DECOMP_BARS = (
    ("auroc", "ID vs OOD"),
    ("auroc_correct", "correct ID vs OOD"),
    ("auroc_incorrect", "incorrect ID vs OOD"),
)


def decomposition_figure(results: pd.DataFrame) -> Figure | None:
    """Grouped horizontal bars per detector: AUROC of ID, correct ID and incorrect ID vs OOD."""
    rows = _ok(results[(results["protocol"] == "decomposition") & results["detector"].notna()])
    if rows.empty:
        return None
    detectors = [str(d) for d in ordered_unique(rows["detector"])]
    value = {(str(r.detector), str(r.metric)): float(r.value) for r in rows.itertuples()}
    n = len(detectors)
    fig = Figure(figsize=(6.8, 0.32 * n * 1.0 + 1.4), layout="constrained")
    ax = fig.subplots()
    h = 0.8 / len(_DECOMP_BARS)
    cmap = colormaps["tab10"]
    y = np.arange(n)
    for k, (metric, label) in enumerate(_DECOMP_BARS):
        vals = np.array([value.get((d, metric), np.nan) for d in detectors])
        ax.barh(y - 0.4 + h * (k + 0.5), 100.0 * vals, height=h, color=cmap(k), label=label)
    ax.set_yticks(y, detectors, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("AUROC x100")
    ax.set_xlim(0, 100)
    ax.axvline(50, color="#888888", linewidth=0.8, linestyle=":")
    fig.legend(loc="outside upper center", ncol=3, fontsize=7, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    fig.suptitle("AUROC decomposition (ImageNet-OOD eq. 2)", fontsize=10)
    return fig


# ---------------------------------------------------------------------- sanity
def sanity_figure(results: pd.DataFrame, delta: float = 0.05) -> Figure | None:
    """AUROC with CI per detector, one panel per set, one marker per random model (seed).

    The grey band is 0.5 +- ``delta``; detectors the runner flagged have red labels.
    """
    rows = results[(results["protocol"] == "sanity") & results["detector"].notna()]
    au = _ok(rows[rows["metric"] == "auroc"])
    if au.empty:
        return None
    detectors = [str(d) for d in ordered_unique(rows["detector"])]
    sets = sorted((str(s) for s in ordered_unique(au["set"])), key=level_sort_key)
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
            err = np.vstack([np.where(has, x - lo, 0.0), np.where(has, hi - x, 0.0)])
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
    axes.flat[0].legend(fontsize=7, loc="lower left", frameon=False)
    fig.suptitle(
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
        fig.suptitle(
            f"Hyperparameter sensitivity on validation data ({metric_label(objective)})",
            fontsize=10,
        )
        figures.append(fig)
    return figures
