"""GradNorm's closed form equals the gradient norm of the loss of a random linear head.

The loss is ``sum_c -log softmax(W h + b)_c``; its gradient with respect to W is taken with
torch autograd when torch is installed, otherwise by central finite differences in float64.
"""

from __future__ import annotations

import importlib.util

import numpy as np

from semshift import detectors


def _loss(w: np.ndarray, b: np.ndarray, h: np.ndarray) -> float:
    z = w @ h + b
    m = z.max()
    log_p = z - (m + np.log(np.exp(z - m).sum()))
    return float(-log_p.sum())


def _grad_l1(w: np.ndarray, b: np.ndarray, h: np.ndarray) -> float:
    if importlib.util.find_spec("torch") is not None:
        import torch

        wt = torch.tensor(w, dtype=torch.float64, requires_grad=True)
        z = wt @ torch.tensor(h) + torch.tensor(b)
        (-torch.log_softmax(z, dim=0).sum()).backward()
        assert wt.grad is not None
        return float(wt.grad.abs().sum())
    eps = 1e-6
    grad = np.empty_like(w)
    for idx in np.ndindex(*w.shape):
        up, down = w.copy(), w.copy()
        up[idx] += eps
        down[idx] -= eps
        grad[idx] = (_loss(up, b, h) - _loss(down, b, h)) / (2 * eps)
    return float(np.abs(grad).sum())


def test_closed_form_equals_gradient_norm() -> None:
    rng = np.random.default_rng(7)
    n_classes, dim = 5, 8
    w, b = rng.standard_normal((n_classes, dim)), rng.standard_normal(n_classes)
    h = np.abs(rng.standard_normal((6, dim)))  # post-ReLU features
    h[0, :3] = 0.0
    z = h @ w.T + b
    scores = detectors.get("gradnorm").fit().score(features=h, logits=z)
    expected = [_grad_l1(w, b, x) for x in h]
    np.testing.assert_allclose(scores, expected, rtol=1e-7)
    assert np.ptp(scores) > 0.1  # distinct samples give distinct norms
