"""The numbers behind the distance-regression, correct / incorrect and axis-curve figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from semshift.protocols import ScoredSet
from semshift.protocols.distance_regression import distance_regression
from semshift.report._load import load_run
from semshift.report.figures_failure import (
    correct_incorrect_histogram_figure,
    failure_rank_figure,
    failure_rank_groups,
    group_histograms,
    rank_percentiles,
    score_groups,
)
from semshift.report.figures_levels import axis_level_curves_figure, axis_level_means
from semshift.report.figures_regression import (
    distance_regression_figure,
    distance_regression_fits,
    distance_regression_points,
    distance_regression_table,
    distance_verdict_table,
)
from semshift.report.tables import format_cell


def _regression_results() -> pd.DataFrame:
    """Planted sides: subset b has AUROC (b + 1 + offset) / 20 at distance 0.1 (b + 1)."""
    idt = ScoredSet("id_test", "id_test", [0] * 20, [0] * 20,
                    {"msp": np.arange(20) + 0.5, "energy": np.arange(20) + 0.5})  # fmt: skip
    b = np.repeat(np.arange(5), 4)
    dist = 0.1 * (b + 1)
    sets = []
    for name, role, offset in (("r", "covariate", 6), ("o", "ood", 0)):
        labels = [0] * 20 if role == "covariate" else [-1] * 20
        sc = 19.0 - (b + offset)
        sets.append(ScoredSet(name, role, labels, labels, {"msp": sc, "energy": sc[::-1]}))
    return distance_regression(idt, sets[:1], sets[1:], {"r": dist, "o": dist}, n_bins=5)


def test_regression_points_and_fits_read_back_the_planted_subsets():
    res = _regression_results()
    pts = distance_regression_points(res)
    msp = pts[pts["detector"] == "msp"]
    assert msp["side"].tolist() == ["covariate"] * 5 + ["semantic"] * 5
    assert msp["bin"].tolist() == [1, 2, 3, 4, 5] * 2
    np.testing.assert_allclose(msp["mean_distance"], np.tile(0.1 * np.arange(1, 6), 2))
    np.testing.assert_allclose(msp["auroc"], np.r_[np.arange(7, 12), np.arange(1, 6)] / 20)
    fits = distance_regression_fits(res).set_index(["detector", "side"])
    assert fits.loc[("msp", "covariate"), "intercept"] == pytest.approx(0.3)
    assert fits.loc[("msp", "semantic"), "slope"] == pytest.approx(0.5)
    table = distance_regression_table(res)
    assert table.rows[:2] == ["msp / covariate (r)", "msp / semantic (o)"]
    assert format_cell(table.cells[0][0], "score") == "0.3 [0.3, 0.3]"
    verdict = distance_verdict_table(res)
    assert verdict.rows == ["msp", "energy"]
    assert format_cell(verdict.cells[0][1], "flag") == "yes"
    fig = distance_regression_figure(res)
    assert fig is not None and len([a for a in fig.axes if a.get_visible()]) == 2
    assert distance_regression_figure(res.iloc[:0]) is None


def test_rank_groups_on_known_scores():
    assert rank_percentiles([2.0]).tolist() == [50.0]
    g = failure_rank_groups([10.0, 9.0, 1.0, 5.0], [True, True, False, False], [0.0, 3.0, 7.0])
    # pooled order: 0 1 3 5 7 9 10 -> percentiles 0, 16.7, 33.3, 50, 66.7, 83.3, 100
    np.testing.assert_allclose(g["correct ID"], [100.0, 500 / 6])
    np.testing.assert_allclose(g["incorrect ID"], [100 / 6, 50.0])
    np.testing.assert_allclose(g["OOD"], [0.0, 100 / 3, 200 / 3])


def test_score_groups_and_histograms():
    groups = score_groups([1.0, 2.0, 3.0], [True, False, True], [0.0], [4.0, 5.0], [False, True])
    assert {k: v.tolist() for k, v in groups.items()} == {
        "ID correct": [1.0, 3.0], "ID incorrect": [2.0], "covariate correct": [5.0],
        "covariate incorrect": [4.0], "OOD": [0.0],
    }  # fmt: skip
    edges, dens = group_histograms(groups, bins=5)
    np.testing.assert_allclose(edges, [0, 1, 2, 3, 4, 5])
    for name, h in dens.items():
        assert (h * np.diff(edges)).sum() == pytest.approx(1.0), name
    np.testing.assert_allclose(dens["ID correct"], [0, 0.5, 0, 0.5, 0])


def test_failure_figures_from_a_run(run_dir):
    run = load_run(run_dir)
    fig = failure_rank_figure(run)
    assert fig is not None and len(fig.axes) == 3
    hist = correct_incorrect_histogram_figure(run)
    assert hist is not None and any(a.get_visible() for a in hist.axes)


def test_axis_level_means_read_both_axes(run_dir):
    res = load_run(run_dir).results
    means = axis_level_means(res, "auroc")
    assert set(means["axis"]) == {"semantic", "covariate"}
    rows = res[(res["protocol"] == "graded") & (res["metric"] == "auroc.level_mean")
               & res["error"].isna()]  # fmt: skip
    for r in means.itertuples(index=False):
        col = f"{r.axis}_level"
        hit = rows[(rows["detector"] == r.detector) & (rows[col] == r.level)]
        hit = hit[hit["covariate_level" if r.axis == "semantic" else "semantic_level"].isna()]
        assert len(hit) == 1 and hit["value"].iloc[0] == r.value
    cov = means[(means["axis"] == "covariate") & (means["detector"] == means["detector"].iloc[0])]
    assert cov["level"].tolist() == sorted(cov["level"], key=float)  # smaller shift first
    fig = axis_level_curves_figure(res, "auroc")
    assert fig is not None and len(fig.axes) == 2
    assert axis_level_curves_figure(res, "no_such_metric") is None
