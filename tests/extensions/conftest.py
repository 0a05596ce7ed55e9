"""What the toy-extension tests share: registering a toy for one test, and a small image
release (the toy layout's format) that the layout and benchmark toys read."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest


@contextlib.contextmanager
def registration(toy: ModuleType) -> Iterator[None]:
    """``toy.register()`` for the block, ``toy.unregister()`` after it, whatever happens."""
    toy.register()
    try:
        yield
    finally:
        toy.unregister()


@pytest.fixture
def release(tmp_path: Path) -> Path:
    """Ten 8 x 8 images, classes cat and dog: train.csv (4.png-7.png), test.csv (0.png-3.png:
    dog, cat, dog, cat) and ood.csv (8.png, 9.png)."""
    from PIL import Image

    root = tmp_path / "release"
    (root / "images").mkdir(parents=True)
    for i in range(10):
        Image.new("RGB", (8, 8), (25 * i, 0, 0)).save(root / "images" / f"{i}.png")
    (root / "classes.txt").write_text("cat\ndog\n")
    (root / "test.csv").write_text("0.png,dog\n1.png,cat\n2.png,dog\n3.png,cat\n")
    (root / "train.csv").write_text("4.png,cat\n5.png,dog\n6.png,cat\n7.png,dog\n")
    (root / "ood.csv").write_text("8.png,cat\n9.png,dog\n")  # labels unused for an OOD set
    return root
