"""Figures: the exact OSCR curve, N/A cells, pages for many detectors, nothing left open."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from semshift.errors import InputError
from semshift.metrics import accuracy, oscr
from semshift.report import figures as F
from semshift.report import load_run, oscr_curve


def test_oscr_curve_area_is_exact_oscr_and_ends_at_accuracy() -> None:
    rng = np.random.default_rng(3)
    n_known, n_unknown = 300, 200
    labels = rng.integers(0, 4, n_known)
    pred = np.where(rng.random(n_known) < 0.7, labels, (labels + 1) % 4)
    # rounded scores: many ties, which the curve must count one half
    s = np.round(np.r_[rng.normal(1, 1, n_known), rng.normal(0, 1, n_unknown)], 1)
    m = np.r_[np.zeros(n_known, bool), np.ones(n_unknown, bool)]
    c = np.r_[pred == labels, np.zeros(n_unknown, bool)]
    fpr, ccr = oscr_curve(s, m, c)
    assert (fpr[0], ccr[0]) == (0.0, 0.0)
    assert fpr[-1] == 1.0
    assert ccr[-1] == pytest.approx(accuracy(pred, labels), abs=1e-15)
    assert np.all(np.diff(fpr) >= 0) and np.all(np.diff(ccr) >= 0)
    assert fpr.size == np.unique(s).size + 1
    area = float(np.sum(np.diff(fpr) * (ccr[1:] + ccr[:-1]) / 2))
    assert area == pytest.approx(oscr(s, m, c), abs=1e-12)


def test_oscr_curve_rejects_bad_input() -> None:
    with pytest.raises(InputError, match="non-finite"):
        oscr_curve([0.1, np.nan], [False, True], [True, False])
    with pytest.raises(InputError, match="0 unknown"):
        oscr_curve([0.1, 0.2], [False, False], [True, False])
    with pytest.raises(InputError, match="index 1"):
        oscr_curve([0.1, 0.2], [False, True], [True, True])
    with pytest.raises(InputError, match="one length"):
        oscr_curve([0.1, 0.2], [False], [True, False])


def test_oscr_figure_curves_match_scores(run_dir: Path) -> None:
    run = load_run(run_dir)
    fig = F.oscr_figure(run)
    assert isinstance(fig, Figure)
    axes = [ax for ax in fig.axes if ax.get_visible() and ax.lines]
    # smaller -> larger semantic shift: SSB's Hard bin first
    assert [ax.get_title() for ax in axes] == ["hard: hard", "medium: medium", "easy: easy"]
    # broken has NaN scores on hard: drawn on easy and medium only
    assert [ln.get_label() for ln in axes[2].lines] == ["msp", "energy", "knn", "broken"]
    assert [ln.get_label() for ln in axes[0].lines] == ["msp", "energy", "knn"]
    ident = run.read_scores("id_test")
    acc = float(np.mean(ident["label"].to_numpy() == ident["pred"].to_numpy()))
    for ax in axes:
        for line in ax.lines:
            x, y = line.get_data()
            assert x[-1] == 1.0 and y[-1] == pytest.approx(acc)


def test_heatmaps_grey_hatched_na_and_pages(run_dir: Path) -> None:
    res = load_run(run_dir).results
    figs = F.grid_heatmap_figures(res, "auroc")
    assert len(figs) == 1
    panels = {ax.get_title(): ax for ax in figs[0].axes if ax.get_title()}
    assert set(panels) == {"msp", "energy", "knn", "broken"}
    hatched = [p for p in panels["msp"].patches if isinstance(p, Rectangle) and p.get_hatch()]
    assert len(hatched) == 1  # cell (4, 4) has 3 samples: N/A
    assert hatched[0].get_xy() == (2.5, 2.5)
    # broken has an error row and no cell: every cell N/A and an "err" label
    assert len([p for p in panels["broken"].patches if p.get_hatch()]) == 16
    assert [t.get_text() for t in panels["broken"].texts] == ["err"]
    # 30 detectors -> two pages (24 + 6 panels)
    many = res[(res["protocol"] == "graded") & (res["detector"] == "msp")]
    frames = [many.assign(detector=f"d{k:02d}") for k in range(30)]
    pages = F.grid_heatmap_figures(pd.concat(frames, ignore_index=True), "auroc")
    titled = [[ax.get_title() for ax in f.axes if ax.get_title()] for f in pages]
    assert [len(t) for t in titled] == [24, 6]
    assert titled[1][0] == "d24"


def test_histograms_level_curves_sanity_and_decomposition(run_dir: Path) -> None:
    run = load_run(run_dir)
    (hist,) = F.score_histogram_figures(run)
    titles = [ax.get_title() for ax in hist.axes if ax.get_title()]
    assert titles == ["msp", "energy", "knn", "broken"]
    pooled = F.score_histogram_figures(run, max_sets=2)[0]
    labels = [t.get_text() for t in pooled.legends[0].get_texts()]
    assert labels[:3] == ["id_test", "easy", "grid"]
    assert any(lbl.startswith("other ") and "sets)" in lbl for lbl in labels)
    lc = F.level_curves_figure(run.results)
    assert lc is not None
    graded_ax, osr_ax = [ax for ax in lc.axes if ax.lines]
    assert [t.get_text() for t in osr_ax.get_xticklabels()] == ["hard", "medium", "easy"]
    assert [t.get_text() for t in graded_ax.get_xticklabels()] == ["1", "2", "3", "4"]
    sanity = F.sanity_figure(run.results, delta=0.1)
    assert sanity is not None and "0.5 ± 0.1" in sanity.get_suptitle()
    red = [t.get_text() for t in sanity.axes[0].get_yticklabels() if t.get_color() == "#c00000"]
    assert red == ["energy"]
    assert [t.get_text() for t in sanity.legends[0].get_texts()] == ["seed0", "seed1"]
    assert F.decomposition_figure(run.results) is not None
    assert F.decomposition_figure(run.results[run.results["protocol"] == "osr"]) is None


def test_histogram_panel_of_a_detector_without_any_finite_score(
    run_dir: Path, tmp_path: Path
) -> None:
    """A detector that failed everywhere (all-NaN score columns) gets a labelled empty panel."""
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    for f in (copy / "scores").glob("*.parquet"):
        frame = pd.read_parquet(f)
        frame["score:knn"] = np.nan
        frame.to_parquet(f)
    (hist,) = F.score_histogram_figures(load_run(copy))
    knn = next(ax for ax in hist.axes if ax.get_title() == "knn")
    assert [t.get_text() for t in knn.texts] == ["no finite scores"]
    assert not knn.patches  # nothing drawn for it; the other panels keep their histograms
    msp = next(ax for ax in hist.axes if ax.get_title() == "msp")
    assert msp.patches
