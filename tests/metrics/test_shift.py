"""Shift grid cells and the IS-OOD level correlation / sensitivity."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from semshift.errors import InputError
from semshift.metrics import auroc, fpr_at_tpr, level_means, level_trend, shift_grid


def grid_data(seed=0, m=600):
    rng = np.random.default_rng(seed)
    ids = rng.normal(2, 1, 300)
    sem = rng.integers(1, 4, m)
    cov = rng.integers(1, 5, m)
    ood = rng.normal(0, 1, m) + 0.3 * sem - 0.2 * cov
    return ids, ood, sem, cov


def test_shift_grid_cells_match_direct_metric():
    ids, ood, sem, cov = grid_data()
    df = shift_grid(ids, ood, sem, cov, metric="auroc", min_count=10)
    assert list(df.columns) == ["sem_level", "cov_level", "n_ood", "metric", "value"]
    assert len(df) == 3 * 4 and (df["metric"] == "auroc").all()
    for row in df.itertuples():
        cell = (sem == row.sem_level) & (cov == row.cov_level)
        assert row.n_ood == cell.sum()
        s = np.r_[ids, ood[cell]]
        y = np.r_[np.zeros(ids.size, bool), np.ones(cell.sum(), bool)]
        assert row.value == pytest.approx(auroc(s, y), abs=1e-15)


def test_shift_grid_na_cells_and_levels():
    ids = np.array([3.0, 2.0, 4.0])
    ood = np.array([0.0, 1.0, 2.5, 0.5, 1.5])
    sem = np.array([1, 1, 2, 1, 1])
    cov = np.array([1, 1, 1, 2, 2])
    df = shift_grid(ids, ood, sem, cov, min_count=2, levels=([1, 2, 3], [1, 2]))
    assert df[["sem_level", "cov_level"]].to_numpy().tolist() == [
        [1, 1],
        [1, 2],
        [2, 1],
        [2, 2],
        [3, 1],
        [3, 2],
    ]
    assert df["n_ood"].tolist() == [2, 2, 1, 0, 0, 0]
    assert df["value"].iloc[:2].tolist() == [1.0, 1.0]
    assert df["value"].iloc[2:].isna().all()  # fewer than min_count: N/A
    with pytest.raises(InputError, match=r"level\(s\) \[2\] not in the given levels"):
        shift_grid(ids, ood, sem, cov, levels=([1, 3], None))


def test_shift_grid_other_metric_and_callable():
    ids, ood, sem, cov = grid_data(1)
    df = shift_grid(ids, ood, sem, cov, metric="fpr95_ood_recall")
    cell = (sem == 2) & (cov == 3)
    s = np.r_[ids, ood[cell]]
    y = np.r_[np.zeros(ids.size, bool), np.ones(cell.sum(), bool)]
    row = df[(df.sem_level == 2) & (df.cov_level == 3)]
    assert row["value"].item() == fpr_at_tpr(s, y, convention="ood_recall")

    def mean_gap(scores, is_ood):
        return float(scores[~is_ood].mean() - scores[is_ood].mean())

    df2 = shift_grid(ids, ood, sem, cov, metric=mean_gap)
    assert df2["metric"].iloc[0] == "mean_gap"
    assert df2[(df2.sem_level == 2) & (df2.cov_level == 3)]["value"].item() == pytest.approx(
        mean_gap(s, y)
    )


def test_level_trend_hand_case():
    grid = np.array([[0.9, 0.8], [0.7, 0.6]])
    t = level_trend(grid).set_index("axis")
    assert t.loc["semantic", "correlation"] == pytest.approx(-1.0)
    assert t.loc["semantic", "sensitivity"] == pytest.approx(0.2)
    assert t.loc["covariate", "sensitivity"] == pytest.approx(0.1)
    assert t.loc["covariate", "n_levels"] == 2


def test_level_trend_matches_formula_with_na_cells():
    rng = np.random.default_rng(0)
    grid = 0.9 - 0.03 * np.arange(8)[:, None] + 0.01 * rng.normal(size=(8, 8))
    grid[rng.random((8, 8)) < 0.2] = np.nan  # N/A cells
    x = np.nanmean(grid, axis=1)
    i = np.arange(1, 9)
    sens = abs(np.sum((x - x.mean()) * (i - 4.5))) / np.sum((i - 4.5) ** 2)
    t = level_trend(grid).set_index("axis")
    assert t.loc["semantic", "correlation"] == pytest.approx(np.corrcoef(x, i)[0, 1])
    assert t.loc["semantic", "sensitivity"] == pytest.approx(sens)
    assert t.loc["semantic", "sensitivity"] == pytest.approx(abs(np.polyfit(i, x, 1)[0]))
    xc = np.nanmean(grid, axis=0)
    assert t.loc["covariate", "correlation"] == pytest.approx(np.corrcoef(xc, i)[0, 1])
    np.testing.assert_allclose(level_means(grid)["semantic"], x)


def test_level_trend_from_shift_grid_frame_and_1d():
    ids, ood, sem, cov = grid_data(2)
    df = shift_grid(ids, ood, sem, cov)
    pivot = df.pivot(index="sem_level", columns="cov_level", values="value").to_numpy()
    pd.testing.assert_frame_equal(level_trend(df), level_trend(pivot))
    one = level_trend([0.5, 0.6, 0.8])
    assert one["axis"].item() == "level"
    assert one["sensitivity"].item() == pytest.approx(0.15)
    # custom level positions: slope per unit of position
    assert level_trend([0.5, 0.6, 0.8], levels=[0, 2, 4])["sensitivity"].item() == pytest.approx(
        0.075
    )


def test_level_trend_degenerate_levels():
    grid = np.array([[0.5, np.nan], [np.nan, np.nan]])
    t = level_trend(grid).set_index("axis")
    assert t.loc["semantic", "n_levels"] == 1
    assert np.isnan(t.loc["semantic", "correlation"])
    flat = level_trend([[0.5, 0.5], [0.5, 0.5]]).set_index("axis")
    assert np.isnan(flat.loc["semantic", "correlation"])
    assert flat.loc["semantic", "sensitivity"] == 0.0
