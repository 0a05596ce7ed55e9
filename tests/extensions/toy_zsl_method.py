"""A toy zero-shot method in one module: ridge regression from image features to class
embeddings, scored by the negative squared distance to each class's embedding.

``W = (X^T X + lam I)^{-1} X^T S[y]``; ``score(x, s) = -||x W - s||^2``. :func:`register` adds
it (a package would apply ``register_zsl_method`` on import, through the
``semshift.zsl_methods`` entry-point group).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Real
from typing import Any, ClassVar

import numpy as np

from semshift.params import Interval
from semshift.training.zsl import ZSL_METHODS, ZSLMethod, register_zsl_method

NAME = "toy_ridge"


class ToyRidge(ZSLMethod):
    """Ridge regression onto the class embeddings, nearest embedding wins."""

    name = NAME
    title = "Toy ridge"
    reference = "a test's toy"
    constraints: ClassVar[Mapping[str, Any]] = {
        "lam": [Interval(Real, 0.0, None, closed="neither")]
    }
    grid: ClassVar[Mapping[str, Sequence[Any]]] = {"lam": (0.1, 10.0)}
    order = 99

    def __init__(self, lam: float = 1.0) -> None:
        self.lam = lam

    def _fit(self, X: np.ndarray, y: np.ndarray, S: np.ndarray) -> None:
        A = X.T @ X + self.lam * np.eye(X.shape[1])
        self.W_ = np.linalg.solve(A, X.T @ S[y])

    def _scores(self, X: np.ndarray, S: np.ndarray) -> np.ndarray:
        P = X @ self.W_
        return -((P**2).sum(1)[:, None] - 2 * P @ S.T + (S**2).sum(1)[None, :])


def register() -> None:
    register_zsl_method(ToyRidge)


def unregister() -> None:
    ZSL_METHODS.remove(NAME)
