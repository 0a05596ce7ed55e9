"""Accuracy, macro-F1, confusion matrix and mIoU: sklearn references and hand cases."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import confusion_matrix as sk_confusion
from sklearn.metrics import f1_score

from semshift.errors import InputError
from semshift.metrics import accuracy, confusion_matrix, iou_per_class, macro_f1, miou


def test_accuracy_hand_case():
    assert accuracy([0, 1, 2, 2], [0, 1, 1, 2]) == 0.75
    assert accuracy(np.array([3]), np.array([3])) == 1.0


def test_accuracy_unknown_samples_are_explicit():
    with pytest.raises(InputError, match=r"1 unknown sample\(s\) \(-1\), first at index 1"):
        accuracy([0, 1, 2], [0, -1, 1])
    assert accuracy([0, 1, 2], [0, -1, 1], known_only=True) == 0.5


@pytest.mark.parametrize("seed", range(6))
def test_macro_f1_matches_sklearn(seed):
    rng = np.random.default_rng(seed)
    n, c = 200, 4 + seed
    y = rng.integers(0, c, n)
    # mostly right, some classes only predicted, some never predicted
    p = np.where(rng.random(n) < 0.6, y, rng.integers(0, c + 2, n))
    assert macro_f1(p, y) == pytest.approx(f1_score(y, p, average="macro"), abs=1e-12)


def test_macro_f1_hand_case():
    # class 0: TP 1, FP 1, FN 0 -> 2/3; class 1: TP 2, FP 0, FN 1 -> 4/5
    assert macro_f1([0, 0, 1, 1], [0, 1, 1, 1]) == pytest.approx((2 / 3 + 4 / 5) / 2)
    # a class that is only predicted scores 0 and counts in the mean
    assert macro_f1([0, 2], [0, 0]) == pytest.approx((2 / 3 + 0) / 2)
    with pytest.raises(InputError, match="num_classes=2"):
        macro_f1([0, 2], [0, 0], num_classes=2)


def test_macro_f1_invariant_to_order_and_class_renaming():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 5, 100)
    p = np.where(rng.random(100) < 0.5, y, rng.integers(0, 5, 100))
    perm = rng.permutation(100)
    rename = np.array([3, 0, 4, 1, 2])
    ref = macro_f1(p, y)
    assert macro_f1(p[perm], y[perm]) == ref
    assert macro_f1(rename[p], rename[y]) == pytest.approx(ref, abs=1e-15)


def test_confusion_matrix_matches_sklearn_and_ignores_index():
    rng = np.random.default_rng(1)
    t = rng.integers(0, 5, (4, 8, 8))
    p = rng.integers(0, 5, (4, 8, 8))
    ref = sk_confusion(t.ravel(), p.ravel(), labels=np.arange(5))
    np.testing.assert_array_equal(confusion_matrix(p, t, 5), ref)
    t_ign = t.copy()
    t_ign[:, :2] = 255
    keep = t_ign.ravel() != 255
    ref_ign = sk_confusion(t.ravel()[keep], p.ravel()[keep], labels=np.arange(5))
    m = confusion_matrix(p, t_ign, 5)
    np.testing.assert_array_equal(m, ref_ign)
    assert m.sum() == keep.sum()


def test_confusion_matrix_rejects_out_of_range():
    with pytest.raises(InputError, match=r"target has 1 id\(s\) outside \[0, 3\)"):
        confusion_matrix([0, 1], [0, 7], 3)
    with pytest.raises(InputError, match=r"pred has 1 id\(s\) outside \[0, 3\)"):
        confusion_matrix([0, 3], [0, 1], 3)
    with pytest.raises(InputError, match="ignore_index"):
        confusion_matrix([0, 1], [0, 255], 3, ignore_index=None)
    with pytest.raises(InputError, match="shape mismatch"):
        confusion_matrix([0, 1], [0, 1, 1], 3)


def test_miou_hand_case():
    m = np.array([[2, 1, 0], [0, 1, 0], [0, 0, 0]])
    np.testing.assert_allclose(iou_per_class(m)[:2], [2 / 3, 1 / 2])
    assert np.isnan(iou_per_class(m)[2])  # absent class: left out of the mean
    assert miou(m) == pytest.approx((2 / 3 + 1 / 2) / 2)
    # a class only predicted (never in the target) counts with IoU 0
    m2 = np.array([[1, 1], [0, 0]])
    assert miou(m2) == pytest.approx((1 / 2 + 0) / 2)


def test_miou_from_segmentation_maps_matches_direct_iou():
    rng = np.random.default_rng(2)
    t = rng.integers(0, 4, (3, 16, 16))
    p = np.where(rng.random(t.shape) < 0.7, t, rng.integers(0, 4, t.shape))
    ious = []
    for c in range(4):
        inter = np.sum((p == c) & (t == c))
        union = np.sum((p == c) | (t == c))
        ious.append(inter / union)
    assert miou(confusion_matrix(p, t, 4)) == pytest.approx(np.mean(ious), abs=1e-15)
    # accumulating per-image matrices gives the same split-level value
    total = sum(confusion_matrix(p[i], t[i], 4) for i in range(3))
    assert miou(total) == miou(confusion_matrix(p, t, 4))


def test_classification_bad_input():
    with pytest.raises(InputError, match="integer class ids"):
        accuracy([0.0, 1.0], [0, 1])
    with pytest.raises(InputError, match="shape mismatch"):
        accuracy([0, 1], [0, 1, 2])
    with pytest.raises(InputError, match="empty"):
        macro_f1([], [])
    with pytest.raises(InputError, match=r"below 0; first at index 1"):
        accuracy([0, -2], [0, 1])
    with pytest.raises(InputError, match="square"):
        miou(np.zeros((2, 3), int))
    with pytest.raises(InputError, match="all zeros"):
        miou(np.zeros((2, 2), int))
