"""Bilinear compatibility learned by SGD on ranking losses: ALE, DEVISE, SJE and LATEM.

Each learns ``F(x, y) = x^T W s_y`` (LATEM: the maximum over K such maps) so that the true
class outranks the others by a margin. They differ only in the loss, i.e. in which violating
classes a sample pushes down and by how much (``Delta = 1`` for a wrong class):

* ALE (weighted approximate ranking): every violating class, weighted ``beta_r / r`` with
  ``r`` the number of violators and ``beta_r = sum_{k<=r} 1/k``;
* DEVISE (hinge rank loss): every class with ``margin + F(x, y) - F(x, y_n) > 0``, unweighted;
* SJE (structured SVM): the single most violating class;
* LATEM (piecewise linear): a randomly drawn wrong class, when it violates; the update goes to
  the map that attains the maximum for that class and for the true class.

Vectorised epochs (how this departs from the papers' SGD): the papers update ``W`` after every
sample. Here an epoch walks a seeded permutation in minibatches of ``batch_size`` samples and
takes one step of ``lr`` times the batch-mean (sub)gradient, computed for all samples and all
classes of the batch at once: one (B, C) score matrix, a (B, C) coefficient matrix ``G`` of
the loss, and the gradient ``X_b^T G S``. With ``batch_size=1`` an epoch is exactly the
per-sample SGD (:meth:`BilinearRanking.per_sample_epoch`, the reference the tests and
``benchmarks/bench_zsl.py`` compare with). ALE's rank is the exact count of violators in the
batch's score matrix, where the paper estimates it by sampling classes until one violates.
Features are divided by their mean L2 norm over the training set (``scale_``), so one learning
rate grid serves every feature extractor; the class embeddings are used as given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from semshift.params import Interval
from semshift.training.zsl.registry import ZSLMethod, register_zsl_method

__all__ = ["ALE", "DEVISE", "LATEM", "SJE", "BilinearRanking", "feature_scale"]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


def feature_scale(X: F64) -> float:
    """Mean L2 norm of the rows of ``X`` (1.0 when it is 0)."""
    s = float(np.linalg.norm(X, axis=1).mean()) if X.size else 0.0
    return s if s > 0 else 1.0


class BilinearRanking(ZSLMethod):
    """Shared SGD loop of the ranking methods (not registered itself).

    Subclasses implement :meth:`coefficients`: from a batch's (B, C) score matrix, the (B, C)
    matrix ``G`` with ``dLoss/dscores``, so that the batch gradient is ``X_b^T G S``.
    """

    constraints: ClassVar[Mapping[str, Any]] = {
        "lr": [Interval(Real, 0.0, None, closed="neither")],
        "epochs": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "seed": [Interval(Integral, 0, None, closed="left")],
    }
    grid: ClassVar[Mapping[str, Sequence[Any]]] = {"lr": (0.03, 0.1, 0.3, 1.0)}

    def __init__(
        self, lr: float = 0.1, epochs: int = 30, batch_size: int = 64, seed: int = 0
    ) -> None:
        self.lr = lr
        self.epochs = epochs
        self.batch_size = batch_size
        self.seed = seed

    # -- the loss
    def coefficients(self, scores: F64, y: I64, draws: I64 | None) -> F64:
        """``G`` (B, C): the loss's derivative with respect to each score of the batch."""
        raise NotImplementedError

    def draws(self, rng: np.random.Generator, y: I64, n_classes: int) -> I64 | None:
        """Random draws the loss needs per sample (LATEM's wrong class), in epoch order."""
        return None

    # -- SGD
    def init_weights(self, rng: np.random.Generator, d: int, a: int) -> F64:
        """Initial ``W``: N(0, 1/d) entries, as the authors' code (Fortran order, so that
        :meth:`batch_step` updates it in place with one BLAS call)."""
        return np.asfortranarray(rng.standard_normal((d, a)) / np.sqrt(d))

    def batch_gradient(self, W: F64, Xb: F64, yb: I64, S: F64, draws: I64 | None) -> F64:
        """Sum over the batch of the loss gradient with respect to ``W`` (d, a)."""
        scores = (Xb @ W) @ S.T
        G = self.coefficients(scores, yb, draws)
        return Xb.T @ (G @ S)

    def batch_step(self, W: F64, Xb: F64, yb: I64, S: F64, draws: I64 | None, step: float) -> F64:
        """``W -= step * batch_gradient(...)``, in place when ``W`` is a Fortran-ordered
        float64 array: every product is then a SciPy ``dgemm`` on Fortran views (no copies),
        and the rank-B update ``W += (-step) X_b^T (G S)`` is one ``dgemm`` with ``beta=1``, so
        no (d, a) gradient is written and read back. One BLAS library for the whole step:
        NumPy's and SciPy's OpenBLAS threads spin after each call, and alternating the two
        made a two-thread epoch 3x slower than a one-thread one. Otherwise (a C-ordered ``W``)
        the plain NumPy update. Returns ``W``."""
        if W.flags.f_contiguous and W.dtype == np.float64:
            from scipy.linalg.blas import dgemm

            xt = np.asfortranarray(np.asarray(Xb, dtype=np.float64).T)  # (d, B)
            st = np.asfortranarray(np.asarray(S, dtype=np.float64).T)  # (a, C), a view of S
            xw = dgemm(1.0, xt, W, trans_a=1)  # X_b W (B, a)
            scores = dgemm(1.0, xw, st)  # (B, C)
            G = self.coefficients(scores, yb, draws)
            H = dgemm(1.0, np.asfortranarray(G), st, trans_b=1)  # G S (B, a)
            out = dgemm(-step, xt, H, beta=1.0, c=W, overwrite_c=True)
            if out is W or np.shares_memory(out, W):
                return W
            W[...] = out  # pragma: no cover - BLAS wrappers that copy anyway
            return W
        scores = (Xb @ W) @ S.T
        H = self.coefficients(scores, yb, draws) @ S
        W -= step * (Xb.T @ H)
        return W

    def sgd_epoch(
        self, W: F64, X: F64, y: I64, S: F64, order: I64, draws: I64 | None = None
    ) -> F64:
        """One epoch over ``order`` in minibatches (updates ``W`` in place and returns it)."""
        bs = self.batch_size
        for lo in range(0, order.size, bs):
            idx = order[lo : lo + bs]
            d = None if draws is None else draws[lo : lo + bs]
            W = self.batch_step(W, X[idx], y[idx], S, d, self.lr / idx.size)
        return W

    def per_sample_epoch(
        self, W: F64, X: F64, y: I64, S: F64, order: I64, draws: I64 | None = None
    ) -> F64:
        """The papers' SGD: one update per sample, in a Python loop over ``order`` (the
        reference for tests and benchmarks; :meth:`sgd_epoch` with ``batch_size=1`` equals it)."""
        for k, i in enumerate(order):
            d = None if draws is None else draws[k : k + 1]
            W = self.batch_step(W, X[i : i + 1], y[i : i + 1], S, d, self.lr)
        return W

    def _fit(self, X: F64, y: I64, S: F64) -> None:
        rng = np.random.default_rng(self.seed)
        self.scale_ = feature_scale(X)
        Xs = X / self.scale_
        W = self.init_weights(rng, X.shape[1], S.shape[1])
        for _ in range(self.epochs):
            order = rng.permutation(y.size)
            W = self.sgd_epoch(W, Xs, y, S, order, self.draws(rng, y[order], S.shape[0]))
        self.W_ = W

    def _scores(self, X: F64, S: F64) -> F64:
        return ((X / self.scale_) @ self.W_) @ S.T


