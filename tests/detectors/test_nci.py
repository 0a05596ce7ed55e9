"""NCI: a hand-computed case, agreement with pytorch-ood's NCI, and a bad input."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.stats

from semshift import detectors
from semshift.errors import InputError

from .conftest import make_problem


def test_hand_computed() -> None:
    # mean training feature mu = (1, 1, 0); head rows W_0 = (1, 0, 0), W_1 = (0, 2, 0), b = 0.
    w, b = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]]), np.zeros(2)
    h_train = np.array([[2.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    h = np.array([[4.0, 1.0, 4.0], [1.0, 3.0, 0.0]])
    # sample 0: z = (4, 2), yhat = 0, h - mu = (3, 0, 4): 3 / 5; ||h||_1 = 9
    # sample 1: z = (1, 6), yhat = 1, h - mu = (0, 2, 0): 4 / 2; ||h||_1 = 4
    for alpha, expected in [(0.0, [0.6, 2.0]), (0.5, [0.6 + 4.5, 2.0 + 2.0])]:
        det = detectors.get("nci", alpha=alpha).fit(features=h_train, head=(w, b))
        np.testing.assert_allclose(det.score(features=h, logits=h @ w.T + b), expected)


def test_matches_a_plain_loop(problem: Any) -> None:
    det = detectors.get("nci", alpha=0.01).fit(**problem.fit_inputs())
    mu = problem.h_train.mean(axis=0)
    expected = []
    for h, z in zip(problem.h_test, problem.z_test, strict=True):
        w = problem.w[int(np.argmax(z))]
        expected.append(w @ (h - mu) / np.linalg.norm(h - mu) + 0.01 * np.abs(h).sum())
    np.testing.assert_allclose(det.score(**problem.score_inputs()), expected, rtol=1e-10)


@pytest.mark.parametrize("alpha", [0.0, 0.01])
def test_agrees_with_pytorch_ood(alpha: float) -> None:
    torch = pytest.importorskip("torch")
    pood = pytest.importorskip("pytorch_ood.detector")
    p = make_problem(seed=3, dim=64, n_classes=8, n_per_class=120)
    head = torch.nn.Linear(64, 8)
    with torch.no_grad():
        head.weight.copy_(torch.tensor(p.w, dtype=torch.float32))
        head.bias.copy_(torch.tensor(p.b, dtype=torch.float32))
    ref = pood.NCI(None, head, alpha=alpha).fit_features(torch.tensor(p.h_train).float())
    theirs = ref.predict_features(torch.tensor(p.h_test).float()).numpy()
    ours = detectors.get("nci", alpha=alpha).fit(**p.fit_inputs()).score(**p.score_inputs())
    # measured: Spearman 1.000000, max |ours + theirs| 4e-6 (their float32) on a scale of 22
    assert scipy.stats.spearmanr(ours, -theirs).statistic >= 0.999
    np.testing.assert_allclose(ours, -theirs, rtol=1e-4, atol=1e-4)


def test_logits_of_another_head_are_refused(problem: Any) -> None:
    # the predicted class indexes the head rows: logits with other classes cannot be used
    det = detectors.get("nci").fit(**problem.fit_inputs())
    with pytest.raises(InputError, match=r"^nci.score: `logits` has 4 classes but fit saw 6$"):
        det.score(features=problem.h_test, logits=problem.z_test[:, :4])
