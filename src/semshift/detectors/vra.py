"""VRA: energy of the head applied to activations rectified between two per-unit ID percentiles."""

from __future__ import annotations

from numbers import Real
from typing import ClassVar

import numpy as np

from semshift.errors import InputError

from . import _common
from ._base import Inputs
from ._common import F32, F64
from ._head import HeadEnergyDetector
from ._params import Interval, ParamConstraints, SearchSpace, StrOptions
from ._registry import register_detector

__all__ = ["VRA", "column_percentiles"]


def column_percentiles(x: np.ndarray, q: list[float]) -> F64:
    """``np.percentile(x, q, axis=0)`` (linear interpolation) of x (n, D) -> float64 (len(q), D).

    Computed over blocks of columns, so the working copy is about :data:`BLOCK_BYTES` instead of
    the whole matrix.
    """
    n, d = x.shape
    out = np.empty((len(q), d), dtype=np.float64)
    step = max(1, _common.BLOCK_BYTES // (8 * n))
    for start in range(0, d, step):
        cols = slice(start, min(start + step, d))
        out[:, cols] = np.percentile(np.asarray(x[:, cols], dtype=np.float64), q, axis=0)
    return out


@register_detector
class VRA(HeadEnergyDetector):
    """Variational rectified activation ``Energy(W g(h) + b)``; higher = more in-distribution.

    Each unit j of h has two thresholds from the ID training features: lo_j, its
    ``lower_percentile``-th percentile, and hi_j, its ``upper_percentile``-th. With the default
    ``below="clip"``, g(h)_j = min(max(h_j, lo_j), hi_j), the two-sided clipping of pytorch-ood's
    ``VRA`` (per unit, like it) and OpenOOD's (which takes one global pair of thresholds over
    all activations of the validation set). ``below="zero"`` is the paper's VRA and its public
    code: activations below lo_j are set to 0 (suppressed) rather than raised to lo_j, and those
    above hi_j clipped. The paper's VRA+ and VRA++ add terms not implemented here.

    Parameters
    ----------
    lower_percentile : float, default 1.0
        Percentile giving lo (pytorch-ood's 0.01 as a fraction; OpenOOD uses 10, the paper's
        public code 60 on CIFAR, with ``below="zero"``).
    upper_percentile : float, default 99.0
        Percentile giving hi (pytorch-ood's 0.99; OpenOOD 90, the paper's code 90 to 95 on
        CIFAR). Not below ``lower_percentile``.
    below : {"clip", "zero"}, default "clip"
        What becomes of activations below lo: raised to lo (pytorch-ood, OpenOOD) or zeroed
        (the paper).

    Attributes
    ----------
    lower_ : float32 array (D,)
        lo, per unit.
    upper_ : float32 array (D,)
        hi, per unit.

    Raises
    ------
    InputError
        (fit) ``lower_percentile`` is above ``upper_percentile``.

    Examples
    --------
    >>> import numpy as np
    >>> from semshift import detectors
    >>> h_train = np.array([[0.0, 1.0], [1.0, 3.0], [2.0, 5.0]])
    >>> det = detectors.get("vra", lower_percentile=25.0, upper_percentile=75.0)
    >>> det = det.fit(features=h_train, head=(np.eye(2), np.zeros(2)))
    >>> det.lower_, det.upper_
    (array([0.5, 2. ], dtype=float32), array([1.5, 4. ], dtype=float32))
    >>> det.score(features=np.array([[0.0, 9.0]])).round(4)  # Energy((0.5, 4))
    array([4.0298])

    References
    ----------
    .. [1] M. Xu, Z. Lian, B. Liu and J. Tao, "VRA: Variational Rectified Activation for
       Out-of-distribution Detection", NeurIPS 2023.
    """

    name = "vra"
    fit_requires = frozenset({"features", "head"})
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "lower_percentile": [Interval(Real, 0, 100, closed="both")],
        "upper_percentile": [Interval(Real, 0, 100, closed="both")],
        "below": [StrOptions(("clip", "zero"))],
    }
    #: OpenOOD v1.5's sweep (configs/postprocessors/vra.yml) with the paper's defaults added
    search_space: ClassVar[SearchSpace] = {
        "lower_percentile": (1.0, 5.0, 10.0, 15.0),
        "upper_percentile": (85.0, 90.0, 95.0, 99.0),
    }

    def __init__(
        self,
        *,
        lower_percentile: float = 1.0,
        upper_percentile: float = 99.0,
        below: str = "clip",
    ) -> None:
        self.lower_percentile = lower_percentile
        self.upper_percentile = upper_percentile
        self.below = below

    def _check_params(self) -> None:
        super()._check_params()
        if self.lower_percentile > self.upper_percentile:
            raise InputError(
                f"vra: lower_percentile ({self.lower_percentile}) must not exceed "
                f"upper_percentile ({self.upper_percentile})"
            )

    def _fit(self, inputs: Inputs) -> None:
        super()._fit(inputs)
        q = [float(self.lower_percentile), float(self.upper_percentile)]
        lower, upper = column_percentiles(inputs.get("features"), q)
        self.lower_ = lower.astype(np.float32)
        self.upper_ = upper.astype(np.float32)

    def _transform(self, h: F32) -> F32:
        clipped = np.clip(h, self.lower_, self.upper_)
        if self.below == "zero":
            clipped[h < self.lower_] = 0
        return clipped
