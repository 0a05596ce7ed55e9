"""Shared fixtures for the demo tests: one tiny demo build per session (a few seconds)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from semshift.demo import DemoData, DemoParams, build_demo_data

torch.set_num_threads(1)

#: 8 ID classes, 16 training images each: small enough for a test, large enough to learn.
TINY = DemoParams(
    id_groups=(("latin-capital", 3), ("greek-small", 3), ("arrows", 2)),
    n_train=16,
    n_val=4,
    n_test=6,
    ood_classes=4,
    n_ood=3,
    n_font=2,
    epochs=6,
    batch_size=16,
)


@pytest.fixture(scope="session")
def tiny_demo(tmp_path_factory: pytest.TempPathFactory) -> DemoData:
    return build_demo_data(tmp_path_factory.mktemp("demo"), seed=0, params=TINY, progress=False)


def file_digests(root: Path) -> dict[str, bytes]:
    """Relative path -> bytes of every file under ``root``."""
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }
