"""A small study on generated images: three tiny CNNs (seeded weights) x one or two datasets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from tests.tiny_model import TINY_CNN, register_tiny_cnn
from tests.training.images import write_class_images

register_tiny_cnn()


def study_dict(root: Path, **over: Any) -> dict[str, Any]:
    """Three tiny CNNs x dataset ``colours`` (a data block), osr with three detectors."""
    from semshift.features.models import MODELS

    models = []
    for seed in range(3):
        weights = root / f"tiny{seed}.pt"
        if not weights.exists():
            torch.manual_seed(seed)
            torch.save(MODELS[TINY_CNN].build(num_classes=3).module.state_dict(), weights)
        models.append(
            {
                "name": TINY_CNN,
                "weights": weights.name,
                "num_classes": 3,
                "preset": "resize32-crop32",
                "batch_size": 8,
                "label": f"tiny{seed}",
            }
        )
    data = {
        "id_train": {"images": "img/train"},
        "id_test": {"images": "img/test"},
        "sets": {"ood": {"role": "ood", "split": "ood", "images": "img/ood"}},
    }
    study = {
        "name": "toy",
        "output": "out",
        "models": models,
        "datasets": {"colours": {"data": data, "classes": "img/classes.txt"}},
        "detectors": ["msp", "energy", "mls"],
        "protocols": {"osr": {}},
        "run": {"bootstrap": {"n_resamples": 50}},
        "plugins": ["tests.study.tiny_plugin"],
    }
    study.update(over)
    return study


@pytest.fixture(scope="module")
def study_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("study")
    img = root / "img"
    write_class_images(img / "train", {"r": 6, "g": 6, "b": 6}, seed=0)
    write_class_images(img / "test", {"r": 5, "g": 5, "b": 5}, seed=1)
    write_class_images(img / "ood", {"x": 8, "y": 4}, seed=2)
    (img / "classes.txt").write_text("r\ng\nb\n")
    return root
