"""Calibrated stacking, the rows of fitted zero-shot methods, the ``zsl`` protocol and the
report's Table 1 / Table 2 layouts."""

from __future__ import annotations

import numpy as np
import pytest

from semshift.errors import InputError
from semshift.metrics import gzsl as gzsl_metric
from semshift.protocols import get_protocol, gzsl, zsl_results
from semshift.report import gzsl_table, zsl_table
from semshift.training.zsl import evaluate_zsl, write_xlsa

from ..training.planted import planted

# 2 seen classes (0, 1), 2 unseen (2, 3); seen scores a little higher everywhere
SCORES = np.array(
    [
        [0.9, 0.1, 0.5, 0.0],  # seen 0
        [0.2, 0.8, 0.1, 0.7],  # seen 1
        [0.6, 0.0, 0.5, 0.1],  # unseen 2
        [0.0, 0.7, 0.2, 0.6],  # unseen 3
    ]
)
LABELS = np.array([0, 1, 2, 3])


def test_calibrated_stacking_moves_predictions_to_unseen_classes():
    plain = gzsl_metric(SCORES, LABELS, [0, 1], [2, 3])
    assert (plain.tr, plain.ts, plain.zsl_top1) == (1.0, 0.0, 1.0)
    cal = gzsl_metric(SCORES, LABELS, [0, 1], [2, 3], calibration=0.15)
    assert (cal.tr, cal.ts) == (0.5, 1.0)  # seen 1 now goes to unseen 3
    assert cal.zsl_top1 == plain.zsl_top1  # ZSL is over unseen classes only
    huge = gzsl_metric(SCORES, LABELS, [0, 1], [2, 3], calibration=10.0)
    assert (huge.tr, huge.ts) == (0.0, huge.zsl_top1)
    with pytest.raises(InputError, match="needs a score matrix"):
        gzsl_metric(LABELS, LABELS, [0, 1], [2, 3], calibration=0.1)


def test_gzsl_rows_carry_method_dataset_and_split():
    df = gzsl(LABELS, SCORES, [0, 1], [2, 3], set_name="AWA2", detector="ale", split="v2")
    assert set(df["detector"]) == {"ale"} and set(df["set"]) == {"AWA2"}
    assert set(df["split"]) == {"v2"} and df["metric"].tolist() == ["ts", "tr", "h", "zsl_top1"]


@pytest.fixture(scope="module")
def outcomes():
    a = planted(seed=1)
    b = planted(seed=4, noise=0.6)
    b = type(b)(**{**b.__dict__, "name": "noisy"})
    return [
        evaluate_zsl(d, m, split=v, grid={})
        for d in (a, b)
        for v in ("v1", "v2")
        for m in ("eszsl", "sae")
    ]


def test_zsl_results_equal_the_metric_on_each_score_matrix(outcomes):
    res = zsl_results(outcomes, calibration=0.05)
    assert len(res) == 4 * len(outcomes)
    for o in outcomes:
        r = gzsl_metric(o.scores, o.labels, o.seen, o.unseen, calibration=0.05)
        rows = res[(res["detector"] == o.method) & (res["set"] == o.dataset)]
        rows = rows[rows["split"] == o.split].set_index("metric")["value"]
        assert rows.to_dict() == pytest.approx(r.as_dict())


def test_table_1_has_v1_next_to_v2_per_dataset_and_table_2_shows_v2(outcomes):
    res = zsl_results(outcomes)
    t1 = zsl_table(res)
    assert t1.rows == ["eszsl", "sae"]
    assert [c.full_label for c in t1.columns] == [
        "planted V1",
        "planted V2",
        "noisy V1",
        "noisy V2",
    ]
    o = next(x for x in outcomes if (x.dataset, x.split, x.method) == ("noisy", "v1", "sae"))
    assert t1.values().loc["sae", "noisy V1"] == pytest.approx(
        gzsl_metric(o.scores, o.labels, o.seen, o.unseen).zsl_top1
    )
    t2 = gzsl_table(res)
    assert [c.full_label for c in t2.columns][:4] == [
        "planted ts", "planted tr", "planted H", "planted ZSL top-1"
    ]  # fmt: skip
    o = next(x for x in outcomes if (x.dataset, x.split, x.method) == ("noisy", "v2", "eszsl"))
    assert t2.values().loc["eszsl", "noisy H"] == pytest.approx(
        gzsl_metric(o.scores, o.labels, o.seen, o.unseen).h
    )


def test_the_zsl_protocol_trains_from_the_mat_pair(tmp_path):
    root = write_xlsa(planted(n_seen=12, n_unseen=4, per_class=12, seed=3), tmp_path)
    spec = get_protocol("zsl")
    cfg = spec.config(
        features=root / "res101.mat",
        splits=root / "att_splits.mat",
        name="P",
        methods=["eszsl", "sae"],
        versions=["v1", "v2"],
    )
    res = spec.run(None, cfg)
    assert set(res["set"]) == {"P"} and set(res["split"]) == {"v1", "v2"}
    assert len(res) == 2 * 2 * 4 and (res["value"].between(0, 1)).all()
    with pytest.raises(ValueError, match="unknown zero-shot method 'eszl'"):
        spec.config(features=root / "res101.mat", splits=root / "att_splits.mat", methods=["eszl"])
