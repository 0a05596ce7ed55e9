"""Tiny synthetic problems shared by the detector tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from semshift import detectors

#: Hyperparameters that fit the tiny problems (defaults assume ImageNet-sized data).
SMALL_PARAMS: dict[str, dict[str, Any]] = {
    "knn": {"k": 5},
    "nnguide": {"k": 5, "alpha": 0.2},
    "gen": {"M": 4},
    "neco": {"dim": 5},
}


@dataclass
class Problem:
    """A Gaussian class mixture with non-negative features and a linear (LDA) head."""

    h_train: np.ndarray
    y_train: np.ndarray
    z_train: np.ndarray
    h_val: np.ndarray
    y_val: np.ndarray
    z_val: np.ndarray
    h_test: np.ndarray
    z_test: np.ndarray
    is_ood: np.ndarray
    w: np.ndarray
    b: np.ndarray

    def fit_inputs(self) -> dict[str, Any]:
        return {
            "features": self.h_train,
            "logits": self.z_train,
            "labels": self.y_train,
            "head": (self.w, self.b),
            "val_logits": self.z_val,
            "val_labels": self.y_val,
        }

    def score_inputs(self) -> dict[str, Any]:
        return {"features": self.h_test, "logits": self.z_test}


def make_problem(
    seed: int = 0,
    n_classes: int = 6,
    dim: int = 24,
    n_per_class: int = 40,
    n_test_id: int = 60,
    n_test_ood: int = 60,
    noise: float = 1.0,
    sep: float = 3.0,
    ood_scale: float = 1.0,
    val_label_noise: float = 0.0,
) -> Problem:
    """Class means on sparse non-negative patterns; features ``relu(mean + noise)``.

    OOD samples come from new class means drawn the same way, their features multiplied by
    ``ood_scale`` (< 1 mimics the weaker activations networks produce on OOD inputs). The head
    is the LDA classifier of the training features (pooled covariance), so logits = h W^T + b.
    A fraction ``val_label_noise`` of the validation labels is replaced by random labels.
    """
    rng = np.random.default_rng(seed)

    def means(k: int) -> np.ndarray:
        return sep * (rng.random((k, dim)) < 0.3) * rng.uniform(0.5, 1.5, (k, dim))

    mu = means(n_classes)
    mu_new = means(n_classes)

    def draw(centres: np.ndarray, labels: np.ndarray) -> np.ndarray:
        return np.maximum(centres[labels] + noise * rng.standard_normal((labels.size, dim)), 0)

    y_train = np.repeat(np.arange(n_classes), n_per_class)
    h_train = draw(mu, y_train)
    y_val = rng.integers(0, n_classes, n_classes * 10)
    h_val = draw(mu, y_val)
    flip = rng.random(y_val.size) < val_label_noise
    y_val = np.where(flip, rng.integers(0, n_classes, y_val.size), y_val)
    h_id = draw(mu, rng.integers(0, n_classes, n_test_id))
    h_ood = ood_scale * draw(mu_new, rng.integers(0, n_classes, n_test_ood))
    h_test = np.concatenate([h_id, h_ood])
    is_ood = np.r_[np.zeros(n_test_id, bool), np.ones(n_test_ood, bool)]

    class_means = np.stack([h_train[y_train == c].mean(0) for c in range(n_classes)])
    centred = h_train - class_means[y_train]
    cov = centred.T @ centred / len(h_train) + 1e-3 * np.eye(dim)
    w = np.linalg.solve(cov, class_means.T).T
    b = -0.5 * np.einsum("cd,cd->c", w, class_means)
    return Problem(
        h_train=h_train,
        y_train=y_train,
        z_train=h_train @ w.T + b,
        h_val=h_val,
        y_val=y_val,
        z_val=h_val @ w.T + b,
        h_test=h_test,
        z_test=h_test @ w.T + b,
        is_ood=is_ood,
        w=w,
        b=b,
    )


@pytest.fixture(scope="session")
def problem() -> Problem:
    return make_problem()


def small(name: str, **extra: Any) -> detectors.Detector:
    """``detectors.get(name)`` with the tiny-data hyperparameters."""
    return detectors.get(name, **{**SMALL_PARAMS.get(name, {}), **extra})


@pytest.fixture(scope="session")
def build():
    return small
