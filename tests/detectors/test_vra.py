"""VRA: a hand-computed case, agreement with pytorch-ood's VRA, and a bad input."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import scipy.stats

from semshift import detectors
from semshift.errors import InputError

from .conftest import make_problem


def _energy(z: np.ndarray) -> float:
    return math.log(sum(math.exp(v) for v in z))


def test_hand_computed() -> None:
    # unit 0 takes 0, 1, 2, 3 and unit 1 takes 0, 2, 4, 6: with linear interpolation the
    # 25th percentiles are 0.75 and 1.5, the 75th 2.25 and 4.5.
    h_train = np.array([[0.0, 6.0], [1.0, 4.0], [2.0, 2.0], [3.0, 0.0]])
    w, b = np.array([[1.0, 0.0], [1.0, 1.0]]), np.array([0.0, -1.0])
    h = np.array([[0.5, 9.0], [2.0, 1.0]])
    fit = {"features": h_train, "head": (w, b)}
    det = detectors.get("vra", lower_percentile=25.0, upper_percentile=75.0).fit(**fit)
    np.testing.assert_allclose(det.lower_, [0.75, 1.5])
    np.testing.assert_allclose(det.upper_, [2.25, 4.5])
    # clip: (0.75, 4.5) and (2, 1.5); logits (h0, h0 + h1 - 1)
    clipped = [_energy([0.75, 0.75 + 4.5 - 1]), _energy([2.0, 2.0 + 1.5 - 1])]
    np.testing.assert_allclose(det.score(features=h), clipped, rtol=1e-6)
    # zero (the paper): activations below the lower threshold become 0: (0, 4.5) and (2, 0)
    det = detectors.get("vra", lower_percentile=25.0, upper_percentile=75.0, below="zero")
    zeroed = [_energy([0.0, 4.5 - 1]), _energy([2.0, 2.0 - 1])]
    np.testing.assert_allclose(det.fit(**fit).score(features=h), zeroed, rtol=1e-6)


def test_thresholds_are_numpy_per_unit_percentiles(problem: Any) -> None:
    det = detectors.get("vra", lower_percentile=10.0, upper_percentile=80.0)
    det.fit(**problem.fit_inputs())
    lo, hi = np.percentile(problem.h_train, [10.0, 80.0], axis=0)
    np.testing.assert_allclose(det.lower_, lo, rtol=1e-6)
    np.testing.assert_allclose(det.upper_, hi, rtol=1e-6)


@pytest.mark.parametrize(("lower", "upper"), [(1.0, 99.0), (10.0, 90.0)])
def test_agrees_with_pytorch_ood(lower: float, upper: float) -> None:
    torch = pytest.importorskip("torch")
    pood = pytest.importorskip("pytorch_ood.detector")
    p = make_problem(seed=3, dim=64, n_classes=8, n_per_class=120)
    head = torch.nn.Linear(64, 8)
    with torch.no_grad():
        head.weight.copy_(torch.tensor(p.w, dtype=torch.float32))
        head.bias.copy_(torch.tensor(p.b, dtype=torch.float32))
    # pytorch-ood takes fractions and any (N, ...) activations: here the penultimate features
    ref = pood.VRA(None, head, lower_percentile=lower / 100, upper_percentile=upper / 100)
    ref.fit_feature_maps(torch.tensor(p.h_train).float(), torch.tensor(p.y_train))
    theirs = ref.predict_feature_maps(torch.tensor(p.h_test).float()).numpy()
    det = detectors.get("vra", lower_percentile=lower, upper_percentile=upper)
    ours = det.fit(**p.fit_inputs()).score(**p.score_inputs())
    # measured (1, 99): Spearman 1.000000, max |ours + theirs| 1.2e-4 on a scale of 274 (their
    # logits and log-sum-exp are float32)
    assert scipy.stats.spearmanr(ours, -theirs).statistic >= 0.999
    np.testing.assert_allclose(ours, -theirs, rtol=1e-5, atol=1e-6 * np.abs(theirs).max())


def test_lower_percentile_above_upper_is_refused(problem: Any) -> None:
    det = detectors.get("vra", lower_percentile=60.0, upper_percentile=40.0)
    with pytest.raises(
        InputError,
        match=r"^vra: lower_percentile \(60.0\) must not exceed upper_percentile \(40.0\)$",
    ):
        det.fit(**problem.fit_inputs())
