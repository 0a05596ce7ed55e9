"""The distance-regression protocol on planted sets whose answer is known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from semshift.errors import InputError
from semshift.protocols import ProtocolInputs, ScoredSet, get_protocol
from semshift.protocols.distance_regression import (
    DistanceRegressionConfig,
    distance_regression,
    set_distances,
)
from semshift.protocols.registry import SetDescription

N_BINS, M = 10, 20


def _planted(offset: int, name: str, role: str) -> tuple[ScoredSet, np.ndarray]:
    """Subset b (by distance 0.1 (b + 1)) has AUROC (b + 1 + offset) / 20 against the ID set
    below: AUROC = 0.05 offset + 0.5 d exactly (slope 0.5, intercept 0.05 offset)."""
    b = np.repeat(np.arange(N_BINS), M)
    scores = 19.0 - (b + offset)  # below b + 1 + offset of the 20 ID scores
    labels = np.zeros(b.size, int) if role == "covariate" else np.full(b.size, -1)
    dist = 0.1 * (b + 1) + np.tile(np.linspace(-0.01, 0.01, M), N_BINS)
    perm = np.random.default_rng(offset).permutation(b.size)  # order must not matter
    s = ScoredSet(name, role, labels[perm], labels[perm], {"msp": scores[perm]})
    return s, dist[perm]


def _id_test() -> ScoredSet:
    return ScoredSet("id_test", "id_test", [0] * 20, [0] * 20, {"msp": np.arange(20) + 0.5})


def _by(df: pd.DataFrame, split: str, metric: str) -> pd.Series:
    return df[(df["split"] == split) & (df["metric"] == metric)].iloc[0]


def test_planted_sides_have_known_lines_and_a_verdict():
    cov, d_cov = _planted(6, "imagenet-r", "covariate")
    sem, d_sem = _planted(0, "imagenet-ood", "ood")
    df = distance_regression(
        _id_test(), [cov], [sem], {"imagenet-r": d_cov, "imagenet-ood": d_sem}, n_bins=N_BINS
    )
    assert df["error"].isna().all()
    for side, intercept in (("covariate", 0.3), ("semantic", 0.0)):
        assert _by(df, side, "slope")["value"] == pytest.approx(0.5)
        assert _by(df, side, "intercept")["value"] == pytest.approx(intercept, abs=1e-12)
        assert _by(df, side, "r2")["value"] == pytest.approx(1.0)
        bins = df[(df["split"] == side) & (df["metric"] == "auroc")]
        level = bins[f"{side}_level"].tolist()
        assert level == [str(k) for k in range(1, N_BINS + 1)]
        offset = 6 if side == "covariate" else 0
        np.testing.assert_allclose(bins["value"], (np.arange(1, 11) + offset) / 20)
        assert bins["n_ood"].tolist() == [M] * N_BINS and bins["n_id"].tolist() == [20] * N_BINS
    assert _by(df, "verdict", "intercept_difference")["value"] == pytest.approx(0.3)
    assert _by(df, "verdict", "intercepts_differ")["value"] == 1.0
    assert _by(df, "verdict", "slopes_differ")["value"] == 0.0  # equal slopes, zero width
    assert _by(df, "verdict", "slope_difference")["set"] == "imagenet-r vs imagenet-ood"


def test_overlapping_sides_give_no_verdict():
    rng = np.random.default_rng(5)
    cov, d_cov = _planted(0, "r", "covariate")
    sem, _ = _planted(0, "ood", "ood")
    # noise in the distances makes the fits imprecise; the same data on both sides overlaps
    d_cov = d_cov + rng.normal(0, 0.3, d_cov.size)
    df = distance_regression(_id_test(), [cov], [sem], {"r": d_cov, "ood": d_cov}, n_bins=N_BINS)
    assert _by(df, "verdict", "intercepts_differ")["value"] == 0.0
    assert _by(df, "verdict", "intercept_difference")["value"] == pytest.approx(0.0, abs=1e-12)
    low, high = _by(df, "covariate", "intercept")[["ci_low", "ci_high"]]
    assert low < _by(df, "covariate", "intercept")["value"] < high


def test_pooled_sides_and_missing_detector():
    a, da = _planted(0, "a", "ood")
    b, db = _planted(2, "b", "ood")
    cov, dc = _planted(4, "r", "covariate")
    cov = ScoredSet("r", "covariate", cov.labels, cov.preds, {}, errors={"msp": "boom"})
    df = distance_regression(_id_test(), [cov], [a, b], {"a": da, "b": db, "r": dc}, n_bins=20)
    assert _by(df, "semantic", "slope")["set"] == "a+b"
    err = df[(df["split"] == "covariate")]
    assert len(err) == 1 and err["error"].iloc[0] == "boom"
    assert df[df["split"] == "verdict"]["error"].str.startswith("n/a").all()


def test_bad_inputs_are_one_line_errors():
    cov, d = _planted(0, "r", "covariate")
    sem, _ = _planted(0, "o", "ood")
    with pytest.raises(InputError, match="no distances for set 'o'"):
        distance_regression(_id_test(), [cov], [sem], {"r": d})
    with pytest.raises(InputError, match="fewer than n_bins"):
        distance_regression(_id_test(), [cov], [sem], {"r": d, "o": d}, n_bins=500)
    with pytest.raises(InputError, match="200 images but 3 distances"):
        distance_regression(_id_test(), [cov], [sem], {"r": d[:3], "o": d})


def test_set_distances_reads_features_and_checks_counts():
    s = ScoredSet("o", "ood", [-1, -1], [0, 0], {"msp": np.zeros(2)})
    ref = np.array([[1.0, 0.0], [0.0, 1.0]])
    got = set_distances([s], ref, {"o": lambda: np.array([[2.0, 0.0], [1.0, 1.0]])})
    np.testing.assert_allclose(got["o"], [0.0, np.sqrt(2 - np.sqrt(2))])
    with pytest.raises(InputError, match="shape"):
        set_distances([s], ref, {"o": lambda: np.zeros((3, 2))})


def test_config_checks_the_named_sets():
    sets = {"r": SetDescription("covariate", False), "o": SetDescription("ood", False)}
    assert DistanceRegressionConfig().check_sets(sets) is None
    assert "role" in (DistanceRegressionConfig(covariate=["o"]).check_sets(sets) or "")
    assert "not a set" in (DistanceRegressionConfig(semantic=["x"]).check_sets(sets) or "")
    only_ood = {"o": SetDescription("ood", False)}
    assert "no covariate set" in (DistanceRegressionConfig().check_sets(only_ood) or "")


def _features_of(dist: np.ndarray) -> np.ndarray:
    """2-D unit rows at angle ``dist`` from (1, 0): their chord to (1, 0) grows with it."""
    return np.stack((np.cos(dist), np.sin(dist)), axis=1)


def test_registered_run_uses_the_run_features_or_reference_stores(tmp_path):
    from semshift.features import write_store

    cov, dc = _planted(6, "r", "covariate")
    sem, ds = _planted(0, "o", "ood")
    feats = {"id_train": np.array([[1.0, 0.0]]), "r": _features_of(dc), "o": _features_of(ds)}
    inputs = ProtocolInputs(
        id_test=_id_test(), others=[cov, sem],
        features={k: (lambda v=v: v) for k, v in feats.items()},
    )  # fmt: skip
    spec = get_protocol("distance_regression")
    cfg = spec.config(n_bins=N_BINS)
    df = spec.run(inputs, cfg)
    assert _by(df, "verdict", "intercepts_differ")["value"] == 1.0
    # chord 2 sin(d / 2) is monotone in d: the subsets are the planted ones
    bins = df[(df["split"] == "covariate") & (df["metric"] == "auroc")]
    np.testing.assert_allclose(bins["value"], (np.arange(1, 11) + 6) / 20)
    # the same features from stores named in the config give the same rows
    entries = []
    for name, arr in feats.items():
        idx = pd.DataFrame({"path": [f"{name}{i}.png" for i in range(len(arr))], "label": 0})
        write_store(tmp_path / name, index=idx, arrays={"features": arr.astype(np.float32)})
        entries.append({"name": name, "store": tmp_path / name})
    no_feats = ProtocolInputs(id_test=_id_test(), others=[cov, sem])
    df2 = spec.run(no_feats, spec.config(n_bins=N_BINS, reference=entries))
    np.testing.assert_allclose(df2["value"].to_numpy(), df["value"].to_numpy(), atol=1e-6)
    with pytest.raises(InputError, match="no id_train features"):
        spec.run(no_feats, cfg)
