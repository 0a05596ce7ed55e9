"""The graded grid's level curves along both shift axes (IS-OOD Figs. 6, 13, 17).

IS-OOD draws, per metric, the mean over covariate levels at each semantic level and the mean
over semantic levels at each covariate level, one curve per detector. The graded protocol writes
both as ``<metric>.level_mean`` rows (``split`` = the axis); :func:`axis_level_means` reads them
and :func:`axis_level_curves_figure` draws one panel per axis, smaller shift on the left.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from semshift.report._load import ordered_unique
from semshift.report.figure_style import shift_order
from semshift.report.figures import (
    MAX_COLORED,
    _mean_by_detector,
    _ok,
    _plan_legend,
    _plot_line,
    line_plan,
)
from semshift.report.tables import metric_direction, metric_label

__all__ = ["AXES", "axis_level_curves_figure", "axis_level_means"]

#: The two shift axes, in panel order.
AXES = ("semantic", "covariate")


def axis_level_means(results: pd.DataFrame, metric: str = "auroc") -> pd.DataFrame:
    """The level means of ``metric`` on each axis: columns ``axis``, ``level``, ``detector``,
    ``value``; per axis its levels from the smaller shift to the larger (:func:`shift_order`),
    detectors in results order. Failed and N/A level means are left out."""
    graded = _ok(results[results["protocol"] == "graded"])
    graded = graded[(graded["metric"] == f"{metric}.level_mean") & graded["detector"].notna()]
    parts = []
    for axis in AXES:
        other = "covariate" if axis == "semantic" else "semantic"
        rows = graded[graded[f"{axis}_level"].notna() & graded[f"{other}_level"].isna()]
        if rows.empty:
            continue
        order = {lvl: k for k, lvl in enumerate(shift_order(rows[f"{axis}_level"]))}
        dets = {d: k for k, d in enumerate(ordered_unique(rows["detector"]))}
        frame = pd.DataFrame(
            {
                "axis": axis,
                "level": rows[f"{axis}_level"].astype(str).to_numpy(),
                "detector": rows["detector"].astype(str).to_numpy(),
                "value": rows["value"].to_numpy(dtype=float),
            }
        )
        frame["_d"], frame["_l"] = frame["detector"].map(dets), frame["level"].map(order)
        parts.append(frame.sort_values(["_d", "_l"], kind="stable").drop(columns=["_d", "_l"]))
    if not parts:
        return pd.DataFrame(columns=["axis", "level", "detector", "value"])
    return pd.concat(parts, ignore_index=True)


def axis_level_curves_figure(
    results: pd.DataFrame, metric: str = "auroc", *, max_colored: int = MAX_COLORED
) -> Figure | None:
    """``metric`` vs semantic level and vs covariate level (level means), one line per detector,
    a panel per axis; None when the grid has no level means for ``metric``."""
    means = axis_level_means(results, metric)
    if means.empty:
        return None
    axes_present = [a for a in AXES if (means["axis"] == a).any()]
    detectors = [str(d) for d in ordered_unique(means["detector"])]
    summary = _mean_by_detector([means])
    plan = line_plan(detectors, summary, metric_direction(metric), max_colored=max_colored)
    fig = Figure(figsize=(4.0 * len(axes_present) + 0.6, 4.2), layout="constrained")
    panels = fig.subplots(1, len(axes_present), squeeze=False)[0]
    label = metric_label(metric)
    for ax, axis in zip(panels, axes_present, strict=True):
        frame = means[means["axis"] == axis]
        levels = shift_order(frame["level"])
        pos = {lvl: k for k, lvl in enumerate(levels)}
        for d in sorted(detectors, key=lambda d: d in plan):  # grey first, coloured on top
            sub = frame[frame["detector"] == d]
            if sub.empty:
                continue
            x = [pos[v] for v in sub["level"]]
            _plot_line(ax, x, 100.0 * sub["value"].to_numpy(), d, plan, marker="o", markersize=3)
        ax.set_xticks(range(len(levels)), levels)
        ax.set_xlim(-0.25, len(levels) - 0.75)
        ax.set_xlabel(f"{axis} level (smaller → larger shift)", fontsize=8)
        ax.set_ylabel(f"{label} x100", fontsize=8)
        ax.tick_params(labelsize=8)
        other = "covariate" if axis == "semantic" else "semantic"
        ax.set_title(f"{axis.capitalize()} shift: mean over {other} levels", fontsize=9)
        ax.grid(alpha=0.3)
    _plan_legend(fig, plan, len(detectors))
    fig.suptitle(f"{label} along each shift axis (IS-OOD)", fontsize=10)
    return fig
