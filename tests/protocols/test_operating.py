"""operating_point: hand-computed rates, the threshold's source, level rows, CIs, errors."""

from __future__ import annotations

import doctest

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

import semshift.protocols.operating as operating_module
from semshift.errors import InputError
from semshift.metrics import threshold_at_recall
from semshift.protocols import Bootstrap, ScoredSet
from semshift.protocols.operating import (
    OperatingPointConfig,
    calibration_split,
    operating_point,
)
from semshift.protocols.tidy import RESULT_COLUMNS

OFF = Bootstrap(n_resamples=0)


def _val() -> ScoredSet:
    # 10 ID validation scores 0.1 .. 1.0; at 80% recall t = 0.3 (8 scores >= 0.3)
    s = np.round(np.arange(1, 11) / 10, 1)
    return ScoredSet("id_val", "id_test", [0] * 10, [0] * 10, {"msp": s, "knn": s[::-1] * 10})


def _id_test() -> ScoredSet:
    # labels / preds: rows 1 and 4 misclassified
    return ScoredSet(
        "id_test",
        "id_test",
        [0, 1, 2, 0, 1, 2],
        [0, 2, 2, 0, 0, 2],
        {"msp": np.array([0.9, 0.8, 0.25, 0.5, 0.3, 0.1]), "knn": np.array([5, 1, 2, 9, 3, 4.0])},
    )


def _ood(name: str, scores: dict[str, list[float]], **kw: object) -> ScoredSet:
    n = len(next(iter(scores.values())))
    arrays = {k: np.array(v) for k, v in scores.items()}
    return ScoredSet(name, "ood", [-1] * n, [0] * n, arrays, **kw)  # type: ignore[arg-type]


def _rows(df: pd.DataFrame, **match: object) -> pd.DataFrame:
    keep = np.ones(len(df), dtype=bool)
    for col, value in match.items():
        keep &= (df[col].isna() if value is None else df[col] == value).to_numpy()
    return df[keep]


def _value(df: pd.DataFrame, **match: object) -> float:
    got = _rows(df, **match)
    assert len(got) == 1, got
    return float(got["value"].iloc[0])


def test_hand_computed_rates_with_a_calibration_set() -> None:
    near = _ood("near", {"msp": [0.95, 0.35, 0.2, 0.05], "knn": [1.0, 2.0, 3.0, 4.0]}, split="hard")
    df = operating_point(_id_test(), [near], calibration=_val(), recall=0.8, bootstrap=OFF)
    assert list(df.columns) == list(RESULT_COLUMNS)
    assert set(df["protocol"]) == {"operating_point"}
    msp = df[df["detector"] == "msp"]
    assert msp[["set", "split", "metric"]].values.tolist() == [
        ["id_val", "id_val", "threshold"],
        ["id_test", None, "rejection_rate"],
        ["id_test", None, "accepted_wrong_rate"],
        ["id_test", None, "correct_rejection_rate"],
        ["near", "hard", "rejection_rate"],
        ["near", "hard", "accepted_wrong_rate"],
    ]
    assert _value(msp, metric="threshold") == 0.3
    # correctly classified id_test rows 0, 2, 3, 5 score 0.9, 0.25, 0.5, 0.1: 2 of 4 rejected
    assert _value(msp, set="id_test", metric="correct_rejection_rate") == 0.5
    # id_test msp: 0.25 and 0.1 rejected (2 / 6); accepted & wrong: 0.8 (row 1) and 0.3 (row 4,
    # tied with t: accepted) -> 2 / 6
    assert _value(msp, set="id_test", metric="rejection_rate") == 2 / 6
    assert _value(msp, set="id_test", metric="accepted_wrong_rate") == 2 / 6
    # near: 0.95 and 0.35 accepted (both wrong: OOD); 0.2, 0.05 rejected
    assert _value(msp, set="near", metric="rejection_rate") == 0.5
    assert _value(msp, set="near", metric="accepted_wrong_rate") == 0.5
    # knn calibration scores 10, 9, ... 1 at 80% -> t = 3
    knn = df[df["detector"] == "knn"]
    assert _value(knn, metric="threshold") == 3.0
    assert _value(knn, set="id_test", metric="rejection_rate") == 2 / 6  # 1 and 2
    assert _value(knn, set="id_test", metric="accepted_wrong_rate") == 1 / 6  # row 4 (3)
    assert _value(knn, set="near", metric="accepted_wrong_rate") == 0.5  # 3 and 4
    counts = msp[["metric", "n_id", "n_ood"]].astype(object).values.tolist()
    assert counts == [
        ["threshold", 10, pd.NA],
        ["rejection_rate", 6, 0],
        ["accepted_wrong_rate", 6, 0],
        ["correct_rejection_rate", 6, 0],
        ["rejection_rate", 0, 4],
        ["accepted_wrong_rate", 0, 4],
    ]
    assert df["error"].isna().all() and df["ci_low"].isna().all()


def test_the_threshold_comes_from_the_calibration_set() -> None:
    rng = np.random.default_rng(0)
    val = ScoredSet("id_val", "id_test", [0] * 40, [0] * 40, {"msp": rng.normal(5.0, 1.0, 40)})
    idt = ScoredSet("id_test", "id_test", [0] * 30, [0] * 30, {"msp": rng.normal(0.0, 1.0, 30)})
    ood = _ood("o", {"msp": list(rng.normal(0.0, 1.0, 20))})
    df = operating_point(idt, [ood], calibration=val, bootstrap=OFF)
    t = _value(df, metric="threshold")
    assert t == threshold_at_recall(val.scores["msp"], 0.95)
    assert t != threshold_at_recall(idt.scores["msp"], 0.95)
    # a threshold from scores around 5 rejects nearly all of id_test (scores around 0)
    rej = _value(df, set="id_test", metric="rejection_rate")
    assert rej == np.mean(idt.scores["msp"] < t) and rej > 0.9


def test_without_calibration_id_test_is_split_in_seeded_halves() -> None:
    rng = np.random.default_rng(1)
    n = 21
    labels = rng.integers(0, 3, n)
    preds = np.where(rng.random(n) < 0.7, labels, (labels + 1) % 3)
    scores = rng.normal(size=n)
    idt = ScoredSet("id_test", "id_test", labels, preds, {"msp": scores})
    ood = _ood("o", {"msp": list(rng.normal(-1.0, 1.0, 9))})
    df = operating_point(idt, [ood], bootstrap=OFF, seed=3)
    cal, ev = calibration_split(n, 3)
    assert (cal.size, ev.size) == (10, 11) and not set(cal) & set(ev)
    thr = _rows(df, metric="threshold")
    assert thr[["set", "split", "n_id"]].values.tolist() == [
        ["id_test", "id_test half (seed 3)", 10]
    ]
    t = threshold_at_recall(scores[cal], 0.95)
    assert float(thr["value"].iloc[0]) == t
    rows = _rows(df, set="id_test", metric="rejection_rate")
    assert rows["split"].tolist() == ["id_test other half (seed 3)"]
    assert rows["n_id"].tolist() == [11]
    assert float(rows["value"].iloc[0]) == np.mean(scores[ev] < t)
    wrong = labels[ev] != preds[ev]
    aw = np.mean((scores[ev] >= t) & wrong)
    assert _value(df, set="id_test", metric="accepted_wrong_rate") == aw
    # another seed, other halves
    other = operating_point(idt, [ood], bootstrap=OFF, seed=4)
    assert _rows(other, metric="threshold")["split"].tolist() == ["id_test half (seed 4)"]
    assert not np.array_equal(calibration_split(n, 4)[0], cal)
    with pytest.raises(InputError, match="at least 2 samples, got 1"):
        operating_point(ScoredSet("id_test", "id_test", [0], [0], {"msp": [0.5]}), [ood])


