"""CMT and CMT*: cross-modal transfer (Socher et al., NIPS 2013).

CMT maps image features into the class-embedding space with a two-layer network,
``f(x) = W2^T tanh(W1^T x + b1) + b2``, trained to put each image near its class's embedding
(the paper's eq. 1, squared distance), and scores a class by the negative Euclidean distance
between the mapped image and the class's embedding (the paper's nearest-embedding rule).

CMT* adds the paper's novelty detection for the generalised task (sec. 5.1, the Gaussian
model): an isometric Gaussian per seen class in the mapped space, centred on the class's
embedding, with the variance of that class's mapped training images; an image whose likelihood
under the class-prior mixture falls below a threshold is novel. The threshold is the
``novelty_quantile`` quantile of the training images' own log-likelihoods. A novel image is then
classified among the unseen classes only, a familiar one among the seen classes only (the
paper's two-stage rule), written into one score matrix by pushing the other group's scores
below every score of the chosen group (finite scores, same order within each group).

Training (both): minibatch Adam in NumPy on the mean squared distance plus an L2 penalty on
the weights, in float32 by default (``precision``); features are standardised per dimension over
the training images. Every step is a handful of matrix products over the whole minibatch and
in-place moment updates, seeded and bitwise repeatable (for a given BLAS library and thread
count; OpenBLAS gave equal bits with 1 and 2 threads).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from semshift.errors import InputError, NotFittedError
from semshift.params import Interval, StrOptions
from semshift.training.zsl.registry import ZSLMethod, register_zsl_method

__all__ = ["CMT", "CMTStar", "gaussian_log_likelihood", "mapping_loss", "seen_columns"]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
Float = NDArray[np.floating[Any]]  # float32 or float64 (the training's ``precision``)

#: Rows of ``S'`` that agree with a seen class's embedding within these tolerances (every
#: entry, ``np.isclose``) are that seen class: loose enough for a float32 round trip, far tighter
#: than any two distinct classes' embeddings.
MATCH_RTOL = 1e-6
MATCH_ATOL = 1e-9

_ADAM_BETAS = (0.9, 0.999)
_ADAM_EPS = 1e-8


def mapping_loss(
    params: Mapping[str, Float], X: Float, T: Float, lam: float
) -> tuple[float, dict[str, Float]]:
    """The CMT objective on a batch and its gradient.

    ``J = (1 / 2n) sum_i ||W2^T tanh(W1^T x_i + b1) + b2 - t_i||^2 + (lam / 2)(||W1||^2 +
    ||W2||^2)`` (the paper's eq. 1 as a mean, with the released code's weight penalty).

    Parameters
    ----------
    params : mapping
        ``W1`` (d, h), ``b1`` (h,), ``W2`` (h, a), ``b2`` (a,).
    X : ndarray, shape (n, d)
        Images (standardised features).
    T : ndarray, shape (n, a)
        Each image's target: its class's embedding.
    lam : float
        L2 strength on ``W1`` and ``W2`` (biases are not penalised).

    Returns
    -------
    loss : float
    grad : dict
        Same keys and shapes as ``params``.
    """
    W1, b1, W2, b2 = params["W1"], params["b1"], params["W2"], params["b2"]
    n = X.shape[0]
    H = np.tanh(X @ W1 + b1)
    E = H @ W2 + b2 - T
    loss = 0.5 * float(np.einsum("ij,ij->", E, E)) / n
    loss += 0.5 * lam * (float(np.einsum("ij,ij->", W1, W1)) + float(np.einsum("ij,ij->", W2, W2)))
    dZ = (E @ W2.T) * (1.0 - H * H)
    grad = {
        "W1": X.T @ dZ / n + lam * W1,
        "b1": dZ.sum(axis=0) / n,
        "W2": H.T @ E / n + lam * W2,
        "b2": E.sum(axis=0) / n,
    }
    return loss, grad


def _sq_distances(A: F64, B: F64) -> F64:
    """Squared Euclidean distances between the rows of ``A`` (n, a) and ``B`` (m, a)."""
    d2 = (A * A).sum(axis=1)[:, None] - 2.0 * (A @ B.T) + (B * B).sum(axis=1)[None, :]
    return np.maximum(d2, 0.0)


def gaussian_log_likelihood(M: F64, means: F64, variances: F64, priors: F64) -> F64:
    """``log sum_c pi_c N(m; mu_c, sigma_c^2 I)`` for each row ``m`` of ``M`` (n, a): (n,).

    ``means`` (C, a), ``variances`` (C,), ``priors`` (C,) summing to 1: the mixture of the
    seen classes' isometric Gaussians (Socher et al., sec. 5.1).
    """
    a = M.shape[1]
    logc = (
        np.log(priors)[None, :]
        - 0.5 * a * np.log(2.0 * np.pi * variances)[None, :]
        - _sq_distances(M, means) / (2.0 * variances[None, :])
    )
    top = logc.max(axis=1)
    return top + np.log(np.exp(logc - top[:, None]).sum(axis=1))


def seen_columns(S: F64, seen: F64) -> NDArray[np.bool_]:
    """Which rows of ``S`` (C', a) are seen classes: rows equal, entry by entry within
    ``np.isclose(rtol=MATCH_RTOL, atol=MATCH_ATOL)``, to a row of ``seen`` (C, a). (C',)."""
    mask = np.zeros(S.shape[0], dtype=bool)
    for row in seen:  # over the seen classes; each comparison is vectorised over S
        mask |= np.isclose(S, row[None, :], rtol=MATCH_RTOL, atol=MATCH_ATOL).all(axis=1)
    return mask


@register_zsl_method
class CMT(ZSLMethod):
    """Cross-modal transfer: a two-layer tanh network maps images onto class embeddings.

    ``f(x) = W2^T tanh(W1^T x + b1) + b2`` minimises the mean squared distance between each
    training image's ``f(x)`` and its class's embedding plus ``(lam / 2)(||W1||^2 + ||W2||^2)``
    (:func:`mapping_loss`); ``x`` is standardised per dimension with the training images' mean
    and standard deviation. The score of class ``s`` is ``-||f(x) - s||`` (the nearest
    embedding wins, the paper's rule for classes without images).

    Optimiser: minibatch Adam (betas 0.9, 0.999, eps 1e-8) for ``epochs`` passes over a seeded
    permutation in batches of ``batch_size``; weights initialised uniform in ``+-sqrt(6 /
    (fan_in + fan_out + 1))`` (the released code's ``initializeParameters``), biases 0.

    Parameters
    ----------
    hidden : int
        Hidden units h (200 in the authors' released code).
    lam : float
        L2 weight penalty (1e-4 in the released code); grid 1e-4, 1e-3, 1e-2, 1e-1.
    lr : float
        Adam step size.
    epochs : int
        Passes over the training images.
    batch_size : int
        Images per Adam step.
    seed : int
        Initialisation and permutations.
    precision : {"float32", "float64"}
        Floating-point type of the training (features, weights, Adam moments). float32 halves
        the cost of the two (batch, d) x (d, hidden) products that dominate an epoch; the
        fitted weights, the mapping and the scores are float64 either way.

    Attributes
    ----------
    mean_, std_ : ndarray, shape (d,)
        Feature standardisation.
    params_ : dict
        ``W1`` (d, h), ``b1`` (h,), ``W2`` (h, a), ``b2`` (a,).
    seen_embeddings_ : ndarray, shape (C, a)
    loss_curve_ : list of float
        Mean minibatch objective per epoch.

    References
    ----------
    .. [1] Socher, R., Ganjoo, M., Manning, C. D. and Ng, A. Y., "Zero-shot learning through
       cross-modal transfer", NIPS 2013, eq. 1.

    Notes
    -----
    Departures: the paper minimises eq. 1 with L-BFGS over the full training set (the released
    code: minFunc, 500 iterations) and no stated regulariser; here minibatch Adam (one
    iteration of full-batch L-BFGS costs an epoch, and a few tens of epochs of Adam fit in the
    time budget at AWA2's size where 500 L-BFGS iterations do not), with the released code's L2
    weight penalty (its bias penalty is dropped) and standardised features. The released code's
    sparsity penalty on the hidden units (``mapTrainingCost.m``) is not in the paper and not
    used.
    """

    name = "cmt"
    title = "CMT"
    reference = "Socher et al., NIPS 2013"
    order = 4
    constraints: ClassVar[Mapping[str, Any]] = {
        "hidden": [Interval(Integral, 1, None, closed="left")],
        "lam": [Interval(Real, 0.0, None, closed="left")],
        "lr": [Interval(Real, 0.0, None, closed="neither")],
        "epochs": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "seed": [Interval(Integral, 0, None, closed="left")],
        "precision": [StrOptions(("float32", "float64"))],
    }
    grid: ClassVar[Mapping[str, Sequence[Any]]] = {"lam": (1e-4, 1e-3, 1e-2, 1e-1)}

    def __init__(
        self,
        hidden: int = 200,
        lam: float = 1e-4,
        lr: float = 1e-3,
        epochs: int = 20,
        batch_size: int = 256,
        seed: int = 0,
        precision: str = "float32",
    ) -> None:
        self.hidden = hidden
        self.lam = lam
        self.lr = lr
        self.epochs = epochs
        self.batch_size = batch_size
        self.seed = seed
        self.precision = precision

    # -- training
    def init_params(self, rng: np.random.Generator, d: int, a: int) -> dict[str, F64]:
        """Initial weights: uniform in ``+-sqrt(6 / (fan_in + fan_out + 1))``, biases 0."""
        h = int(self.hidden)
        r1 = np.sqrt(6.0 / (d + h + 1))
        r2 = np.sqrt(6.0 / (h + a + 1))
        return {
            "W1": rng.uniform(-r1, r1, size=(d, h)),
            "b1": np.zeros(h),
            "W2": rng.uniform(-r2, r2, size=(h, a)),
            "b2": np.zeros(a),
        }

    def _standardise(self, X: F64) -> F64:
        return (X - self.mean_) / self.std_

    def _train(self, Xs: Float, T: Float) -> None:
        """Adam on :func:`mapping_loss` in ``Xs``'s dtype; moments and the step are updated in
        place (one scratch array per parameter, no allocation per step)."""
        rng = np.random.default_rng(self.seed)
        init = self.init_params(rng, Xs.shape[1], T.shape[1])
        params: dict[str, Float] = {k: w.astype(Xs.dtype) for k, w in init.items()}
        m = {k: np.zeros_like(w) for k, w in params.items()}
        v = {k: np.zeros_like(w) for k, w in params.items()}
        tmp = {k: np.zeros_like(w) for k, w in params.items()}
        b1, b2 = _ADAM_BETAS
        lam, lr, bs = float(self.lam), float(self.lr), int(self.batch_size)
        step = 0
        curve: list[float] = []
        n = Xs.shape[0]
        for _ in range(int(self.epochs)):
            order = rng.permutation(n)
            total = 0.0
            for lo in range(0, n, bs):
                idx = order[lo : lo + bs]
                loss, grad = mapping_loss(params, Xs[idx], T[idx], lam)
                total += loss * idx.size
                step += 1
                c1, c2 = 1.0 - b1**step, 1.0 - b2**step
                for k, g in grad.items():
                    mk, vk, tk = m[k], v[k], tmp[k]
                    mk *= b1
                    np.multiply(g, 1.0 - b1, out=tk)
                    mk += tk  # m = b1 m + (1 - b1) g
                    vk *= b2
                    np.multiply(g, g, out=tk)
                    tk *= 1.0 - b2
                    vk += tk  # v = b2 v + (1 - b2) g^2
                    np.multiply(vk, 1.0 / c2, out=tk)
                    np.sqrt(tk, out=tk)
                    tk += _ADAM_EPS
                    np.divide(mk, tk, out=tk)
                    tk *= lr / c1
                    params[k] -= tk  # theta -= lr m_hat / (sqrt(v_hat) + eps)
            curve.append(total / n)
        self.params_ = {k: w.astype(np.float64) for k, w in params.items()}
        self.loss_curve_ = curve

    def _fit(self, X: F64, y: I64, S: F64) -> None:
        dtype = np.float32 if self.precision == "float32" else np.float64
        self.mean_ = X.mean(axis=0)
        # standardised training features in the training dtype, without a float64 copy
        Xs = np.empty(X.shape, dtype=dtype)
        np.subtract(X, self.mean_, out=Xs, casting="same_kind")
        std = np.sqrt(np.einsum("ij,ij->j", Xs, Xs, dtype=np.float64) / X.shape[0])
        self.std_ = np.where(std > 1e-12 * np.abs(self.mean_), std, 1.0)
        Xs /= self.std_.astype(dtype)
        self.seen_embeddings_ = S.copy()
        self._train(Xs, S[y].astype(dtype))

    # -- mapping and scores
    def _map(self, X: F64) -> F64:
        p = self.params_
        return np.tanh(self._standardise(X) @ p["W1"] + p["b1"]) @ p["W2"] + p["b2"]

    def transform(self, X: Any) -> F64:
        """The images mapped into the embedding space, ``f(x)``: (n, a)."""
        if not hasattr(self, "n_features_in_"):
            raise NotFittedError(f"{self.name}: call fit before transform")
        Xa = np.asarray(X, dtype=np.float64)
        if Xa.ndim != 2 or Xa.shape[1] != self.n_features_in_:
            raise InputError(f"{self.name}: X must be (n, {self.n_features_in_}), got {Xa.shape}")
        return self._map(Xa)

    def _scores(self, X: F64, S: F64) -> F64:
        return -np.sqrt(_sq_distances(self._map(X), S))


@register_zsl_method
class CMTStar(CMT):
    """CMT with the paper's novelty detection for the generalised task (Gaussian model).

    After the mapping (:class:`CMT`), each seen class ``c`` gets an isometric Gaussian in the
    embedding space with mean its embedding ``s_c`` and variance ``sigma_c^2`` = the mean
    squared deviation (per dimension) of its mapped training images from ``s_c``; priors are the
    class frequencies. An image is novel when ``log sum_c pi_c N(f(x); s_c, sigma_c^2 I)``
    (:func:`gaussian_log_likelihood`) is below ``threshold_``, the ``novelty_quantile``
    quantile of the training images' log-likelihoods (so that fraction of the training images
    would be called novel).

    ``decision_function(X, S')`` finds the seen classes among the rows of ``S'``
    (:func:`seen_columns`: every entry equal within ``np.isclose(rtol=1e-6, atol=1e-9)`` to a
    training class's embedding) and starts from CMT's scores. For a novel image every seen
    column is lowered by ``max - min + 1`` of that image's scores (so it falls below every
    unseen column); for a familiar image the unseen columns are lowered the same way. The argmax
    is then the paper's two-stage rule; scores stay finite and keep their order within each
    group. With no seen class among the rows of ``S'`` (the ZSL task), or only seen classes,
    the argmax is CMT's; with no seen class the scores are exactly CMT's.

    Parameters
    ----------
    novelty_quantile : float
        Fraction of training images below the novelty threshold, in [0, 1). The paper sweeps
        the threshold (its Fig. 3) rather than fixing one; 0.05 is this implementation's
        default. Not in the grid: the val selection is a ZSL task, on which the threshold has
        no effect.
    hidden, lam, lr, epochs, batch_size, seed, precision : as :class:`CMT`.

    Attributes
    ----------
    variances_, priors_ : ndarray, shape (C,)
    threshold_ : float
        Novelty threshold on the log-likelihood.

    References
    ----------
    .. [1] Socher, R., Ganjoo, M., Manning, C. D. and Ng, A. Y., "Zero-shot learning through
       cross-modal transfer", NIPS 2013, sec. 5.1 (Gaussian novelty detection) and eq. 2-3.

    Notes
    -----
    Departures: the paper classifies familiar images with a softmax classifier on the
    original features; here both stages use CMT's distances in the mapped space, so CMT* is
    CMT plus the gate. The released code (``trainGaussianDiscriminant.m``) divides each class's
    squared deviations by the number of all training images; here by the class's own count
    (the variance the paper describes). The paper's second detector (LoOP) is not implemented:
    the Gaussian model needs only the per-class variances, LoOP the k nearest training images of
    every test image.
    """

    name = "cmt_star"
    title = "CMT*"
    reference = "Socher et al., NIPS 2013"
    order = 5
    constraints: ClassVar[Mapping[str, Any]] = {
        **CMT.constraints,
        "novelty_quantile": [Interval(Real, 0.0, 1.0, closed="left")],
    }

    def __init__(
        self,
        novelty_quantile: float = 0.01,
        hidden: int = 200,
        lam: float = 1e-4,
        lr: float = 1e-3,
        epochs: int = 20,
        batch_size: int = 256,
        seed: int = 0,
        precision: str = "float32",
    ) -> None:
        super().__init__(
            hidden=hidden,
            lam=lam,
            lr=lr,
            epochs=epochs,
            batch_size=batch_size,
            seed=seed,
            precision=precision,
        )
        self.novelty_quantile = novelty_quantile

    def _fit(self, X: F64, y: I64, S: F64) -> None:
        super()._fit(X, y, S)
        M = self._map(X)
        counts = np.bincount(y, minlength=S.shape[0]).astype(np.float64)
        dev = ((M - S[y]) ** 2).sum(axis=1)
        var = np.bincount(y, weights=dev, minlength=S.shape[0]) / (counts * S.shape[1])
        floor = 1e-12 * max(float(np.mean(S * S)), 1e-300)
        self.variances_ = np.maximum(var, floor)
        self.priors_ = counts / counts.sum()
        train_ll = gaussian_log_likelihood(M, S, self.variances_, self.priors_)
        self.threshold_ = float(np.quantile(train_ll, float(self.novelty_quantile)))

    def novelty(self, X: Any) -> NDArray[np.bool_]:
        """Whether each image is judged novel (an unseen class): (n,)."""
        M = self.transform(X)
        ll = gaussian_log_likelihood(M, self.seen_embeddings_, self.variances_, self.priors_)
        return np.asarray(ll < self.threshold_)

    def _scores(self, X: F64, S: F64) -> F64:
        M = self._map(X)
        scores = -np.sqrt(_sq_distances(M, S))
        seen = seen_columns(S, self.seen_embeddings_)
        if not seen.any() or seen.all():
            return scores
        ll = gaussian_log_likelihood(M, self.seen_embeddings_, self.variances_, self.priors_)
        novel = ll < self.threshold_
        span = scores.max(axis=1) - scores.min(axis=1) + 1.0
        lower = np.where(novel[:, None], seen[None, :], ~seen[None, :])
        return scores - lower * span[:, None]
