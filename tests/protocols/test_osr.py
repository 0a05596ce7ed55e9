"""OSR protocol: known answers per pooled split, OSCR, CIs and error rows."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from semshift.metrics import bootstrap_ci, oscr
from semshift.protocols import Bootstrap, ScoredSet, osr


def sets():
    idt = ScoredSet(
        "id_test", "id_test", [0, 1, 2, 1], [0, 1, 0, 1],
        {"msp": np.array([0.9, 0.7, 0.3, 0.6]), "knn": np.array([1.0, 2.0, 3.0, 4.0])},
    )  # fmt: skip
    e1 = ScoredSet("e1", "ood", [-1, -1], [0, 0], {"msp": [0.5, 0.1], "knn": [0.0, 5.0]},
                   split="easy")  # fmt: skip
    e2 = ScoredSet("e2", "ood", [-1], [1], {"msp": [0.8], "knn": [2.5]}, split="easy")
    hard = ScoredSet("hard", "ood", [-1, -1], [2, 0], {"msp": [0.65, 0.95]},
                     errors={"knn": "faiss index failed"}, split="hard")  # fmt: skip
    cov = ScoredSet("cov", "covariate", [0], [0], {"msp": [0.0], "knn": [0.0]})
    return idt, [e1, hard, e2, cov]


def test_known_answers_and_pooling():
    idt, others = sets()
    df = osr(idt, others, metrics=["auroc", "fpr95"], bootstrap=Bootstrap(0))
    acc = df[df["metric"] == "accuracy"].iloc[0]
    assert acc["value"] == 0.75 and acc["set"] == "id_test" and acc["detector"] is None
    easy = df[(df["set"] == "e1+e2") & (df["detector"] == "msp")].set_index("metric")
    assert easy.loc["auroc", "split"] == "easy"
    # ID msp [0.9, 0.7, 0.3, 0.6] vs pooled [0.5, 0.1, 0.8]: 8 of 12 pairs
    assert easy.loc["auroc", "value"] == pytest.approx(8 / 12)
    y = np.r_[np.ones(4), np.zeros(3)]
    s = np.r_[idt.scores["msp"], 0.5, 0.1, 0.8]
    assert easy.loc["auroc", "value"] == pytest.approx(roc_auc_score(y, s))
    # OSCR: correct knowns 0.9, 0.7, 0.6 vs unknowns: (3 + 2 + 2) / (4 * 3)
    assert easy.loc["oscr", "value"] == pytest.approx(7 / 12)
    correct = np.r_[idt.correct, np.zeros(3, bool)]
    assert easy.loc["oscr", "value"] == pytest.approx(oscr(s, y == 0, correct))
    assert (easy["n_id"] == 4).all() and (easy["n_ood"] == 3).all()
    assert list(easy.index) == ["auroc", "oscr", "fpr95"]
    assert "cov" not in set(df["set"])  # covariate sets are not part of OSR


def test_failed_detector_gives_error_rows_and_others_survive():
    idt, others = sets()
    df = osr(idt, others, metrics=["auroc"], bootstrap=Bootstrap(50))
    bad = df[(df["set"] == "hard") & (df["detector"] == "knn")]
    assert len(bad) == 2 and bad["value"].isna().all()
    assert bad["error"].str.contains("faiss index failed").all()
    good = df[(df["set"] == "hard") & (df["detector"] == "msp")]
    assert good["error"].isna().all() and good["value"].notna().all()


def test_cis_equal_bootstrap_ci_and_can_be_turned_off():
    rng = np.random.default_rng(0)
    idt = ScoredSet("id_test", "id_test", np.zeros(80, int), np.zeros(80, int),
                    {"msp": rng.normal(1, 1, 80)})  # fmt: skip
    ood = ScoredSet("ood", "ood", -np.ones(50, int), np.zeros(50, int),
                    {"msp": rng.normal(0, 1, 50)})  # fmt: skip
    df = osr(idt, [ood], metrics=["auroc", "aupr_in"], bootstrap=Bootstrap(200, seed=4))
    row = df[df["metric"] == "auroc"].iloc[0]
    s = np.r_[idt.scores["msp"], ood.scores["msp"]]
    ref = bootstrap_ci("auroc", s, np.r_[np.zeros(80, bool), np.ones(50, bool)],
                       n_resamples=200, seed=4)  # fmt: skip
    assert (row["ci_low"], row["ci_high"]) == (ref.low, ref.high)
    y = np.r_[np.zeros(80, bool), np.ones(50, bool)]
    fpr = bootstrap_ci("fpr95", s, y, n_resamples=200, seed=4)
    df2 = osr(idt, [ood], metrics=["fpr95"], bootstrap=Bootstrap(200, seed=4))
    r2 = df2[df2["metric"] == "fpr95"].iloc[0]
    assert (r2["ci_low"], r2["ci_high"]) == (fpr.low, fpr.high)
    assert np.isnan(df[df["metric"] == "aupr_in"]["ci_low"]).all()  # no fast CI for AUPR
    off = osr(idt, [ood], bootstrap=Bootstrap(0))
    assert off["ci_low"].isna().all() and off["value"].notna().all()


def test_sets_without_split_pool_alone_or_are_left_out_when_others_have_splits():
    idt, others = sets()
    cell = ScoredSet("easy_noise3", "ood", [-1, -1], [0, 1], {"msp": [0.2, 0.4], "knn": [1, 2]},
                     semantic_level="3", covariate_level="3")  # fmt: skip
    df = osr(idt, [*others, cell], metrics=["auroc"], bootstrap=Bootstrap(0))
    assert set(df["set"].dropna()) == {"id_test", "e1+e2", "hard"}  # the grid cell is left out
    alone = osr(idt, [cell], metrics=["auroc"], bootstrap=Bootstrap(0))
    row = alone[(alone["detector"] == "msp") & (alone["metric"] == "auroc")].iloc[0]
    assert row["set"] == "easy_noise3" and row["split"] is None
    # ID msp [0.9, 0.7, 0.3, 0.6] vs [0.2, 0.4]: 7 of 8 pairs
    assert row["value"] == pytest.approx(7 / 8)
