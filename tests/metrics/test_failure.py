"""AURC, e-AURC, AUGRC, the ImageNet-OOD label builders and the AUROC decomposition."""

from __future__ import annotations

import math

import numpy as np
import pytest

from semshift.errors import InputError
from semshift.metrics import (
    augrc,
    aurc,
    auroc,
    auroc_decomposition,
    correct_known,
    eaurc,
    failure_labels,
    newclass_labels,
)


def rc_curve_loop(s, err, generalized=False):
    """Risk-coverage area by an explicit loop over the distinct thresholds (descending)."""
    n = len(s)
    cov, risk = [], []
    for t in sorted(set(s.tolist()), reverse=True):
        acc = s >= t
        cov.append(acc.sum() / n)
        risk.append(err[acc].sum() / (n if generalized else acc.sum()))
    cov = [0.0, *cov]
    risk = [0.0 if generalized else risk[0], *risk]
    return sum((cov[i + 1] - cov[i]) * (risk[i + 1] + risk[i]) / 2 for i in range(len(cov) - 1))


def test_aurc_hand_case():
    s = np.array([3.0, 2.0, 1.0])
    e = np.array([False, True, False])
    # points (0, 0), (1/3, 0), (2/3, 1/2), (1, 1/3)
    assert aurc(s, e) == pytest.approx(1 / 12 + 5 / 36, abs=1e-15)
    assert augrc(s, e) == pytest.approx(1 / 18 + 1 / 9, abs=1e-15)
    err = 1 / 3
    assert eaurc(s, e) == pytest.approx(2 / 9 - (err + (1 - err) * math.log(1 - err)))


def test_aurc_hand_case_with_ties():
    s = np.array([2.0, 2.0, 1.0, 1.0])
    e = np.array([False, True, True, True])
    # points (0, 1/2), (1/2, 1/2), (1, 3/4)
    assert aurc(s, e) == pytest.approx(0.25 + 0.5 * (0.5 + 0.75) / 2)
    # generalized: (0, 0), (1/2, 1/4), (1, 3/4)
    assert augrc(s, e) == pytest.approx(0.5 * 0.25 / 2 + 0.5 * (0.25 + 0.75) / 2)


@pytest.mark.parametrize("ties", [False, True])
def test_aurc_augrc_match_loop(ties):
    rng = np.random.default_rng(0)
    for _ in range(15):
        n = int(rng.integers(2, 60))
        s = rng.normal(size=n)
        if ties:
            s = np.round(s)
        e = rng.random(n) < 0.3
        assert aurc(s, e) == pytest.approx(rc_curve_loop(s, e), abs=1e-12)
        assert augrc(s, e) == pytest.approx(rc_curve_loop(s, e, True), abs=1e-12)


def test_constant_scores_give_error_rate_and_optimum():
    e = np.array([True, False, False, False, True])
    assert aurc(np.ones(5), e) == pytest.approx(0.4)
    assert augrc(np.ones(5), e) == pytest.approx(0.4 / 2)
    # no errors / only errors are valid single-class cases
    assert aurc(np.arange(4.0), np.zeros(4, bool)) == 0.0
    assert eaurc(np.arange(4.0), np.zeros(4, bool)) == 0.0
    assert aurc(np.arange(4.0), np.ones(4, bool)) == 1.0
    assert eaurc(np.arange(4.0), np.ones(4, bool)) == pytest.approx(0.0)


def test_perfect_ranking_reaches_optima():
    n, n_err = 2000, 300
    e = np.r_[np.zeros(n - n_err, bool), np.ones(n_err, bool)]
    s = -np.arange(n, dtype=float)  # errors ranked last
    err = n_err / n
    # trapezoid vs the continuous optimum: a discretisation error only (of either sign)
    assert abs(eaurc(s, e)) < 1e-6
    assert augrc(s, e) == pytest.approx(err**2 / 2, abs=1e-3)
    # the worst ranking is far above
    assert aurc(-s, e) > aurc(s, e) + 0.2


def test_aurc_invariances():
    rng = np.random.default_rng(3)
    s = np.round(rng.normal(size=80), 1)
    e = rng.random(80) < 0.25
    perm = rng.permutation(80)
    for f in (aurc, eaurc, augrc):
        ref = f(s, e)
        assert f(s[perm], e[perm]) == pytest.approx(ref, abs=1e-15)
        assert f(np.exp(s), e) == pytest.approx(ref, abs=1e-15)


def test_label_builders():
    pred = np.array([1, 2, 0, 3, 1])
    labels = np.array([1, 0, -1, 3, -1])
    np.testing.assert_array_equal(newclass_labels(labels), [False, False, True, False, True])
    np.testing.assert_array_equal(correct_known(pred, labels), [True, False, False, True, False])
    np.testing.assert_array_equal(failure_labels(pred, labels), [False, True, True, False, True])
    with pytest.raises(InputError, match="below -1"):
        newclass_labels([0, -2])


def test_decomposition_identity():
    rng = np.random.default_rng(0)
    for ties in (False, True):
        for seed in range(20):
            n_id, n_ood = 40 + seed, 30
            s = np.r_[rng.normal(1, 1, n_id), rng.normal(0, 1, n_ood)]
            if ties:
                s = np.round(s, 1)
            m = np.r_[np.zeros(n_id, bool), np.ones(n_ood, bool)]
            c = ~m & (rng.random(s.size) < 0.6)
            d = auroc_decomposition(s, m, c)
            recon = d.acc * d.auroc_correct + (1 - d.acc) * d.auroc_incorrect
            assert abs(d.auroc - recon) <= 1e-12
            assert d.auroc == auroc(s, m)
            keep_c = c | m
            assert d.auroc_correct == auroc(s[keep_c], m[keep_c])
            keep_w = ~c
            assert d.auroc_incorrect == auroc(s[keep_w], m[keep_w])
            ids = ~m
            assert d.auroc_correct_vs_incorrect == auroc(s[ids], ~c[ids])
            assert (d.n_correct, d.n_incorrect, d.n_ood) == (c.sum(), (~m & ~c).sum(), n_ood)


def test_decomposition_hand_case_and_all_correct():
    d = auroc_decomposition(
        [4.0, 3.0, 2.0, 1.0], [False, False, False, True], [True, False, True, False]
    )
    assert (d.auroc, d.acc, d.auroc_correct, d.auroc_incorrect) == (1.0, 2 / 3, 1.0, 1.0)
    assert d.auroc_correct_vs_incorrect == 0.5
    d = auroc_decomposition([3.0, 2.0, 1.0], [False, False, True], [True, True, False])
    assert d.acc == 1.0 and math.isnan(d.auroc_incorrect)
    assert math.isnan(d.auroc_correct_vs_incorrect)
    assert d.as_dict()["n_incorrect"] == 0
