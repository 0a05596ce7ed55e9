"""The tiny CNN the runner and benchmark tests extract with (registered once, seeded weights)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from semshift.features.models import MODELS, HookAdapter, register_model

TINY_CNN = "semshift-test-tiny-cnn"


def register_tiny_cnn() -> str:
    """Register the tiny CNN (conv 3->8, ReLU, global average pool, linear head) once."""
    if TINY_CNN not in MODELS:

        @register_model(TINY_CNN, "conv 3->8, ReLU, global average pool, linear head")
        def _tiny_cnn(num_classes: int = 3) -> HookAdapter:
            net = nn.Sequential(
                nn.Conv2d(3, 8, 3, padding=1),
                nn.ReLU(),
                nn.AdaptiveAvgPool2d(1),
                nn.Flatten(),
                nn.Linear(8, num_classes),
            )
            return HookAdapter(TINY_CNN, net)

    return TINY_CNN


def save_tiny_cnn_weights(path: Path, num_classes: int, seed: int = 0) -> Path:
    """The tiny CNN's initial weights for ``num_classes``, seeded, saved as a state dict."""
    register_tiny_cnn()
    torch.manual_seed(seed)
    torch.save(MODELS[TINY_CNN].build(num_classes=num_classes).module.state_dict(), path)
    return path