def test_level_rows_pool_the_sets_at_each_level() -> None:
    # semantic levels: a (set level 1), b (per row: 1, 2, 2, None); covariate: c (level 3)
    a = _ood("a", {"msp": [0.9, 0.1]}, semantic_level=1)
    b = _ood("b", {"msp": [0.2, 0.8, 0.7, 0.6]}, row_semantic_level=[1, 2, "2", None])
    c = ScoredSet(
        "c",
        "covariate",
        [0, 1, 2],
        [0, 1, 0],
        {"msp": np.array([0.95, 0.15, 0.9])},
        covariate_level=3,
    )
    df = operating_point(_id_test(), [a, b, c], calibration=_val(), recall=0.8, bootstrap=OFF)
    df = df[df["detector"] == "msp"]  # knn has no scores on a, b, c: error rows
    levels = df[df["semantic_level"].notna() | df["covariate_level"].notna()]
    keys = levels[["set", "split", "semantic_level", "covariate_level", "metric"]]
    assert keys.values.tolist() == [
        ["a+b", "semantic", "1", None, "rejection_rate"],
        ["a+b", "semantic", "1", None, "accepted_wrong_rate"],
        ["b", "semantic", "2", None, "rejection_rate"],
        ["b", "semantic", "2", None, "accepted_wrong_rate"],
        ["c", "covariate", None, "3", "rejection_rate"],
        ["c", "covariate", None, "3", "accepted_wrong_rate"],
        ["c", "covariate", None, "3", "correct_rejection_rate"],
    ]
    # t = 0.3; semantic 1 = a's 0.9, 0.1 and b's 0.2: rejected 0.1, 0.2; accepted (wrong) 0.9
    sem1 = _rows(levels, semantic_level="1")
    assert sem1["value"].tolist() == [2 / 3, 1 / 3]
    assert sem1[["n_id", "n_ood"]].values.tolist() == [[0, 3], [0, 3]]
    # semantic 2 = b's 0.8, 0.7: nothing rejected, both accepted and wrong
    assert _rows(levels, semantic_level="2")["value"].tolist() == [0.0, 1.0]
    # covariate 3 = c: 0.15 rejected; accepted 0.95 (right) and 0.9 (misclassified)
    cov = _rows(levels, covariate_level="3")
    # of c's two correct rows (0.95 and 0.15), 0.15 is rejected
    assert cov["value"].tolist() == [1 / 3, 1 / 3, 1 / 2]
    assert cov[["n_id", "n_ood"]].values.tolist() == [[3, 0], [3, 0], [3, 0]]
    # the set rows carry no level
    assert _rows(df, set="b", semantic_level=None, metric="rejection_rate")["value"].tolist() == [
        0.25
    ]


def test_levels_in_numeric_order() -> None:
    sets = [_ood(f"s{lv}", {"msp": [0.5, 0.6]}, semantic_level=lv) for lv in (10, 2, 1.5)]
    df = operating_point(_id_test(), sets, calibration=_val(), bootstrap=OFF)
    df = df[df["detector"] == "msp"]
    order = _rows(df, split="semantic", metric="rejection_rate")["semantic_level"].tolist()
    assert order == ["1.5", "2", "10"]


def _big() -> tuple[ScoredSet, ScoredSet, list[ScoredSet]]:
    rng = np.random.default_rng(5)
    val = ScoredSet(
        "id_val",
        "id_test",
        [0] * 200,
        [0] * 200,
        {"msp": rng.normal(1, 1, 200), "knn": rng.normal(2, 1, 200)},
    )
    labels = rng.integers(0, 4, 300)
    preds = np.where(rng.random(300) < 0.8, labels, (labels + 1) % 4)
    idt = ScoredSet(
        "id_test",
        "id_test",
        labels,
        preds,
        {"msp": rng.normal(1, 1, 300), "knn": rng.normal(2, 1, 300)},
    )
    far = _ood(
        "far",
        {"msp": list(rng.normal(-1, 1, 150)), "knn": list(rng.normal(0, 1, 150))},
        semantic_level=2,
    )
    near = _ood(
        "near",
        {"msp": list(rng.normal(0.5, 1, 120)), "knn": list(rng.normal(1, 1, 120))},
        semantic_level=1,
    )
    return val, idt, [near, far]


