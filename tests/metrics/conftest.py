"""Shared generators for the metrics tests: tiny seeded score sets with and without ties."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

Sample = tuple[np.ndarray, np.ndarray]


def draw(
    rng: np.random.Generator, n_id: int, n_ood: int, ties: str = "none", shift: float = 1.0
) -> Sample:
    """Scores (ID ~ N(shift, 1), OOD ~ N(0, 1)) in shuffled order and the is_ood mask.

    ties: "none" (continuous), "some" (rounded to one decimal), "heavy" (integers 0..3).
    """
    s = np.concatenate((rng.normal(shift, 1.0, n_id), rng.normal(0.0, 1.0, n_ood)))
    if ties == "some":
        s = np.round(s, 1)
    elif ties == "heavy":
        s = np.clip(np.round(s), 0, 3)
    y = np.concatenate((np.zeros(n_id, bool), np.ones(n_ood, bool)))
    perm = rng.permutation(s.size)
    return s[perm], y[perm]


@pytest.fixture
def sample() -> Callable[..., Sample]:
    """``sample(seed, n_id, n_ood, ties="none", shift=1.0)`` -> (scores, is_ood)."""

    def make(seed: int, n_id: int, n_ood: int, ties: str = "none", shift: float = 1.0) -> Sample:
        return draw(np.random.default_rng(seed), n_id, n_ood, ties, shift)

    return make


@pytest.fixture
def every_metric() -> Callable[..., list[float]]:
    """Every value a ``RankCore`` gives, in one list (bitwise comparisons of two paths)."""

    def values(core: Any) -> list[float]:
        return [
            core.auroc(),
            core.fpr(0.95, "id_recall"),
            core.fpr(0.95, "ood_recall"),
            core.fpr(0.5, "id_recall"),
            core.fpr(0.3, "id_recall"),
            core.fpr(0.07, "ood_recall"),
            core.ap_in(),
            core.ap_out(),
            core.detection_error(),
            float(core.tied_pairs()),
        ]

    return values
