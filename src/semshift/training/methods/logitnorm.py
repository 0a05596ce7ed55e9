"""LogitNorm: cross-entropy of the normalised logits (Wei et al., ICML 2022)."""

from __future__ import annotations

from numbers import Real
from typing import ClassVar

import torch
from torch import Tensor, nn

from semshift.params import Constraint, Interval

from ._base import TrainingMethod, register_method


@register_method
class LogitNorm(TrainingMethod):
    """Logit normalisation: cross-entropy of ``z / (tau ||z||)``.

    ``L = CE(z / (tau (||z||_2 + 1e-7)), y)``; the norm constraint stops the logits from
    growing to make the loss small, so confidence stays informative on unseen classes. Only
    training changes: the model's logits are used unnormalised at test time.

    Parameters
    ----------
    temperature : float
        ``tau`` > 0; default 0.04, the paper's value for CIFAR-10 (and OpenOOD v1.5's).

    References
    ----------
    .. [1] Wei, Xie, Cheng, Feng, An, Li. "Mitigating Neural Network Overconfidence with Logit
       Normalization." ICML 2022.
    """

    name = "logitnorm"
    _parameter_constraints: ClassVar[dict[str, list[Constraint | None]]] = {
        "temperature": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(self, temperature: float = 0.04) -> None:
        super().__init__()
        self.temperature = temperature

    def loss(
        self, logits: Tensor, features: Tensor, labels: Tensor, outlier_logits: Tensor | None
    ) -> Tensor:
        z = logits.float()
        norms = torch.linalg.vector_norm(z, dim=1, keepdim=True) + 1e-7
        return nn.functional.cross_entropy(z / (norms * float(self.temperature)), labels)