def test_cis_bracket_the_values_and_are_deterministic() -> None:
    val, idt, others = _big()
    boot = Bootstrap(n_resamples=300, seed=7)
    df = operating_point(idt, others, calibration=val, bootstrap=boot)
    assert df["error"].isna().all()
    assert (df["ci_low"] <= df["value"]).all() and (df["value"] <= df["ci_high"]).all()
    rates = df[df["metric"] != "threshold"]
    assert (rates["ci_low"] >= 0).all() and (rates["ci_high"] <= 1).all()
    assert (rates["ci_high"] - rates["ci_low"] > 0.01).all()  # real intervals
    again = operating_point(idt, others, calibration=val, bootstrap=boot)
    pd.testing.assert_frame_equal(df, again)
    other = operating_point(idt, others, calibration=val, bootstrap=Bootstrap(300, seed=8))
    pd.testing.assert_series_equal(df["value"], other["value"])
    assert not np.allclose(df["ci_low"], other["ci_low"])
    off = operating_point(idt, others, calibration=val, bootstrap=OFF)
    pd.testing.assert_series_equal(df["value"], off["value"])
    assert off["ci_low"].isna().all() and off["ci_high"].isna().all()


def test_cis_follow_the_documented_resampling() -> None:
    """A plain loop over resamples, drawn as documented: the threshold re-chosen on the
    resampled calibration set, each evaluated set resampled separately."""
    val, idt, others = _big()
    boot = Bootstrap(n_resamples=40, seed=3, level=0.9)
    df = operating_point(idt, others[:1], calibration=val, recall=0.9, bootstrap=boot)
    near = others[0]
    rng = np.random.default_rng(3)
    cal_idx = rng.integers(0, 200, size=(40, 200))
    groups = [idt, near, near]  # id_test, the set, its semantic level (the same rows)
    idx = [rng.integers(0, g.n, size=(40, g.n)) for g in groups]
    for det in ("msp", "knn"):
        thr, rej, aw, cr = [], [[], [], []], [[], [], []], []
        for b in range(40):
            t = threshold_at_recall(val.scores[det][cal_idx[b]], 0.9)
            thr.append(t)
            for g, (s, ix) in enumerate(zip(groups, idx, strict=True)):
                x, wrong = s.scores[det][ix[b]], ~s.correct[ix[b]]
                rej[g].append(np.mean(x < t))
                aw[g].append(np.mean((x >= t) & wrong))
                if g == 0:  # id_test has known rows: the rejection among its correct rows
                    cr.append(np.mean(x[~wrong] < t))
        got = df[df["detector"] == det]
        assert got["ci_low"].iloc[0] == pytest.approx(np.quantile(thr, 0.05))
        assert got["ci_high"].iloc[0] == pytest.approx(np.quantile(thr, 0.95))
        want = [rej[0], aw[0], cr] + [xs for g in (1, 2) for xs in (rej[g], aw[g])]
        for k, xs in enumerate(want):
            row = got.iloc[1 + k]
            assert (row["ci_low"], row["ci_high"]) == pytest.approx(
                (np.quantile(xs, 0.05), np.quantile(xs, 0.95))
            )


def test_the_threshold_is_rechosen_in_every_resample() -> None:
    """A set whose scores all equal t is accepted at t but rejected when a resampled
    calibration set gives a larger t: the CI spans [0, 1] (a fixed t would give [0, 0])."""
    val = ScoredSet("id_val", "id_test", [0] * 20, [0] * 20, {"msp": np.arange(20.0)})
    flat = _ood("flat", {"msp": [10.0] * 8})
    df = operating_point(_id_test(), [flat], calibration=val, recall=0.5, bootstrap=Bootstrap(200))
    df = df[df["detector"] == "msp"]
    assert _value(df, metric="threshold") == 10.0
    row = _rows(df, set="flat", metric="rejection_rate")
    assert row[["value", "ci_low", "ci_high"]].values.tolist() == [[0.0, 0.0, 1.0]]
    thr = _rows(df, metric="threshold")
    assert float(thr["ci_low"].iloc[0]) < 10.0 < float(thr["ci_high"].iloc[0])


