"""AUROC, FPR@TPR, AUPR-In/Out, detection error: references, hand cases, invariances."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import rankdata
from sklearn.metrics import auc, average_precision_score, precision_recall_curve, roc_auc_score

from semshift.metrics import (
    aupr_in,
    aupr_out,
    auroc,
    detection_error,
    fpr_at_tpr,
    rankcore,
    ranking_metrics,
)
from semshift.metrics.rankcore import RankCore as _RankCore

TIES = ["none", "some", "heavy"]


# -- brute-force references written from the definitions (pairs / every threshold) ----------


def auroc_pairs(s, y):
    a, b = s[~y][:, None], s[y][None, :]
    return float(np.mean((a > b) + 0.5 * (a == b)))


def fpr_definition(s, y, tpr, convention):
    ids, ood = s[~y], s[y]
    if convention == "id_recall":
        t = max(v for v in np.unique(ids) if np.mean(ids >= v) >= tpr - 1e-12)
        return float(np.mean(ood >= t))
    t = min(v for v in np.unique(ood) if np.mean(ood <= v) >= tpr - 1e-12)
    return float(np.mean(ids <= t))


def detection_error_definition(s, y):
    ids, ood = s[~y], s[y]
    cands = np.append(np.unique(s), np.inf)
    return min(0.5 * (1 - np.mean(ids >= t)) + 0.5 * np.mean(ood >= t) for t in cands)


def trapezoid_pr(y_true, score):
    precision, recall, _ = precision_recall_curve(y_true, score)
    return auc(recall, precision)


# -- against sklearn ----------------------------------------------------------------------


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize(("n_id", "n_ood"), [(7, 5), (300, 40), (40, 300), (2500, 2500)])
def test_matches_sklearn(sample, ties, n_id, n_ood):
    for seed in range(3):
        s, y = sample(seed, n_id, n_ood, ties)
        assert auroc(s, y) == pytest.approx(roc_auc_score(~y, s), abs=1e-12)
        assert aupr_in(s, y) == pytest.approx(average_precision_score(~y, s), abs=1e-12)
        assert aupr_out(s, y) == pytest.approx(average_precision_score(y, -s), abs=1e-12)
        assert aupr_in(s, y, method="trapezoid") == pytest.approx(trapezoid_pr(~y, s), abs=1e-12)
        assert aupr_out(s, y, method="trapezoid") == pytest.approx(trapezoid_pr(y, -s), abs=1e-12)


@pytest.mark.parametrize("merge", ["search", "sort"])
@pytest.mark.parametrize("ties", TIES)
def test_both_merge_paths_match_definitions(sample, merge, ties):
    for seed in range(20):
        s, y = sample(seed, 3 + seed, 2 + 2 * seed % 7, ties)
        core = _RankCore(np.sort(s[~y]), np.sort(s[y]), merge=merge)
        assert core.auroc() == pytest.approx(auroc_pairs(s, y), abs=1e-12)
        assert core.ap_in() == pytest.approx(average_precision_score(~y, s), abs=1e-12)
        assert core.ap_out() == pytest.approx(average_precision_score(y, -s), abs=1e-12)
        assert core.trapz_in() == pytest.approx(trapezoid_pr(~y, s), abs=1e-12)
        assert core.trapz_out() == pytest.approx(trapezoid_pr(y, -s), abs=1e-12)
        assert core.detection_error() == pytest.approx(detection_error_definition(s, y))
        for tpr in (0.05, 0.5, 0.95, 1.0):
            for conv in ("id_recall", "ood_recall"):
                assert core.fpr(tpr, conv) == pytest.approx(fpr_definition(s, y, tpr, conv))


@pytest.mark.parametrize("ties", TIES)
def test_fpr_and_detection_error_match_definitions(sample, ties):
    for seed in range(10):
        s, y = sample(seed, 30, 25, ties)
        for tpr in (0.1, 0.9, 0.95):
            for conv in ("id_recall", "ood_recall"):
                assert fpr_at_tpr(s, y, tpr, conv) == pytest.approx(fpr_definition(s, y, tpr, conv))
        assert detection_error(s, y) == pytest.approx(detection_error_definition(s, y))


# -- hand-computed cases (ties included) --------------------------------------------------

S_TIE = np.array([3.0, 2.0, 2.0, 1.0, 2.0, 1.0, 0.0])
Y_TIE = np.array([False, False, False, False, True, True, True])


def test_auroc_hand_case_with_ties():
    # ID 3: 3 wins; ID 2 (x2): 0.5 + 2 each; ID 1: 0 + 0.5 + 1 -> 9.5 / 12
    assert auroc(S_TIE, Y_TIE) == 9.5 / 12


def test_auroc_extremes():
    assert auroc([2.0, 1.0], [False, True]) == 1.0
    assert auroc([1.0, 2.0], [False, True]) == 0.0
    assert auroc([1.0, 1.0, 1.0], [False, True, True]) == 0.5


FPR_S = np.array([5.0, 4.0, 4.0, 4.0, 1.0, 4.0, 4.0, 3.0, 0.0])
FPR_Y = np.array([False] * 5 + [True] * 4)


@pytest.mark.parametrize(
    ("tpr", "expected"),
    [
        (0.2, 0.0),  # k = 1: t = 5, no OOD >= 5
        (0.6, 0.5),  # k = 3: t = 4, OOD 4, 4 pass
        (0.8, 0.5),  # k = 4: t = 4 (tied ID scores)
        (0.95, 0.75),  # k = 5: t = 1, OOD 4, 4, 3 pass
        (1.0, 0.75),
    ],
)
def test_fpr_id_recall_hand_case(tpr, expected):
    assert fpr_at_tpr(FPR_S, FPR_Y, tpr=tpr) == expected


@pytest.mark.parametrize(
    ("tpr", "expected"),
    [
        (0.25, 0.0),  # k = 1: t = 0, no ID <= 0
        (0.5, 0.2),  # k = 2: t = 3, ID 1 caught
        (0.75, 0.8),  # k = 3: t = 4, ID 1, 4, 4, 4 caught (ties at t count)
        (0.95, 0.8),  # k = 4: t = 4
    ],
)
def test_fpr_ood_recall_hand_case(tpr, expected):
    assert fpr_at_tpr(FPR_S, FPR_Y, tpr=tpr, convention="ood_recall") == expected


def test_fpr_threshold_rounding():
    # 0.07 * 100 = 7.000000000000001 must still mean 7 samples, not 8
    s = np.arange(200.0)
    y = s < 100  # OOD = 0..99, ID = 100..199
    assert fpr_at_tpr(s, y, tpr=0.07) == 0.0
    assert fpr_at_tpr(-s, y, tpr=0.07) == 1.0
    assert fpr_at_tpr(s, y, tpr=0.07, convention="ood_recall") == 0.0


def test_aupr_hand_case_with_ties():
    s = np.array([3.0, 2.0, 2.0, 1.0])
    y = np.array([False, False, True, True])
    # ID positive: (R, P) = (1/2, 1) at 3, (1, 2/3) at 2 -> AP = 1/2 + 1/3
    assert aupr_in(s, y) == pytest.approx(5 / 6, abs=1e-15)
    # trapezoid through (0, 1), (1/2, 1), (1, 2/3): 1/2 + 1/2 * (1 + 2/3) / 2
    assert aupr_in(s, y, method="trapezoid") == pytest.approx(11 / 12, abs=1e-15)
    # OOD positive is the mirror image
    assert aupr_out(s, y) == pytest.approx(5 / 6, abs=1e-15)
    assert aupr_out(s, y, method="trapezoid") == pytest.approx(11 / 12, abs=1e-15)


def test_aupr_out_all_tied():
    # one group: precision = prevalence at recall 1; trapezoid from (0, 1)
    s = np.ones(4)
    y = np.array([False, True, True, True])
    assert aupr_out(s, y) == 0.75
    assert aupr_out(s, y, method="trapezoid") == pytest.approx((1 + 0.75) / 2)
    assert aupr_in(s, y) == 0.25


def test_detection_error_hand_case():
    s = np.array([3.0, 2.0, 2.0, 1.0])
    y = np.array([False, False, True, True])
    assert detection_error(s, y) == 0.25  # t = 3: 0.5 * 0.5 + 0.5 * 0
    assert detection_error([2.0, 1.0], [False, True]) == 0.0
    assert detection_error([1.0, 2.0], [False, True]) == 0.5  # best is accept-all / none


# -- invariances and identities -----------------------------------------------------------


@pytest.mark.parametrize("ties", TIES)
def test_invariant_to_increasing_transforms_and_order(sample, ties):
    s, y = sample(3, 60, 45, ties)
    ref = ranking_metrics(s, y, tpr=0.9)
    transforms = [
        lambda x: 3 * x + 7,
        lambda x: np.exp(x / 4),
        lambda x: x**3 + x,
        lambda x: rankdata(x, method="dense").astype(float),
    ]
    for f in transforms:
        assert ranking_metrics(f(s), y, tpr=0.9) == ref
    perm = np.random.default_rng(0).permutation(s.size)
    assert ranking_metrics(s[perm], y[perm], tpr=0.9) == ref
    for method in ("ap", "trapezoid"):
        r = ranking_metrics(s, y, aupr_method=method)
        assert ranking_metrics(3 * s - 1, y, aupr_method=method) == r


@pytest.mark.parametrize("ties", TIES)
def test_flip_identities(sample, ties):
    s, y = sample(5, 50, 70, ties)
    assert auroc(-s, y) == pytest.approx(1 - auroc(s, y), abs=1e-15)
    # AUPR-Out is AUPR-In with the classes and the score direction swapped
    assert aupr_out(s, y) == pytest.approx(aupr_in(-s, ~y), abs=1e-15)
    assert aupr_out(s, y, "trapezoid") == pytest.approx(aupr_in(-s, ~y, "trapezoid"), abs=1e-15)
    # the two FPR conventions are mirror images
    for tpr in (0.8, 0.95):
        assert fpr_at_tpr(s, y, tpr, "id_recall") == fpr_at_tpr(-s, ~y, tpr, "ood_recall")


def test_ranking_metrics_equals_single_functions(sample):
    for ties in TIES:
        s, y = sample(11, 80, 33, ties)
        for conv in ("id_recall", "ood_recall"):
            for method in ("ap", "trapezoid"):
                r = ranking_metrics(s, y, tpr=0.9, convention=conv, aupr_method=method)
                assert r.auroc == auroc(s, y)
                assert r.fpr == fpr_at_tpr(s, y, 0.9, conv)
                assert r.aupr_in == aupr_in(s, y, method)
                assert r.aupr_out == aupr_out(s, y, method)
                assert r.detection_error == detection_error(s, y)
                assert (r.n_id, r.n_ood, r.convention) == (80, 33, conv)
                assert r.as_dict()["aupr_method"] == method


def test_float32_and_integer_scores(sample):
    s, y = sample(2, 200, 150)
    s32 = s.astype(np.float32)
    assert auroc(s32, y) == pytest.approx(roc_auc_score(~y, s32), abs=1e-12)
    si = np.round(s * 3).astype(np.int64)
    assert auroc(si, y) == pytest.approx(roc_auc_score(~y, si), abs=1e-12)
    assert aupr_in(si, y) == pytest.approx(average_precision_score(~y, si), abs=1e-12)


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("block", [2, 7, 64])
def test_block_merge_equals_one_stable_merge(monkeypatch, sample, ties, block):
    # small blocks so that tie groups straddle block boundaries
    monkeypatch.setattr(rankcore, "_MERGE_BLOCK", block)
    for seed in range(5):
        s, y = sample(seed, 150, 90 + 40 * seed, ties)
        sa, sb = np.sort(s[~y]), np.sort(s[y])
        order = np.argsort(np.concatenate((sa, sb)), kind="stable")
        pos_ood, pos_id, cross = rankcore._block_merge(sa, sb)
        assert cross == bool(np.isin(sb, sa).any())
        np.testing.assert_array_equal(pos_ood, np.flatnonzero(order >= sa.size))
        np.testing.assert_array_equal(pos_id, np.flatnonzero(order < sa.size))
        core = _RankCore(sa, sb, merge="sort")
        assert core.auroc() == pytest.approx(roc_auc_score(~y, s), abs=1e-12)
        assert core.ap_in() == pytest.approx(average_precision_score(~y, s), abs=1e-12)
