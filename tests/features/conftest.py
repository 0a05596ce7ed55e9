"""Shared fixtures for the features tests: few threads, tiny generated images."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

torch.set_num_threads(1)

TINY_CLIP = {
    "embed_dim": 32,
    "vision_cfg": {"image_size": 32, "layers": 2, "width": 64, "patch_size": 16},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 2},
}


def write_images(root: Path, classes: dict[str, int], size: int = 40, seed: int = 0) -> list[Path]:
    """``root/<class>/<k>.png`` random RGB images, ``classes`` = folder -> count."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    out = []
    for folder, count in classes.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        for k in range(count):
            arr = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
            path = root / folder / f"{k:04d}.png"
            Image.fromarray(arr).save(path)
            out.append(path)
    return out


@pytest.fixture
def images(tmp_path):
    root = tmp_path / "imgs"
    write_images(root, {"cat": 5, "dog": 4, "owl": 3})
    return root


def count_decodes(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts the images decoded from here on (``semshift.features.data.load_image`` calls)."""
    import semshift.features.data as data_module

    calls = {"n": 0}
    real = data_module.load_image

    def load(path: Path) -> object:
        calls["n"] += 1
        return real(path)

    monkeypatch.setattr(data_module, "load_image", load)
    return calls
