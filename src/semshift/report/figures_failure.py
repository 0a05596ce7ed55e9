"""Correct / incorrect views of the scores (ImageNet-OOD Fig. 5 and Appendix B, Figs. 6-9).

- :func:`rank_percentiles` and :func:`failure_rank_groups`: each image's rank percentile
  within the pooled ID test + OOD images (0 = lowest score, the most OOD-looking; 100 = the
  highest), split into correctly classified ID, misclassified ID and OOD (semantic shift);
  :func:`failure_rank_figure` draws their distributions per detector (Fig. 5);
- :func:`score_groups` and :func:`group_histograms`: score histograms of ID and covariate-shift
  images split by correct / incorrect classification, beside the semantic-shift pool
  (Figs. 6-9); :func:`correct_incorrect_histogram_figure` draws them.

The ``*_figure`` functions read the run's ``scores/<set>.parquet`` tables (:class:`RunData`);
the other functions are the numbers behind them, on plain arrays.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from numpy.typing import ArrayLike, NDArray
from scipy.stats import rankdata

from semshift.errors import InputError
from semshift.report._load import RunData
from semshift.report.figures import _panels, _suptitle

__all__ = [
    "GROUPS",
    "correct_incorrect_histogram_figure",
    "failure_rank_figure",
    "failure_rank_groups",
    "group_histograms",
    "rank_percentiles",
    "score_groups",
]

#: The three groups of Fig. 5, in drawing order.
GROUPS = ("correct ID", "incorrect ID", "OOD")
#: Panels per page at most (the rest of the detectors are left out, and the caption says so).
MAX_DETECTORS = 24
_HIST_COLOURS = {
    "ID correct": "#2ca02c",
    "ID incorrect": "#98df8a",
    "covariate correct": "#1f77b4",
    "covariate incorrect": "#aec7e8",
    "OOD": "#d62728",
}


def rank_percentiles(scores: ArrayLike) -> NDArray[np.float64]:
    """Each score's rank percentile among ``scores``: ``100 (r - 1) / (n - 1)`` with ``r`` the
    mid-rank (ties share their mean rank); 0 = lowest, 100 = highest, 50 for a single score.

    >>> rank_percentiles([3.0, 1.0, 2.0, 2.0, 5.0]).tolist()
    [75.0, 0.0, 37.5, 37.5, 100.0]
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1 or s.size == 0:
        raise InputError(f"rank_percentiles needs a non-empty 1-D array, got shape {s.shape}")
    if s.size == 1:
        return np.array([50.0])
    return 100.0 * (rankdata(s, method="average") - 1.0) / (s.size - 1)


def failure_rank_groups(
    id_scores: ArrayLike, id_correct: ArrayLike, ood_scores: ArrayLike
) -> dict[str, NDArray[np.float64]]:
    """Rank percentiles (:func:`rank_percentiles`) within the pooled ID + OOD scores, split
    into :data:`GROUPS`: correctly classified ID, misclassified ID and OOD.

    >>> g = failure_rank_groups([4.0, 1.0, 3.0], [True, False, True], [2.0, 0.0])
    >>> {k: v.tolist() for k, v in g.items()}
    {'correct ID': [100.0, 75.0], 'incorrect ID': [25.0], 'OOD': [50.0, 0.0]}
    """
    ids = np.asarray(id_scores, dtype=np.float64)
    ok = np.asarray(id_correct, dtype=bool)
    if ok.shape != ids.shape:
        raise InputError(f"id_correct has shape {ok.shape}, id_scores {ids.shape}")
    pct = rank_percentiles(np.concatenate((ids, np.asarray(ood_scores, dtype=np.float64))))
    head = pct[: ids.size]
    return {"correct ID": head[ok], "incorrect ID": head[~ok], "OOD": pct[ids.size :]}


def score_groups(
    id_scores: ArrayLike,
    id_correct: ArrayLike,
    ood_scores: ArrayLike,
    cov_scores: ArrayLike | None = None,
    cov_correct: ArrayLike | None = None,
) -> dict[str, NDArray[np.float64]]:
    """Scores split by group: ``ID correct``, ``ID incorrect``, ``covariate correct``,
    ``covariate incorrect`` (when covariate scores are given) and ``OOD``."""
    ids = np.asarray(id_scores, dtype=np.float64)
    ok = np.asarray(id_correct, dtype=bool)
    out = {"ID correct": ids[ok], "ID incorrect": ids[~ok]}
    if cov_scores is not None and cov_correct is not None:
        cov = np.asarray(cov_scores, dtype=np.float64)
        c_ok = np.asarray(cov_correct, dtype=bool)
        out["covariate correct"], out["covariate incorrect"] = cov[c_ok], cov[~c_ok]
    out["OOD"] = np.asarray(ood_scores, dtype=np.float64)
    return out


def group_histograms(
    groups: Mapping[str, ArrayLike], bins: int = 40
) -> tuple[NDArray[np.float64], dict[str, NDArray[np.float64]]]:
    """Shared bin edges over every group's finite scores and each non-empty group's density
    (integrating to 1).

    >>> edges, dens = group_histograms({"a": [0.0, 1.0], "b": [1.0, 1.0]}, bins=2)
    >>> edges.tolist(), {k: v.tolist() for k, v in dens.items()}
    ([0.0, 0.5, 1.0], {'a': [1.0, 1.0], 'b': [0.0, 2.0]})
    """
    finite = {k: np.asarray(v, dtype=np.float64) for k, v in groups.items()}
    finite = {k: v[np.isfinite(v)] for k, v in finite.items()}
    finite = {k: v for k, v in finite.items() if v.size}
    if not finite:
        raise InputError("group_histograms: no group has a finite score")
    every = np.concatenate(list(finite.values()))
    lo, hi = float(every.min()), float(every.max())
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    edges = np.linspace(lo, hi, bins + 1)
    return edges, {k: np.histogram(v, bins=edges, density=True)[0] for k, v in finite.items()}


