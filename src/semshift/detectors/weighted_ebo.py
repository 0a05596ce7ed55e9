"""Weighted energy (VOS): ``log sum_c w_c exp(z_c)`` with non-negative class weights."""

from __future__ import annotations

from numbers import Real
from typing import Any, ClassVar

import numpy as np

from semshift.errors import InputError

from ._base import Float64Array, Inputs
from ._common import F64, logsumexp
from ._params import Interval, ParamConstraints
from ._registry import register_detector
from .logit import LogitDetector, shared_energy

__all__ = ["ClassWeights", "WeightedEnergy"]


class ClassWeights(Interval):
    """A sequence of C class weights, each a finite number, at least one of them > 0.

    Shape (C,) or (1, C) (the ``weight`` of a ``Linear(C, 1)``, as VOS stores it). An
    :class:`Interval` (every entry a finite number) applied entry-wise, so the descriptions and
    the generated bad values of the constraint machinery treat it like one; a single number is
    not a sequence and is refused.
    """

    def __init__(self) -> None:
        super().__init__(Real, None, None, closed="neither")

    def is_satisfied_by(self, value: object) -> bool:
        if isinstance(value, str | bytes):
            return False
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError, RuntimeError):  # ragged, or a tensor that needs grad
            return False
        if arr.ndim == 2 and arr.shape[0] == 1:
            arr = arr[0]
        if arr.ndim != 1 or arr.size == 0 or arr.dtype.kind not in "iuf":
            return False
        return bool(np.isfinite(arr).all() and (arr > 0).any())

    def __str__(self) -> str:
        return "a sequence of finite class weights (shape (C,) or (1, C)) with one or more > 0"


@register_detector
class WeightedEnergy(LogitDetector):
    """Weighted energy ``log sum_c max(w_c, 0) exp(z_c)``; higher = more in-distribution.

    VOS learns the class weights w during training (the ``weight`` of a ``Linear(C, 1)``,
    trained with its uncertainty loss, which pytorch-ood's ``VOSRegLoss`` reproduces); they are
    not part of a classifier's head, so semshift takes them as the hyperparameter ``weights``,
    as pytorch-ood's ``WeightedEBO`` takes them as an argument. Negative weights are clipped to
    0 as in VOS and pytorch-ood. ``weights=None`` gives every class weight 1: the plain
    :class:`~semshift.detectors.logit.Energy` score (a network not trained with VOS has no
    other weights). The sum runs over the classes with a positive weight, as a stable
    log-sum-exp in float64 (pytorch-ood exponentiates the raw logits, which overflows in
    float32 above z = 88). pytorch-ood returns minus this value as its outlier score.

    Parameters
    ----------
    weights : sequence of float, shape (C,) or (1, C), or None, default None
        Class weights w (one or more > 0); None: all ones. The number of weights must equal the
        number of classes of the scored logits.

    Raises
    ------
    InputError
        (score) The logits have another number of classes than ``weights``.

    Examples
    --------
    >>> import numpy as np
    >>> from semshift import detectors
    >>> det = detectors.get("weighted_ebo", weights=[1.0, 3.0, -2.0]).fit()
    >>> det.score(logits=np.array([[0.0, 0.0, 5.0], [1.0, 0.0, 0.0]])).round(4)
    array([1.3863, 1.7437])

    References
    ----------
    .. [1] X. Du, Z. Wang, M. Cai and Y. Li, "VOS: Learning What You Don't Know by Virtual
       Outlier Synthesis", ICLR 2022.
    """

    name = "weighted_ebo"
    _parameter_constraints: ClassVar[ParamConstraints] = {"weights": [ClassWeights(), None]}

    def __init__(self, *, weights: Any = None) -> None:
        self.weights = weights

    def _fit(self, inputs: Inputs) -> None:
        if self.weights is None:
            self.weights_: F64 | None = None
            return
        w = np.maximum(np.asarray(self.weights, dtype=np.float64).reshape(-1), 0.0)
        self.weights_ = w
        self._positive = np.flatnonzero(w > 0)
        self._log_weights = np.log(w[self._positive])
        self._all_positive = self._positive.size == w.size

    def _score(self, inputs: Inputs) -> Float64Array:
        if self.weights_ is None:
            return shared_energy(inputs)
        n_classes = int(inputs.get("logits").shape[1])
        if n_classes != self.weights_.size:
            raise InputError(
                f"weighted_ebo.score: `logits` has {n_classes} classes but `weights` gives "
                f"{self.weights_.size} class weights"
            )
        return super()._score(inputs)

    def _score_block(self, z: F64) -> F64:
        kept = z if self._all_positive else z[:, self._positive]
        return logsumexp(kept + self._log_weights)
