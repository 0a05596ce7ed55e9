"""conventions="openood": OpenOOD v1.5's leaderboard numbers, ties included.

The reference is a literal copy of OpenOOD v1.5's evaluator (``openood/evaluators/metrics.py``,
``auc_and_fpr_recall``), scikit-learn calls as in its source.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics as skm

from semshift.errors import InputError
from semshift.metrics import (
    aupr_in,
    aupr_out,
    fpr_at_tpr,
    fpr_at_tpr_openood,
    get_metric,
    ranking_metrics,
)


def openood_auc_and_fpr_recall(conf, label, tpr_th):
    """OpenOOD v1.5 ``auc_and_fpr_recall`` as in its source (returns auroc, aupr_in,
    aupr_out, fpr)."""
    # following convention in ML we treat OOD as positive
    ood_indicator = np.zeros_like(label)
    ood_indicator[label == -1] = 1

    # in the postprocessor we assume ID samples will have larger
    # "conf" values than OOD samples
    # therefore here we need to negate the "conf" values
    fpr_list, tpr_list, _thresholds = skm.roc_curve(ood_indicator, -conf)
    fpr = fpr_list[np.argmax(tpr_list >= tpr_th)]

    precision_in, recall_in, _thresholds_in = skm.precision_recall_curve(1 - ood_indicator, conf)

    precision_out, recall_out, _thresholds_out = skm.precision_recall_curve(ood_indicator, -conf)

    auroc = skm.auc(fpr_list, tpr_list)
    aupr_in = skm.auc(recall_in, precision_in)
    aupr_out = skm.auc(recall_out, precision_out)

    return auroc, aupr_in, aupr_out, fpr


def openood(scores, is_ood, tpr=0.95):
    """OpenOOD's numbers for (scores, is_ood): labels are class ids, -1 for OOD."""
    label = np.where(is_ood, -1, 3)
    auroc, a_in, a_out, fpr = openood_auc_and_fpr_recall(np.asarray(scores), label, tpr)
    return {"auroc": auroc, "aupr_in": a_in, "aupr_out": a_out, "fpr": fpr}


