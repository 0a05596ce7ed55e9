"""OSCR: exact definition, the ARPL reference loop, closed-set accuracy bound."""

from __future__ import annotations

import numpy as np
import pytest

from semshift.errors import InputError
from semshift.metrics import accuracy, auroc, oscr


def arpl_reference(x1, x2, correct_known):
    """ARPL's compute_oscr (core/evaluation.py) as a plain loop, on known-ness scores.

    x1: scores of known samples, x2: scores of unknown samples, correct_known: bool per known.
    The reference calls np.argsort (default kind); a stable sort is used here so that ties
    are deterministic, as in semshift's ``variant="arpl"``.
    """
    m_x1 = np.zeros(len(x1))
    m_x1[correct_known] = 1
    k_target = np.concatenate((m_x1, np.zeros(len(x2))), axis=0)
    u_target = np.concatenate((np.zeros(len(x1)), np.ones(len(x2))), axis=0)
    predict = np.concatenate((x1, x2), axis=0)
    n = len(predict)
    ccr = [0 for _ in range(n + 2)]
    fpr = [0 for _ in range(n + 2)]
    idx = predict.argsort(kind="stable")
    s_k_target = k_target[idx]
    s_u_target = u_target[idx]
    for k in range(n - 1):
        cc = s_k_target[k + 1 :].sum()
        fp = s_u_target[k:].sum()
        ccr[k] = float(cc) / float(len(x1))
        fpr[k] = float(fp) / float(len(x2))
    ccr[n] = 0.0
    fpr[n] = 0.0
    ccr[n + 1] = 1.0
    fpr[n + 1] = 1.0
    roc = sorted(zip(fpr, ccr, strict=True), reverse=True)
    total = 0
    for j in range(n + 1):
        h = roc[j][0] - roc[j + 1][0]
        w = (roc[j][1] + roc[j + 1][1]) / 2.0
        total = total + h * w
    return total


def oscr_pairs(s, is_ood, correct):
    a = s[correct][:, None]
    b = s[is_ood][None, :]
    n_known = np.count_nonzero(~is_ood)
    return float(np.sum((a > b) + 0.5 * (a == b)) / (n_known * is_ood.sum()))


def draw(seed, n_known=40, n_unknown=30, ties=False):
    rng = np.random.default_rng(seed)
    s = np.concatenate((rng.normal(1, 1, n_known), rng.normal(0, 1, n_unknown)))
    if ties:
        s = np.round(s)
    is_ood = np.r_[np.zeros(n_known, bool), np.ones(n_unknown, bool)]
    correct = ~is_ood & (rng.random(s.size) < 0.7)
    perm = rng.permutation(s.size)
    return s[perm], is_ood[perm], correct[perm]


@pytest.mark.parametrize("ties", [False, True])
def test_arpl_variant_equals_reference_loop(ties):
    for seed in range(25):
        s, m, c = draw(seed, 5 + seed, 3 + seed % 11, ties)
        ref = arpl_reference(s[~m], s[m], c[~m])
        assert oscr(s, m, c, variant="arpl") == pytest.approx(ref, abs=1e-12)


@pytest.mark.parametrize("ties", [False, True])
def test_exact_variant_equals_pairwise_definition(ties):
    for seed in range(10):
        s, m, c = draw(seed, ties=ties)
        assert oscr(s, m, c) == pytest.approx(oscr_pairs(s, m, c), abs=1e-12)
        # = accuracy x AUROC(correct known vs unknown)
        keep = c | m
        acc = c.sum() / (~m).sum()
        assert oscr(s, m, c) == pytest.approx(acc * auroc(s[keep], m[keep]), abs=1e-12)


def test_hand_case_with_ties():
    s = np.array([3.0, 2.0, 2.0, 1.0, 2.0, 0.0])
    m = np.array([False, False, False, False, True, True])
    c = np.array([True, True, False, True, False, False])
    # correct knowns 3, 2, 1 vs unknowns 2, 0: (2 + 1.5 + 1) / (4 known * 2 unknown)
    assert oscr(s, m, c) == 4.5 / 8


def test_perfect_separation():
    n_known, n_unknown = 6, 4
    s = np.r_[np.arange(10.0, 16.0), np.arange(4.0)]
    m = np.r_[np.zeros(n_known, bool), np.ones(n_unknown, bool)]
    c = ~m
    assert oscr(s, m, c) == 1.0
    # the reference code's off-by-one
    assert oscr(s, m, c, variant="arpl") == pytest.approx(1 - 1 / (2 * n_known * n_unknown))
    assert arpl_reference(s[~m], s[m], c[~m]) == pytest.approx(1 - 1 / (2 * n_known * n_unknown))


def test_oscr_equals_closed_set_accuracy_when_unknowns_score_lowest():
    rng = np.random.default_rng(4)
    n_known, n_unknown = 50, 20
    pred = rng.integers(0, 5, n_known)
    labels = np.where(rng.random(n_known) < 0.8, pred, rng.integers(0, 5, n_known))
    s = np.r_[rng.uniform(1, 2, n_known), rng.uniform(-1, 0.5, n_unknown)]
    m = np.r_[np.zeros(n_known, bool), np.ones(n_unknown, bool)]
    c = np.r_[pred == labels, np.zeros(n_unknown, bool)]
    assert oscr(s, m, c) == pytest.approx(accuracy(pred, labels), abs=1e-15)


def test_oscr_invariant_to_order_and_monotone_transform():
    s, m, c = draw(7, ties=True)
    perm = np.random.default_rng(1).permutation(s.size)
    ref = oscr(s, m, c)
    assert oscr(s[perm], m[perm], c[perm]) == ref
    assert oscr(np.exp(s), m, c) == ref
    assert oscr(np.zeros(4), np.array([0, 0, 1, 1], bool), np.array([0, 0, 0, 0], bool)) == 0


def test_oscr_bad_input():
    s = np.array([1.0, 0.0])
    m = np.array([False, True])
    with pytest.raises(InputError, match="correct is True for 1 OOD sample"):
        oscr(s, m, np.array([True, True]))
    with pytest.raises(InputError, match="variant"):
        oscr(s, m, np.array([True, False]), variant="openood")
    with pytest.raises(InputError, match="known and unknown"):
        oscr(s, ~np.zeros(2, bool), np.zeros(2, bool))
    with pytest.raises(InputError, match="boolean"):
        oscr(s, m, np.array([1, 0]))
