"""A 1,280,000 x 2,048 store (ImageNet train, ResNet-50 features) opens and serves rows lazily.

The shard files are sparse (nothing is written to disk), so the test costs seconds and no disk
space; what it checks is that opening, selecting and reading a few rows never maps more than
those rows into memory.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from semshift import __version__
from semshift.features import open_store
from semshift.features.store import FORMAT_VERSION

N, D, SHARDS = 1_280_000, 2048, 4


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * 4096 / 2**20


def test_imagenet_scale_store_is_lazy(tmp_path):
    root = tmp_path / "big"
    (root / "shards").mkdir(parents=True)
    rows = N // SHARDS
    shards = []
    for k in range(SHARDS):
        name = f"{k:05d}.features.npy"
        mm = np.lib.format.open_memmap(root / "shards" / name, "w+", np.float32, (rows, D))
        mm[k * 1000 + 7, :4] = [k, 1, 2, 3]  # one known row per shard; the rest stays sparse
        mm.flush()
        del mm
        shards.append(
            {
                "shard": k,
                "rows": rows,
                "files": {"features": {"file": name, "sha256": "-", "size": 0}},
            }
        )
    index = pd.DataFrame(
        {
            "sample_id": np.arange(N, dtype=np.int64),
            "path": pd.Series(np.arange(N)).map("train/{:07d}.JPEG".format),
            "label": (np.arange(N) % 1000).astype(np.int64),
            "shard": np.repeat(np.arange(SHARDS, dtype=np.int32), rows),
            "row": np.tile(np.arange(rows, dtype=np.int32), SHARDS),
            "split": np.where(np.arange(N) % 100 == 0, "val", "train"),
        }
    )
    index.to_parquet(root / "index.parquet", index=False)
    meta = {
        "format": FORMAT_VERSION, "semshift_version": __version__, "n_rows": N, "groups": ["split"],
        "arrays": {"features": {"shape": [D], "dtype": "float32"}}, "head": None, "shards": shards,
    }  # fmt: skip
    (root / "meta.json").write_text(json.dumps(meta))
    del index

    before = _rss_mb()
    st = open_store(root)
    assert len(st) == N and st._mmaps == {}
    # a contiguous run inside a shard is a memory map, not a copy (about 2.6 GB of rows)
    (view,) = st.select(np.arange(N) < rows).arrays("features")
    assert isinstance(view, np.memmap) and view.shape == (rows, D)
    # one row per shard, gathered across all four shards
    pos = np.array([k * rows + k * 1000 + 7 for k in range(SHARDS)])
    got = st.gather(pos, "features")
    np.testing.assert_array_equal(got[:, :4], [[k, 1, 2, 3] for k in range(SHARDS)])
    # a group selection (12,800 rows spread over every shard) reads just those rows: 105 MB
    val = st.select(split="val")
    assert len(val) == N // 100
    (feats,) = val.arrays("features")
    assert feats.shape == (N // 100, D) and feats[0, 0] == 0
    blocks = val.blocks("features", rows=4096)
    assert next(blocks)["features"].shape == (4096, D)
    grown = _rss_mb() - before
    # index (~150 MB of Python strings) + the 105 MB selection + a block; never the 10.5 GB
    assert grown < 1500, f"resident memory grew by {grown:.0f} MB"
