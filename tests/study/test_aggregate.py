"""Known answers for the study aggregates: means, sds and bootstrap CIs over models against a
literal loop with the same draws, ranks with each metric's direction, and correlations against
scipy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from semshift.study import (
    accuracy_relation,
    aggregate_over_models,
    detector_ranks,
    mean_ranks,
    model_values,
)


def _rows(values: dict[tuple[str, str, str, int], float]) -> pd.DataFrame:
    """Tidy study rows from {(model, detector, metric, seed): value} on one dataset/set."""
    rows = []
    for (model, det, metric, seed), v in values.items():
        rows.append({"model": model, "dataset": "d", "seed": seed, "protocol": "osr",
                     "set": "ood", "split": "ood", "semantic_level": None,
                     "covariate_level": None, "detector": det, "metric": metric, "value": v,
                     "error": None if np.isfinite(v) else "failed"})  # fmt: skip
    return pd.DataFrame(rows)


def test_model_values_average_seeds_and_count_failures():
    res = _rows({("a", "msp", "auroc", 0): 0.6, ("a", "msp", "auroc", 1): 0.8,
                 ("b", "msp", "auroc", 0): np.nan, ("b", "msp", "auroc", 1): 0.5})  # fmt: skip
    got = model_values(res).set_index("model")
    assert got.loc["a", "value"] == pytest.approx(0.7) and got.loc["a", "n_seeds"] == 2
    assert got.loc["b", "value"] == 0.5 and got.loc["b", "n_failed"] == 1
    assert got["semantic_level"].isna().all()  # null keys stay null


def test_mean_sd_and_ci_over_models_match_a_literal_loop():
    rng = np.random.default_rng(3)
    vals = rng.uniform(0.5, 0.9, size=(6, 2))  # models x detectors
    res = _rows({(f"m{i}", d, "auroc", 0): vals[i, j]
                 for i in range(6) for j, d in enumerate(["msp", "knn"])})  # fmt: skip
    out = aggregate_over_models(res, n_resamples=400, level=0.9, seed=11).set_index("detector")
    draws = np.random.default_rng(11).integers(0, 6, size=(400, 6))
    for j, d in enumerate(["msp", "knn"]):
        x = vals[:, j]
        assert out.loc[d, "mean"] == pytest.approx(x.mean(), abs=1e-15)
        assert out.loc[d, "sd"] == pytest.approx(x.std(ddof=1), abs=1e-15)
        boot = np.array([x[idx].mean() for idx in draws])
        lo, hi = np.quantile(boot, [0.05, 0.95])
        assert (out.loc[d, "ci_low"], out.loc[d, "ci_high"]) == pytest.approx((lo, hi))
        assert out.loc[d, "n_models"] == 6 and out.loc[d, "n_failed"] == 0


def test_a_missing_model_is_left_out_and_one_model_has_no_spread():
    res = _rows({("a", "msp", "auroc", 0): 0.6, ("b", "msp", "auroc", 0): np.nan,
                 ("a", "knn", "auroc", 0): 0.7})  # fmt: skip
    out = aggregate_over_models(res, n_resamples=50).set_index("detector")
    assert out.loc["msp", "mean"] == 0.6 and out.loc["msp", "n_models"] == 1
    assert out.loc["msp", "n_failed"] == 1
    assert np.isnan(out.loc["msp", "sd"]) and np.isnan(out.loc["msp", "ci_low"])


def test_aggregation_is_deterministic_and_paired():
    rng = np.random.default_rng(0)
    res = _rows({(f"m{i}", d, "auroc", 0): float(rng.uniform())
                 for i in range(5) for d in ("a", "b")})  # fmt: skip
    one = aggregate_over_models(res, n_resamples=100, seed=4)
    two = aggregate_over_models(res.sample(frac=1, random_state=1), n_resamples=100, seed=4)
    cols = ["detector", "mean", "ci_low", "ci_high"]
    one = one.sort_values("detector").reset_index(drop=True)[cols]
    two = two.sort_values("detector").reset_index(drop=True)[cols]
    pd.testing.assert_frame_equal(one, two)


def test_ranks_follow_each_metrics_direction_and_share_ties():
    res = _rows({
        ("a", "msp", "auroc", 0): 0.9, ("a", "knn", "auroc", 0): 0.7, ("a", "vim", "auroc", 0): 0.7,
        ("a", "msp", "fpr95", 0): 0.2, ("a", "knn", "fpr95", 0): 0.5, ("a", "vim", "fpr95", 0): 0.1,
        ("b", "msp", "auroc", 0): 0.6, ("b", "knn", "auroc", 0): 0.8, ("b", "vim", "auroc", 0): 0.7,
    })  # fmt: skip
    r = detector_ranks(res).set_index(["model", "metric", "detector"])["rank"]
    assert r[("a", "auroc", "msp")] == 1 and r[("a", "auroc", "knn")] == 2.5
    assert r[("a", "fpr95", "vim")] == 1 and r[("a", "fpr95", "knn")] == 3  # lower is better
    m = mean_ranks(detector_ranks(res))
    auroc = m[m["metric"] == "auroc"].set_index("detector")["mean_rank"]
    assert auroc.to_dict() == {"knn": 1.75, "msp": 2.0, "vim": 2.25}  # (2.5 + 1) / 2 ...
    assert list(auroc.index) == ["knn", "msp", "vim"]  # best first


def test_accuracy_relation_equals_scipy():
    rng = np.random.default_rng(5)
    acc = rng.uniform(0.5, 0.9, 8)
    auroc = 0.3 + 0.6 * acc + rng.normal(0, 0.02, 8)
    rows = []
    for i in range(8):
        rows.append({"model": f"m{i}", "dataset": "d", "seed": 0, "protocol": "osr",
                     "set": "id_test", "split": None, "detector": None, "metric": "accuracy",
                     "value": acc[i]})  # fmt: skip
        rows.append({"model": f"m{i}", "dataset": "d", "seed": 0, "protocol": "osr",
                     "set": "ood", "split": "ood", "detector": "msp", "metric": "auroc",
                     "value": auroc[i]})  # fmt: skip
    rel, points = accuracy_relation(pd.DataFrame(rows), n_resamples=300, seed=2)
    assert len(rel) == 1 and len(points) == 8
    r = rel.iloc[0]
    assert r["pearson"] == pytest.approx(stats.pearsonr(acc, auroc).statistic)
    assert r["spearman"] == pytest.approx(stats.spearmanr(acc, auroc).statistic)
    assert r["pearson_low"] <= r["pearson"] <= r["pearson_high"]
    assert r["pearson_low"] > 0.5 and r["n_models"] == 8
