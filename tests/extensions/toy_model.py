"""A toy model in one module: a two-layer CNN registered under :data:`NAME` when the module is
imported (what a ``semshift.models`` entry point names), or again by :func:`register`."""

from __future__ import annotations

from torch import nn

from semshift.features.models import MODELS, HookAdapter, register_model

NAME = "toy-two-conv"


def build(num_classes: int = 2) -> HookAdapter:
    """conv 3->4, ReLU, conv 4->6, ReLU, global average pool, linear head."""
    net = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 6, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, num_classes),
    )  # fmt: skip
    return HookAdapter(NAME, net)


def register() -> None:
    if NAME not in MODELS:
        register_model(NAME, "toy: two convolutions, global average pool, linear head")(build)


def unregister() -> None:
    MODELS.remove(NAME)


register()