def _violations(scores: F64, y: I64, margin: float) -> F64:
    """``margin + F(x, y) - F(x, y_n)`` per (sample, class), with the true class at -inf."""
    rows = np.arange(y.size)
    out = margin + scores - scores[rows, y][:, None]
    out[rows, y] = -np.inf
    return out


@register_zsl_method
class ALE(BilinearRanking):
    """Attribute label embedding: bilinear compatibility, weighted approximate ranking loss.

    ``loss(x_n) = (beta_r / r) sum_y max(0, 1 + F(x_n, y) - F(x_n, y_n))`` with ``r`` the
    number of violating classes and ``beta_r = sum_{k=1}^r 1/k`` (the rank weighting that
    stresses the top of the ranking).

    Parameters
    ----------
    lr : float
        Learning rate (grid 0.03, 0.1, 0.3, 1).
    epochs : int
        Passes over the training set.
    batch_size : int
        Samples per vectorised step (1 = the paper's per-sample SGD).
    seed : int
        Initialisation, permutations.

    References
    ----------
    .. [1] Akata, Z., Perronnin, F., Harchaoui, Z. and Schmid, C., "Label-embedding for image
       classification", TPAMI 2016, sec. 3.3 (WSABIE-style ranking).
    """

    name = "ale"
    title = "ALE"
    reference = "Akata et al., TPAMI 2016"
    order = 8

    def coefficients(self, scores: F64, y: I64, draws: I64 | None) -> F64:
        viol = _violations(scores, y, 1.0) > 0
        r = viol.sum(axis=1)
        beta = np.concatenate(([0.0], np.cumsum(1.0 / np.arange(1, scores.shape[1] + 1))))
        w = beta[r] / np.maximum(r, 1)
        G = viol * w[:, None]
        G[np.arange(y.size), y] = -G.sum(axis=1)
        return G