def tied_case(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One random input from a family built to stress ties and extremes."""
    kind = rng.integers(7)
    n_id, n_ood = (int(v) for v in rng.integers(1, 60, 2))
    if kind == 0:  # tiny sets
        n_id, n_ood = (int(v) for v in rng.integers(1, 4, 2))
    elif kind == 1:  # unbalanced
        n_id, n_ood = (n_id * 20, n_ood) if rng.random() < 0.5 else (n_id, n_ood * 20)
    n = n_id + n_ood
    is_ood = np.r_[np.zeros(n_id, bool), np.ones(n_ood, bool)]
    s = rng.normal(size=n) + rng.normal(0, 1.5) * ~is_ood
    if kind in (0, 1, 2):  # rounded to a few levels
        s = np.round(s, int(rng.integers(0, 2)))
    elif kind == 3:  # saturated, as a softmax probability in float32
        s = np.clip(s, -0.5, 0.5).astype(np.float32)
    elif kind == 4:  # a few values only
        s = rng.integers(0, int(rng.integers(1, 5)), n).astype(float)
    elif kind == 5:  # all-equal blocks among continuous values
        blocks = rng.random(n) < 0.6
        s[blocks] = rng.choice([-1.0, 0.0, 1.0], blocks.sum())
    else:  # runs of equal (ID, OOD) make-up: the points roc_curve drops
        k = int(rng.integers(1, 4))
        levels = np.repeat(np.arange(n // (2 * k) + 1.0), 2 * k)[:n]
        s = levels[rng.permutation(n)] if rng.random() < 0.3 else levels
        is_ood = np.arange(n) % (2 * k) < k if rng.random() < 0.5 else is_ood
    perm = rng.permutation(n)
    return s[perm], is_ood[perm]


CASES = [tied_case(np.random.default_rng(seed)) for seed in range(400)]


@pytest.mark.parametrize("tpr", [0.95, 0.9, 0.5, 0.07, 1.0])
def test_equals_openood_reference_on_tied_inputs(tpr):
    n_fpr_differs = 0
    for s, y in CASES:
        if y.all() or not y.any():
            continue
        ref = openood(s, y, tpr)
        got = ranking_metrics(s, y, tpr=tpr, conventions="openood")
        for field in ("auroc", "aupr_in", "aupr_out", "fpr"):
            assert getattr(got, field) == pytest.approx(ref[field], abs=1e-12), (field, s, y)
        assert fpr_at_tpr_openood(s, y, tpr=tpr) == got.fpr
        n_fpr_differs += got.fpr != fpr_at_tpr(s, y, tpr=tpr, convention="ood_recall")
    # the cases do exercise the difference; at tpr = 1 the first point with all OOD scores
    # always has a different step after it, so it is never dropped
    assert (n_fpr_differs > 0) == (tpr < 1)


def test_registry_entries_equal_openood_reference():
    spec = {name: get_metric(f"{name}_openood") for name in ("auroc", "aupr_in", "aupr_out")}
    spec["fpr"] = get_metric("fpr95_openood")
    assert not spec["fpr"].higher_is_better
    assert all(spec[k].higher_is_better for k in ("auroc", "aupr_in", "aupr_out"))
    for s, y in CASES[:100]:
        ref = openood(s, y)
        for field, metric in spec.items():
            assert metric(s, y) == pytest.approx(ref[field], abs=1e-12), field


def test_known_tied_case_fpr_higher_under_openood():
    # OOD at 0, then three tied (ID, OOD) pairs: roc_curve drops the pair points at 1 and 2
    s = np.array([0.0, 1, 1, 2, 2, 3, 3])
    y = np.array([True, False, True, False, True, False, True])
    exact = ranking_metrics(s, y, tpr=0.5, convention="ood_recall", aupr_method="trapezoid")
    oo = ranking_metrics(s, y, tpr=0.5, conventions="openood")
    assert exact.fpr == pytest.approx(1 / 3)  # threshold 1: one of three ID scores
    assert oo.fpr == 1.0 == openood(s, y, 0.5)["fpr"]
    assert (oo.auroc, oo.aupr_in, oo.aupr_out) == (exact.auroc, exact.aupr_in, exact.aupr_out)
    assert (oo.convention, oo.aupr_method, oo.conventions) == ("ood_recall", "trapezoid", "openood")
    assert exact.conventions == "exact"


def test_rounded_scores_fpr95_higher_under_openood():
    # 50 ID ~ N(1.5, 1) and 50 OOD ~ N(0, 1) rounded to one decimal (the case in docs/methods.md)
    rng = np.random.default_rng(124)
    y = np.r_[np.zeros(50, bool), np.ones(50, bool)]
    s = np.round(rng.normal(size=100) + 1.5 * ~y, 1)
    oo = ranking_metrics(s, y, conventions="openood")
    assert oo.fpr == openood(s, y)["fpr"] == pytest.approx(0.54)
    assert fpr_at_tpr(s, y, convention="ood_recall") == pytest.approx(0.48)


@pytest.mark.parametrize("seed", range(20))
def test_untied_inputs_agree_with_exact_conventions(seed):
    rng = np.random.default_rng(seed)
    n_id, n_ood = (int(v) for v in rng.integers(1, 200, 2))
    s = np.r_[rng.normal(1, 1, n_id), rng.normal(0, 1, n_ood)]
    y = np.r_[np.zeros(n_id, bool), np.ones(n_ood, bool)]
    exact = ranking_metrics(s, y, convention="ood_recall", aupr_method="trapezoid")
    oo = ranking_metrics(s, y, conventions="openood")
    assert oo.fpr == exact.fpr
    assert oo.aupr_in == exact.aupr_in == aupr_in(s, y, method="trapezoid")
    assert oo.aupr_out == exact.aupr_out == aupr_out(s, y, method="trapezoid")
    assert oo.auroc == exact.auroc


@pytest.mark.parametrize("seed", range(10))
def test_invariant_to_sample_order(seed):
    s, y = CASES[seed]
    ref = ranking_metrics(s, y, conventions="openood")
    perm = np.random.default_rng(seed).permutation(s.size)
    assert ranking_metrics(s[perm], y[perm], conventions="openood") == ref
    assert fpr_at_tpr_openood(s[::-1], y[::-1]) == ref.fpr


def test_precedence_and_bad_values():
    s, y = CASES[3]
    oo = ranking_metrics(s, y, conventions="openood")
    # convention / aupr_method do not change an "openood" result
    assert ranking_metrics(s, y, conventions="openood", convention="ood_recall") == oo
    assert ranking_metrics(s, y, conventions="openood", aupr_method="trapezoid") == oo
    with pytest.raises(InputError, match="conventions must be one of"):
        ranking_metrics(s, y, conventions="OpenOOD")
    with pytest.raises(InputError, match="convention must be one of"):
        ranking_metrics(s, y, conventions="openood", convention="openood")
    with pytest.raises(InputError, match=r"tpr must be a number in \(0, 1\]"):
        fpr_at_tpr_openood(s, y, tpr=95)
    with pytest.raises(InputError, match="single class"):
        fpr_at_tpr_openood([1.0, 2.0], [True, True])
