"""Tiny feature stores for the hyperparameter-search tests: ID train / val / test and OOD sets
whose rows carry WordNet class ids, and a model-level ``odin`` score column in every store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tests.run.conftest import C, D, make_store

from semshift.features import write_store

CHIHUAHUA, DOG, TABLE = "n02085620", "n02084071", "n04379243"


def build_search_stores(root: Path) -> dict[str, Any]:
    """``train`` (240), ``val`` (80), ``test`` (120) and the OOD stores ``valood``
    (Chihuahua), ``far`` (table) and ``dog`` (dog: an ancestor of the validation class)."""
    rng = np.random.default_rng(0)
    means = np.abs(rng.normal(0, 3, (C, D))).astype(np.float32)
    head = (means, (-0.5 * (means**2).sum(1)).astype(np.float32))

    def odin(n: int) -> dict[str, np.ndarray]:
        return {"odin": rng.normal(size=n).astype(np.float32)}

    out: dict[str, Any] = {
        "train": make_store(root / "train", rng, means, head, 240, extra=odin(240)),
        "val": make_store(root / "val", rng, means, head, 80, extra=odin(80)),
        "test": make_store(root / "test", rng, means, head, 120, extra=odin(120)),
    }
    for name, n, shift, cls in (("valood", 80, 2.0, CHIHUAHUA), ("far", 100, 3.0, TABLE),
                                ("dog", 60, 2.5, DOG)):  # fmt: skip
        feats = np.abs(rng.normal(0, 3, (n, D)) + shift).astype(np.float32)
        logits = (feats @ head[0].T + head[1]).astype(np.float32)
        index = pd.DataFrame(
            {"path": [f"{name}{i}.png" for i in range(n)], "label": -1, "class_id": cls}
        )
        arrays = {"logits": logits, "features": feats, **odin(n)}
        write_store(root / name, index=index, arrays=arrays, head=head, fsync=False)
        out[name] = root / name
    return {**out, "head": head}


def search_config(stores: dict[str, Any], out: Path, **over: Any) -> dict[str, Any]:
    """A run of msp and knn, searched on id_val vs ``valood``, tested on ``far``."""
    cfg: dict[str, Any] = {
        "name": "search",
        "output": str(out),
        "data": {
            "id_train": {"store": str(stores["train"])},
            "id_val": {"store": str(stores["val"])},
            "id_test": {"store": str(stores["test"])},
            "sets": {
                "valood": {"role": "ood", "store": str(stores["valood"])},
                "far": {"role": "ood", "split": "far", "store": str(stores["far"])},
            },
        },
        "detectors": ["msp", "knn"],
        "protocols": {"osr": {}},
        "bootstrap": {"n_resamples": 0},
        "search": {
            "val_ood": "valood",
            "detectors": [{"name": "knn", "params": {"k": [1, 10, 50]}}],
        },
    }
    cfg.update(over)
    return cfg