def _frames(run: RunData, role: str, columns: Sequence[str]) -> pd.DataFrame | None:
    parts = []
    for name in run.score_files:
        if name == "id_test":
            continue
        frame = run.read_scores(name, ["role", *columns])
        if len(frame) and str(frame["role"].iloc[0]) == role:
            parts.append(frame)
    return pd.concat(parts, ignore_index=True) if parts else None


def _detectors(frame: pd.DataFrame) -> list[str]:
    return [c[len("score:") :] for c in frame.columns if c.startswith("score:")]


def _finite(values: pd.Series) -> NDArray[np.float64]:
    return values.to_numpy(dtype=np.float64)


def _load(run: RunData) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame | None] | None:
    """id_test, the OOD pool and the covariate pool of the run's score tables."""
    if "id_test" not in run.score_files:
        return None
    idt = run.read_scores("id_test")
    dets = _detectors(idt)
    cols = ["label", "pred", *(f"score:{d}" for d in dets)]
    ood = _frames(run, "ood", cols)
    if not dets or ood is None:
        return None
    return idt, ood, _frames(run, "covariate", cols)


def _usable(idt: pd.DataFrame, ood: pd.DataFrame, det: str) -> bool:
    col = f"score:{det}"
    return (
        col in ood.columns
        and bool(np.isfinite(_finite(idt[col])).all())
        and bool(np.isfinite(_finite(ood[col])).all())
    )


def failure_rank_figure(run: RunData) -> Figure | None:
    """Fig. 5 of ImageNet-OOD: per detector, box plots of the rank percentiles (within id_test +
    the OOD pool) of correct ID, incorrect ID and OOD images; one panel per group. None without
    id_test and an ood set."""
    loaded = _load(run)
    if loaded is None:
        return None
    idt, ood, _ = loaded
    correct = (idt["label"] >= 0).to_numpy() & (idt["label"] == idt["pred"]).to_numpy()
    dets = [d for d in _detectors(idt) if _usable(idt, ood, d)][:MAX_DETECTORS]
    if not dets:
        return None
    data = {
        d: failure_rank_groups(_finite(idt[f"score:{d}"]), correct, _finite(ood[f"score:{d}"]))
        for d in dets
    }
    fig = Figure(figsize=(9.0, 1.2 + 0.22 * len(dets)), layout="constrained")
    axes = fig.subplots(1, len(GROUPS), sharey=True)
    for ax, group in zip(axes, GROUPS, strict=True):
        values = [data[d][group] for d in dets]
        if all(v.size == 0 for v in values):
            ax.text(0.5, 0.5, f"no {group} image", transform=ax.transAxes, ha="center")
        ax.boxplot(
            [v if v.size else [np.nan] for v in values], orientation="horizontal", widths=0.6,
            showfliers=False, medianprops={"color": "#d62728"},
        )  # fmt: skip
        ax.set_title(group, fontsize=9)
        ax.set_xlim(0, 100)
        ax.set_xlabel("rank percentile (0 = most OOD)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(range(1, len(dets) + 1), dets)
    axes[0].invert_yaxis()
    fig.suptitle("Where each group ranks among ID test + OOD images", fontsize=10)
    return fig


def correct_incorrect_histogram_figure(run: RunData, *, bins: int = 40) -> Figure | None:
    """Figs. 6-9 of ImageNet-OOD: per detector, score histograms of correct and misclassified ID
    test images, correct and misclassified covariate-shift images (every covariate set pooled)
    and the OOD pool. None without id_test and an ood set."""
    loaded = _load(run)
    if loaded is None:
        return None
    idt, ood, cov = loaded
    correct = (idt["label"] >= 0).to_numpy() & (idt["label"] == idt["pred"]).to_numpy()
    dets = [d for d in _detectors(idt) if _usable(idt, ood, d)][:MAX_DETECTORS]
    if not dets:
        return None
    ncols = min(4, len(dets))
    nrows = math.ceil(len(dets) / ncols)
    # fixed margins: the constrained-layout solver costs seconds for dozens of panels
    fig, axes = _panels(nrows, ncols, (2.0, 1.2), left=0.2, right=0.2, bottom=0.75, hspace=0.5)
    for ax in axes.flat[len(dets) :]:
        ax.set_visible(False)
    for ax, d in zip(axes.flat, dets, strict=False):
        col = f"score:{d}"
        cov_ok = cov is not None and col in cov.columns and np.isfinite(_finite(cov[col])).all()
        groups = score_groups(
            _finite(idt[col]), correct, _finite(ood[col]),
            _finite(cov[col]) if cov_ok and cov is not None else None,
            ((cov["label"] >= 0) & (cov["label"] == cov["pred"])).to_numpy()
            if cov_ok and cov is not None else None,
        )  # fmt: skip
        edges, dens = group_histograms(groups, bins)
        for name, h in dens.items():
            ax.stairs(h, edges, color=_HIST_COLOURS[name], linewidth=1.0)
        ax.set_title(d, fontsize=8)
        ax.tick_params(labelsize=6)
        ax.set_yticks([])
    handles = [Patch(edgecolor=c, fill=False, label=n) for n, c in _HIST_COLOURS.items()]
    fig.legend(handles=handles, loc="lower center", ncols=5, fontsize=7, frameon=False)
    _suptitle(fig, "Normality scores split by correct / incorrect classification")
    return fig
