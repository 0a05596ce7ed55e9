"""pNML: the regret of the single-layer predictive normalized maximum likelihood learner."""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg

from semshift.errors import InputError

from ._base import Detector, Float64Array, Inputs
from ._common import F64, f32, pinv_sqrt, prepare_head, row_blocks
from ._head import shared_head_product
from ._registry import register_detector
from ._shared import digest

__all__ = ["PNML"]

#: Floor of a feature norm (``torch.nn.functional.normalize``'s eps).
_NORM_EPS = 1e-12
#: Rows per float32 rank-k update of X^T X (syrk runs at 70 % of its one-call speed with 8,192
#: rows, at 60 % with 2,048); the updates are summed in float64.
_GRAM_CHUNK = 8192
#: The pseudo-inverse drops eigenvalues at or below ``D * eps32`` of the largest.
_EPS32 = float(np.finfo(np.float32).eps)
#: Probabilities are clamped to [eps, 1 - eps] before the regret (pytorch-ood's eps).
_PROB_EPS = 1e-12


def _row_sq(x: np.ndarray) -> F64:
    """Squared norm of each row, accumulated in float64."""
    return np.einsum("ij,ij->i", x, x, dtype=np.float64)


@register_detector
class PNML(Detector):
    """Negative pNML regret ``-log(sum_c p_c / (p_c + (1 - p_c) p_c^g)) / log C``.

    Higher = more in-distribution. With x = h / ||h||, X the normalised training features
    (rows) and ``k = x^T (X^T X)^+ x``, g = k / (1 + k); p = softmax(W x + b), the head applied
    to the normalised feature, clamped to [1e-12, 1 - 1e-12]. The regret is 0 for a test
    feature the training features determine (g = 0) and grows towards 1 as g does. This is
    pytorch-ood's ``PNML`` (which returns the regret itself). X^T X is built from float32
    products (rank-k updates of 8,192 rows, summed in float64) and (X^T X)^+ drops the
    eigenvalues at or below ``D * eps32`` (``D * 1.2e-7``) of the largest, the cut-off of
    pytorch-ood's float32 ``torch.linalg.pinv``: directions the training features barely span
    count as not spanned. The product W h is shared with max_cosine and mcm
    (W x = W h / ||h||).

    Departures from the paper's public code, as pytorch-ood: no constant-1 column appended to
    the features, and no term for the component of x outside the span of the training
    features (the public code takes g = max(||x_perp||^2, k / (1 + k)); x_perp = 0 when X^T X
    has full rank, as for real feature sets with more samples than dimensions).

    Attributes
    ----------
    projection_ : float32 array (D, r)
        R with R R^T = (X^T X)^+, so that k = ||x R||^2.

    Raises
    ------
    InputError
        (fit) The head has fewer than 2 classes (the regret is divided by log C).

    Examples
    --------
    >>> import numpy as np
    >>> from semshift import detectors
    >>> h_train = np.array([[2.0, 0.0], [0.0, 1.0]])  # X^T X = I after normalising
    >>> det = detectors.get("pnml").fit(features=h_train, head=(np.eye(2), np.zeros(2)))
    >>> det.score(features=np.array([[3.0, 0.0]])).round(4)  # k = 1, g = 1/2
    array([-0.2335])

    References
    ----------
    .. [1] K. Bibas, M. Feder and T. Hassner, "Single Layer Predictive Normalized Maximum
       Likelihood for Out-of-Distribution Detection", NeurIPS 2021.
    """

    name = "pnml"
    fit_requires = frozenset({"features", "head"})
    score_requires = frozenset({"features"})

    def __init__(self) -> None:
        pass

    def _fit(self, inputs: Inputs) -> None:
        self._weight, self._bias = prepare_head(*inputs.head)
        if self._weight.shape[0] < 2:
            raise InputError("pnml.fit: the head must have at least 2 classes")
        self._head_token = digest(self._weight)
        x = inputs.get("features")
        n, d = (int(v) for v in x.shape)
        gram = np.zeros((d, d), dtype=np.float64)
        buf = np.empty((min(_GRAM_CHUNK, n), d), dtype=np.float32)
        for start in range(0, n, _GRAM_CHUNK):
            xb = x[start : start + _GRAM_CHUNK]
            unit = buf[: xb.shape[0]]
            inv = 1.0 / np.maximum(np.sqrt(_row_sq(xb)), _NORM_EPS)
            np.multiply(xb, inv[:, None], out=unit, casting="same_kind")
            # float32 rank-k update of the upper triangle; the chunks are summed in float64
            gram += scipy.linalg.blas.ssyrk(1.0, unit.T)
        gram = np.triu(gram) + np.triu(gram, 1).T
        self.projection_ = f32(pinv_sqrt(gram, rtol=d * _EPS32))

    def _score(self, inputs: Inputs) -> Float64Array:
        h = inputs.get("features")
        prod = shared_head_product(inputs, self._weight, self._head_token)
        n_classes = int(prod.shape[1])
        out = np.empty(h.shape[0], dtype=np.float64)
        log_lo, log_hi = math.log(_PROB_EPS), math.log1p(-_PROB_EPS)
        rows = 8 * h.shape[1] + 4 * self.projection_.shape[1] + 32 * n_classes
        for sl in row_blocks(h.shape[0], rows):
            hb = f32(h[sl])
            inv = 1.0 / np.maximum(np.sqrt(_row_sq(hb)), _NORM_EPS)
            # k = ||x R||^2 with x = h / ||h||: the projection of h, divided by ||h||^2
            k = _row_sq(hb @ self.projection_) * inv**2
            g = k / (1.0 + k)
            # W x + b = W h / ||h|| + b (x = 0, logits b, for a zero feature)
            z = np.multiply(prod[sl], inv[:, None], dtype=np.float64)
            z += self._bias
            z -= z.max(axis=1, keepdims=True)
            p = np.exp(z)
            total = p.sum(axis=1, keepdims=True)
            p /= total
            z -= np.log(total)  # log p
            np.clip(p, _PROB_EPS, 1.0 - _PROB_EPS, out=p)
            np.clip(z, log_lo, log_hi, out=z)
            # p / (p + (1 - p) p^g) = 1 / (1 + (1 - p) p^(g - 1)), in place
            z *= (g - 1.0)[:, None]
            np.exp(z, out=z)
            np.subtract(1.0, p, out=p)
            z *= p
            z += 1.0
            np.reciprocal(z, out=z)
            out[sl] = -np.log(z.sum(axis=1)) / math.log(n_classes)
        return out
