"""evaluate_many: one ID set against many OOD subsets, equal to the single-metric functions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

from semshift.errors import InputError, UnknownNameError
from semshift.metrics import evaluate_many, get_metric, list_metrics

RANKING = list_metrics(inputs=("scores", "is_ood"))


def subsets(seed, n_id, sizes, ties):
    rng = np.random.default_rng(seed)
    ids = rng.normal(1, 1, n_id)
    sets = {f"s{k}": rng.normal(0.2 * k, 1, n) for k, n in enumerate(sizes)}
    if ties:
        ids = np.round(ids, 1)
        sets = {k: np.round(v, 1) for k, v in sets.items()}
    return ids, sets


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("sizes", [(5, 12, 1), (400, 900, 3000)])
def test_equals_single_metric_functions(ties, sizes):
    ids, sets = subsets(0, 500, sizes, ties)
    df = evaluate_many(ids, sets, RANKING)
    assert list(df.columns) == ["subset", "metric", "value", "n_id", "n_ood"]
    assert len(df) == len(sets) * len(RANKING)
    for row in df.itertuples():
        ood = sets[row.subset]
        s = np.r_[ids, ood]
        y = np.r_[np.zeros(ids.size, bool), np.ones(ood.size, bool)]
        assert row.value == pytest.approx(get_metric(row.metric)(s, y), abs=1e-12)
        assert (row.n_id, row.n_ood) == (500, ood.size)
    assert df["subset"].drop_duplicates().tolist() == list(sets)
    assert df["metric"].iloc[: len(RANKING)].tolist() == RANKING


def test_matches_sklearn_per_subset():
    ids, sets = subsets(1, 300, (50, 80, 200, 10), ties=True)
    df = evaluate_many(ids, sets, ["auroc", "aupr_in"]).set_index(["subset", "metric"])
    for k, ood in sets.items():
        s = np.r_[ids, ood]
        y = np.r_[np.ones(ids.size, bool), np.zeros(ood.size, bool)]  # ID positive
        assert df.loc[(k, "auroc"), "value"] == pytest.approx(roc_auc_score(y, s), abs=1e-12)
        assert df.loc[(k, "aupr_in"), "value"] == pytest.approx(
            average_precision_score(y, s), abs=1e-12
        )


def test_groups_form_equals_dict_form():
    ids, sets = subsets(2, 200, (30, 40, 50), ties=False)
    scores = np.concatenate(list(sets.values()))
    groups = np.repeat(["c", "a", "b"], [30, 40, 50])
    perm = np.random.default_rng(0).permutation(scores.size)
    by_groups = evaluate_many(ids, scores[perm], groups=groups[perm])
    renamed = dict(zip(["c", "a", "b"], sets.values(), strict=True))
    by_dict = evaluate_many(ids, {k: renamed[k] for k in ["a", "b", "c"]})
    pd.testing.assert_frame_equal(by_groups, by_dict)


def test_callable_metric_and_order_invariance():
    ids, sets = subsets(3, 100, (20, 30), ties=False)

    def mean_gap(scores, is_ood):
        return float(scores[~is_ood].mean() - scores[is_ood].mean())

    df = evaluate_many(ids, sets, ["auroc", mean_gap, get_metric("fpr95_ood_recall")])
    assert df["metric"].iloc[:3].tolist() == ["auroc", "mean_gap", "fpr95_ood_recall"]
    gap = df[(df.subset == "s1") & (df.metric == "mean_gap")]["value"].item()
    assert gap == pytest.approx(ids.mean() - sets["s1"].mean())
    rng = np.random.default_rng(1)
    shuffled = {k: rng.permutation(v) for k, v in sets.items()}
    pd.testing.assert_frame_equal(
        evaluate_many(rng.permutation(ids), shuffled, RANKING), evaluate_many(ids, sets, RANKING)
    )


def test_bad_input():
    ids = np.array([1.0, 2.0])
    with pytest.raises(InputError, match="evaluate_many takes metrics of"):
        evaluate_many(ids, {"a": [0.0]}, ["accuracy"])
    with pytest.raises(UnknownNameError, match="Known: "):
        evaluate_many(ids, {"a": [0.0]}, ["auroc_typo"])
    with pytest.raises(InputError, match="ood_sets is empty"):
        evaluate_many(ids, {})
    with pytest.raises(InputError, match=r"ood_sets\['b'\] is empty"):
        evaluate_many(ids, {"a": [0.0], "b": []})
    with pytest.raises(InputError, match="pass groups"):
        evaluate_many(ids, [0.0, 1.0])
    with pytest.raises(InputError, match="shape mismatch"):
        evaluate_many(ids, [0.0, 1.0], groups=[1])
    with pytest.raises(InputError, match="2 non-finite"):
        evaluate_many(ids, {"a": [0.0, np.nan, np.inf]})
