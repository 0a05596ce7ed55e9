"""The per-class run scan of the label keys (``rankcore._KeyScan``) and the checks it defers.

The scan reads each class in its own index space, completes a run in the block of its last
score, counts tied ID-OOD pairs from the run-start flags (binary search of the keys for runs
longer than a few scores) and skips blocks that cannot hold the detection-error minimum. Every
value must be bitwise the one of the sorted-class path, whatever the block size. The finite
check of the scores runs after the sort on that path; its errors must stay those of
``as_scores``.
"""

from __future__ import annotations

import numpy as np
import pytest

from semshift.errors import InputError
from semshift.metrics import auroc, rankcore, ranking_metrics
from semshift.metrics._validation import as_scores, check_finite
from semshift.metrics.rankcore import RankCore


def scores(kind: str, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    y = rng.random(n) < rng.uniform(0.1, 0.9)
    y[0], y[-1] = True, False  # both classes
    x = rng.normal(size=n) * 3 + np.where(y, 0.0, 1.0)
    if kind == "coarse":  # many short tie runs, both signs
        s = np.round(x * 4) / 4
    elif kind == "positive":
        s = np.abs(np.round(x * 2) / 2)
    elif kind == "negative":
        s = -np.abs(np.round(x * 2) / 2)
    elif kind == "few_values":  # runs far longer than a block and than the look-ups
        s = np.clip(np.round(x / 3), -1, 2)
    elif kind == "signed_zeros":
        s = np.where(rng.random(n) < 0.4, np.where(rng.random(n) < 0.5, 0.0, -0.0), np.round(x))
    else:  # "float32": fine float32 values, few ties
        s = x.astype(np.float32).astype(np.float64)
    return s, y


@pytest.mark.parametrize("block", [2, 3, 8, 64, 1 << 16])
@pytest.mark.parametrize(
    "kind", ["coarse", "positive", "negative", "few_values", "signed_zeros", "float32"]
)
def test_scan_bitwise_equal_to_sorted_class_path(monkeypatch, block, kind, every_metric):
    monkeypatch.setattr(rankcore, "_BLOCK", block)
    rng = np.random.default_rng(block + len(kind))
    for n in (2, 3, 57, 500):
        s, y = scores(kind, rng, n)
        core = RankCore.from_scores(s, y, "test")
        assert core.scan is not None
        ref = RankCore(np.sort(s[~y]), np.sort(s[y]))
        assert every_metric(core) == every_metric(ref), (kind, n)


def brute_tied_pairs(s: np.ndarray, y: np.ndarray) -> int:
    values, counts = np.unique(s[~y], return_counts=True)
    ood_values, ood_counts = np.unique(s[y], return_counts=True)
    _, i, j = np.intersect1d(values, ood_values, return_indices=True)
    return int(np.dot(counts[i], ood_counts[j]))


@pytest.mark.parametrize("block", [2, 5, 1 << 16])
def test_tied_pairs_short_and_long_runs(monkeypatch, block):
    # tie groups whose ID and OOD runs have lengths 1..9, so that some are resolved by the
    # look-ups and some by binary search, some straddling block boundaries
    monkeypatch.setattr(rankcore, "_BLOCK", block)
    rng = np.random.default_rng(3)
    parts, labels = [], []
    for v in range(60):
        a, b = rng.integers(0, 10, 2)
        parts += [np.full(a + b, v - 30.0)]
        labels += [np.r_[np.zeros(a, bool), np.ones(b, bool)]]
    s, y = np.concatenate(parts), np.concatenate(labels)
    order = rng.permutation(s.size)
    s, y = s[order], y[order]
    core = RankCore.from_scores(s, y, "test")
    assert core.scan is not None
    assert core.tied_pairs() == brute_tied_pairs(s, y)
    assert core.auroc() == RankCore(np.sort(s[~y]), np.sort(s[y])).auroc()


def test_scan_known_answer():
    # ID: -1, 0.5, 0.5, 2; OOD: -1, -1, 0.5, 3
    s = np.array([0.5, -1.0, 3.0, 2.0, -1.0, 0.5, -1.0, 0.5])
    y = np.array([False, True, True, False, True, True, False, False])
    scan = RankCore.from_scores(s, y, "test").scan
    assert scan is not None
    assert scan.tied == 1 * 2 + 2 * 1  # -1: 1 ID x 2 OOD; 0.5: 2 ID x 1 OOD
    # R per OOD score (ID scores <= it): -1 -> 1, -1 -> 1, 0.5 -> 3, 3 -> 4
    assert scan.sum_r == 1 + 1 + 3 + 4
    # AP-Out: OOD runs (-1 x2 ends at merged 2, l + 1 = 2; 0.5 ends at 5, 3; 3 ends at 7, 4)
    assert scan.ap_out == (2 * 2 / 3 + 3 / 6 + 4 / 8) / 4
    # AP-In: ID runs (-1 at merged 0, f = 0; 0.5 x2 at 3, f = 1; 2 at 6, f = 3)
    assert scan.ap_in == (4 / 8 + 2 * 3 / 5 + 1 / 2) / 4


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_non_finite_scores_on_the_key_path(bad, dtype):
    rng = np.random.default_rng(0)
    s = np.round(rng.normal(size=50) * 4).astype(dtype) / 4
    y = rng.random(50) < 0.5
    y[:2] = [False, True]
    for at in (0, 1, 17, 49):  # ID and OOD positions, the label bit set and not
        t = s.copy()
        t[at] = bad
        with pytest.raises(InputError) as got:
            ranking_metrics(t, y)
        with pytest.raises(InputError) as want:
            check_finite(t, "scores")
        assert str(got.value) == str(want.value)
        with pytest.raises(InputError, match="non-finite"):
            auroc(t, y)


def test_score_errors_come_before_label_errors():
    s = np.array([0.5, np.nan, 1.0], dtype=np.float32)
    with pytest.raises(InputError, match="non-finite"):
        ranking_metrics(s, np.array([1, 0, 1]))  # is_ood not boolean
    with pytest.raises(InputError, match="non-finite"):
        ranking_metrics(s, np.array([True, True, True]))  # a single class
    with pytest.raises(InputError, match="boolean"):
        ranking_metrics(s[[0, 2]], np.array([1, 0]))  # finite scores: the label error


def test_non_finite_float64_scores_off_the_key_path():
    s = np.array([0.1, 0.2, np.inf, 0.3])  # float64 digits: the sorted-class path
    with pytest.raises(InputError, match="1 non-finite value"):
        ranking_metrics(s, np.array([False, True, False, True]))


def test_as_scores_finite_flag():
    s = np.array([1.0, np.nan])
    with pytest.raises(InputError, match="non-finite"):
        as_scores(s)
    assert as_scores(s, finite=False) is s


def test_blocks_past_the_detection_error_minimum_are_skipped(monkeypatch):
    monkeypatch.setattr(rankcore, "_BLOCK", 16)
    rng = np.random.default_rng(8)
    s, y = scores("coarse", rng, 2000)
    calls = []
    gap_runs = rankcore._KeyScan._gap_runs

    def counted(self, *args):
        calls.append(1)
        return gap_runs(self, *args)

    monkeypatch.setattr(rankcore._KeyScan, "_gap_runs", counted)
    core = RankCore.from_scores(s, y, "test")
    assert core.scan is not None
    assert 0 < len(calls) < 2000 // 16 / 2  # the blocks after the minimum are skipped
    assert core.detection_error() == RankCore(np.sort(s[~y]), np.sort(s[y])).detection_error()


@pytest.mark.parametrize("block", [3, 1 << 16])
def test_split_classes_blockwise(monkeypatch, block, every_metric):
    monkeypatch.setattr(rankcore, "_BLOCK", block)
    rng = np.random.default_rng(block)
    s = rng.normal(size=200)
    y = rng.random(200) < 0.3
    both = rankcore._split_classes(s, y, int((~y).sum()))
    np.testing.assert_array_equal(both, np.concatenate((s[~y], s[y])))
    # float64 digits: the sorted-class path, bitwise the metrics of the classes sorted apart
    core = RankCore.from_scores(s, y, "test")
    assert core.scan is None
    assert every_metric(core) == every_metric(RankCore(np.sort(s[~y]), np.sort(s[y])))


def test_detection_error_float_comparison_branch(monkeypatch):
    # n1 n0 >= 2**50 compares every OOD run's gap in floating point, without the block bound
    monkeypatch.setattr(rankcore, "_EXACT_GAP", 0)
    monkeypatch.setattr(rankcore, "_BLOCK", 16)
    rng = np.random.default_rng(9)
    for kind in ("coarse", "float32"):
        s, y = scores(kind, rng, 700)
        core = RankCore.from_scores(s, y, "test")
        assert core.scan is not None
        ref = RankCore(np.sort(s[~y]), np.sort(s[y]))
        assert core.detection_error() == ref.detection_error()
