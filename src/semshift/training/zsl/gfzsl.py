"""GFZSL: one diagonal Gaussian per class, its parameters regressed from the class embedding.

Notation: ``X`` (n, d) features, ``y`` (n,) class indices, ``S`` (C, a) the training classes'
embeddings, ``M`` (C, d) the class means, ``V`` (C, d) the class variances, ``K = k(S, S)``
(C, C) the kernel matrix of the embeddings.

Each class c is ``N(mu_c, diag(sigma_c^2))``. For the training (seen) classes ``mu_c`` and
``sigma_c^2`` are the per-class sample mean and (unbiased) variance of their images; two kernel
ridge regressions map an embedding to ``mu`` and to ``rho = log(sigma^2 + eps)``:

``A_mu = (K + lam_mu I)^-1 M``, ``A_rho = (K + lam_var I)^-1 log(V + eps)``,

so a class with embedding ``s`` gets ``mu(s) = k(s, S) A_mu`` and ``sigma^2(s) =
exp(k(s, S) A_rho)``. An image is scored by its Gaussian log-likelihood under each class, with
``var_reg`` added to every variance. All in a handful of matrix products: no loop over images
or classes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
import scipy.linalg as sla
from numpy.typing import NDArray

from semshift.params import Interval, StrOptions
from semshift.training.zsl.closed_form import class_sums
from semshift.training.zsl.registry import (
    ZSLMethod,
    check_fit_inputs,
    register_zsl_method,
)

__all__ = ["GFZSL", "class_gaussians", "diagonal_gaussian_loglik", "embedding_kernel"]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

_ROWS = 4096  # rows of X centred at a time when computing the class variances


def embedding_kernel(A: F64, B: F64, kernel: str, degree: int) -> F64:
    """``k(A, B)`` (m, k) for rows of ``A`` (m, a) and ``B`` (k, a): ``A B^T`` (``linear``) or
    ``(1 + A B^T)^degree`` (``poly``, the released code's ``kernelPoly``)."""
    G = A @ B.T
    return G if kernel == "linear" else (1.0 + G) ** degree


def class_gaussians(X: F64, y: I64, n_classes: int) -> tuple[F64, F64]:
    """Per-class means (C, d) and unbiased variances (C, d, divisor ``n_c - 1``; a class with
    one image gets 0), the variances from the centred features, a block of rows at a time."""
    counts = np.bincount(y, minlength=n_classes).astype(np.float64)
    M = class_sums(X, y, n_classes) / counts[:, None]
    ss = np.zeros_like(M)
    for lo in range(0, X.shape[0], _ROWS):
        yb = y[lo : lo + _ROWS]
        Xc = X[lo : lo + _ROWS] - M[yb]
        np.square(Xc, out=Xc)
        ss += class_sums(Xc, yb, n_classes)
    return M, ss / np.maximum(counts - 1.0, 1.0)[:, None]


def diagonal_gaussian_loglik(X: F64, mu: F64, var: F64) -> F64:
    """``log N(x_i | mu_c, diag(var_c))`` for every image i and class c: (n, C), as
    ``-(1/2) [x^2 . (1/v) - 2 x . (mu/v) + sum(mu^2/v) + sum(log v) + d log(2 pi)]``."""
    P = 1.0 / var
    quad = (X * X) @ P.T - 2.0 * (X @ (mu * P).T) + np.sum(mu * mu * P, axis=1)
    const = np.sum(np.log(var), axis=1) + X.shape[1] * np.log(2.0 * np.pi)
    return -0.5 * (quad + const)


@register_zsl_method
class GFZSL(ZSLMethod):
    """Generative framework for zero-shot learning, Gaussian case (inductive).

    Each class is a diagonal Gaussian; the seen classes' means and variances are estimated
    from their images, and kernel ridge regressions from the class embedding to the mean and to
    the log-variance predict those of any other class (module docstring). Scores are
    Gaussian log-likelihoods (higher = more compatible).

    Parameters
    ----------
    lam_mu : float
        Ridge of the mean regression (the released code's lamda1 = 0.01); grid 10^-3 .. 1.
    lam_var : float
        Ridge of the log-variance regression (the released code's lamda2 = 1e8, which shrinks
        the predicted log-variance to about 0, i.e. unit variance, for embeddings of norm ~1);
        grid {1, 1e8}.
    kernel : {"poly", "linear"}
        ``(1 + s^T t)^degree`` (the released code) or ``s^T t`` (the paper's linear model
        ``mu = W s`` written in its dual form); grid both.
    degree : int
        Degree of the polynomial kernel (2 in the released code).
    var_reg : float
        Added to every variance when scoring (the released code's ``reg`` = 0.05, "for
        stability").
    var_eps : float
        Added to the seen variances inside the log before the regression (the released code's
        0.001).
    seen : {"estimated", "regressed"}
        Parameters of a scored class whose embedding is (exactly) one of the training
        embeddings: its images' estimates (the generative model's own seen-class
        distributions; default) or the regression's prediction like any other class.

    Attributes
    ----------
    means_, variances_ : ndarray, shape (C, d)
        The seen classes' estimates.
    alpha_mu_, alpha_rho_ : ndarray, shape (C, d)
        Dual coefficients of the two regressions.
    train_embeddings_ : ndarray, shape (C, a)

    References
    ----------
    .. [1] Verma, V. K. and Rai, P., "A simple exponential family framework for zero-shot
       learning", ECML-PKDD 2017 (arXiv:1707.08040), Gaussian case, Sec. 3.

    Notes
    -----
    Defaults follow the authors' released MATLAB (github.com/vkverma01/Zero-Shot, ``awa2.m``,
    ``Inductive_setting.m``, ``logmvnpdf.m``): polynomial kernel of degree 2, ``lamda1``
    0.01, ``lamda2`` 1e8, ``var(.)`` with divisor ``n_c - 1``, ``log(sigma^2 + 0.001)``
    regressed, ``diag(sigma^2 + 0.05)`` in the log-likelihood. That code scores the unseen
    classes only (ZSL). For scored classes that are training classes (GZSL) this class uses
    their estimated Gaussians by default (``seen="estimated"``): in the generative model the
    regression only stands in for classes without images. A scored row is a seen class when it
    equals a training embedding exactly (``-0.0 == 0.0``); with duplicate training rows the
    first one's estimates are used. The regressions have no bias term beyond the polynomial
    kernel's constant (the linear kernel has none), as in the paper.

    Examples
    --------
    >>> import numpy as np
    >>> from semshift.training.zsl import GFZSL
    >>> rng = np.random.default_rng(0)
    >>> S = np.eye(3)
    >>> y = np.repeat(np.arange(3), 10)
    >>> X = S[y] @ rng.standard_normal((3, 8)) + 0.01 * rng.standard_normal((30, 8))
    >>> (GFZSL().fit(X, y, S).predict(X, S) == y).mean()
    np.float64(1.0)
    """

    name = "gfzsl"
    title = "GFZSL"
    reference = "Verma and Rai, ECML-PKDD 2017"
    constraints: ClassVar[Mapping[str, Any]] = {
        "lam_mu": [Interval(Real, 0.0, None, closed="neither")],
        "lam_var": [Interval(Real, 0.0, None, closed="neither")],
        "kernel": [StrOptions({"poly", "linear"})],
        "degree": [Interval(Integral, 1, None, closed="left")],
        "var_reg": [Interval(Real, 0.0, None, closed="neither")],
        "var_eps": [Interval(Real, 0.0, None, closed="neither")],
        "seen": [StrOptions({"estimated", "regressed"})],
    }
    grid: ClassVar[Mapping[str, Sequence[Any]]] = {
        "kernel": ("poly", "linear"),
        "lam_mu": (0.001, 0.01, 0.1, 1.0),
        "lam_var": (1.0, 1e8),
    }
    order = 14

    def __init__(
        self,
        lam_mu: float = 0.01,
        lam_var: float = 1e8,
        kernel: str = "poly",
        degree: int = 2,
        var_reg: float = 0.05,
        var_eps: float = 0.001,
        seen: str = "estimated",
    ) -> None:
        self.lam_mu = lam_mu
        self.lam_var = lam_var
        self.kernel = kernel
        self.degree = degree
        self.var_reg = var_reg
        self.var_eps = var_eps
        self.seen = seen

    def _regress(self, K: F64, M: F64, V: F64) -> None:
        eye = np.eye(K.shape[0])
        self.alpha_mu_ = sla.solve(K + self.lam_mu * eye, M, assume_a="pos")
        self.alpha_rho_ = sla.solve(
            K + self.lam_var * eye, np.log(V + self.var_eps), assume_a="pos"
        )

    def _fit(self, X: F64, y: I64, S: F64) -> None:
        M, V = class_gaussians(X, y, S.shape[0])
        self.means_, self.variances_, self.train_embeddings_ = M, V, S.copy()
        self._regress(embedding_kernel(S, S, self.kernel, self.degree), M, V)

    def class_parameters(self, S: F64) -> tuple[F64, F64]:
        """Means and variances (before ``var_reg``) of the classes with embeddings ``S``
        (C', a): (C', d) each."""
        Kt = embedding_kernel(S, self.train_embeddings_, self.kernel, self.degree)
        mu = Kt @ self.alpha_mu_
        var = np.exp(Kt @ self.alpha_rho_)
        if self.seen == "estimated":
            rows, seen = self.seen_rows(S)
            mu[rows] = self.means_[seen]
            var[rows] = self.variances_[seen]
        return mu, var

    def seen_rows(self, S: F64) -> tuple[I64, I64]:
        """Rows of ``S`` equal to a training embedding, and which one (the first on
        duplicates)."""
        index: dict[bytes, int] = {}
        for c, row in enumerate(self.train_embeddings_ + 0.0):
            index.setdefault(row.tobytes(), c)
        hits = [(i, index.get(row.tobytes(), -1)) for i, row in enumerate(S + 0.0)]
        pairs = np.array([h for h in hits if h[1] >= 0], dtype=np.int64).reshape(-1, 2)
        return pairs[:, 0], pairs[:, 1]

    def _scores(self, X: F64, S: F64) -> F64:
        mu, var = self.class_parameters(S)
        return diagonal_gaussian_loglik(X, mu, var + self.var_reg)

    @classmethod
    def fit_grid(
        cls, X: F64, y: I64, S: F64, candidates: Sequence[Mapping[str, Any]]
    ) -> Iterator[GFZSL]:
        """Fitted models for every hyperparameter set, sharing the class means and variances
        (one pass over the images) and one kernel matrix per (kernel, degree)."""
        Xa, ya, Sa = check_fit_inputs(X, y, S, cls.name)
        M, V = class_gaussians(Xa, ya, Sa.shape[0])
        kernels: dict[tuple[str, int], F64] = {}
        for params in candidates:
            model = cls(**{**cls.defaults(), **params})
            model._validate()
            key = (model.kernel, model.degree)
            if key not in kernels:
                kernels[key] = embedding_kernel(Sa, Sa, model.kernel, model.degree)
            model.means_, model.variances_, model.train_embeddings_ = M, V, Sa.copy()
            model._regress(kernels[key], M, V)
            model.n_features_in_, model.embedding_dim_ = Xa.shape[1], Sa.shape[1]
            yield model
