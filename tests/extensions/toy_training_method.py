"""A toy training method in one module: cross-entropy plus a penalty on the logits' squared norm.

``L = CE(z, y) + weight * mean(||z||^2)``. :func:`register` adds it (a package would apply
``register_method`` on import, through the ``semshift.training_methods`` entry-point group).
"""

from __future__ import annotations

from numbers import Real
from typing import ClassVar

from torch import Tensor, nn

from semshift.params import Constraint, Interval
from semshift.training.methods import METHODS, TrainingMethod, register_method

NAME = "toy_logit_penalty"


class ToyLogitPenalty(TrainingMethod):
    """Cross-entropy plus ``weight`` times the mean squared logit norm.

    References
    ----------
    .. [1] None: a test's toy.
    """

    name = NAME
    _parameter_constraints: ClassVar[dict[str, list[Constraint | None]]] = {
        "weight": [Interval(Real, 0, None, closed="left")],
    }

    def __init__(self, weight: float = 0.01) -> None:
        super().__init__()
        self.weight = weight

    def loss(
        self, logits: Tensor, features: Tensor, labels: Tensor, outlier_logits: Tensor | None
    ) -> Tensor:
        z = logits.float()
        return nn.functional.cross_entropy(z, labels) + self.weight * (z**2).sum(1).mean()


def register() -> None:
    register_method(ToyLogitPenalty)


def unregister() -> None:
    METHODS.remove(NAME)