@register_zsl_method
class DEVISE(BilinearRanking):
    """DeViSE: a linear map of image features into the embedding space, hinge rank loss.

    ``loss(x_n) = sum_{y != y_n} max(0, margin + F(x_n, y) - F(x_n, y_n))``.

    Parameters
    ----------
    margin : float
        The hinge margin (0.1 in the paper).
    lr, epochs, batch_size, seed : as :class:`ALE`.

    References
    ----------
    .. [1] Frome, A. et al., "DeViSE: A deep visual-semantic embedding model", NIPS 2013,
       eq. 1 (here on fixed image features: only the linear map is trained).
    """

    name = "devise"
    title = "DEVISE"
    reference = "Frome et al., NIPS 2013"
    order = 9
    constraints: ClassVar[Mapping[str, Any]] = {
        **BilinearRanking.constraints,
        "margin": [Interval(Real, 0.0, None, closed="neither")],
    }
    grid: ClassVar[Mapping[str, Sequence[Any]]] = {
        "lr": (0.03, 0.1, 0.3, 1.0),
        "margin": (0.1, 1.0),
    }

    def __init__(
        self,
        margin: float = 0.1,
        lr: float = 0.1,
        epochs: int = 30,
        batch_size: int = 64,
        seed: int = 0,
    ) -> None:
        super().__init__(lr=lr, epochs=epochs, batch_size=batch_size, seed=seed)
        self.margin = margin

    def coefficients(self, scores: F64, y: I64, draws: I64 | None) -> F64:
        G = (_violations(scores, y, self.margin) > 0).astype(np.float64)
        G[np.arange(y.size), y] = -G.sum(axis=1)
        return G


@register_zsl_method
class SJE(BilinearRanking):
    """Structured joint embedding: bilinear compatibility, structured SVM loss.

    ``loss(x_n) = max_y (Delta(y_n, y) + F(x_n, y) - F(x_n, y_n))``: only the most violating
    class is pushed down.

    Parameters
    ----------
    lr, epochs, batch_size, seed : as :class:`ALE`.

    References
    ----------
    .. [1] Akata, Z., Reed, S., Walter, D., Lee, H. and Schiele, B., "Evaluation of output
       embeddings for fine-grained image classification", CVPR 2015, eq. 2.
    """

    name = "sje"
    title = "SJE"
    reference = "Akata et al., CVPR 2015"
    order = 10

    def coefficients(self, scores: F64, y: I64, draws: I64 | None) -> F64:
        v = _violations(scores, y, 1.0)
        rows = np.arange(y.size)
        worst = np.argmax(v, axis=1)
        active = (v[rows, worst] > 0).astype(np.float64)
        G = np.zeros_like(scores)
        G[rows, worst] = active
        G[rows, y] -= active
        return G


