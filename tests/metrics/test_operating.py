"""threshold_at_recall and operating_rates: hand-computed values, ties, order, bad input."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

import semshift.metrics.operating as operating_module
from semshift.errors import InputError
from semshift.metrics import OperatingRates, fpr_at_tpr, operating_rates, threshold_at_recall
from semshift.metrics.ranking import n_required


def test_threshold_hand_computed() -> None:
    s = np.array([0.3, 0.9, 0.1, 0.5, 0.7, 0.8, 0.2, 0.4, 0.6, 1.0])
    # 95% of 10 -> k = 10 scores kept: the smallest score
    assert threshold_at_recall(s) == 0.1
    # 80% -> k = 8: the 8th largest is 0.3 (0.3 ... 1.0 are 8 scores)
    assert threshold_at_recall(s, recall=0.8) == 0.3
    # 0.7 * 10 rounds up to 7.000000000000001 in floating point; k must still be 7
    assert threshold_at_recall(s, recall=0.7) == 0.4
    assert threshold_at_recall(s, recall=1.0) == 0.1
    assert threshold_at_recall(s, recall=0.05) == 1.0  # k = 1: the largest
    assert threshold_at_recall([2], recall=0.5) == 2.0
    assert threshold_at_recall(np.array([3, 1, 2]), recall=0.5) == 2.0  # integer input


def test_threshold_keeps_at_least_recall_and_is_the_largest_such() -> None:
    rng = np.random.default_rng(0)
    for n in (1, 7, 20, 101):
        s = np.round(rng.normal(size=n), 1)  # with ties
        for recall in (0.05, 0.5, 0.9, 0.95, 1.0):
            t = threshold_at_recall(s, recall)
            assert t in s
            assert np.mean(s >= t) >= recall
            larger = s[s > t]
            if larger.size:  # the next larger value keeps too few
                assert np.mean(s >= larger.min()) < recall


def test_threshold_is_fpr95s_id_recall_threshold() -> None:
    """FPR@95 (id_recall) = share of OOD scores >= threshold_at_recall(ID scores)."""
    rng = np.random.default_rng(1)
    id_s = np.round(rng.normal(1.0, 1.0, 137), 1)
    ood_s = np.round(rng.normal(0.0, 1.0, 59), 1)
    scores = np.concatenate((id_s, ood_s))
    is_ood = np.r_[np.zeros(137, bool), np.ones(59, bool)]
    for recall in (0.8, 0.95):
        t = threshold_at_recall(id_s, recall)
        assert np.mean(ood_s >= t) == fpr_at_tpr(scores, is_ood, tpr=recall)
    assert n_required(0.95, 137) == 131


def test_threshold_order_invariant() -> None:
    rng = np.random.default_rng(2)
    s = rng.normal(size=50)
    assert threshold_at_recall(s, 0.9) == threshold_at_recall(rng.permutation(s), 0.9)


@pytest.mark.parametrize(
    ("scores", "recall", "match"),
    [
        ([], 0.95, "id_scores is empty"),
        ([0.1, np.nan], 0.95, r"id_scores contains 1 non-finite value\(s\) \(1 NaN, 0 inf\)"),
        ([0.1, np.inf], 0.95, r"\(0 NaN, 1 inf\)"),
        ([[0.1, 0.2]], 0.95, "must be 1-D"),
        (["a", "b"], 0.95, "real numeric array"),
        ([0.1], 0.0, r"recall must be a number in \(0, 1\], got 0.0"),
        ([0.1], 1.5, r"recall must be a number in \(0, 1\]"),
        ([0.1], float("nan"), r"recall must be a number in \(0, 1\]"),
        ([0.1], True, r"recall must be a number in \(0, 1\], got True"),
        ([0.1], "0.9", r"recall must be a number in \(0, 1\]"),
    ],
)
def test_threshold_bad_input(scores: object, recall: object, match: str) -> None:
    with pytest.raises(InputError, match=match):
        threshold_at_recall(scores, recall)  # type: ignore[arg-type]


def test_rates_hand_computed() -> None:
    # ID: 0.9 correct, 0.8 wrong, 0.4 correct, 0.3 wrong; OOD: 0.85, 0.5, 0.1 (all wrong)
    scores = np.array([0.9, 0.8, 0.4, 0.3, 0.85, 0.5, 0.1])
    correct = np.array([True, False, True, False, False, False, False])
    r = operating_rates(scores, 0.45, correct=correct)
    assert isinstance(r, OperatingRates)
    # rejected: 0.4, 0.3, 0.1 -> 3 / 7; accepted and wrong: 0.8, 0.85, 0.5 -> 3 / 7
    assert (r.rejection_rate, r.accepted_wrong_rate, r.n, r.threshold) == (3 / 7, 3 / 7, 7, 0.45)
    assert r.as_dict() == {
        "threshold": 0.45,
        "rejection_rate": 3 / 7,
        "accepted_wrong_rate": 3 / 7,
        "n": 7,
    }
    # everything accepted / rejected
    assert operating_rates(scores, -np.inf, correct=correct).rejection_rate == 0.0
    assert operating_rates(scores, -np.inf, correct=correct).accepted_wrong_rate == 5 / 7
    every = operating_rates(scores, np.inf, correct=correct)
    assert (every.rejection_rate, every.accepted_wrong_rate) == (1.0, 0.0)


def test_rates_ties_at_the_threshold_are_accepted() -> None:
    scores = np.array([1.0, 2.0, 2.0, 2.0, 3.0])
    correct = np.array([True, False, True, False, True])
    r = operating_rates(scores, 2.0, correct=correct)
    assert r.rejection_rate == 1 / 5  # only 1.0 is below
    assert r.accepted_wrong_rate == 2 / 5  # the two wrong samples tied at 2.0
    # with the threshold from the same scores, at least `recall` of them are accepted
    t = threshold_at_recall(scores, 0.5)
    assert t == 2.0
    assert operating_rates(scores, t, correct=correct).rejection_rate <= 0.5


def test_rates_order_invariant_and_agree_with_a_loop() -> None:
    rng = np.random.default_rng(3)
    scores = np.round(rng.normal(size=200), 1)
    correct = rng.random(200) < 0.6
    t = threshold_at_recall(scores[:80], 0.95)
    r = operating_rates(scores, t, correct=correct)
    rej = sum(1 for s in scores if s < t) / 200
    aw = sum(1 for s, c in zip(scores, correct, strict=True) if s >= t and not c) / 200
    assert (r.rejection_rate, r.accepted_wrong_rate) == (rej, aw)
    perm = rng.permutation(200)
    assert operating_rates(scores[perm], t, correct=correct[perm]) == r


@pytest.mark.parametrize(
    ("scores", "threshold", "correct", "match"),
    [
        ([], 0.5, [], "scores is empty"),
        ([0.1, np.nan], 0.5, [True, False], "scores contains 1 non-finite"),
        ([0.1, 0.2], float("nan"), [True, False], r"threshold must be a real number \(not NaN\)"),
        ([0.1, 0.2], None, [True, False], "threshold must be a real number"),
        ([0.1, 0.2], 0.5, [1, 0], "correct must be a boolean array"),
        ([0.1, 0.2], 0.5, [True], "shape mismatch: scores have 2 elements but correct has 1"),
    ],
)
def test_rates_bad_input(scores: object, threshold: object, correct: object, match: str) -> None:
    with pytest.raises(InputError, match=match):
        operating_rates(scores, threshold, correct=correct)  # type: ignore[arg-type]


def test_docstring_examples() -> None:
    result = doctest.testmod(operating_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
