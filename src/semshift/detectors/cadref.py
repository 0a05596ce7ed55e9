"""CARef and CADRef: relative L1 deviation from the mean feature of the predicted class."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from semshift.errors import InputError

from ._base import Detector, Float64Array, Inputs, require_class_counts
from ._common import F64, class_sums, logsumexp, row_blocks, rowwise_blocks, softmax
from ._params import ParamConstraints, SearchSpace, StrOptions
from ._registry import register_detector

__all__ = ["LOGIT_METHODS", "CADRef", "CARef", "logit_score"]

#: The logit scores CADRef can divide by (the released code's Energy, MSP, MaxLogit, GEN).
LOGIT_METHODS = ("energy", "msp", "mls", "gen")
_EPS = 1e-12


def logit_score(z: np.ndarray, method: str) -> F64:
    """The logit score S(z) of a block of logits (n, C) -> float64 (n,), as the released code.

    ``"energy"``: logsumexp z; ``"msp"``: max softmax; ``"mls"``: max z; ``"gen"``:
    ``1 / sum over the M largest p_c of p_c^0.1 (1 - p_c)^0.1`` with M = max(C // 10, 10)
    (capped at C).
    """
    zb = np.asarray(z, dtype=np.float64)
    if method == "energy":
        return logsumexp(zb)
    if method == "mls":
        return zb.max(axis=1)
    p = softmax(zb)
    if method == "msp":
        return p.max(axis=1)
    m = min(p.shape[1], max(p.shape[1] // 10, 10))
    top = np.partition(p, p.shape[1] - m, axis=1)[:, p.shape[1] - m :]
    return 1.0 / (top**0.1 * (1.0 - top) ** 0.1).sum(axis=1)


class _PredictedClassMeans(Detector):
    """Shared fit: the mean training feature of each *predicted* class (argmax of the logits)."""

    fit_requires: ClassVar[frozenset[str]] = frozenset({"features", "logits"})
    score_requires: ClassVar[frozenset[str]] = frozenset({"features", "logits"})

    def _fit(self, inputs: Inputs) -> None:
        x, z = inputs.get("features"), inputs.get("logits")
        n_classes = int(z.shape[1])
        pred = np.argmax(z, axis=1)
        counts = np.bincount(pred, minlength=n_classes)
        require_class_counts(f"{self.name}.fit", counts, "training samples predicted as them")
        self.means_ = class_sums(x, pred, n_classes) / counts[:, None]

    def _deviation(self, hb: F64, pred: np.ndarray) -> F64:
        """``h - mu_yhat`` of a float64 block."""
        return hb - self.means_[pred]

    @staticmethod
    def _l1(hb: F64) -> F64:
        return np.maximum(np.abs(hb).sum(axis=1), _EPS)


@register_detector
class CARef(_PredictedClassMeans):
    """CARef score ``-||h - mu_yhat||_1 / ||h||_1``; higher = more in-distribution.

    mu_c is the mean training feature of the training samples *predicted* as class c (the
    released code groups the training features by the argmax of their logits, not by their
    labels); yhat = argmax z of the test sample. ``||h||_1`` is floored at 1e-12.

    Attributes
    ----------
    means_ : float64 array (C, D)
        Mean training feature per predicted class.

    Raises
    ------
    InputError
        (fit) A class is never predicted on the training samples (its mean is undefined).

    Examples
    --------
    >>> import numpy as np
    >>> from semshift import detectors
    >>> h = np.array([[2.0, 0.0], [0.0, 2.0]])
    >>> det = detectors.get("caref").fit(features=h, logits=h)
    >>> det.score(features=np.array([[3.0, 0.0], [1.0, 1.0]]), logits=np.eye(2))
    array([-0.33333333, -1.        ])

    References
    ----------
    .. [1] Z. Ling, Y. Chang, H. Zhao, X. Zhao, K. Chow and S. Deng, "CADRef: Robust
       Out-of-Distribution Detection via Class-Aware Decoupled Relative Feature Leveraging",
       CVPR 2025 (CARef, the method without decoupling).
    """

    name = "caref"

    def __init__(self) -> None:
        pass

    def _score(self, inputs: Inputs) -> Float64Array:
        h, z = inputs.get("features"), inputs.get("logits")
        out = np.empty(h.shape[0], dtype=np.float64)
        for sl in rowwise_blocks(h.shape[0], 24 * h.shape[1] + 8 * z.shape[1], h, z):
            hb = np.asarray(h[sl], dtype=np.float64)
            dev = self._deviation(hb, np.argmax(z[sl], axis=1))
            out[sl] = -np.abs(dev).sum(axis=1) / self._l1(hb)
        return out


@register_detector
class CADRef(_PredictedClassMeans):
    """CADRef score ``-(E_p / S(z) + E_n / mean_train S)``; higher = more in-distribution.

    With yhat = argmax z, d = (h - mu_yhat) * sign(W_yhat) (mu_c as in :class:`CARef`, W the
    head), the positive error ``E_p = ||max(d, 0)||_1 / ||h||_1`` and the negative error
    ``E_n = ||max(-d, 0)||_1 / ||h||_1``; S is the logit score ``logit_method`` of the test
    logits and ``mean_train S`` its mean over the training logits. ``||h||_1`` is floored at
    1e-12.

    Parameters
    ----------
    logit_method : {"energy", "msp", "mls", "gen"}, default "energy"
        Logit score S (the released code's Energy, MSP, MaxLogit, GEN; Energy is its default).

    Attributes
    ----------
    means_ : float64 array (C, D)
        Mean training feature per predicted class.
    mean_logit_score_ : float
        Mean of S over the training logits.

    Raises
    ------
    InputError
        (fit) A class is never predicted on the training samples, or the mean training logit
        score is not positive (the decoupled errors would change sign).

    Examples
    --------
    >>> import numpy as np
    >>> from semshift import detectors
    >>> h = np.array([[2.0, 0.0], [0.0, 2.0]])
    >>> det = detectors.get("cadref", logit_method="mls").fit(
    ...     features=h, logits=h, head=(np.eye(2), np.zeros(2)))
    >>> det.score(features=np.array([[3.0, 0.0], [1.0, 0.0]]), logits=np.eye(2)[[0, 0]])
    array([-0.33333333, -0.5       ])

    References
    ----------
    .. [1] Z. Ling, Y. Chang, H. Zhao, X. Zhao, K. Chow and S. Deng, "CADRef: Robust
       Out-of-Distribution Detection via Class-Aware Decoupled Relative Feature Leveraging",
       CVPR 2025.
    """

    name = "cadref"
    fit_requires: ClassVar[frozenset[str]] = frozenset({"features", "logits", "head"})
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "logit_method": [StrOptions(LOGIT_METHODS)],
    }
    #: the released code's four logit scores, its default (energy) first
    search_space: ClassVar[SearchSpace] = {"logit_method": ("energy", "msp", "mls", "gen")}

    def __init__(self, *, logit_method: str = "energy") -> None:
        self.logit_method = logit_method

    def _fit(self, inputs: Inputs) -> None:
        super()._fit(inputs)
        z = inputs.get("logits")
        total = 0.0
        for sl in row_blocks(z.shape[0], 24 * z.shape[1]):
            total += float(logit_score(z[sl], self.logit_method).sum())
        self.mean_logit_score_ = total / z.shape[0]
        if not self.mean_logit_score_ > 0:
            raise InputError(
                f"cadref.fit: the mean training {self.logit_method} score is "
                f"{self.mean_logit_score_:.4g}, not positive, so the decoupled errors would "
                "change sign; use logit_method='msp' or 'gen' (always positive)"
            )
        self._signs = np.sign(np.asarray(inputs.head[0], dtype=np.float64))

    def _score(self, inputs: Inputs) -> Float64Array:
        h, z = inputs.get("features"), inputs.get("logits")
        out = np.empty(h.shape[0], dtype=np.float64)
        for sl in rowwise_blocks(h.shape[0], 32 * h.shape[1] + 24 * z.shape[1], h, z):
            hb = np.asarray(h[sl], dtype=np.float64)
            pred = np.argmax(z[sl], axis=1)
            d = self._deviation(hb, pred)
            d *= self._signs[pred]
            e_all = np.abs(d).sum(axis=1)  # sum |d| = sum max(d, 0) + sum max(-d, 0)
            np.maximum(d, 0.0, out=d)
            e_pos = d.sum(axis=1)
            l1 = self._l1(hb)
            s = logit_score(z[sl], self.logit_method)
            out[sl] = -((e_pos / l1) / s + ((e_all - e_pos) / l1) / self.mean_logit_score_)
        return out