@register_zsl_method
class LATEM(BilinearRanking):
    """Latent embeddings: ``F(x, y) = max_i x^T W_i s_y`` over ``n_maps`` bilinear maps.

    For each sample a wrong class ``y`` is drawn at random; when ``1 + F(x, y) - F(x, y_n) > 0``
    the map attaining ``F(x, y)`` is pushed down and the one attaining ``F(x, y_n)`` up.

    Parameters
    ----------
    n_maps : int
        Number of latent maps K (the paper tunes K in 2, 4, 6, 8, 10; grid 2, 4, 6 here,
        with lr in 0.1, 0.3, 1: each point trains K maps).
    lr, epochs, batch_size, seed : as :class:`ALE`.

    Attributes
    ----------
    W_ : ndarray, shape (K, d, a)

    References
    ----------
    .. [1] Xian, Y., Akata, Z., Sharma, G., Nguyen, Q., Hein, M. and Schiele, B., "Latent
       embeddings for zero-shot classification", CVPR 2016, eq. 3 and Algorithm 1.
    """

    name = "latem"
    title = "LATEM"
    reference = "Xian et al., CVPR 2016"
    order = 7
    constraints: ClassVar[Mapping[str, Any]] = {
        **BilinearRanking.constraints,
        "n_maps": [Interval(Integral, 1, None, closed="left")],
    }
    grid: ClassVar[Mapping[str, Sequence[Any]]] = {
        "lr": (0.1, 0.3, 1.0),
        "n_maps": (2, 4, 6),
    }

    def __init__(
        self,
        n_maps: int = 6,
        lr: float = 0.1,
        epochs: int = 30,
        batch_size: int = 64,
        seed: int = 0,
    ) -> None:
        super().__init__(lr=lr, epochs=epochs, batch_size=batch_size, seed=seed)
        self.n_maps = n_maps

    def init_weights(self, rng: np.random.Generator, d: int, a: int) -> F64:
        return rng.standard_normal((self.n_maps, d, a)) / np.sqrt(d)

    def batch_step(self, W: F64, Xb: F64, yb: I64, S: F64, draws: I64 | None, step: float) -> F64:
        W -= step * self.batch_gradient(W, Xb, yb, S, draws)
        return W

    def draws(self, rng: np.random.Generator, y: I64, n_classes: int) -> I64 | None:
        # a uniformly drawn class other than the true one
        return (y + 1 + rng.integers(n_classes - 1, size=y.size)) % n_classes

    def batch_gradient(self, W: F64, Xb: F64, yb: I64, S: F64, draws: I64 | None) -> F64:
        assert draws is not None
        rows = np.arange(yb.size)
        scores = np.matmul(np.matmul(Xb[None], W), S.T)  # (K, B, C)
        k_wrong = np.argmax(scores[:, rows, draws], axis=0)
        k_true = np.argmax(scores[:, rows, yb], axis=0)
        best = scores.max(axis=0)
        active = 1.0 + best[rows, draws] - best[rows, yb] > 0
        grad = np.zeros_like(W)
        for k in range(W.shape[0]):  # over the K maps, not over samples
            up = active & (k_wrong == k)
            down = active & (k_true == k)
            grad[k] = Xb[up].T @ S[draws[up]] - Xb[down].T @ S[yb[down]]
        return grad

    def _scores(self, X: F64, S: F64) -> F64:
        Xs = X / self.scale_
        out = np.full((X.shape[0], S.shape[0]), -np.inf)
        for Wk in self.W_:
            np.maximum(out, (Xs @ Wk) @ S.T, out=out)
        return out
