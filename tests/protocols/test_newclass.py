"""New-class vs failure detection and the AUROC decomposition."""

from __future__ import annotations

import numpy as np
import pytest

from semshift.protocols import Bootstrap, ScoredSet, newclass_failure


def table(boot=None):
    idt = ScoredSet("id_test", "id_test", [0, 1, 2, 3], [0, 1, 2, 0],
                    {"msp": [0.9, 0.8, 0.7, 0.2]})  # fmt: skip
    # covariate set: the classifier is wrong on half of it (the two low-scored images)
    cov = ScoredSet("cov", "covariate", [0, 1, 2, 3], [0, 1, 0, 0],
                    {"msp": [0.6, 0.5, 0.35, 0.15]}, split="hard")  # fmt: skip
    ood = ScoredSet("ood", "ood", [-1, -1], [0, 0], {"msp": [0.4, 0.1]})
    return newclass_failure(idt, [cov, ood], bootstrap=boot or Bootstrap(0))


def value(df, protocol, set_, metric="auroc"):
    r = df[(df["protocol"] == protocol) & (df["set"] == set_) & (df["metric"] == metric)]
    assert len(r) == 1
    return r.iloc[0]


def test_newclass_and_failure_positives_and_negatives():
    df = table()
    # new-class: every cov image positive vs OOD [0.4, 0.1]: 0.6, 0.5 beat both; 0.35, 0.15 one
    r = value(df, "newclass", "cov")
    assert r["value"] == pytest.approx(6 / 8) and (r["n_id"], r["n_ood"]) == (4, 2)
    assert r["split"] == "hard"
    # failure: positives = correct cov [0.6, 0.5]; negatives = wrong cov [0.35, 0.15] + OOD
    r = value(df, "failure", "cov")
    assert r["value"] == 1.0 and (r["n_id"], r["n_ood"]) == (2, 4)
    # id_test: new-class 7 of 8 pairs; failure: correct [0.9, 0.8, 0.7] vs [0.2, 0.4, 0.1]
    assert value(df, "newclass", "id_test")["value"] == pytest.approx(7 / 8)
    assert value(df, "failure", "id_test")["value"] == 1.0


def test_decomposition_identity_is_exact():
    rng = np.random.default_rng(3)
    n = 300
    labels = rng.integers(0, 5, n)
    preds = np.where(rng.random(n) < 0.7, labels, (labels + 1) % 5)
    idt = ScoredSet("id_test", "id_test", labels, preds,
                    {"a": rng.normal(1, 1, n) + (preds == labels)})  # fmt: skip
    ood = ScoredSet("ood", "ood", -np.ones(120, int), np.zeros(120, int),
                    {"a": rng.normal(0, 1, 120)})  # fmt: skip
    df = newclass_failure(idt, [ood], bootstrap=Bootstrap(100))
    d = df[df["protocol"] == "decomposition"].set_index("metric")["value"]
    assert d["acc"] == pytest.approx((preds == labels).mean())
    assert d["auroc"] == pytest.approx(
        d["acc"] * d["auroc_correct"] + (1 - d["acc"]) * d["auroc_incorrect"], abs=1e-12
    )
    assert d["auroc"] == value(df, "newclass", "id_test")["value"]
    cis = df[df["protocol"] == "decomposition"]
    assert (cis["ci_low"] <= cis["value"]).all() and (cis["value"] <= cis["ci_high"]).all()


def test_undefined_term_and_failed_detector_are_error_rows():
    idt = ScoredSet("id_test", "id_test", [0, 1], [0, 1], {"a": [2.0, 3.0]},
                    errors={"b": "out of memory"})  # fmt: skip
    ood = ScoredSet("ood", "ood", [-1], [0], {"a": [1.0], "b": [0.0]})
    df = newclass_failure(idt, [ood], bootstrap=Bootstrap(20))
    inc = df[(df["detector"] == "a") & (df["metric"] == "auroc_incorrect")].iloc[0]
    assert np.isnan(inc["value"]) and inc["error"].startswith("n/a: no misclassified")
    b = df[df["detector"] == "b"]
    assert (
        len(b) == 7 and b["value"].isna().all() and b["error"].str.contains("out of memory").all()
    )


def test_bootstrap_equals_explicit_resamples():
    from semshift.metrics import auroc, auroc_decomposition, fpr_at_tpr, oscr
    from semshift.protocols._bootstrap import pool_bootstrap

    rng = np.random.default_rng(5)
    pool = np.round(rng.normal(0, 1, 30), 1)
    sets = [np.round(rng.normal(1, 1, 25), 1), np.round(rng.normal(0.5, 1, 12), 1)]
    corrects = [rng.random(25) < 0.6, rng.random(12) < 0.5]
    out = pool_bootstrap([pool], [sets], corrects, n_resamples=4, seed=11, fpr95=True, threads=1)
    draws = np.random.default_rng(11)
    ip = draws.integers(0, 30, size=(4, 30))
    idx = [draws.integers(0, n, size=(4, n)) for n in (25, 12)]
    for k in range(2):
        for b in range(4):
            s, c, p = sets[k][idx[k][b]], corrects[k][idx[k][b]], pool[ip[b]]
            both = np.r_[s, p]
            is_ood = np.r_[np.zeros(s.size, bool), np.ones(p.size, bool)]
            d = auroc_decomposition(both, is_ood, np.r_[c, np.zeros(p.size, bool)])
            got = {name: out[name][0, k, b] for name in out}
            assert got["newclass"] == pytest.approx(d.auroc, abs=1e-14)
            assert got["acc"] == pytest.approx(d.acc, abs=1e-14)
            assert got["auroc_correct"] == pytest.approx(d.auroc_correct, abs=1e-14)
            assert got["auroc_incorrect"] == pytest.approx(d.auroc_incorrect, abs=1e-14)
            assert got["auroc_correct_vs_incorrect"] == pytest.approx(
                d.auroc_correct_vs_incorrect, abs=1e-14
            )
            fail = auroc(both, ~np.r_[c, np.zeros(p.size, bool)])
            assert got["failure"] == pytest.approx(fail, abs=1e-14)
            c_all = np.r_[c, np.zeros(p.size, bool)]
            assert got["oscr"] == pytest.approx(oscr(both, is_ood, c_all), abs=1e-14)
            assert got["fpr95"] == pytest.approx(fpr_at_tpr(both, is_ood), abs=1e-14)
