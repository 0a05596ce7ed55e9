"""Bad inputs give errors that name the problem (or the documented fallback applies)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from semshift import detectors
from semshift.errors import InputError


def test_feature_dimension_not_matching_head(problem: Any) -> None:
    with pytest.raises(InputError, match=r"react.fit: feature dimension 10 does not match the "
                       r"head's 24 \(features have shape \(240, 10\)\)"):  # fmt: skip
        detectors.get("react").fit(features=problem.h_train[:, :10], head=(problem.w, problem.b))


def test_feature_dimension_not_matching_fit(problem: Any) -> None:
    det = detectors.get("knn", k=3).fit(features=problem.h_train)
    with pytest.raises(
        InputError, match=r"knn.score: feature dimension 23 does not match fit's 24"
    ):
        det.score(features=problem.h_test[:, :23])
    det = detectors.get("ash_p").fit(head=(problem.w, problem.b))
    with pytest.raises(InputError, match=r"ash_p.score: feature dimension 23 does not match"):
        det.score(features=problem.h_test[:, :23])


def test_number_of_classes_not_matching(problem: Any) -> None:
    det = detectors.get("vim").fit(features=problem.h_train, head=(problem.w, problem.b))
    with pytest.raises(InputError, match=r"vim.score: `logits` has 5 classes but fit saw 6"):
        det.score(features=problem.h_test, logits=problem.z_test[:, :5])


def test_head_shapes() -> None:
    with pytest.raises(InputError, match=r"head bias b has 3 entries but W has 4 rows"):
        detectors.get("max_cosine").fit(head=(np.ones((4, 2)), np.ones(3)))
    with pytest.raises(InputError, match=r"`head` must be a pair \(W, b\)"):
        detectors.get("max_cosine").fit(head=np.ones((4, 2)))


@pytest.mark.parametrize("bad", [-1, 6])
def test_labels_out_of_range(problem: Any, bad: int) -> None:
    y = problem.y_train.copy()
    y[17] = bad
    with pytest.raises(
        InputError, match=rf"`labels` must lie in \[0, 6\); index 17 holds {bad}"
    ) as err:
        detectors.get("she").fit(features=problem.h_train, logits=problem.z_train, labels=y)
    # the "-1 marks unknown samples" hint only where it applies
    assert ("marks unknown" in str(err.value)) == (bad < 0)


def test_labels_must_be_integers(problem: Any) -> None:
    with pytest.raises(
        InputError, match=r"`labels` must be a 1-D integer array, got dtype float64"
    ):
        detectors.get("mahalanobis").fit(
            features=problem.h_train, labels=problem.y_train.astype(float)
        )


def test_negative_labels_for_classes_from_labels(problem: Any) -> None:
    y = problem.y_train.copy()
    y[3] = -1
    with pytest.raises(InputError, match=r"must lie in >= 0; index 3 holds -1 \(-1 marks unknown"):
        detectors.get("mahalanobis").fit(features=problem.h_train, labels=y)


def test_val_labels_rows(problem: Any) -> None:
    with pytest.raises(InputError, match=r"`val_labels` has 59 entries but `val_logits` has 60"):
        detectors.get("temp_scaling").fit(val_logits=problem.z_val, val_labels=problem.y_val[:59])


def test_rows_disagree(problem: Any) -> None:
    with pytest.raises(InputError, match=r"disagree on the number of samples"):
        detectors.get("gradnorm").fit().score(features=problem.h_test[:5], logits=problem.z_test)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_values_are_located(problem: Any, value: float) -> None:
    h = problem.h_train.copy()
    h[3, 5] = value
    h[200, 1] = np.nan
    with pytest.raises(InputError, match=r"`features` contains 2 NaN or infinite value\(s\), "
                       r"the first at index \[3, 5\]"):  # fmt: skip
        detectors.get("knn", k=3).fit(features=h)
    z = problem.z_test.copy()
    z[7, 0] = value
    det = detectors.get("energy").fit()
    with pytest.raises(InputError, match=r"energy.score: `logits` contains 1 NaN .* \[7, 0\]"):
        det.score(logits=z)
    w = problem.w.copy()
    w[1, 2] = value
    with pytest.raises(InputError, match=r"`head W` contains 1 NaN .* index \[1, 2\]"):
        detectors.get("max_cosine").fit(head=(w, problem.b))


def test_non_numeric_and_wrong_rank(problem: Any) -> None:
    with pytest.raises(InputError, match=r"`logits` must be a real numeric array, got dtype <U1"):
        detectors.get("msp").fit().score(logits=np.array([["a", "b"]]))
    with pytest.raises(InputError, match=r"`features` must be 2-D .* got shape \(24,\)"):
        detectors.get("knn", k=1).fit(features=problem.h_train[0])
    with pytest.raises(InputError, match=r"`logits` is empty"):
        detectors.get("msp").fit().score(logits=np.empty((0, 3)))


@pytest.mark.parametrize("name", ["mahalanobis", "rmd"])
def test_class_without_training_samples(problem: Any, name: str) -> None:
    keep = problem.y_train != 2
    with pytest.raises(InputError, match=r"1 class\(es\) have fewer than 1 training samples: "
                       r"class id\(s\) 2; every class in \[0, 6\)"):  # fmt: skip
        detectors.get(name).fit(features=problem.h_train[keep], labels=problem.y_train[keep])


def test_class_without_correct_training_samples(problem: Any) -> None:
    z = problem.z_train.copy()
    z[problem.y_train == 4, 4] = -1e3  # class 4 is never predicted correctly
    fit = {"features": problem.h_train, "logits": z, "labels": problem.y_train}
    with pytest.raises(InputError, match=r"fewer than 1 correctly classified training samples: "
                       r"class id\(s\) 4"):  # fmt: skip
        detectors.get("she").fit(**fit)
    with pytest.raises(InputError, match=r"fewer than 2 correctly classified .* class id\(s\) 4"):
        detectors.get("openmax").fit(logits=z, labels=problem.y_train)


def test_openmax_degenerate_tail() -> None:
    z = np.array([[2.0, 0.0], [2.0, 0.0], [0.0, 2.0], [0.0, 3.0]])
    with pytest.raises(InputError, match=r"distances of class 0 are all equal"):
        detectors.get("openmax").fit(logits=z, labels=np.array([0, 0, 1, 1]))


def test_fdbd_identical_head_rows() -> None:
    w = np.array([[1.0, 2.0], [0.0, 1.0], [1.0, 2.0]])
    with pytest.raises(InputError, match=r"rows 0 and 2 of the head W are identical"):
        detectors.get("fdbd").fit(features=np.ones((3, 2)), head=(w, np.zeros(3)))


def test_sample_counts_too_small(problem: Any) -> None:
    with pytest.raises(InputError, match=r"k = 50 neighbours requested but only 10 training"):
        detectors.get("knn").fit(features=problem.h_train[:10])
    with pytest.raises(
        InputError, match=r"bank holds ceil\(alpha \* n\) = 3 .* fewer than k = 100"
    ):
        detectors.get("nnguide").fit(features=problem.h_train, logits=problem.z_train)


def test_vim_dim_out_of_range(problem: Any) -> None:
    with pytest.raises(InputError, match=r"dim = 24 must lie in \[1, D\) with feature dimension"):
        detectors.get("vim", dim=24).fit(features=problem.h_train, head=(problem.w, problem.b))


def test_ash_percentile_keeping_nothing(problem: Any) -> None:
    with pytest.raises(InputError, match=r"percentile 99.0 keeps no activation of D = 24"):
        detectors.get("ash_s", percentile=99.0).fit(head=(problem.w, problem.b))
