"""Tiny generated feature stores for the runner tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from semshift.features import write_store

C, D = 4, 12


def _head(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    means = rng.normal(0, 3, (C, D)).astype(np.float32)
    w = means
    b = (-0.5 * (means**2).sum(1)).astype(np.float32)
    return means, w, b


def make_store(
    path: Path,
    rng: np.random.Generator,
    means: np.ndarray,
    head: tuple[np.ndarray, np.ndarray],
    n: int,
    *,
    labels: np.ndarray | None = None,
    shift: float = 0.0,
    groups: dict[str, Any] | None = None,
    classes: list[str] | None = None,
    extra: dict[str, np.ndarray] | None = None,
) -> Path:
    """A store of n rows: features around class means (+ shift), logits from the head."""
    if labels is None:
        labels = np.arange(n) % means.shape[0]
    centre = means[np.clip(labels, 0, None)] + shift
    feats = (centre + rng.normal(0, 1.0, (n, means.shape[1]))).astype(np.float32)
    feats = np.abs(feats)  # non-negative, like post-ReLU features
    w, b = head
    logits = (feats @ w.T + b).astype(np.float32)
    index = pd.DataFrame({"path": [f"im{i}.png" for i in range(n)], "label": labels})
    for k, v in (groups or {}).items():
        index[k] = v
    arrays: dict[str, np.ndarray] = {"logits": logits, "features": feats, **(extra or {})}
    meta = {"classes": {"ids": classes}} if classes is not None else None
    write_store(path, index=index, arrays=arrays, head=(w, b), meta=meta, fsync=False)
    return path


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """id_train (240), id_test (120), an OOD store with an easy/hard split column (160),
    a covariate store (80) and a graded store with sem/cov level columns (200)."""
    return build_stores(tmp_path_factory.mktemp("stores"))


def build_stores(root: Path) -> dict[str, Any]:
    """The stores of the :func:`stores` fixture, under ``root``."""
    rng = np.random.default_rng(0)
    means, w, b = _head(rng)
    head = (np.abs(w), b)
    means = np.abs(means)
    out = {
        "train": make_store(root / "train", rng, means, head, 240),
        "test": make_store(root / "test", rng, means, head, 120),
        "cov": make_store(root / "cov", rng, means, head, 80, shift=0.8),
    }
    n_ood = 160
    split = np.where(np.arange(n_ood) % 2 == 0, "easy", "hard")
    shift = np.where(split == "easy", 4.0, 1.5)[:, None]
    lab = np.full(n_ood, -1)
    o_feats = np.abs(rng.normal(0, 3, (n_ood, D)) + shift).astype(np.float32)
    logits = (o_feats @ head[0].T + head[1]).astype(np.float32)
    idx = pd.DataFrame({"path": [f"o{i}.png" for i in range(n_ood)], "label": lab, "split": split})
    write_store(root / "ood", index=idx, arrays={"logits": logits, "features": o_feats},
                head=head, fsync=False)  # fmt: skip
    out["ood"] = root / "ood"
    n_g = 200
    sem = np.arange(n_g) % 2 + 1
    cov = (np.arange(n_g) // 2) % 2 + 1
    g_feats = np.abs(rng.normal(0, 3, (n_g, D)) + sem[:, None] * 1.5).astype(np.float32)
    g_logits = (g_feats @ head[0].T + head[1]).astype(np.float32)
    gidx = pd.DataFrame({"path": [f"g{i}.png" for i in range(n_g)], "label": -1,
                         "sem_level": sem, "cov_level": cov})  # fmt: skip
    write_store(root / "graded", index=gidx, arrays={"logits": g_logits, "features": g_feats},
                head=head, fsync=False)  # fmt: skip
    out["graded"] = root / "graded"
    return {**out, "means": means, "head": head}


def base_config(stores: dict[str, Path], out: Path, **over: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "name": "tiny",
        "output": str(out),
        "data": {
            "id_train": {"store": str(stores["train"])},
            "id_test": {"store": str(stores["test"])},
            "sets": {
                "easy": {"role": "ood", "split": "easy", "semantic_level": 1,
                         "store": str(stores["ood"]), "select": {"split": "easy"}},
                "hard": {"role": "ood", "split": "hard", "semantic_level": 2,
                         "store": str(stores["ood"]), "select": {"split": "hard"}},
                "cov": {"role": "covariate", "covariate_level": 1, "store": str(stores["cov"])},
            },
        },
        "detectors": ["msp", "energy", "knn", "mahalanobis"],
        "protocols": {},
        "bootstrap": {"n_resamples": 50},
    }  # fmt: skip
    cfg.update(over)
    return cfg
