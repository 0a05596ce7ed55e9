"""SOOD generalisation: accuracy / macro-F1 and relative drops, with resampled CIs."""

from __future__ import annotations

import numpy as np
import pytest

from semshift.metrics import macro_f1
from semshift.protocols import Bootstrap, ScoredSet, generalisation
from semshift.protocols.generalisation import _resampled


def test_drops_by_hand():
    idt = ScoredSet("id_test", "id_test", [0, 1, 2, 0], [0, 1, 2, 1], {})
    easy = ScoredSet("easy", "covariate", [0, 1, 2, 2], [0, 1, 2, 0], {}, split="easy")
    hard = ScoredSet("hard", "covariate", [0, 1, 2, 2], [1, 1, 0, 0], {}, split="hard")
    df = generalisation(idt, [easy, hard], bootstrap=Bootstrap(0))
    v = df.set_index(["set", "metric"])["value"]
    assert v[("id_test", "accuracy")] == 0.75 and v[("hard", "accuracy")] == 0.25
    assert v[("easy", "accuracy.relative_drop")] == pytest.approx(0.0)
    assert v[("hard", "accuracy.relative_drop")] == pytest.approx((0.75 - 0.25) / 0.75)
    f1_id = macro_f1([0, 1, 2, 1], [0, 1, 2, 0])
    f1_hard = macro_f1([1, 1, 0, 0], [0, 1, 2, 2])
    assert v[("hard", "macro_f1.relative_drop")] == pytest.approx((f1_id - f1_hard) / f1_id)
    assert df.set_index("set").loc["hard", "split"].eq("hard").all()
    # SOOD's Delta, Easy -> Hard: (hard - easy) / easy (negative: Hard is worse)
    acc_easy, f1_easy = 0.75, macro_f1([0, 1, 2, 0], [0, 1, 2, 2])
    assert v[("easy", "accuracy")] == acc_easy
    assert v[("hard", "accuracy.delta_easy_hard")] == pytest.approx((0.25 - acc_easy) / acc_easy)
    assert v[("hard", "macro_f1.delta_easy_hard")] == pytest.approx((f1_hard - f1_easy) / f1_easy)
    assert not (df["metric"].str.endswith("delta_easy_hard") & (df["set"] == "easy")).any()


def test_delta_easy_hard_has_a_paired_ci_and_needs_one_set_of_each_split():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 4, 200)

    def noisy(p_ok: float, seed: int) -> list[int]:
        r = np.random.default_rng(seed)
        return np.where(r.random(200) < p_ok, y, r.integers(0, 4, 200)).tolist()

    idt = ScoredSet("id_test", "id_test", y, noisy(0.95, 0), {})
    easy = ScoredSet("e", "covariate", y, noisy(0.8, 1), {}, split="easy")
    hard = ScoredSet("h", "covariate", y, noisy(0.5, 2), {}, split="hard")
    df = generalisation(idt, [easy, hard], bootstrap=Bootstrap(300, seed=4))
    row = df[df["metric"] == "macro_f1.delta_easy_hard"].iloc[0]
    assert row["set"] == "h" and row["ci_low"] <= row["value"] <= row["ci_high"] < 0
    other = ScoredSet("h2", "covariate", y, noisy(0.5, 5), {}, split="hard")
    two = generalisation(idt, [easy, hard, other], bootstrap=Bootstrap(0))
    assert not two["metric"].str.endswith("delta_easy_hard").any()  # which Hard? none


def test_resampled_macro_f1_equals_metric_on_each_resample():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 6, 50)
    p = np.where(rng.random(50) < 0.6, y, rng.integers(0, 7, 50))
    acc, f1 = _resampled(y, p, np.random.default_rng(5), 6)
    idx = np.random.default_rng(5).integers(0, 50, size=(6, 50))
    for k in range(6):
        assert acc[k] == pytest.approx(np.mean(y[idx[k]] == p[idx[k]]))
        assert f1[k] == pytest.approx(macro_f1(p[idx[k]], y[idx[k]]), abs=1e-12)


def test_cis_bracket_values():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 4, 400)
    idt = ScoredSet("id_test", "id_test", y, np.where(rng.random(400) < 0.9, y, 0), {})
    cov = ScoredSet("cov", "covariate", y, np.where(rng.random(400) < 0.6, y, 0), {})
    df = generalisation(idt, [cov], bootstrap=Bootstrap(300))
    assert ((df["ci_low"] <= df["value"]) & (df["value"] <= df["ci_high"])).all()
    assert df.set_index("metric").loc["accuracy.relative_drop", "ci_low"] > 0
