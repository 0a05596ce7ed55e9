"""CONSE: convex combination of the seen classes' embeddings by classifier probabilities."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from semshift.params import Interval
from semshift.training.zsl.ranking import feature_scale
from semshift.training.zsl.registry import (
    ZSLMethod,
    check_fit_inputs,
    register_zsl_method,
)

__all__ = ["CONSE", "convex_embedding"]

F64 = NDArray[np.float64]


def convex_embedding(proba: F64, S: F64, top: int) -> F64:
    """``f(x) = sum_{t<=T} p(y_t | x) s_{y_t} / sum_{t<=T} p(y_t | x)`` over the ``top``
    most probable seen classes ``y_t`` of each row of ``proba`` (n, C): (n, a)."""
    T = min(top, proba.shape[1])
    keep = np.argpartition(-proba, T - 1, axis=1)[:, :T]
    w = np.zeros_like(proba)
    rows = np.arange(proba.shape[0])[:, None]
    w[rows, keep] = proba[rows, keep]
    w /= np.maximum(w.sum(axis=1, keepdims=True), 1e-300)
    return w @ S


@register_zsl_method
class CONSE(ZSLMethod):
    """Zero-shot by convex combination of semantic embeddings.

    A softmax classifier over the seen classes (multinomial logistic regression, L2-regularised,
    on features divided by their mean norm) gives ``p(y | x)``; an image is embedded as the
    probability-weighted mean of its ``top`` most probable seen classes' embeddings
    (:func:`convex_embedding`) and scored against any class by cosine similarity.

    Parameters
    ----------
    top : int
        T, the number of seen classes combined (10 in the paper); grid 1, 2, 5, 10.
    C : float
        Inverse L2 strength of the seen-class classifier; grid 0.1, 1, 10.
    max_iter : int
        L-BFGS iterations of the classifier.

    References
    ----------
    .. [1] Norouzi, M. et al., "Zero-shot learning by convex combination of semantic
       embeddings", ICLR 2014, eq. 1.

    Notes
    -----
    Departure: the paper takes the probabilities of a CNN trained end to end on the seen
    classes; here the classifier is trained on the fixed features (as in Xian et al.'s
    re-evaluation on ResNet features).
    """

    name = "conse"
    title = "CONSE"
    reference = "Norouzi et al., ICLR 2014"
    order = 3
    constraints: ClassVar[Mapping[str, Any]] = {
        "top": [Interval(Integral, 1, None, closed="left")],
        "C": [Interval(Real, 0.0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
    }
    grid: ClassVar[Mapping[str, Sequence[Any]]] = {"top": (1, 2, 5, 10), "C": (0.1, 1.0, 10.0)}

    def __init__(self, top: int = 10, C: float = 1.0, max_iter: int = 300) -> None:
        self.top = top
        self.C = C
        self.max_iter = max_iter

    def _classifier(self, X: F64, y: NDArray[np.int64]) -> Any:
        import warnings

        from sklearn.exceptions import ConvergenceWarning
        from sklearn.linear_model import LogisticRegression

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return LogisticRegression(C=self.C, max_iter=self.max_iter).fit(X, y)

    def _fit(self, X: F64, y: NDArray[np.int64], S: F64) -> None:
        self.scale_ = feature_scale(X)
        self.clf_ = self._classifier(X / self.scale_, y)
        self.seen_embeddings_ = S.copy()

    def _scores(self, X: F64, S: F64) -> F64:
        proba = self.clf_.predict_proba(X / self.scale_)
        f = convex_embedding(proba, self.seen_embeddings_, self.top)
        fn = f / np.maximum(np.linalg.norm(f, axis=1, keepdims=True), 1e-12)
        sn = S / np.maximum(np.linalg.norm(S, axis=1, keepdims=True), 1e-12)
        return fn @ sn.T

    @classmethod
    def fit_grid(
        cls, X: F64, y: NDArray[np.int64], S: F64, candidates: Sequence[Mapping[str, Any]]
    ) -> Iterator[CONSE]:
        """Fitted models for every hyperparameter set, one classifier per (C, max_iter):
        ``top`` only changes the combination."""
        Xa, ya, Sa = check_fit_inputs(X, y, S, cls.name)
        scale = feature_scale(Xa)
        clfs: dict[tuple[float, int], Any] = {}
        for params in candidates:
            model = cls(**{**cls.defaults(), **params})
            model._validate()
            key = (model.C, model.max_iter)
            if key not in clfs:
                clfs[key] = model._classifier(Xa / scale, ya)
            model.scale_, model.clf_, model.seen_embeddings_ = scale, clfs[key], Sa.copy()
            model.n_features_in_, model.embedding_dim_ = Xa.shape[1], Sa.shape[1]
            yield model
