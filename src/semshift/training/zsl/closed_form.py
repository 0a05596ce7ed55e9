"""The closed-form zero-shot methods: ESZSL and SAE.

Both learn a linear map between image features and class embeddings in one linear solve over
the Gram matrix ``X^T X`` (d x d); the hyperparameter grid reuses it (:meth:`fit_grid`), so a
grid of 49 ESZSL fits costs one Gram matrix and seven Cholesky factorisations.

Notation: ``X`` (n, d) features, ``y`` (n,) class indices, ``S`` (C, a) class embeddings,
``Y`` (n, C) with ``Y[i, y_i] = 1`` and -1 elsewhere (ESZSL), ``N = diag(n_c)`` class counts,
``M`` (C, d) per-class feature sums.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from numbers import Real
from typing import Any, ClassVar

import numpy as np
import scipy.linalg as sla
from numpy.typing import NDArray

from semshift.params import Boolean, Interval, StrOptions
from semshift.training.zsl.registry import (
    ZSLMethod,
    check_fit_inputs,
    register_zsl_method,
)

__all__ = ["ESZSL", "SAE", "class_sums"]

F64 = NDArray[np.float64]
_DECADES = tuple(float(10.0**k) for k in range(-3, 4))


def class_sums(X: F64, y: NDArray[np.int64], n_classes: int) -> F64:
    """Per-class sums of the rows of ``X``: (n_classes, d), in one sparse product."""
    from scipy.sparse import csr_matrix

    onehot = csr_matrix(
        (np.ones(y.size), (y, np.arange(y.size))), shape=(n_classes, y.size), dtype=np.float64
    )
    return np.asarray(onehot @ X)


def gram(X: F64) -> F64:
    """``X^T X`` (d, d); NumPy computes ``X.T @ X`` with a symmetric rank-k update."""
    return X.T @ X


def _cosine(a: F64, b: F64) -> F64:
    """Cosine similarity of the rows of ``a`` (n, k) and ``b`` (m, k): (n, m)."""
    an = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    bn = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return an @ bn.T


@register_zsl_method
class ESZSL(ZSLMethod):
    """Embarrassingly simple zero-shot learning: a bilinear map in closed form.

    Minimises ``||X V S^T - Y||_F^2 + gamma ||V S^T||_F^2 + lam ||X V||_F^2 + gamma lam
    ||V||_F^2`` over ``V`` (d, a), ``Y`` (n, C) the training targets, whose minimiser is

    ``V = (X^T X + gamma I)^{-1} X^T Y S (S^T S + lam I)^{-1}``.

    Scores are ``x^T V s`` (higher = more compatible).

    Parameters
    ----------
    gamma : float
        Regulariser of the feature side (the paper's gamma); grid 10^-3 .. 10^3.
    lam : float
        Regulariser of the embedding side (the paper's lambda); grid 10^-3 .. 10^3.
    targets : {"onehot", "signed"}
        ``Y[i, c]``: 1 for the image's class and 0 (``onehot``) or -1 (``signed``) elsewhere.

    Attributes
    ----------
    V_ : ndarray, shape (d, a)

    References
    ----------
    .. [1] Romera-Paredes, B. and Torr, P. H. S., "An embarrassingly simple approach to
       zero-shot learning", ICML 2015, eq. 5 (the paper's X is d x n; here n x d).

    Notes
    -----
    Departure: the paper writes ``Y`` in {-1, 1}; the default here is one-hot targets, as the
    public re-implementations that reproduce Xian et al.'s ESZSL numbers use. The signed
    targets add the rank-one term ``-X^T 1 1^T S``, which ties every score to the direction of
    the mean class embedding and lost 30-45 points of ZSL accuracy on the planted data of the
    tests; ``targets="signed"`` gives the paper's form.

    Examples
    --------
    >>> import numpy as np
    >>> from semshift.training.zsl import ESZSL
    >>> rng = np.random.default_rng(0)
    >>> S = np.eye(3)
    >>> y = np.repeat(np.arange(3), 10)
    >>> X = S[y] @ rng.standard_normal((3, 8)) + 0.01 * rng.standard_normal((30, 8))
    >>> (ESZSL().fit(X, y, S).predict(X, S) == y).mean()
    np.float64(1.0)
    """

    name = "eszsl"
    title = "ESZSL"
    reference = "Romera-Paredes and Torr, ICML 2015"
    constraints: ClassVar[Mapping[str, Any]] = {
        "gamma": [Interval(Real, 0.0, None, closed="neither")],
        "lam": [Interval(Real, 0.0, None, closed="neither")],
        "targets": [StrOptions({"onehot", "signed"})],
    }
    grid: ClassVar[Mapping[str, Sequence[Any]]] = {"gamma": _DECADES, "lam": _DECADES}
    order = 11

    def __init__(self, gamma: float = 1.0, lam: float = 1.0, targets: str = "onehot") -> None:
        self.gamma = gamma
        self.lam = lam
        self.targets = targets

    @staticmethod
    def xty(X: F64, y: NDArray[np.int64], n_classes: int, targets: str = "onehot") -> F64:
        """``X^T Y`` (d, C) without a dense (n, C) ``Y``: ``M^T`` for one-hot targets,
        ``2 M^T - (column sums) 1^T`` for signed ones."""
        M = class_sums(X, y, n_classes).T
        return M if targets == "onehot" else 2.0 * M - X.sum(axis=0)[:, None]

    def _fit(self, X: F64, y: NDArray[np.int64], S: F64) -> None:
        B = self.xty(X, y, S.shape[0], self.targets) @ S
        left = sla.solve(gram(X) + self.gamma * np.eye(X.shape[1]), B, assume_a="pos")
        K = S.T @ S + self.lam * np.eye(S.shape[1])
        self.V_ = sla.solve(K, left.T, assume_a="pos").T

    def _scores(self, X: F64, S: F64) -> F64:
        return (X @ self.V_) @ S.T

    @classmethod
    def fit_grid(
        cls, X: F64, y: NDArray[np.int64], S: F64, candidates: Sequence[Mapping[str, Any]]
    ) -> Iterator[ESZSL]:
        """Fitted models for every hyperparameter set, sharing the Gram matrix and one Cholesky
        factorisation per ``gamma``."""
        Xa, ya, Sa = check_fit_inputs(X, y, S, cls.name)
        G = gram(Xa)
        factors: dict[float, Any] = {}
        left: dict[tuple[float, str], F64] = {}
        for params in candidates:
            model = cls(**{**cls.defaults(), **params})
            model._validate()
            key = (model.gamma, model.targets)
            if key not in left:
                if model.gamma not in factors:
                    factors[model.gamma] = sla.cho_factor(G + model.gamma * np.eye(G.shape[0]))
                B = cls.xty(Xa, ya, Sa.shape[0], model.targets) @ Sa
                left[key] = sla.cho_solve(factors[model.gamma], B)
            K = Sa.T @ Sa + model.lam * np.eye(Sa.shape[1])
            model.V_ = sla.solve(K, left[key].T, assume_a="pos").T
            model.n_features_in_, model.embedding_dim_ = Xa.shape[1], Sa.shape[1]
            yield model


def solve_sylvester_sym(A: F64, B_eig: tuple[F64, F64], C: F64) -> F64:
    """Solve ``A W + W B = C`` for symmetric PSD ``A`` (k, k) and ``B`` (d, d) given as its
    eigendecomposition ``(e, Q)``.

    With ``A = P diag(a) P^T``: ``W = P [(P^T C Q) / (a_i + e_j)] Q^T``. Entries whose
    denominator is zero (both matrices singular there) are set to 0, the minimum-norm solution.
    """
    a, P = np.linalg.eigh(A)
    e, Q = B_eig
    denom = a[:, None] + e[None, :]
    tiny = np.finfo(np.float64).eps * max(float(np.abs(denom).max()), 1.0)
    inner = (P.T @ C) @ Q
    inner = np.divide(inner, denom, out=np.zeros_like(inner), where=np.abs(denom) > tiny)
    return (P @ inner) @ Q.T


@register_zsl_method
class SAE(ZSLMethod):
    """Semantic autoencoder: an encoder ``W`` (a, d) whose transpose decodes.

    Minimises ``||X^T - W^T S_y^T||_F^2 + lam ||W X^T - S_y^T||_F^2`` with ``S_y = S[y]``
    (n, a); setting the gradient to zero gives the Sylvester equation

    ``(S^T N S) W + W (lam X^T X) = (1 + lam) S^T M``,

    solved exactly from the eigendecompositions of both sides (:func:`solve_sylvester_sym`).
    Scores: ``space="semantic"`` (the paper's F -> S) is the cosine similarity of the encoded
    image ``W x`` with each class embedding; ``space="feature"`` (S -> F) the cosine of the
    image with each decoded class ``W^T s``. With ``row_normalise=True``, ``W`` is replaced in
    both by ``W_n``, each row scaled to unit L2 norm (a zero row stays zero).

    Parameters
    ----------
    lam : float
        Weight of the encoder term (the paper's lambda; 0.2 for CUB, 5e5 for ImageNet); grid
        10^-2 .. 10^5.
    space : {"semantic", "feature"}
        Where test images and classes are compared.
    row_normalise : bool
        Score with ``W``'s rows scaled to unit norm, as the authors' AwA demo and the
        mvp18 Python port do (Notes); default False, the paper's unnormalised ``W``. Not in
        the grid.

    Attributes
    ----------
    W_ : ndarray, shape (a, d)
        The solution, unnormalised whatever ``row_normalise`` says.

    References
    ----------
    .. [1] Kodirov, E., Xiang, T. and Gong, S., "Semantic autoencoder for zero-shot learning",
       CVPR 2017, eq. 6-9.

    Notes
    -----
    The released code. The authors' MATLAB (github.com/Elyorcv/SAE) solves the same equation
    (``library/SAE.m``: ``sylvester(S*S', lambda*X*X', (1+lambda)*S*X')``, W k x d as here).
    Its ``awa_demo.m`` then scores with W row-normalised: F -> S ``X_te * NormalizeFea(W)'``,
    S -> F ``NormalizeFea(S_te_pro')' * NormalizeFea(W)``. Each row of W encodes one semantic
    dimension, so this reweights the dimensions of an encoded image (F -> S) and the rows a
    class's decoding sums (S -> F): the cosines and the predictions change
    (``row_normalise=True``; the default keeps the paper's form, eq. 9). The popular Python
    port (github.com/mvp18/Popular-ZSL-Algorithms, ``SAE/sae.py``, ``zsl_acc``) does the same
    in both directions (its ``normalizeFeature`` adds 1e-10 to every entry first). The
    authors' ``cub_demo.m`` and ``ImNet_2_demo.m`` do not normalise W (they reduce the features by a
    ridge regression onto the labels first and z-score the scores or the embeddings).

    Departures, preprocessing the released code adds and this class leaves to the data loader
    (features and embeddings are taken as given, so ``lam`` is on the data's own scale):
    ``awa_demo.m`` scales each feature dimension (column of ``X_tr``) to unit L2 norm over the
    training images (``NormalizeFea(X_tr')'``; the test features are not scaled), each
    attribute to unit norm over the test classes (F -> S ``NormalizeFea(S_te_gt')'`` in
    ``zsl_el.m``, S -> F ``NormalizeFea(S_te_pro')'`` before decoding) and, S -> F, each
    feature dimension of the decoded classes over the classes (``zsl_el.m``); the Python port
    scales each training feature vector (row) to unit norm.
    """

    name = "sae"
    title = "SAE"
    reference = "Kodirov et al., CVPR 2017"
    constraints: ClassVar[Mapping[str, Any]] = {
        "lam": [Interval(Real, 0.0, None, closed="neither")],
        "space": [StrOptions({"semantic", "feature"})],
        "row_normalise": [Boolean()],
    }
    grid: ClassVar[Mapping[str, Sequence[Any]]] = {
        "lam": tuple(float(10.0**k) for k in range(-2, 6)),
        "space": ("semantic", "feature"),
    }
    order = 13

    def __init__(
        self, lam: float = 0.2, space: str = "semantic", row_normalise: bool = False
    ) -> None:
        self.lam = lam
        self.space = space
        self.row_normalise = row_normalise

    @staticmethod
    def _sides(X: F64, y: NDArray[np.int64], S: F64) -> tuple[F64, F64]:
        counts = np.bincount(y, minlength=S.shape[0]).astype(np.float64)
        A = S.T @ (counts[:, None] * S)
        SM = S.T @ class_sums(X, y, S.shape[0])
        return A, SM

    def _fit(self, X: F64, y: NDArray[np.int64], S: F64) -> None:
        A, SM = self._sides(X, y, S)
        e, Q = np.linalg.eigh(gram(X))
        self.W_ = solve_sylvester_sym(A, (self.lam * e, Q), (1.0 + self.lam) * SM)

    def _scores(self, X: F64, S: F64) -> F64:
        W = self.W_
        if self.row_normalise:
            W = W / np.maximum(np.linalg.norm(W, axis=1, keepdims=True), 1e-12)
        if self.space == "semantic":
            return _cosine(X @ W.T, S)
        return _cosine(X, S @ W)

    @classmethod
    def fit_grid(
        cls, X: F64, y: NDArray[np.int64], S: F64, candidates: Sequence[Mapping[str, Any]]
    ) -> Iterator[SAE]:
        """Fitted models for every hyperparameter set, sharing one eigendecomposition of the
        Gram matrix (``lam`` only scales its eigenvalues) and one fit per ``lam``."""
        Xa, ya, Sa = check_fit_inputs(X, y, S, cls.name)
        A, SM = cls._sides(Xa, ya, Sa)
        e, Q = np.linalg.eigh(gram(Xa))
        fitted: dict[float, F64] = {}
        for params in candidates:
            model = cls(**{**cls.defaults(), **params})
            model._validate()
            if model.lam not in fitted:
                fitted[model.lam] = solve_sylvester_sym(A, (model.lam * e, Q), (1 + model.lam) * SM)
            model.W_ = fitted[model.lam]
            model.n_features_in_, model.embedding_dim_ = Xa.shape[1], Sa.shape[1]
            yield model
