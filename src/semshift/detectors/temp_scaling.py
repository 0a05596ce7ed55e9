"""Temperature scaling: MSP of ``z / T`` with T fitted on labelled ID validation logits."""

from __future__ import annotations

import numpy as np
import scipy.optimize

from ._base import Inputs
from ._common import F64, cache_blocks, logsumexp, row_blocks, softmax
from ._registry import register_detector
from .logit import LogitDetector

__all__ = ["TempScaling", "nll_slope"]

#: Range of temperatures searched; T stops at a bound when the optimum lies beyond it.
T_BOUNDS = (1e-2, 1e2)


def nll_slope(beta: float, z: np.ndarray, y: np.ndarray) -> float:
    """Derivative in beta = 1/T of the mean NLL ``mean(logsumexp(beta z) - beta z_y)``.

    It equals ``mean(sum_c p_c z_c - z_y)`` with ``p = softmax(beta z)`` and is non-decreasing
    in beta (the second derivative is the mean variance of z under p), so the NLL is convex in
    beta. Computed in float64 row blocks.
    """
    total = 0.0
    for sl in row_blocks(z.shape[0], 32 * z.shape[1]):
        zb = np.asarray(z[sl], dtype=np.float64)
        zy = zb[np.arange(zb.shape[0]), y[sl]]
        total += float(((softmax(beta * zb) * zb).sum(axis=1) - zy).sum())
    return total / z.shape[0]


@register_detector
class TempScaling(LogitDetector):
    """Maximum softmax probability of temperature-scaled logits, ``max_c softmax(z / T)_c``.

    T minimises the mean negative log-likelihood of the labelled ID validation logits over
    T in [0.01, 100]. OpenOOD starts L-BFGS at T = 1.5 (docs/methods.md#temp_scaling); since the
    NLL is convex in 1/T, we instead find its global minimiser by bracketed root finding
    (:func:`scipy.optimize.brentq`) on its monotone derivative, which no start value can change
    and which does not stall on the flat NLL of over-confident logits. Higher = more
    in-distribution.

    If the validation logits are perfectly separated the NLL decreases all the way to the
    bound T = 0.01 and the scores saturate at 1: fit on validation data the classifier makes
    errors on.

    Attributes
    ----------
    temperature_ : float
        The fitted temperature T.

    References
    ----------
    .. [1] C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger, "On Calibration of Modern Neural
       Networks", ICML 2017.
    """

    name = "temp_scaling"
    fit_requires = frozenset({"val_logits", "val_labels"})

    def __init__(self) -> None:
        pass

    def _fit(self, inputs: Inputs) -> None:
        z, y = inputs.get("val_logits"), inputs.get("val_labels")
        beta_lo, beta_hi = 1.0 / T_BOUNDS[1], 1.0 / T_BOUNDS[0]
        if nll_slope(beta_hi, z, y) <= 0.0:  # still decreasing at the smallest T
            beta = beta_hi
        elif nll_slope(beta_lo, z, y) >= 0.0:  # already increasing at the largest T
            beta = beta_lo
        else:
            beta = scipy.optimize.brentq(nll_slope, beta_lo, beta_hi, args=(z, y), xtol=1e-14)
        self.temperature_ = float(1.0 / beta)

    def _score(self, inputs: Inputs) -> F64:
        z = inputs.get("logits")
        if not z.flags.c_contiguous:
            return super()._score(inputs)
        out = np.empty(z.shape[0], dtype=np.float64)
        # cache-sized row blocks, one float64 temporary worked in place: the same operations
        # as _score_block (every value equal), a quarter of the memory traffic
        for sl in cache_blocks(z.shape[0], 8 * int(z.shape[1])):
            zt = np.divide(z[sl], self.temperature_, dtype=np.float64)
            zt -= zt.max(axis=1, keepdims=True)
            m = zt.max(axis=1)  # logsumexp's own shift (0 here), kept: each step is its step
            zt -= m[:, None]
            np.exp(zt, out=zt)
            out[sl] = np.exp(-(np.log(zt.sum(axis=1)) + m))
        return out

    def _score_block(self, z: F64) -> F64:
        """The straightforward form (the reference of the tests; F-ordered logits)."""
        zt = z / self.temperature_
        return np.exp(-logsumexp(zt - zt.max(axis=1, keepdims=True)))
