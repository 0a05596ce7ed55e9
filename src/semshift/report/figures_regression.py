"""The distance regression's report pieces (ImageNet-OOD Fig. 3 left, Appendix C / Fig. 10).

:func:`distance_regression_points` and :func:`distance_regression_fits` read the numbers behind
the figure off the tidy results; :func:`distance_regression_table` and
:func:`distance_verdict_table` are the tables, :func:`distance_regression_figure` the figure
(AUROC vs mean distance per equal-count subset, points and OLS line per side, one panel per
detector).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from semshift.report._load import ordered_unique
from semshift.report.figures import _panels, _suptitle
from semshift.report.tables._core import _EMPTY, Cell, Column, Table, _build, _lookup

__all__ = [
    "MAX_DETECTORS",
    "PROTOCOL",
    "distance_regression_figure",
    "distance_regression_fits",
    "distance_regression_points",
    "distance_regression_table",
    "distance_verdict_table",
]

PROTOCOL = "distance_regression"
_SIDES = ("covariate", "semantic")
_COLOURS = {"covariate": "#1f77b4", "semantic": "#d62728"}
#: Panels of the figure at most (the table lists every detector).
MAX_DETECTORS = 24


def _rows(results: pd.DataFrame) -> pd.DataFrame:
    return results[results["protocol"] == PROTOCOL]


def distance_regression_points(results: pd.DataFrame) -> pd.DataFrame:
    """One row per detector, side and subset: ``detector``, ``side``, ``set``, ``bin`` (1 =
    nearest), ``mean_distance``, ``auroc``; in results order, subsets by distance."""
    rows = _rows(results)
    rows = rows[rows["split"].isin(_SIDES) & rows["error"].isna()]
    level = np.where(rows["split"] == "covariate", rows["covariate_level"], rows["semantic_level"])
    frame = rows.assign(bin=level)
    frame = frame[frame["bin"].notna()]
    cols = ["detector", "split", "set", "bin"]
    wide = frame.pivot_table(index=cols, columns="metric", values="value", sort=False)
    if wide.empty or not {"auroc", "mean_distance"} <= set(wide.columns):
        return pd.DataFrame(columns=["detector", "side", "set", "bin", "mean_distance", "auroc"])
    out = wide.reset_index().rename(columns={"split": "side"})
    out["bin"] = out["bin"].astype(int)
    return out[["detector", "side", "set", "bin", "mean_distance", "auroc"]].reset_index(drop=True)


def distance_regression_fits(results: pd.DataFrame) -> pd.DataFrame:
    """One row per detector and side: ``slope``, ``intercept`` and their CIs (``*_low`` /
    ``*_high``), ``r2``."""
    rows = _rows(results)
    rows = rows[rows["split"].isin(_SIDES) & rows["error"].isna()]
    rows = rows[rows["metric"].isin(["slope", "intercept", "r2"])]
    out: list[dict[str, object]] = []
    for (det, side, name), g in rows.groupby(["detector", "split", "set"], sort=False):
        rec: dict[str, object] = {"detector": det, "side": side, "set": name}
        for r in g.itertuples(index=False):
            rec[str(r.metric)] = float(r.value)
            if r.metric != "r2":
                rec[f"{r.metric}_low"], rec[f"{r.metric}_high"] = float(r.ci_low), float(r.ci_high)
        out.append(rec)
    return pd.DataFrame(out)


def distance_regression_table(results: pd.DataFrame) -> Table:
    """Slope and intercept (with their CIs) and R² per detector and side."""
    rows = _rows(results)
    fit = rows[rows["split"].isin(_SIDES) & rows["covariate_level"].isna()
               & rows["semantic_level"].isna()]  # fmt: skip
    labels: list[str] = []
    keys: list[tuple[str, str]] = []
    for det in ordered_unique(fit["detector"]):
        for side in _SIDES:
            names = fit.loc[(fit["detector"] == det) & (fit["split"] == side), "set"]
            if len(names):
                labels.append(f"{det} / {side} ({names.iloc[0]})")
                keys.append((str(det), side))
    lookup = _lookup(fit, ("detector", "split", "metric"))
    errors = _lookup(fit[fit["metric"].isna()], ("detector", "split"))
    columns = [
        Column("Intercept", direction=None, kind="score"),
        Column("Slope", direction=None, kind="score"),
        Column("R²", direction=None, kind="r"),
    ]
    cells = [
        [errors.get(k) or lookup.get((*k, m), _EMPTY) for m in ("intercept", "slope", "r2")]
        for k in keys
    ]
    return _build(
        "distance_regression",
        "AUROC vs distance to the ID set: OLS per side (ImageNet-OOD Fig. 3)",
        "OLS of the AUROC (ID test vs each equal-count distance subset) on the subset's mean "
        "distance to the nearest ID image in the reference space; intercept and slope with "
        "their t-distribution CIs; AUROC as a fraction.",
        "Detector / side",
        labels,
        columns,
        cells,
    )


def distance_verdict_table(results: pd.DataFrame) -> Table:
    """Per detector: intercept and slope difference (covariate - semantic), and whether the
    two sides' CIs are disjoint (the paper's verdict)."""
    rows = _rows(results)
    v = rows[rows["split"] == "verdict"]
    dets = [str(d) for d in ordered_unique(v["detector"])]
    lookup = _lookup(v, ("detector", "metric"))
    specs = (
        ("intercept_difference", Column("Intercept Δ (cov − sem)", direction=None, kind="score")),
        ("intercepts_differ", Column("Intercept CIs disjoint", direction=None, kind="flag")),
        ("slope_difference", Column("Slope Δ (cov − sem)", direction=None, kind="score")),
        ("slopes_differ", Column("Slope CIs disjoint", direction=None, kind="flag")),
    )
    cells: list[list[Cell]] = [[lookup.get((d, m), _EMPTY) for m, _ in specs] for d in dets]
    sets = str(v["set"].iloc[0]) if len(v) else ""
    return _build(
        "distance_verdict",
        "Covariate vs semantic side at equal distance",
        f"{sets}: a positive intercept Δ with disjoint CIs means the detector separates the "
        "covariate-shift images from ID better than semantic-shift images at the same distance "
        "to the ID set (ImageNet-OOD's finding for Energy, ViM, ReAct; not MSP).",
        "Detector",
        dets,
        [c for _, c in specs],
        cells,
    )


def distance_regression_figure(
    results: pd.DataFrame, *, max_cols: int = 4, max_detectors: int = MAX_DETECTORS
) -> Figure | None:
    """AUROC vs mean distance per subset, points and OLS line per side, a panel per detector
    (the first ``max_detectors``; None without points)."""
    pts = distance_regression_points(results)
    if pts.empty:
        return None
    fits = distance_regression_fits(results)
    dets = [str(d) for d in ordered_unique(pts["detector"])][:max_detectors]
    ncols = min(max_cols, len(dets))
    nrows = math.ceil(len(dets) / ncols)
    # fixed margins: the constrained-layout solver costs seconds for dozens of panels
    fig, axes = _panels(nrows, ncols, (2.6, 2.0), left=0.7, bottom=0.95, top=0.6)
    span = float(pts["mean_distance"].max() - pts["mean_distance"].min()) or 1.0
    xlim = (pts["mean_distance"].min() - 0.03 * span, pts["mean_distance"].max() + 0.03 * span)
    for ax in axes.flat[len(dets) :]:
        ax.set_visible(False)
    for ax, det in zip(axes.flat, dets, strict=False):
        for side in _SIDES:
            p = pts[(pts["detector"] == det) & (pts["side"] == side)]
            if p.empty:
                continue
            colour = _COLOURS[side]
            ax.plot(p["mean_distance"], 100.0 * p["auroc"], "o", ms=2.5, color=colour, alpha=0.5,
                    label=f"{side}: {p['set'].iloc[0]}")  # fmt: skip
            f = fits[(fits["detector"] == det) & (fits["side"] == side)] if len(fits) else fits
            if len(f):
                r = f.iloc[0]
                x = np.array([p["mean_distance"].min(), p["mean_distance"].max()])
                ax.plot(x, 100.0 * (r["intercept"] + r["slope"] * x), color=colour, lw=1.2)
        ax.set_title(det, fontsize=9)
        ax.set_xlim(*xlim)  # the same axes in every panel (shared axes rescale quadratically)
        ax.set_ylim(-3.0, 103.0)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("mean distance to nearest ID image", fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel("AUROC x100", fontsize=8)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncols=2, fontsize=8, frameon=False)
    _suptitle(fig, "AUROC vs distance to the ID set, per equal-count subset")
    return fig