def test_error_rows() -> None:
    val = ScoredSet(
        "id_val",
        "id_test",
        [0] * 4,
        [0] * 4,
        {"msp": np.arange(4.0), "vim": np.arange(4.0)},
        errors={"knn": "ValueError: singular covariance"},
    )
    idt = ScoredSet(
        "id_test",
        "id_test",
        [0] * 3,
        [0] * 3,
        {"msp": np.array([1.0, 2, 3]), "knn": np.array([1.0, 2, 3]), "vim": np.array([1.0, 2, 3])},
    )
    a = _ood("a", {"msp": [0.5, 3.5], "knn": [1.0, 2.0], "vim": [0.0, 9.0]}, semantic_level=1)
    b = ScoredSet(
        "b",
        "ood",
        [-1] * 2,
        [0] * 2,
        {"msp": np.array([1.5, 2.5])},
        errors={"vim": "ArithmeticError: inf scores"},
        semantic_level=1,
    )
    df = operating_point(idt, [a, b], calibration=val, bootstrap=Bootstrap(20))
    knn = df[df["detector"] == "knn"]
    # threshold + (id_test, a, b, semantic 1) x 2 rates + id_test's correct-rows rejection
    assert len(knn) == 1 + 2 * 4 + 1
    assert knn["value"].isna().all()
    assert set(knn["error"]) == {"set 'id_val': ValueError: singular covariance"}
    vim = df[df["detector"] == "vim"]
    bad = vim[vim["error"].notna()]
    assert bad[["set", "semantic_level", "metric"]].values.tolist() == [
        ["b", None, "rejection_rate"],
        ["b", None, "accepted_wrong_rate"],
        ["a+b", "1", "rejection_rate"],
        ["a+b", "1", "accepted_wrong_rate"],
    ]
    assert set(bad["error"]) == {"set 'b': ArithmeticError: inf scores"}
    assert bad["value"].isna().all() and bad["n_ood"].tolist() == [2, 2, 4, 4]
    ok = vim[vim["error"].isna()]
    assert ok["value"].notna().all() and len(ok) == 6
    assert df[df["detector"] == "msp"]["error"].isna().all()


def test_bad_arguments() -> None:
    val, idt = _val(), _id_test()
    o = _ood("o", {"msp": [0.1]})
    with pytest.raises(InputError, match=r"recall must be a number in \(0, 1\], got 1.2"):
        operating_point(idt, [o], calibration=val, recall=1.2)
    with pytest.raises(InputError, match="calibration must be a ScoredSet of ID samples"):
        operating_point(idt, [o], calibration=o)
    with pytest.raises(InputError, match="id_test must be a ScoredSet with role 'id_test'"):
        operating_point(o, [o])
    with pytest.raises(InputError, match=r"set name\(s\) \['o'\] appear more than once"):
        operating_point(idt, [o, o])
    with pytest.raises(InputError, match="both id_test and in others"):
        operating_point(idt, [ScoredSet("id_test", "ood", [-1], [0], {"msp": [0.1]})])
    with pytest.raises(InputError, match="seed must be an integer"):
        operating_point(idt, [o], seed=1.5)  # type: ignore[arg-type]


def test_config_model() -> None:
    cfg = OperatingPointConfig()
    assert (cfg.recall, cfg.gallery, cfg.max_report_bytes) == (0.95, 8, 10_000_000)
    assert OperatingPointConfig(recall=1.0, gallery=64).gallery == 64
    for bad in (
        {"recall": 0.0},
        {"recall": 1.01},
        {"gallery": -1},
        {"gallery": 65},
        {"max_report_bytes": -1},
        {"threshold": 0.5},
    ):
        with pytest.raises(ValidationError):
            OperatingPointConfig(**bad)


def test_docstring_examples() -> None:
    result = doctest.testmod(operating_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
