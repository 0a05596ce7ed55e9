"""Known answers of the distance-regression pieces (ImageNet-OOD Fig. 3 left, Appendix C)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from semshift.errors import InputError
from semshift.metrics import auroc, evaluate_many
from semshift.metrics.distance import (
    auroc_by_group,
    distance_bins,
    equal_count_bins,
    intervals_overlap,
    kth_neighbour_distance,
    ols_fit,
)


def test_kth_neighbour_distance_matches_brute_force():
    rng = np.random.default_rng(0)
    q, r = rng.normal(size=(37, 5)), rng.normal(size=(23, 5))
    full = np.linalg.norm(q[:, None, :] - r[None, :, :], axis=2)
    for k in (1, 3):
        got = kth_neighbour_distance(q, r, k, normalize=False, block_rows=8)
        np.testing.assert_allclose(got, np.sort(full, axis=1)[:, k - 1], rtol=1e-10, atol=1e-12)
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    rn = r / np.linalg.norm(r, axis=1, keepdims=True)
    cos = np.linalg.norm(qn[:, None, :] - rn[None, :, :], axis=2).min(axis=1)
    np.testing.assert_allclose(kth_neighbour_distance(q, r), cos, rtol=1e-10, atol=1e-7)


def test_kth_neighbour_distance_rejects_bad_input():
    with pytest.raises(InputError, match="features"):
        kth_neighbour_distance(np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(InputError, match="k must be"):
        kth_neighbour_distance(np.zeros((2, 3)), np.zeros((2, 3)), k=3)
    with pytest.raises(InputError, match="non-finite"):
        kth_neighbour_distance(np.full((1, 2), np.nan), np.zeros((2, 2)))


def test_equal_count_bins_sizes_and_order():
    d = np.random.default_rng(1).permutation(103).astype(float)
    bins = equal_count_bins(d, 10)
    sizes = np.bincount(bins)
    assert sizes.sum() == 103 and sizes.max() - sizes.min() <= 1
    # every subset lies wholly beyond the previous one
    hi = np.array([d[bins == b].max() for b in range(10)])
    lo = np.array([d[bins == b].min() for b in range(10)])
    assert (lo[1:] > hi[:-1]).all()
    with pytest.raises(InputError, match="exceeds"):
        equal_count_bins(d[:5], 6)


def test_auroc_by_group_equals_the_single_metric_and_evaluate_many():
    rng = np.random.default_rng(2)
    ids = np.round(rng.normal(1.0, 1.0, 200), 1)  # ties on purpose
    ood = np.round(rng.normal(0.0, 1.0, 150), 1)
    groups = rng.integers(0, 7, 150)
    got = auroc_by_group(ids, ood, groups, 8)
    for g in range(7):
        sub = ood[groups == g]
        both = np.concatenate((ids, sub))
        is_ood = np.r_[np.zeros(ids.size, bool), np.ones(sub.size, bool)]
        assert got[g] == pytest.approx(auroc(both, is_ood), abs=1e-12)
    many = evaluate_many(ids, ood, ["auroc"], groups=groups)
    np.testing.assert_allclose(got[:7], many["value"].to_numpy(), atol=1e-12)
    assert np.isnan(got[7])  # an empty group


def test_ols_fit_matches_linregress_and_hand_cis():
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, 40)
    y = 0.7 + 0.2 * x + rng.normal(0, 0.02, 40)
    fit = ols_fit(x, y)
    ref = stats.linregress(x, y)
    assert fit.slope == pytest.approx(ref.slope, rel=1e-12)
    assert fit.intercept == pytest.approx(ref.intercept, rel=1e-12)
    assert fit.slope_se == pytest.approx(ref.stderr, rel=1e-10)
    assert fit.intercept_se == pytest.approx(ref.intercept_stderr, rel=1e-10)
    assert fit.r2 == pytest.approx(ref.rvalue**2, rel=1e-10)
    np.testing.assert_allclose(np.polyfit(x, y, 1), [fit.slope, fit.intercept], rtol=1e-10)
    t = stats.t.ppf(0.975, 38)
    assert fit.intercept_ci == pytest.approx(
        (ref.intercept - t * ref.intercept_stderr, ref.intercept + t * ref.intercept_stderr)
    )
    assert fit.slope_ci == pytest.approx((ref.slope - t * ref.stderr, ref.slope + t * ref.stderr))


def test_ols_fit_by_hand_on_four_points():
    # x = 0..3, y = 1, 2, 2, 4: slope 0.9, intercept 0.9, residuals 0.1, 0.2, -0.7, 0.4
    fit = ols_fit([0.0, 1.0, 2.0, 3.0], [1.0, 2.0, 2.0, 4.0], level=0.9)
    assert fit.slope == pytest.approx(0.9) and fit.intercept == pytest.approx(1.0 - 0.1)
    s2 = (0.1**2 + 0.2**2 + 0.7**2 + 0.4**2) / 2
    assert fit.slope_se == pytest.approx(np.sqrt(s2 / 5.0))
    assert fit.intercept_se == pytest.approx(np.sqrt(s2 * (0.25 + 1.5**2 / 5.0)))
    t = stats.t.ppf(0.95, 2)
    assert fit.slope_ci[1] == pytest.approx(0.9 + t * np.sqrt(s2 / 5.0))
    with pytest.raises(InputError, match="every x is equal"):
        ols_fit([1.0, 1.0, 1.0], [0.0, 1.0, 2.0])
    with pytest.raises(InputError, match="at least 3"):
        ols_fit([0.0, 1.0], [0.0, 1.0])


def test_intervals_overlap():
    assert intervals_overlap((0.0, 1.0), (0.5, 2.0))
    assert intervals_overlap((0.0, 1.0), (1.0, 2.0))
    assert not intervals_overlap((0.0, 1.0), (1.01, 2.0))
    assert not intervals_overlap((3.0, 4.0), (1.0, 2.0))


def test_planted_subsets_recover_a_known_line():
    """Subset b of m OOD scores: AUROC is exactly (b + 1) / n_bins by construction, distances
    place it at mean distance 0.1 (b + 1): the OLS line is AUROC = 10 d exactly."""
    n_bins, m = 10, 20
    ids = np.arange(n_bins, dtype=float) + 0.5  # ID scores 0.5 .. 9.5
    b = np.repeat(np.arange(n_bins), m)
    ood = n_bins - 1.0 - b  # subset b sits below b + 1 of the n_bins ID scores
    dist = 0.1 * (b + 1) + np.tile(np.linspace(-0.01, 0.01, m), n_bins)
    bins = distance_bins(ids, ood, dist, n_bins)
    np.testing.assert_allclose(bins["auroc"], (np.arange(n_bins) + 1) / n_bins)
    np.testing.assert_allclose(bins["mean_distance"], 0.1 * (np.arange(n_bins) + 1))
    assert bins["n"].tolist() == [m] * n_bins
    fit = ols_fit(bins["mean_distance"], bins["auroc"])
    assert fit.slope == pytest.approx(1.0 / (n_bins * 0.1))
    assert fit.intercept == pytest.approx(0.0, abs=1e-12)
    assert fit.intercept_se == pytest.approx(0.0, abs=1e-9)
