"""Graded grid: planted trend, N/A cells, level order and per-row levels."""

from __future__ import annotations

import numpy as np
import pytest

from semshift.errors import InputError
from semshift.metrics import auroc
from semshift.protocols import Bootstrap, ScoredSet, graded, level_order

ID = np.linspace(0.0, 1.0, 41)  # ID test scores


def idt():
    return ScoredSet("id_test", "id_test", np.zeros(41, int), np.zeros(41, int), {"d": ID})


def cell_set(name, sem, cov, shift, n=12):
    # OOD scores pushed down by `shift`: AUROC rises with the shift
    scores = np.linspace(0.0, 1.0, n) - shift
    return ScoredSet(name, "ood", -np.ones(n, int), np.zeros(n, int), {"d": scores},
                     semantic_level=sem, covariate_level=cov)  # fmt: skip


def test_planted_semantic_trend():
    sets = [cell_set(f"s{i}c{j}", i, j, 0.1 * i) for i in (1, 2, 3) for j in (1, 2)]
    df = graded(idt(), sets, metrics=["auroc"], min_count=10, bootstrap=Bootstrap(0))
    cells = df[df["metric"] == "auroc"]
    assert len(cells) == 6 and cells["error"].isna().all()
    expected = {}
    for s in sets:
        y = np.r_[np.zeros(41, bool), np.ones(12, bool)]
        expected[s.semantic_level] = auroc(np.r_[ID, s.scores["d"]], y)
    means = df[(df["metric"] == "auroc.level_mean") & (df["split"] == "semantic")]
    assert means["semantic_level"].tolist() == ["1", "2", "3"]
    x = np.array([expected[k] for k in ("1", "2", "3")])
    assert means["value"].to_numpy() == pytest.approx(x)
    assert x[0] < x[1] < x[2]
    trend = df[df["split"] == "semantic"].set_index("metric")["value"]
    assert trend["auroc.correlation"] == pytest.approx(np.corrcoef(x, [1, 2, 3])[0, 1])
    assert trend["auroc.correlation"] > 0.99
    assert trend["auroc.sensitivity"] == pytest.approx((x[2] - x[0]) / 2)  # LS slope, 3 levels
    # the covariate axis carries no shift: equal level means, correlation undefined
    cov = df[(df["split"] == "covariate") & (df["metric"] == "auroc.correlation")].iloc[0]
    assert np.isnan(cov["value"]) and cov["error"].startswith("n/a")


def test_na_cells_and_cis():
    sets = [cell_set("a", 1, 1, 0.1), cell_set("b", 2, 1, 0.3), cell_set("c", 2, 2, 0.2, n=5)]
    df = graded(idt(), sets, metrics=["auroc", "fpr95"], bootstrap=Bootstrap(100))
    na = df[(df["metric"] == "auroc") & df["value"].isna()]
    # cells (1, 2) (empty) and (2, 2) (5 samples) are N/A
    assert sorted(zip(na["semantic_level"], na["covariate_level"], na["n_ood"], strict=True)) == [
        ("1", "2", 0),
        ("2", "2", 5),
    ]
    assert (na["error"] == "n/a: fewer than 10 samples").all()
    ok = df[(df["metric"] == "auroc") & df["value"].notna()]
    assert ((ok["ci_low"] <= ok["value"]) & (ok["value"] <= ok["ci_high"])).all()
    mean2 = df[(df["metric"] == "auroc.level_mean") & (df["semantic_level"] == "2")].iloc[0]
    assert mean2["value"] == ok[ok["semantic_level"] == "2"]["value"].iloc[0]  # N/A left out
    assert mean2["n_ood"] == 12


def test_per_row_levels_order_and_missing_detector():
    n = 40
    sem = np.repeat(["10", "2"], 20)  # numeric order: 2 before 10
    scores = np.r_[np.full(20, -1.0), np.full(20, 0.5)]
    grid = ScoredSet("grid", "ood", -np.ones(n, int), np.zeros(n, int), {"d": scores},
                     row_semantic_level=sem)  # fmt: skip
    other = ScoredSet("other", "ood", -np.ones(10, int), np.zeros(10, int), {},
                      errors={"d": "boom"}, semantic_level=2)  # fmt: skip
    df = graded(idt(), [grid, other], metrics=["auroc"], bootstrap=Bootstrap(0))
    cells = df[df["metric"] == "auroc"]
    assert cells["semantic_level"].tolist() == ["2", "10"]
    assert cells["covariate_level"].isna().all()
    assert cells.iloc[0]["set"] == "grid+other" and "boom" in cells.iloc[0]["error"]
    assert cells.iloc[1]["value"] == 1.0


def test_level_order():
    assert level_order(["3", "1", "2.5"]) == ["1", "2.5", "3"]
    assert level_order(["b", "a", "b"]) == ["b", "a"]


def test_rows_without_a_level_are_reported_not_dropped():
    sem = np.array([1] * 12 + [2] * 12 + [None] * 3, dtype=object)
    grid = ScoredSet("grid", "ood", -np.ones(27, int), np.zeros(27, int),
                     {"d": np.linspace(-1, 0.5, 27)}, row_semantic_level=sem)  # fmt: skip
    df = graded(idt(), [grid], metrics=["auroc"], bootstrap=Bootstrap(0))
    cells = df[df["metric"] == "cells"].iloc[0]
    assert cells["set"] == "grid" and cells["n_ood"] == 3
    assert cells["error"].startswith("n/a: 3 of 27 rows lack a level")
    assert df[df["metric"] == "auroc"]["n_ood"].tolist() == [12, 12]


def test_no_level_left_is_an_input_error():
    a = cell_set("a", 1, None, 0.1)
    b = cell_set("b", None, 2, 0.1)
    with pytest.raises(InputError, match="no OOD row has a level on every axis"):
        graded(idt(), [a, b], bootstrap=Bootstrap(0))
