"""Outlier Exposure: uniform targets on auxiliary outliers (Hendrycks et al., ICLR 2019)."""

from __future__ import annotations

from numbers import Real
from typing import ClassVar

from torch import Tensor, nn

from semshift.errors import InputError
from semshift.params import Constraint, Interval

from ._base import TrainingMethod, _uniform_cross_entropy, register_method


@register_method
class OutlierExposure(TrainingMethod):
    """Outlier Exposure: cross-entropy on the ID batch plus uniform targets on outliers.

    ``L = CE(z, y) + lambda * mean_outliers(logsumexp(z_o) - mean_c z_o,c)``, the second term
    being the cross-entropy from the outlier's softmax to the uniform distribution. Each step
    draws a batch of auxiliary outlier images (classes disjoint from every test set; the loop
    checks it against the split manifests).

    Parameters
    ----------
    weight : float
        ``lambda`` >= 0; default 0.5, the paper's value for vision (and OpenOOD v1.5's).
    outlier_batch_ratio : float
        Outlier images per ID image of a batch; default 2, OpenOOD v1.5's (batch 128 ID, 256
        outliers). The paper's fine-tuning used the same ratio.

    References
    ----------
    .. [1] Hendrycks, Mazeika, Dietterich. "Deep Anomaly Detection with Outlier Exposure."
       ICLR 2019.
    """

    name = "oe"
    uses_outliers = True
    _parameter_constraints: ClassVar[dict[str, list[Constraint | None]]] = {
        "weight": [Interval(Real, 0, None, closed="left")],
        "outlier_batch_ratio": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(self, weight: float = 0.5, outlier_batch_ratio: float = 2.0) -> None:
        super().__init__()
        self.weight = weight
        self.outlier_batch_ratio = outlier_batch_ratio

    def loss(
        self, logits: Tensor, features: Tensor, labels: Tensor, outlier_logits: Tensor | None
    ) -> Tensor:
        if outlier_logits is None:
            raise InputError("training method oe needs an outlier batch at every step")
        ce = nn.functional.cross_entropy(logits.float(), labels)
        return ce + float(self.weight) * _uniform_cross_entropy(outlier_logits.float())
