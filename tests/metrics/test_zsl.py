"""GZSL ts / tr / H and ZSL top-1 (per-class accuracy)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from semshift.errors import InputError
from semshift.metrics import gzsl, per_class_accuracy


def test_hand_case_per_class_not_per_sample():
    # seen classes 0, 1; unseen 2, 3
    labels = np.array([0, 0, 0, 0, 1, 2, 2, 3])
    pred = np.array([0, 0, 0, 0, 0, 2, 1, 3])
    r = gzsl(pred, labels, [0, 1], [2, 3])
    assert r.tr == 0.5  # class 0: 4/4, class 1: 0/1 (per-sample would be 0.8)
    assert r.ts == 0.75  # class 2: 1/2, class 3: 1/1
    assert r.h == pytest.approx(2 * 0.5 * 0.75 / 1.25)
    assert math.isnan(r.zsl_top1)
    r2 = gzsl(pred, labels, [0, 1], [2, 3], zsl_pred=np.array([9, 9, 9, 9, 9, 2, 2, 2]))
    assert r2.zsl_top1 == 0.5  # class 2: 2/2, class 3: 0/1


def test_score_matrix_gives_gzsl_and_zsl_predictions():
    labels = np.array([0, 1, 2, 2, 3])
    scores = np.array(
        [
            [5.0, 1, 0, 0],
            [0.0, 5, 0, 0],
            [0.0, 5, 1, 0],  # GZSL says seen class 1, ZSL (unseen only) says 2
            [0.0, 0, 5, 0],
            [0.0, 0, 2, 1],  # ZSL says 2 (wrong)
        ]
    )
    r = gzsl(scores, labels, [0, 1], [2, 3])
    assert r.tr == 1.0
    assert r.ts == pytest.approx((1 / 2 + 0) / 2)
    assert r.zsl_top1 == pytest.approx((2 / 2 + 0) / 2)
    assert r.h == pytest.approx(2 * 1.0 * 0.25 / 1.25)
    assert r.as_dict()["ts"] == r.ts


def test_per_class_accuracy_matches_loop():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 6, 300)
    p = np.where(rng.random(300) < 0.5, y, rng.integers(0, 6, 300))
    ref = np.mean([np.mean(p[y == c] == c) for c in np.unique(y)])
    assert per_class_accuracy(p, y) == pytest.approx(ref, abs=1e-15)


def test_zero_accuracy_gives_zero_h():
    r = gzsl([1, 0], [0, 1], [0], [1])
    assert (r.ts, r.tr, r.h) == (0.0, 0.0, 0.0)


def test_gzsl_bad_input():
    with pytest.raises(InputError, match="overlap"):
        gzsl([0, 1], [0, 1], [0, 1], [1])
    with pytest.raises(InputError, match="neither seen_classes nor unseen_classes"):
        gzsl([0, 5], [0, 5], [0], [1])
    with pytest.raises(InputError, match="both seen and unseen"):
        gzsl([0, 0], [0, 0], [0], [1])
    with pytest.raises(InputError, match="columns"):
        gzsl(np.zeros((2, 2)), [0, 2], [0], [2])
    with pytest.raises(InputError, match="shape mismatch"):
        gzsl([0, 1, 1], [0, 1], [0], [1])
