"""Random-model sanity check: a separating detector is flagged, a random one is not."""

from __future__ import annotations

import numpy as np
import pytest

from semshift.errors import InputError
from semshift.protocols import Bootstrap, ScoredSet, sanity


def run(seed):
    rng = np.random.default_rng(seed)
    n, m = 2000, 1500
    idt = ScoredSet("id_test", "id_test", np.zeros(n, int), np.zeros(n, int),
                    {"random": rng.normal(0, 1, n), "leaky": rng.normal(0.5, 1, n)})  # fmt: skip
    ood = ScoredSet("ood", "ood", -np.ones(m, int), np.zeros(m, int),
                    {"random": rng.normal(0, 1, m), "leaky": rng.normal(0, 1, m)})  # fmt: skip
    cov = ScoredSet("cov", "covariate", np.zeros(m, int), np.zeros(m, int),
                    {"random": rng.normal(0, 1, m)}, errors={"leaky": "nan logits"})  # fmt: skip
    return [idt, ood, cov]


def test_flags_separating_detector_only():
    df = sanity({1: run(1), 0: run(0)}, delta=0.05, bootstrap=Bootstrap(200))
    auc = df[df["metric"] == "auroc"]
    assert auc["split"].drop_duplicates().tolist() == ["seed0", "seed1"]
    assert len(auc) == 8  # 2 seeds x 2 sets x 2 detectors
    flags = df[df["metric"] == "flagged"].set_index("detector")
    assert flags.loc["leaky", "value"] == 1.0 and flags.loc["random", "value"] == 0.0
    assert flags["split"].eq("all").all() and flags["set"].isna().all()
    err = auc[(auc["detector"] == "leaky") & (auc["set"] == "cov")]
    assert err["error"].eq("set 'cov': nan logits").all()
    rnd = auc[auc["detector"] == "random"]
    assert ((rnd["ci_low"] < 0.55) & (rnd["ci_high"] > 0.45)).all()


def test_point_values_without_bootstrap():
    df = sanity({0: run(0)}, delta=0.2, bootstrap=Bootstrap(0))
    flags = df[df["metric"] == "flagged"].set_index("detector")["value"]
    assert flags["leaky"] == 0.0  # AUROC ~0.64 stays inside 0.5 +- 0.2
    assert df["ci_low"].isna().all()


def test_bad_runs():
    with pytest.raises(InputError, match="exactly one id_test"):
        sanity({0: run(0)[1:]})
    with pytest.raises(InputError, match="delta"):
        sanity({0: run(0)}, delta=0.7)


def test_failure_goal_scores_correct_against_incorrect_and_the_set():
    """Appendix F of ImageNet-OOD: on a random model, correct ID images (positives) against the
    misclassified ones and the OOD images; a detector that knows correctness is flagged."""
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(7)
    n, m = 1500, 800
    labels = rng.integers(0, 10, n)
    preds = np.where(rng.random(n) < 0.2, labels, rng.integers(0, 10, n))  # ~28 % correct
    correct = preds == labels
    scores = {"random": rng.normal(0, 1, n), "knows": rng.normal(0, 1, n) + 1.0 * correct}
    idt = ScoredSet("id_test", "id_test", labels, preds, scores)
    ood = ScoredSet("ood", "ood", -np.ones(m, int), rng.integers(0, 10, m),
                    {"random": rng.normal(0, 1, m), "knows": rng.normal(0, 1, m)})  # fmt: skip
    df = sanity({0: [idt, ood]}, bootstrap=Bootstrap(200), goals=("failure",))
    assert not (df["metric"] == "auroc").any()  # the new-class goal left out
    fail = df[df["metric"] == "failure.auroc"].set_index("detector")
    for det in ("random", "knows"):
        s = np.r_[idt.scores[det][correct], idt.scores[det][~correct], ood.scores[det]]
        y = np.r_[np.ones(correct.sum(), bool), np.zeros((~correct).sum() + m, bool)]
        assert fail.loc[det, "value"] == pytest.approx(roc_auc_score(y, s), abs=1e-12)
        assert fail.loc[det, "n_id"] == correct.sum()
        assert fail.loc[det, "n_ood"] == n - correct.sum() + m
    flags = df[df["metric"] == "failure.flagged"].set_index("detector")["value"]
    assert flags["knows"] == 1.0 and flags["random"] == 0.0


def test_failure_goal_is_n_a_when_nothing_or_everything_is_correct():
    df = sanity({0: run(0)}, bootstrap=Bootstrap(0))  # every ID image correct
    fail = df[df["metric"] == "failure.auroc"]
    assert fail["value"].isna().all()
    assert fail["error"].str.startswith("n/a: every ID test image is classified correctly").all()
    with pytest.raises(InputError, match="goals must be among newclass, failure"):
        sanity({0: run(0)}, goals=("newclass", "nope"))
