"""The metric registry and a contract run over every registered metric."""

from __future__ import annotations

import math

import numpy as np
import pytest

from semshift.errors import InputError, UnknownNameError
from semshift.metrics import get_metric, list_metrics
from semshift.metrics.registry import INPUT_NAMES, register_metric


def inputs_for(spec, seed=0, n=60):
    """Generated inputs, in the spec's order, for any registered metric."""
    rng = np.random.default_rng(seed)
    is_ood = np.arange(n) % 3 == 0
    scores = np.round(rng.normal(size=n) + (~is_ood), 1)
    pred = rng.integers(0, 4, n)
    labels = np.where(rng.random(n) < 0.6, pred, rng.integers(0, 4, n))
    pool = {
        "scores": scores,
        "is_ood": is_ood,
        "correct": ~is_ood & (rng.random(n) < 0.7),
        "error": rng.random(n) < 0.3,
        "pred": pred,
        "labels": labels,
        "confusion": rng.integers(0, 20, (4, 4)),
    }
    return [pool[name] for name in spec.inputs]


ALL = list_metrics()


def test_registry_lists_every_issue_metric():
    expected = {
        "auroc",
        "fpr95",
        "fpr95_ood_recall",
        "aupr_in",
        "aupr_out",
        "aupr_in_trapezoid",
        "aupr_out_trapezoid",
        "detection_error",
        "accuracy",
        "macro_f1",
        "miou",
        "oscr",
        "oscr_arpl",
        "aurc",
        "eaurc",
        "augrc",
    }
    assert expected <= set(ALL)
    assert ALL == sorted(ALL)
    assert get_metric("fpr95").kwargs == {"tpr": 0.95, "convention": "id_recall"}
    assert "ood_recall" in get_metric("fpr95_ood_recall").description
    assert get_metric("auroc").higher_is_better
    assert not get_metric("fpr95").higher_is_better
    assert list_metrics(inputs=("pred", "labels")) == ["accuracy", "macro_f1"]


def test_unknown_name_lists_known_names():
    with pytest.raises(UnknownNameError) as info:
        get_metric("aurox")
    msg = str(info.value)
    assert "Did you mean 'auroc'" in msg
    assert "Known: accuracy, augrc, aupr_in" in msg
    assert isinstance(info.value, KeyError) and isinstance(info.value, ValueError)


def test_register_rejects_duplicates_and_unknown_inputs():
    with pytest.raises(ValueError, match="already registered"):
        register_metric("auroc", higher_is_better=True, inputs=("scores",), description="x")(
            lambda s: 0.0
        )
    with pytest.raises(ValueError, match="unknown input"):
        register_metric("new", higher_is_better=True, inputs=("logits",), description="x")


@pytest.mark.parametrize("name", ALL)
def test_contract(name):
    """Every metric: a finite value in [0, 1], invariant to sample order, NaN rejected."""
    spec = get_metric(name)
    assert set(spec.inputs) <= set(INPUT_NAMES)
    assert spec.description
    args = inputs_for(spec)
    if name == "oscr_arpl":
        # the reference code's result depends on the sort order of tied scores (documented);
        # the order-invariance contract holds without ties
        args[0] = np.random.default_rng(5).normal(size=args[0].size) + ~args[1]
    value = spec(*args)
    assert isinstance(value, float) and math.isfinite(value)
    assert -1e-12 <= value <= 1 + 1e-12 or name == "eaurc"
    assert spec(*args) == value  # deterministic
    if spec.inputs != ("confusion",):
        perm = np.random.default_rng(1).permutation(args[0].shape[0])
        assert spec(*[a[perm] for a in args]) == pytest.approx(value, abs=1e-12)
    else:  # relabelling classes consistently permutes rows and columns
        perm = np.random.default_rng(1).permutation(4)
        assert spec(args[0][np.ix_(perm, perm)]) == pytest.approx(value, abs=1e-15)
    if "scores" in spec.inputs:
        bad = [a.copy() for a in args]
        k = spec.inputs.index("scores")
        bad[k][[3, 7]] = np.nan
        with pytest.raises(InputError, match=r"2 non-finite value\(s\).*first at index 3"):
            spec(*bad)


@pytest.mark.parametrize("name", list_metrics(inputs=("scores", "is_ood")))
def test_contract_scores_direction(name):
    """Separable data gives the best value; reversed scores the worst for ranking metrics."""
    spec = get_metric(name)
    s = np.r_[np.arange(10.0, 20.0), np.arange(5.0)]
    y = np.r_[np.zeros(10, bool), np.ones(5, bool)]
    best = spec(s, y)
    worst = spec(-s, y)
    if spec.higher_is_better:
        assert best == 1.0 and worst < 0.5
    else:
        assert best == 0.0 and worst >= 0.5
