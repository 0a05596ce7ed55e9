"""ARPL: reciprocal points with a bounded open space (Chen et al., TPAMI 2021)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from numbers import Real
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from semshift.errors import InputError
from semshift.features.models import ModelAdapter
from semshift.params import Constraint, Interval
from semshift.training.distributed import (
    BATCHNORMS,
)

from ._base import TrainingMethod, register_method


@register_method
class ARPL(TrainingMethod):
    """Adversarial Reciprocal Points Learning: distance logits to one reciprocal point per class.

    With features h (n, D) and reciprocal points P (C, D), the logits are
    ``z_k = ||h - P_k||^2 / D - h . P_k`` (far from class k's reciprocal point = class k), and
    the loss is ``CE(z / T, y) + lambda * mean(max(0, ||h - P_y||^2 / D - R + 1))``, the margin
    term keeping each sample's distance to its own reciprocal point near a learnable radius R
    (the reference code's ``MarginRankingLoss(margin=1)``), which bounds the open space.

    :meth:`export` writes the distance logits into the model's linear head: since
    ``z_k = ||h||^2 / D + h . (-(1 + 2/D) P_k) + ||P_k||^2 / D``, the head ``W_k = -(1 + 2/D)
    P_k``, ``b_k = ||P_k||^2 / D`` gives ``z - ||h||^2 / D``; the same softmax and prediction,
    and the ``arpl`` detector adds the ``||h||^2 / D`` back to score ``max_k z_k``.

    Parameters
    ----------
    weight_pl : float
        ``lambda`` >= 0 of the margin term; default 0.1 (the reference code and OpenOOD v1.5).
    temperature : float
        ``T`` > 0; default 1.

    Notes
    -----
    Departures: one reciprocal point per class (the reference code's default
    ``num_centers=1``); the points are initialised as ``0.1 * N(0, 1)`` from the run's seeded
    generator, as in the reference code. The confusing-sample generator of ARPL+CS is not part
    of this method.

    References
    ----------
    .. [1] Chen, Peng, Wang, Tian. "Adversarial Reciprocal Points Learning for Open Set
       Recognition." IEEE TPAMI 2021.
    """

    name = "arpl"
    _parameter_constraints: ClassVar[dict[str, list[Constraint | None]]] = {
        "weight_pl": [Interval(Real, 0, None, closed="left")],
        "temperature": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(self, weight_pl: float = 0.1, temperature: float = 1.0) -> None:
        super().__init__()
        self.weight_pl = weight_pl
        self.temperature = temperature

    def setup(self, num_classes: int, feature_dim: int) -> None:
        self.points = nn.Parameter(0.1 * torch.randn(num_classes, feature_dim))
        self.radius = nn.Parameter(torch.zeros(1))

    @staticmethod
    def distance_logits(h: Tensor, points: Tensor) -> Tensor:
        """``||h - P_k||^2 / D - h . P_k`` (n, C) of features h (n, D) and points P (C, D)."""
        dot = h @ points.T
        sq = (h * h).sum(1, keepdim=True) - 2 * dot + (points * points).sum(1)[None, :]
        return sq / h.shape[1] - dot

    def forward(self, adapter: ModelAdapter, x: Tensor) -> tuple[Tensor, Tensor]:
        h = adapter.features(x).float()
        return self.distance_logits(h, self.points.float()), h

    def loss(
        self, logits: Tensor, features: Tensor, labels: Tensor, outlier_logits: Tensor | None
    ) -> Tensor:
        ce = nn.functional.cross_entropy(logits / float(self.temperature), labels)
        own = (features - self.points[labels]).pow(2).mean(1)
        margin = torch.clamp(own - self.radius + 1.0, min=0).mean()
        return ce + float(self.weight_pl) * margin

    @torch.no_grad()
    def export(self, adapter: ModelAdapter) -> None:
        lin = adapter.head_module()
        if lin.bias is None:
            raise InputError(f"training method arpl: the head of {adapter.name} has no bias")
        p = self.points.detach().to(lin.weight)
        d = p.shape[1]
        lin.weight.copy_(-(1.0 + 2.0 / d) * p)
        lin.bias.copy_((p * p).sum(1) / d)


@contextmanager
def _running_stats_kept(module: nn.Module) -> Iterator[None]:
    """Train-mode BatchNorm that normalises with the batch's statistics but keeps the running
    ones (momentum 0 for the duration; the batch counters are restored afterwards). The
    global-batch layers of a data-parallel run included."""
    bns: list[Any] = [m for m in module.modules() if isinstance(m, BATCHNORMS)]
    saved = [(m.momentum, None if m.num_batches_tracked is None else m.num_batches_tracked.clone())
             for m in bns]  # fmt: skip
    try:
        for m in bns:
            m.momentum = 0.0
        yield
    finally:
        for m, (momentum, count) in zip(bns, saved, strict=True):
            m.momentum = momentum
            if count is not None and m.num_batches_tracked is not None:
                m.num_batches_tracked.copy_(count)
