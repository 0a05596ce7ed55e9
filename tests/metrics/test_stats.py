"""Bootstrap percentile intervals and DeLong's test: references, identities, simulations."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import ndtr
from scipy.stats import kstest

from semshift.errors import InputError
from semshift.metrics import accuracy, aupr_in, auroc, bootstrap_ci, delong_test


def two_normals(rng, n_id, n_ood, delta):
    s = np.r_[rng.normal(delta, 1, n_id), rng.normal(0, 1, n_ood)]
    y = np.r_[np.zeros(n_id, bool), np.ones(n_ood, bool)]
    return s, y


def test_generic_path_reproduces_manual_percentile_bootstrap():
    rng = np.random.default_rng(1)
    pred = rng.integers(0, 3, 50)
    labels = np.where(rng.random(50) < 0.7, pred, rng.integers(0, 3, 50))
    ci = bootstrap_ci(accuracy, pred, labels, n_resamples=300, seed=7)
    draws = np.random.default_rng(7).integers(0, 50, size=(300, 50))
    stats = [np.mean(pred[i] == labels[i]) for i in draws]
    low, high = np.quantile(stats, [0.025, 0.975])
    assert (ci.estimate, ci.low, ci.high) == (accuracy(pred, labels), low, high)
    assert (ci.level, ci.n_resamples) == (0.95, 300)


def test_stratified_resampling_keeps_class_counts_and_matches_manual():
    rng = np.random.default_rng(2)
    s, y = two_normals(rng, 30, 20, 1.0)
    perm = rng.permutation(50)
    s, y = s[perm], y[perm]
    ci = bootstrap_ci(aupr_in, s, y, n_resamples=200, level=0.9, seed=3)
    g = np.random.default_rng(3)
    id_idx, ood_idx = np.flatnonzero(~y), np.flatnonzero(y)
    a = id_idx[g.integers(0, 30, size=(200, 30))]
    b = ood_idx[g.integers(0, 20, size=(200, 20))]
    stats = [aupr_in(s[np.r_[i, j]], y[np.r_[i, j]]) for i, j in zip(a, b, strict=True)]
    low, high = np.quantile(stats, [0.05, 0.95])
    assert ci.low == pytest.approx(low, abs=1e-15)
    assert ci.high == pytest.approx(high, abs=1e-15)


@pytest.mark.parametrize("ties", [False, True])
def test_auroc_fast_path_equals_generic_path(ties):
    rng = np.random.default_rng(4)
    s, y = two_normals(rng, 70, 50, 0.8)
    if ties:
        s = np.round(s)
    perm = rng.permutation(s.size)
    s, y = s[perm], y[perm]
    fast = bootstrap_ci(auroc, s, y, n_resamples=400, seed=5)
    by_name = bootstrap_ci("auroc", s, y, n_resamples=400, seed=5)
    generic = bootstrap_ci(lambda a, b: auroc(a, b), s, y, n_resamples=400, seed=5)
    assert fast.estimate == generic.estimate == auroc(s, y)
    assert fast.low == pytest.approx(generic.low, abs=1e-12)
    assert fast.high == pytest.approx(generic.high, abs=1e-12)
    assert by_name == fast


def test_bootstrap_auroc_coverage_simulation():
    # 400 seeded replicates of two normals 1 sd apart: true AUROC = Phi(1 / sqrt(2))
    truth = float(ndtr(1.0 / np.sqrt(2.0)))
    rng = np.random.default_rng(2024)
    covered = 0
    for rep in range(400):
        s, y = two_normals(rng, 100, 100, 1.0)
        ci = bootstrap_ci(auroc, s, y, n_resamples=500, seed=rep)
        covered += ci.low <= truth <= ci.high
    assert 0.92 <= covered / 400 <= 0.98


def delong_reference(a, b, y):
    """DeLong et al. (1988) from the pairwise kernel, no ranks."""
    out = []
    for s in (a, b):
        x, z = s[~y][:, None], s[y][None, :]
        psi = (x > z) + 0.5 * (x == z)
        out.append((psi.mean(axis=1), psi.mean(axis=0), psi.mean()))
    (v10a, v01a, aa), (v10b, v01b, ab) = out
    s10 = np.cov(np.vstack((v10a, v10b)))
    s01 = np.cov(np.vstack((v01a, v01b)))
    var = (s10[0, 0] + s10[1, 1] - 2 * s10[0, 1]) / (~y).sum()
    var += (s01[0, 0] + s01[1, 1] - 2 * s01[0, 1]) / y.sum()
    return (aa - ab) / np.sqrt(var), aa, ab


@pytest.mark.parametrize("ties", [False, True])
def test_delong_matches_pairwise_reference(ties):
    rng = np.random.default_rng(6)
    for _ in range(10):
        s, y = two_normals(rng, 40, 35, 1.0)
        b = s + rng.normal(0, 0.8, s.size)
        if ties:
            s, b = np.round(s), np.round(b)
        z, aa, ab = delong_reference(s, b, y)
        r = delong_test(s, b, y)
        assert (r.auroc_a, r.auroc_b) == pytest.approx((aa, ab), abs=1e-12)
        assert r.z == pytest.approx(z, rel=1e-10)
        assert r.p == pytest.approx(2 * ndtr(-abs(z)), rel=1e-10)
        assert (r.auroc_a, r.auroc_b) == (auroc(s, y), auroc(b, y))
        swapped = delong_test(b, s, y)
        assert swapped.z == pytest.approx(-r.z) and swapped.p == pytest.approx(r.p)


def test_delong_identical_detectors_and_power():
    rng = np.random.default_rng(7)
    s, y = two_normals(rng, 50, 50, 1.0)
    r = delong_test(s, np.exp(s), y)  # same ranking
    assert (r.z, r.p, r.se) == (0.0, 1.0, 0.0)
    weak = s * 0.2 + rng.normal(0, 1, s.size)
    assert delong_test(s, weak, y).p < 0.01


def test_delong_null_p_values_are_uniform():
    # two detectors with the same marginal distribution (equal AUROC), correlated noise
    rng = np.random.default_rng(11)
    n, reps = 60, 500
    p = np.empty(reps)
    y = np.r_[np.zeros(n, bool), np.ones(n, bool)]
    signal = np.where(y, 0.0, 1.0)
    for k in range(reps):
        e1 = rng.normal(size=2 * n)
        e2 = 0.5 * e1 + np.sqrt(0.75) * rng.normal(size=2 * n)
        p[k] = delong_test(signal + e1, signal + e2, y).p
    assert kstest(p, "uniform").pvalue > 0.01
    assert 0.02 <= np.mean(p < 0.05) <= 0.09


def test_bad_input():
    s = np.array([1.0, 0.0, 0.5])
    y = np.array([False, True, True])
    with pytest.raises(InputError, match="level"):
        bootstrap_ci(auroc, s, y, level=95)
    with pytest.raises(InputError, match="n_resamples"):
        bootstrap_ci(auroc, s, y, n_resamples=0)
    with pytest.raises(InputError, match="same first dimension"):
        bootstrap_ci(auroc, s, y[:2])
    with pytest.raises(InputError, match=r"resample \d+ made the metric fail"):
        bootstrap_ci(auroc, s, y, stratify=None, n_resamples=200)
    with pytest.raises(InputError, match=">= 2 ID"):
        delong_test(s, s, y)
    with pytest.raises(InputError, match="shape mismatch"):
        delong_test(s, s[:2], y)
