"""DeLong's test of two mean AUROCs over paired replicates (training seeds on the same images)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import ndtr
from scipy.stats import kstest

from semshift.errors import InputError
from semshift.metrics import auroc, delong_mean_test, delong_test


def _data(rng: np.random.Generator, k: int, n1: int = 30, n0: int = 25, ties: bool = False):
    y = np.r_[np.zeros(n1, bool), np.ones(n0, bool)]
    base = np.where(y, 0.0, 1.0)
    a = base + rng.normal(0, 1, (k, y.size))
    b = 0.6 * base + rng.normal(0, 1, (k, y.size))
    if ties:
        a, b = np.round(a), np.round(b)
    return a, b, y


def _reference(a, b, y):
    """From the pairwise kernel averaged over replicates, no ranks."""

    def comps(s):
        x, z = s[~y][:, None], s[y][None, :]
        psi = (x > z) + 0.5 * (x == z)
        return psi.mean(axis=1), psi.mean(axis=0), psi.mean()

    ca, cb = [comps(r) for r in a], [comps(r) for r in b]
    w10 = np.mean([p[0] - q[0] for p, q in zip(ca, cb, strict=True)], axis=0)
    w01 = np.mean([p[1] - q[1] for p, q in zip(ca, cb, strict=True)], axis=0)
    diff = np.mean([p[2] - q[2] for p, q in zip(ca, cb, strict=True)])
    var = w10.var(ddof=1) / (~y).sum() + w01.var(ddof=1) / y.sum()
    return diff / np.sqrt(var)


@pytest.mark.parametrize("ties", [False, True])
def test_matches_the_averaged_pairwise_kernel_and_reduces_to_delong_for_one_replicate(ties):
    rng = np.random.default_rng(3)
    for k in (1, 3):
        a, b, y = _data(rng, k, ties=ties)
        r = delong_mean_test(a, b, y)
        assert r.z == pytest.approx(_reference(a, b, y), rel=1e-10)
        assert r.p == pytest.approx(2 * ndtr(-abs(r.z)), rel=1e-12)
        assert r.auroc_a == pytest.approx(np.mean([auroc(s, y) for s in a]), abs=1e-15)
        if k == 1:
            d = delong_test(a[0], b[0], y)
            assert (r.z, r.p, r.se) == pytest.approx((d.z, d.p, d.se), rel=1e-12)


def test_invariances_and_the_same_models():
    rng = np.random.default_rng(4)
    a, b, y = _data(rng, 3)
    r = delong_mean_test(a, b, y)
    order = [2, 0, 1]  # the replicates' order does not matter
    assert delong_mean_test(a[order], b[order], y).z == pytest.approx(r.z, rel=1e-12)
    # a monotone transform of each replicate's scores changes nothing
    assert delong_mean_test(np.exp(a), 3 * b - 1, y).z == pytest.approx(r.z, rel=1e-12)
    perm = rng.permutation(y.size)  # nor the order of the samples
    assert delong_mean_test(a[:, perm], b[:, perm], y[perm]).z == pytest.approx(r.z, rel=1e-12)
    same = delong_mean_test(a, a, y)
    assert (same.z, same.p, same.se) == (0.0, 1.0, 0.0)
    # one replicate given k times: the plain test of that replicate
    rep = delong_mean_test(np.repeat(a[:1], 4, 0), np.repeat(b[:1], 4, 0), y)
    assert rep.z == pytest.approx(delong_test(a[0], b[0], y).z, rel=1e-10)


def test_null_p_values_are_uniform():
    # three replicates per detector, equal AUROC, noise shared between replicates and images
    rng = np.random.default_rng(12)
    n, reps = 50, 300
    y = np.r_[np.zeros(n, bool), np.ones(n, bool)]
    signal = np.where(y, 0.0, 1.0)
    p = np.empty(reps)
    for t in range(reps):
        img = rng.normal(size=2 * n)  # what every model sees in an image
        a = signal + 0.7 * img + 0.7 * rng.normal(size=(3, 2 * n))
        b = signal + 0.7 * img + 0.7 * rng.normal(size=(3, 2 * n))
        p[t] = delong_mean_test(a, b, y).p
    assert kstest(p, "uniform").pvalue > 0.01
    assert 0.02 <= np.mean(p < 0.05) <= 0.09


def test_bad_input():
    y = np.array([False, False, True, True])
    with pytest.raises(InputError, match="same shape"):
        delong_mean_test(np.zeros((2, 4)), np.zeros((3, 4)), y)
    with pytest.raises(InputError, match=">= 2 ID and >= 2 OOD"):
        delong_mean_test(np.zeros((2, 3)), np.zeros((2, 3)), [False, True, True])
    with pytest.raises(InputError, match=r"NaN|nan"):
        delong_mean_test([[0.0, np.nan, 1.0, 2.0]], [[0.0, 1.0, 1.0, 2.0]], y)
