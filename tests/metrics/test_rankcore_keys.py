"""The label-key path of the ranking core (scores with a free lowest mantissa bit, e.g. float32).

``RankCore.from_scores`` stores each score's class in its lowest mantissa bit when no score
uses that bit and reads every threshold-free metric off one sort of those keys. Its values must
be bitwise those of the sorted-class path (``RankCore(np.sort(id), np.sort(ood))``, the
implementation used before), and match sklearn.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

from semshift.metrics import rankcore, ranking_metrics
from semshift.metrics.rankcore import RankCore


def float32_ties(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """N(1, 1) ID vs N(0, 1) OOD at float32 precision, coarsened so that short tie runs abound."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.5
    s = (rng.normal(size=n) + np.where(y, 0.0, 1.0)) * 64.0
    return np.round(s).astype(np.float32).astype(np.float64) / 64.0, y


def test_label_keys_known_answer():
    s = np.array([-1.0, -1.0, 0.0, -0.0, 2.0, 0.5])
    y = np.array([True, False, True, False, False, True])
    keys = rankcore._label_keys(s, y)
    assert keys is not None
    keys.sort()
    core = RankCore.from_keys(keys, 3)
    # ties put ID first; -0.0 is the same score as 0.0
    np.testing.assert_array_equal(core.id_sorted, [-1.0, 0.0, 2.0])
    np.testing.assert_array_equal(core.ood_sorted, [-1.0, 0.0, 0.5])
    np.testing.assert_array_equal(core.pos_id, [0, 2, 5])
    np.testing.assert_array_equal(core.pos_ood, [1, 3, 4])
    # AUROC by hand: ID 2.0 beats all 3; ID 0.0 beats -1, ties 0.0; ID -1 ties -1 -> 5 / 9
    assert core.auroc() == 5.0 / 9.0
    assert core.tied_pairs() == 2


def test_label_keys_only_with_a_free_bit():
    y = np.array([False, True, False])
    assert rankcore._label_keys(np.array([0.1, 0.2, 0.3]), y) is None  # float64 digits
    assert rankcore._label_keys(np.array([1, 2, 3], dtype=np.float32), y) is not None
    assert rankcore._label_keys(np.array([0.1, 0.2, 0.3], dtype=np.float32), y) is not None


@pytest.mark.parametrize("block", [2, 5, 1 << 16])
def test_float32_ties_bitwise_equal_to_sorted_class_path(monkeypatch, block, every_metric):
    # small blocks so that runs and tie groups straddle block boundaries
    monkeypatch.setattr(rankcore, "_BLOCK", block)
    for seed in range(4):
        s, y = float32_ties(seed, 300 + 97 * seed)
        core = RankCore.from_scores(s, y, "test")
        assert core.scan is not None  # the key path was taken
        assert every_metric(core) == every_metric(RankCore(np.sort(s[~y]), np.sort(s[y])))


@pytest.mark.parametrize(
    "case", ["float32", "float16", "signed_zeros", "long_runs", "ood_distinct", "no_ties"]
)
def test_key_path_cases_bitwise_equal(monkeypatch, case, every_metric):
    monkeypatch.setattr(rankcore, "_BLOCK", 7)
    rng = np.random.default_rng(5)
    n = 400
    y = rng.random(n) < 0.3
    x = rng.normal(size=n) * 3 + np.where(y, 0.0, 1.0)
    if case == "float32":
        s = np.round(x * 8).astype(np.float32) / 8  # float32 input stays float32
    elif case == "float16":
        s = np.round(x).astype(np.float16)
    elif case == "signed_zeros":
        s = np.where(rng.random(n) < 0.5, 0.0, -0.0) * (rng.random(n) < 0.6) + np.round(x)
    elif case == "long_runs":
        s = np.clip(np.round(x / 4), -1, 1)  # three values: runs far longer than a block
    elif case == "ood_distinct":  # ID ties only: detection error without OOD tie runs
        s = np.where(y, np.arange(n) / 2.0, np.round(x))
    else:
        s = rng.permutation(n).astype(np.float64) - n / 2
    core = RankCore.from_scores(s, y, "test")
    assert core.scan is not None
    s64 = np.asarray(s, dtype=np.float64)
    # the metrics as computed before the key path: from the two sorted classes
    assert every_metric(core) == every_metric(RankCore(np.sort(s64[~y]), np.sort(s64[y])))
    # the decoded state equals the sorted classes and their stable merge
    np.testing.assert_array_equal(core.id_sorted, np.sort(s64[~y]))
    np.testing.assert_array_equal(core.ood_sorted, np.sort(s64[y]))
    ref = RankCore(np.sort(s64[~y]), np.sort(s64[y]))
    np.testing.assert_array_equal(core.pos_ood, ref.pos_ood)
    np.testing.assert_array_equal(core.pos_id, ref.pos_id)


def test_float32_ties_match_sklearn():
    s, y = float32_ties(11, 20_000)
    r = ranking_metrics(s, y)
    assert r.auroc == pytest.approx(roc_auc_score(~y, s), abs=1e-12)
    assert r.aupr_in == pytest.approx(average_precision_score(~y, s), abs=1e-12)
    assert r.aupr_out == pytest.approx(average_precision_score(y, -s), abs=1e-12)
    # and the other metrics (trapezoid AUPR, OpenOOD FPR) decode the keys identically
    o = ranking_metrics(s, y, conventions="openood")
    ref = RankCore(np.sort(s[~y]), np.sort(s[y]))
    assert (o.aupr_in, o.aupr_out) == (ref.trapz_in(), ref.trapz_out())
    assert o.fpr == ref.fpr_openood(0.95)
