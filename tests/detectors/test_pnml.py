"""pNML: a hand-computed case, agreement with pytorch-ood's PNML, and a bad input."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import scipy.special
import scipy.stats

from semshift import detectors
from semshift.errors import InputError

from .conftest import make_problem


def _regret(p: np.ndarray, g: float) -> float:
    return math.log(sum(pc / (pc + (1 - pc) * pc**g) for pc in p)) / math.log(len(p))


def test_hand_computed() -> None:
    # normalised training features e_0 and e_1: X^T X = I, so k = ||x||^2 = 1 and g = 1/2 for
    # any test feature; head W = I, b = (0, 1), applied to x = h / ||h||.
    h_train = np.array([[2.0, 0.0], [0.0, 5.0]])
    w, b = np.eye(2), np.array([0.0, 1.0])
    det = detectors.get("pnml").fit(features=h_train, head=(w, b))
    h = np.array([[3.0, 0.0], [3.0, 4.0]])
    p0 = np.exp([1.0, 1.0]) / np.exp([1.0, 1.0]).sum()  # x = (1, 0): logits (1, 1)
    p1 = np.exp([0.6, 1.8]) / np.exp([0.6, 1.8]).sum()  # x = (0.6, 0.8): logits (0.6, 1.8)
    np.testing.assert_allclose(
        det.score(features=h), [-_regret(p0, 0.5), -_regret(p1, 0.5)], rtol=1e-6
    )


def test_matches_a_plain_loop(problem: Any) -> None:
    det = detectors.get("pnml").fit(**problem.fit_inputs())
    x_train = problem.h_train / np.linalg.norm(problem.h_train, axis=1, keepdims=True)
    proj = np.linalg.pinv(x_train.T @ x_train)
    expected = []
    for h in problem.h_test:
        x = h / np.linalg.norm(h)
        k = x @ proj @ x
        p = scipy.special.softmax(problem.w @ x + problem.b)
        expected.append(-_regret(np.clip(p, 1e-12, 1 - 1e-12), k / (1 + k)))
    np.testing.assert_allclose(det.score(**problem.score_inputs()), expected, rtol=1e-5)


def test_agrees_with_pytorch_ood() -> None:
    torch = pytest.importorskip("torch")
    pood = pytest.importorskip("pytorch_ood.detector")
    p = make_problem(seed=3, dim=64, n_classes=8, n_per_class=120)
    head = torch.nn.Linear(64, 8)
    with torch.no_grad():
        head.weight.copy_(torch.tensor(p.w, dtype=torch.float32))
        head.bias.copy_(torch.tensor(p.b, dtype=torch.float32))
    ref = pood.PNML(None, head).fit_features(
        torch.tensor(p.h_train).float(), torch.tensor(p.y_train)
    )
    theirs = ref.predict_features(torch.tensor(p.h_test).float()).numpy()
    ours = detectors.get("pnml").fit(**p.fit_inputs()).score(**p.score_inputs())
    # measured: Spearman 0.999999, max |ours + theirs| 1.3e-7 on a scale of 0.04 (their float32)
    assert scipy.stats.spearmanr(ours, -theirs).statistic >= 0.999
    np.testing.assert_allclose(ours, -theirs, rtol=1e-4, atol=1e-6)


def test_single_class_head_is_refused(problem: Any) -> None:
    with pytest.raises(InputError, match=r"^pnml.fit: the head must have at least 2 classes$"):
        detectors.get("pnml").fit(features=problem.h_train, head=(problem.w[:1], problem.b[:1]))


def test_directions_below_the_float32_cutoff_are_dropped() -> None:
    # X^T X has eigenvalues ~200, ~100 and ~1e-10 along e_2: below D * eps32 of the largest,
    # so (X^T X)^+ ignores e_2 (as torch.linalg.pinv of the float32 Gram does) and a test
    # feature along e_2 has k = 0: g = 0, regret 0, whatever the head says.
    e2 = np.array([[1.0, 0.0, 1e-5]])
    h_train = np.concatenate(
        [np.tile([[1.0, 0.0, 0.0]], (200, 1)), np.tile([[0.0, 1.0, 0.0]], (100, 1)), e2]
    )
    w, b = np.array([[0.0, 0.0, 3.0], [0.0, 0.0, -3.0]]), np.zeros(2)
    det = detectors.get("pnml").fit(features=h_train, head=(w, b))
    assert det.projection_.shape == (3, 2)
    np.testing.assert_allclose(det.score(features=np.array([[0.0, 0.0, 2.0]])), [0.0], atol=1e-12)


def test_several_gram_chunks_match_float64() -> None:
    # more training rows than one float32 rank-k update takes: the chunk sums stay float64-close
    p = make_problem(seed=5, dim=32, n_classes=4, n_per_class=5000)
    x = p.h_train / np.linalg.norm(p.h_train, axis=1, keepdims=True)
    proj = np.linalg.pinv(x.T @ x)
    xt = p.h_test / np.linalg.norm(p.h_test, axis=1, keepdims=True)
    k = np.einsum("ij,jk,ik->i", xt, proj, xt)
    g = k / (1 + k)
    probs = np.clip(scipy.special.softmax(xt @ p.w.T + p.b, axis=1), 1e-12, 1 - 1e-12)
    expected = [-_regret(pr, gi) for pr, gi in zip(probs, g, strict=True)]
    ours = detectors.get("pnml").fit(**p.fit_inputs()).score(**p.score_inputs())
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-12)
