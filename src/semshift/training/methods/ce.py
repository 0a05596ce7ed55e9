"""Cross-entropy with label smoothing (the SSB recipe's closed-set baseline)."""

from __future__ import annotations

from numbers import Real
from typing import ClassVar

from torch import Tensor, nn

from semshift.params import Constraint, Interval

from ._base import TrainingMethod, register_method


@register_method
class CrossEntropy(TrainingMethod):
    """Cross-entropy with label smoothing: the closed-set baseline of the SSB recipe.

    ``L = -sum_c q_c log softmax(z)_c`` with ``q = (1 - eps) onehot(y) + eps / C``.

    Parameters
    ----------
    label_smoothing : float
        ``eps`` in [0, 1). Default 0.3, the value Vaze et al. (2022) use for the fine-grained
        SSB datasets; the optimiser, schedule and augmentation of their recipe are the loop's
        (:class:`semshift.training.recipe.Recipe`).

    References
    ----------
    .. [1] Vaze, Han, Vedaldi, Zisserman. "Open-Set Recognition: a Good Closed-Set Classifier
       is All You Need?" ICLR 2022.
    .. [2] Szegedy et al. "Rethinking the Inception Architecture for Computer Vision." CVPR 2016.
    """

    name = "ce"
    _parameter_constraints: ClassVar[dict[str, list[Constraint | None]]] = {
        "label_smoothing": [Interval(Real, 0, 1, closed="left")],
    }

    def __init__(self, label_smoothing: float = 0.3) -> None:
        super().__init__()
        self.label_smoothing = label_smoothing

    def loss(
        self, logits: Tensor, features: Tensor, labels: Tensor, outlier_logits: Tensor | None
    ) -> Tensor:
        return nn.functional.cross_entropy(
            logits.float(), labels, label_smoothing=float(self.label_smoothing)
        )
