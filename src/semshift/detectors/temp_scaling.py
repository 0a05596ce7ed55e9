"""Temperature scaling: MSP of ``z / T`` with T fitted on labelled ID validation logits."""

from __future__ import annotations

import numpy as np
import scipy.optimize

from ._base import Inputs, check_real
from ._common import F64, logsumexp, row_blocks, softmax
from ._registry import register_detector
from .logit import LogitDetector

__all__ = ["TempScaling"]

_T_BOUNDS = (1e-2, 1e2)


def nll_and_grad(temperature: float, z: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Mean negative log-likelihood of ``softmax(z / T)`` at labels ``y`` and its T-derivative.

    ``NLL(T) = mean(logsumexp(z / T) - z_y / T)`` and
    ``dNLL/dT = mean(z_y - sum_c p_c z_c) / T^2`` with ``p = softmax(z / T)``; computed in
    float64 row blocks.
    """
    t = float(temperature)
    nll = 0.0
    grad = 0.0
    for sl in row_blocks(z.shape[0], 32 * z.shape[1]):
        zb = np.asarray(z[sl], dtype=np.float64)
        zy = zb[np.arange(zb.shape[0]), y[sl]]
        nll += float((logsumexp(zb / t) - zy / t).sum())
        grad += float((zy - (softmax(zb / t) * zb).sum(axis=1)).sum())
    n = z.shape[0]
    return nll / n, grad / (n * t * t)


@register_detector
class TempScaling(LogitDetector):
    """Maximum softmax probability of temperature-scaled logits, ``max_c softmax(z / T)_c``.

    T minimises the negative log-likelihood of the labelled ID validation logits
    (L-BFGS-B from ``init_temperature``, T kept in [0.01, 100]). Higher = more
    in-distribution.

    Parameters
    ----------
    init_temperature : float, default 1.5
        Starting point of the optimisation (OpenOOD's value).

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

    def __init__(self, *, init_temperature: float = 1.5) -> None:
        self.init_temperature = init_temperature

    def _check_params(self) -> None:
        check_real(
            "temp_scaling",
            "init_temperature",
            self.init_temperature,
            low=_T_BOUNDS[0],
            high=_T_BOUNDS[1],
        )

    def _fit(self, inputs: Inputs) -> None:
        z, y = inputs.get("val_logits"), inputs.get("val_labels")
        res = scipy.optimize.minimize(
            lambda t: nll_and_grad(float(t[0]), z, y),
            x0=np.array([float(self.init_temperature)]),
            jac=True,
            method="L-BFGS-B",
            bounds=[_T_BOUNDS],
            options={"ftol": 1e-14, "gtol": 1e-10, "maxiter": 500},
        )
        self.temperature_ = float(res.x[0])

    def _score_block(self, z: F64) -> F64:
        zt = z / self.temperature_
        return np.exp(-logsumexp(zt - zt.max(axis=1, keepdims=True)))
