"""Logit-only detectors that need no fitting: msp, mls, energy, entropy, gen.

Each scores the logits z (n, C) in float64. Scores: higher = more in-distribution. The
log-sum-exp, log-softmax, softmax and negative entropy of the logits are computed once per
chunk when several detectors share them (:class:`semshift.detectors.SharedResults`; also used
by klm, gradnorm, vim and nnguide).
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import ClassVar

import numpy as np

from ._base import Detector, Float64Array, Inputs
from ._common import F64, cache_blocks, energy, row_blocks, softmax
from ._params import Interval, ParamConstraints, SearchSpace
from ._registry import register_detector

__all__ = [
    "GEN",
    "MSP",
    "Energy",
    "Entropy",
    "LogitDetector",
    "MaxLogit",
    "shared_energy",
    "shared_log_softmax",
    "shared_neg_entropy",
    "shared_softmax",
]


def shared_energy(inputs: Inputs) -> F64:
    """``logsumexp(z)`` per row (n,), float64; shared per chunk."""
    return inputs.share(("energy",), lambda: energy(inputs.get("logits")))


def shared_log_softmax(inputs: Inputs) -> F64:
    """``z - logsumexp(z)`` (n, C), float64; shared per chunk."""

    def compute() -> F64:
        z, lse = inputs.get("logits"), shared_energy(inputs)
        if not z.flags.c_contiguous:  # the layout of the result as before (einsum reads it)
            return np.asarray(z, dtype=np.float64) - lse[:, None]
        out = np.empty(z.shape, dtype=np.float64)
        # element-wise: the float64 cast and subtraction per cache-sized block, equal values
        for sl in cache_blocks(z.shape[0], 8 * int(z.shape[1])):
            np.subtract(np.asarray(z[sl], dtype=np.float64), lse[sl, None], out=out[sl])
        return out

    return inputs.share(("log_softmax",), compute)


def shared_softmax(inputs: Inputs) -> F64:
    """``softmax(z)`` (n, C), float64, as ``exp(z - max z) / sum``; shared per chunk.

    (Not ``exp(log_softmax)``: scores such as GEN's ``(1 - p)^g`` are ill-conditioned where
    p rounds to 1, and this is the form the reference implementations use.)
    """
    return inputs.share(
        ("softmax",), lambda: softmax(np.asarray(inputs.get("logits"), dtype=np.float64))
    )


def shared_neg_entropy(inputs: Inputs) -> F64:
    """``sum_c p_c log p_c`` per row (n,), float64; shared per chunk."""
    return inputs.share(
        ("neg_entropy",),
        lambda: np.einsum("ij,ij->i", shared_softmax(inputs), shared_log_softmax(inputs)),
    )


class LogitDetector(Detector):
    """Base for detectors computing a score from each float64 block of logits."""

    score_requires: ClassVar[frozenset[str]] = frozenset({"logits"})

    def _score(self, inputs: Inputs) -> Float64Array:
        z = inputs.get("logits")
        out = np.empty(z.shape[0], dtype=np.float64)
        for sl in row_blocks(z.shape[0], self._block_row_bytes(int(z.shape[1]))):
            out[sl] = self._score_block(np.asarray(z[sl], dtype=np.float64))
        return out

    def _block_row_bytes(self, n_classes: int) -> int:
        """Working memory per logit row in ``_score_block`` (sizes the row blocks)."""
        return 32 * n_classes

    def _score_block(self, z: F64) -> F64:  # pragma: no cover - abstract
        raise NotImplementedError


@register_detector
class MSP(LogitDetector):
    """Maximum softmax probability, ``max_c softmax(z)_c``; higher = more in-distribution.

    Examples
    --------
    >>> import numpy as np
    >>> from semshift import detectors
    >>> detectors.get("msp").fit().score(logits=np.array([[2.0, 0.0], [0.0, 0.0]])).round(4)
    array([0.8808, 0.5   ])

    References
    ----------
    .. [1] D. Hendrycks and K. Gimpel, "A Baseline for Detecting Misclassified and
       Out-of-Distribution Examples in Neural Networks", ICLR 2017.
    """

    name = "msp"

    def __init__(self) -> None:
        pass

    def _score(self, inputs: Inputs) -> Float64Array:
        zmax = np.asarray(inputs.get("logits").max(axis=1), dtype=np.float64)
        return np.exp(zmax - shared_energy(inputs))


@register_detector
class MaxLogit(LogitDetector):
    """Maximum logit, ``max_c z_c``; higher = more in-distribution.

    References
    ----------
    .. [1] D. Hendrycks, S. Basart, M. Mazeika, A. Zou, J. Kwon, M. Mostajabi, J. Steinhardt and
       D. Song, "Scaling Out-of-Distribution Detection for Real-World Settings", ICML 2022.
    """

    name = "mls"

    def __init__(self) -> None:
        pass

    def _score_block(self, z: F64) -> F64:
        return z.max(axis=1)


@register_detector
class Energy(LogitDetector):
    """Energy score ``T log sum_c exp(z_c / T)`` with T = 1; higher = more in-distribution.

    References
    ----------
    .. [1] W. Liu, X. Wang, J. Owens and Y. Li, "Energy-based Out-of-distribution Detection",
       NeurIPS 2020.
    """

    name = "energy"

    def __init__(self) -> None:
        pass

    def _score(self, inputs: Inputs) -> Float64Array:
        return shared_energy(inputs)


@register_detector
class Entropy(LogitDetector):
    """Negative entropy of the softmax, ``sum_c p_c log p_c``; higher = more in-distribution.

    References
    ----------
    .. [1] D. Hendrycks, M. Mazeika and T. Dietterich, "Deep Anomaly Detection with Outlier
       Exposure", ICLR 2019 (entropy of the predictive distribution as an OOD score).
    """

    name = "entropy"

    def __init__(self) -> None:
        pass

    def _score(self, inputs: Inputs) -> Float64Array:
        return shared_neg_entropy(inputs)


@register_detector
class GEN(LogitDetector):
    """Generalized entropy: ``-sum over the M largest p_i of p_i^g (1 - p_i)^g``.

    Higher = more in-distribution.

    Parameters
    ----------
    gamma : float, default 0.1
        Exponent g, in (0, 1].
    M : int, default 100
        Number of largest probabilities summed (capped at the number of classes C).

    References
    ----------
    .. [1] X. Liu, Y. Lochman and C. Zach, "GEN: Pushing the Limits of Softmax-Based
       Out-of-Distribution Detection", CVPR 2023.
    """

    name = "gen"
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "gamma": [Interval(Real, 0, 1, closed="right")],
        "M": [Interval(Integral, 1, None, closed="left")],
    }
    #: OpenOOD v1.5's sweep (configs/postprocessors/gen.yml) within gamma's (0, 1]; M above
    #: the number of classes C scores like M = C (a tie, which goes to the smaller M)
    search_space: ClassVar[SearchSpace] = {
        "gamma": (0.01, 0.1, 0.5, 1.0),
        "M": (10, 50, 100, 200, 500, 1000),
    }

    def __init__(self, *, gamma: float = 0.1, M: int = 100) -> None:
        self.gamma = gamma
        self.M = M

    def _score(self, inputs: Inputs) -> Float64Array:
        p = shared_softmax(inputs)
        m = min(int(self.M), p.shape[1])
        top = np.partition(p, p.shape[1] - m, axis=1)[:, p.shape[1] - m :]
        g = float(self.gamma)
        return -(top**g * (1.0 - top) ** g).sum(axis=1)
