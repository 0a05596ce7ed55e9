"""Tiny labelled image folders for the training tests (32 x 32 PNG, one colour per class)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_class_images(root: Path, classes: dict[str, int], seed: int = 0) -> Path:
    """``root/<class>/<k>.png``: noise around a colour that differs by class; returns ``root``."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for c, (folder, count) in enumerate(classes.items()):
        (root / folder).mkdir(parents=True, exist_ok=True)
        colour = np.array([(60 * c) % 256, (255 - 70 * c) % 256, (40 + 90 * c) % 256])
        for k in range(count):
            noise = rng.integers(-40, 41, (32, 32, 3))
            arr = np.clip(colour + noise, 0, 255).astype(np.uint8)
            Image.fromarray(arr).save(root / folder / f"{k:03d}.png")
    return root
