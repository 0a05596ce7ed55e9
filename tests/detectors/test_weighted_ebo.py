"""Weighted energy: hand-computed cases, agreement with pytorch-ood's WeightedEBO, bad inputs."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import scipy.stats

from semshift import detectors
from semshift.errors import InputError


def test_hand_computed() -> None:
    # w = relu(1, 3, -2) = (1, 3, 0): log(e^0 + 3 e^0 + 0) = log 4, log(e^1 + 3)
    z = np.array([[0.0, 0.0, 5.0], [1.0, 0.0, 0.0], [800.0, 800.0, 0.0]])
    det = detectors.get("weighted_ebo", weights=[1.0, 3.0, -2.0]).fit()
    expected = [math.log(4.0), math.log(math.e + 3.0), 800.0 + math.log(4.0)]
    np.testing.assert_allclose(det.score(logits=z), expected, rtol=1e-12)
    # the weight of a Linear(C, 1), shape (1, C), is accepted as well
    det = detectors.get("weighted_ebo", weights=np.array([[1.0, 3.0, -2.0]])).fit()
    np.testing.assert_allclose(det.score(logits=z), expected, rtol=1e-12)


def test_default_weights_are_the_energy_score(problem: Any) -> None:
    scores = detectors.get("weighted_ebo").fit().score(logits=problem.z_test)
    energy = detectors.get("energy").fit().score(logits=problem.z_test)
    np.testing.assert_array_equal(scores, energy)


def test_agrees_with_pytorch_ood(problem: Any) -> None:
    torch = pytest.importorskip("torch")
    pood = pytest.importorskip("pytorch_ood.detector")
    weights = np.random.default_rng(0).uniform(-0.5, 2.0, problem.z_test.shape[1])
    assert (weights < 0).any()  # their ReLU and ours both zero these
    theirs = pood.WeightedEBO(None, torch.tensor(weights)).predict_logits(
        torch.tensor(problem.z_test)
    )
    det = detectors.get("weighted_ebo", weights=weights).fit()
    ours = det.score(logits=problem.z_test)
    # measured: Spearman 1.000000, max |ours + theirs| 4e-8 (float64 both)
    assert scipy.stats.spearmanr(ours, -theirs.numpy()).statistic >= 0.999
    np.testing.assert_allclose(ours, -theirs.numpy(), rtol=1e-10)


def test_bad_weights(problem: Any) -> None:
    det = detectors.get("weighted_ebo", weights=[1.0, 2.0, 3.0]).fit()
    with pytest.raises(
        InputError,
        match=r"^weighted_ebo.score: `logits` has 6 classes but `weights` gives 3 class weights$",
    ):
        det.score(logits=problem.z_test)
    with pytest.raises(InputError, match=r"^weighted_ebo: weights must be a sequence of finite "
                       r"class weights \(shape \(C,\) or \(1, C\)\) with one or more > 0 or None, "
                       r"got \[0.0, -1.0\]$"):  # fmt: skip
        detectors.get("weighted_ebo", weights=[0.0, -1.0])
