"""Deep-ensemble combiners (semshift.detectors.ensemble): known answers, direction, bad input."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from semshift import metrics
from semshift.detectors import _common
from semshift.detectors.ensemble import (
    ENSEMBLE_RULES,
    ensemble_score,
    mean_logit_energy,
    mean_scores,
    mean_softmax_msp,
)
from semshift.errors import InputError

Z1 = np.array([[2.0, 0.0, -1.0], [0.5, 0.5, 0.5]])
Z2 = np.array([[0.0, 1.0, 0.0], [3.0, -2.0, 0.0]])
Z3 = np.array([[1.0, 1.0, 4.0], [0.0, 0.0, 0.0]])


def _softmax_row(z: list[float]) -> list[float]:
    e = [math.exp(v) for v in z]
    return [v / sum(e) for v in e]


def test_msp_of_the_mean_softmax_known_answer() -> None:
    # row 0: softmax(2, 0, -1) = (0.84379, 0.11420, 0.04201), softmax(0, 1, 0) = (0.21194,
    # 0.57612, 0.21194), softmax(1, 1, 4) = (0.04528, 0.04528, 0.90944)
    # -> mean (0.36700, 0.24520, 0.38780)
    expected = []
    for r in range(2):
        probs = [_softmax_row(list(z[r])) for z in (Z1, Z2, Z3)]
        expected.append(max(sum(p[c] for p in probs) / 3 for c in range(3)))
    got = mean_softmax_msp([Z1, Z2, Z3])
    np.testing.assert_allclose(got, expected, rtol=1e-14)
    assert got[0] == pytest.approx(0.38780, abs=1e-5)  # class 2 wins, not any member's top 1
    np.testing.assert_array_equal(ensemble_score([Z1, Z2, Z3]), got)  # msp is the default


def test_energy_of_the_mean_logits_known_answer() -> None:
    mean = (Z1 + Z2 + Z3) / 3
    expected = [math.log(sum(math.exp(v) for v in row)) for row in mean]
    np.testing.assert_allclose(mean_logit_energy([Z1, Z2, Z3]), expected, rtol=1e-14)
    np.testing.assert_array_equal(
        ensemble_score([Z1, Z2, Z3], rule="energy"), mean_logit_energy([Z1, Z2, Z3])
    )


def test_mean_scores_known_answer() -> None:
    np.testing.assert_array_equal(
        mean_scores([np.array([1.0, 4.0]), np.array([3.0, 0.0])]), [2.0, 2.0]
    )


def test_identical_members_give_the_single_model_score() -> None:
    one = mean_softmax_msp([Z1, Z1])
    np.testing.assert_allclose(one, [max(_softmax_row(list(r))) for r in Z1], rtol=1e-14)


@pytest.mark.parametrize("rule", sorted(ENSEMBLE_RULES))
def test_invariant_to_member_order_rows_and_blocks(rule: str, monkeypatch: Any) -> None:
    rng = np.random.default_rng(0)
    members = [rng.normal(size=(50, 7)).astype(np.float32) for _ in range(4)]
    ref = ensemble_score(members, rule)
    np.testing.assert_allclose(ensemble_score(members[::-1], rule), ref, rtol=1e-14)
    perm = rng.permutation(50)
    np.testing.assert_allclose(ensemble_score([m[perm] for m in members], rule), ref[perm])
    monkeypatch.setattr(_common, "BLOCK_BYTES", 256)  # a row or two per block
    np.testing.assert_allclose(ensemble_score(members, rule), ref, rtol=1e-14)


@pytest.mark.parametrize("rule", sorted(ENSEMBLE_RULES))
def test_shifted_images_rank_as_ood(rule: str) -> None:
    """Members: noisy copies of one linear classifier; OOD images sit between the classes."""
    rng = np.random.default_rng(3)
    c, d = 5, 16
    means = 4.0 * rng.normal(size=(c, d))
    h_id = means[rng.integers(0, c, 300)] + rng.normal(size=(300, d))
    h_ood = rng.normal(size=(300, d))  # no class mean: near the origin
    h = np.concatenate([h_id, h_ood])
    members = [h @ (means + rng.normal(scale=0.5, size=means.shape)).T / 4 for _ in range(3)]
    scores = ensemble_score(members, rule)
    is_ood = np.r_[np.zeros(300, bool), np.ones(300, bool)]
    assert metrics.auroc(scores, is_ood) > 0.95


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ([Z1], r"ensemble msp: an ensemble needs at least two members, got 1"),
        ([], r"at least two members, got 0"),
        ([Z1, Z2[:, :2]], r"member 1 has 2 classes but member 0 has 3; .* one class list"),
        ([Z1, Z2[:1]], r"member 1 has 1 rows but member 0 has 2; every member must score"),
        ([Z1, Z2[0]], r"member 1 must be a non-empty real array \(n, C\) of logits"),
        ([Z1, np.where(Z2 > 2, np.nan, Z2)], r"`member 1 logits` contains 1 NaN .* \[1, 0\]"),
    ],
)
def test_bad_members_raise_one_line(members: list[np.ndarray], message: str) -> None:
    with pytest.raises(InputError, match=message) as err:
        ensemble_score(members)
    assert "\n" not in str(err.value)


def test_unknown_rule_lists_the_known_ones() -> None:
    with pytest.raises(InputError, match=r"unknown rule 'mean'; known rules: msp, energy"):
        ensemble_score([Z1, Z2], rule="mean")
