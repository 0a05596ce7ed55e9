"""ScoredSet / Bootstrap validation and the tidy results table."""

from __future__ import annotations

import numpy as np
import pytest

from semshift.errors import InputError
from semshift.protocols import RESULT_COLUMNS, Bootstrap, ScoredSet, error_row, results_frame


def test_scores_are_float64_and_levels_strings():
    s = ScoredSet(
        "grid", "ood", [-1, -1], [0, 2], {"knn": np.array([1, 2])}, semantic_level=2.0,
        row_covariate_level=[1, float("nan")],
    )  # fmt: skip
    assert s.scores["knn"].dtype == np.float64
    assert s.semantic_level == "2"
    assert s.row_covariate_level.tolist() == ["1", None]
    assert s.correct.tolist() == [False, False]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"preds": [0]}, r"set 'easy': preds has 1 entries but labels has 2"),
        ({"scores": {"msp": [0.1, np.nan]}}, r"set 'easy', detector 'msp': 1 non-finite"),
        ({"scores": {"msp": [0.1, 0.2, 0.3]}}, r"set 'easy', detector 'msp': 3 scores for 2"),
        ({"scores": {"msp": [[0.1, 0.2]]}}, r"detector 'msp': scores must be 1-D"),
        ({"labels": [-1, 3]}, r"set 'easy' is an ood set but 1 label"),
        ({"role": "weird"}, r"set 'easy': role must be one of"),
        ({"errors": {"msp": "boom"}}, r"detector 'msp' has both scores and an error"),
        ({"labels": [], "preds": [], "scores": {}}, r"set 'easy' has zero samples"),
    ],
)
def test_bad_input_names_set_and_detector(kwargs, match):
    args = {"name": "easy", "role": "ood", "labels": [-1, -1], "preds": [0, 1]}
    args["scores"] = {"msp": [0.1, 0.2]}
    args.update(kwargs)
    with pytest.raises(InputError, match=match):
        ScoredSet(**args)


def test_known_sets_need_class_ids():
    with pytest.raises(InputError, match=r"set 'cov' is a covariate set but 1 label"):
        ScoredSet("cov", "covariate", [0, -1], [0, 0], {})


@pytest.mark.parametrize("kw", [{"n_resamples": -1}, {"level": 1.0}, {"seed": 1.5}])
def test_bootstrap_validation(kw):
    with pytest.raises(InputError, match="bootstrap"):
        Bootstrap(**kw)


def test_results_frame_columns_and_dtypes():
    df = results_frame(
        [
            {"protocol": "osr", "set": "easy", "metric": "auroc", "value": 0.75, "n_id": 3},
            error_row("osr", set="hard", detector="knn", error="faiss failed\nmore", n_ood=2),
        ]
    )
    assert tuple(df.columns) == RESULT_COLUMNS
    assert df["value"].dtype == np.float64 and str(df["n_id"].dtype) == "Int64"
    assert df["detector"].tolist() == [None, "knn"]
    assert df["error"].tolist() == [None, "faiss failed"]
    assert np.isnan(df.loc[1, "value"]) and df.loc[1, "n_ood"] == 2
    assert df["n_ood"].isna().tolist() == [True, False]
    empty = results_frame([])
    assert tuple(empty.columns) == RESULT_COLUMNS and len(empty) == 0


def test_results_frame_rejects_unknown_column():
    with pytest.raises(InputError, match="unknown column"):
        results_frame([{"protocol": "osr", "auc": 1.0}])
