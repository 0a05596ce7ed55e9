"""The feature store: logits, features and the head of one model over one image set, on disk.

A store is a directory::

    STORE/
      meta.json              model, layer, preprocessing, class list, dataset fingerprint,
                             semshift version, array schema, shard list with checksums (XXH3-128),
                             checksums of index.parquet, head.npz and skipped.csv
      index.parquet          one row per stored sample: sample_id, path, label, shard, row and
                             free group columns (split, sem_level, cov_level, corruption, ...)
      head.npz               the linear head: W (C, D) and b (C,), float32 (optional)
      skipped.csv            images that could not be used: sample_id, path, reason
      shards/00000.logits.npy, 00000.features.npy, ...   float32 row shards
      shards/00000.index.parquet, 00000.json             per-shard index and commit record

``meta.json`` is written last: a directory without it is an unfinished extraction, which
:func:`open_store` refuses. Every file is written atomically (temporary name, then rename). A
shard only counts once its commit record ``NNNNN.json`` exists, written (with ``fsync``) after
the shard's files are flushed to disk, and its files match the recorded sizes and checksums; so
a kill or a full disk never leaves a partial shard that a later run would trust. A command
opens the stores it reads with :func:`open_verified`, which hashes every recorded file again
(:func:`verify_store`) each time and checks that the stores come from one model.

Opening is lazy: shards are memory-mapped on first use (``np.load(mmap_mode="r",
allow_pickle=False)``; loading never unpickles), so a 1,280,000 x 2,048 store opens in the memory
of its index. Selections gather only their own rows; :meth:`Selection.blocks` iterates in blocks.

Detectors take plain arrays; a selection hands them over::

    store = open_store("runs/resnet50-val")
    test = store.select(split="id_test")
    logits, features = test.arrays("logits", "features")   # (n, C), (n, D) float32
    detector.fit(**store.select(split="id_train").inputs("logits", "features", "head", "labels"))
    scores = detector.score(**test.inputs("logits", "features"))

>>> import numpy as np, pandas as pd, tempfile
>>> from semshift.features import open_store, write_store
>>> d = tempfile.mkdtemp()
>>> idx = pd.DataFrame({"path": [f"im{i}.png" for i in range(6)], "label": [0, 1, 2, 0, 1, 2],
...                     "split": ["val"] * 3 + ["test"] * 3})
>>> logits = np.arange(18, dtype=np.float32).reshape(6, 3)
>>> _ = write_store(d, index=idx, arrays={"logits": logits}, shard_size=4)
>>> store = open_store(d)
>>> len(store), store.n_shards
(6, 2)
>>> store.select(split="test").arrays("logits")[0][:, 0]
array([ 9., 12., 15.], dtype=float32)
>>> import shutil; shutil.rmtree(d)

The package's modules: :mod:`._io` (format constants, atomic writes, checksums),
:mod:`.reader` (:class:`FeatureStore`, :class:`Selection`, opening and concatenating),
:mod:`.writer` (:class:`StoreWriter`, :func:`write_store`) and :mod:`.verify` (verification,
:func:`open_verified`, repair). Every name is importable from ``semshift.features.store``.
"""

from __future__ import annotations

from ._io import (  # noqa: F401
    CHECKSUM,
    DEFAULT_BLOCK_ROWS,
    F32,
    FORMAT_VERSION,
    RESERVED_COLUMNS,
    _fsync_dir,
    _HashingWriter,
    _write_json,
    _write_npy,
    _write_parquet,
    atomic_write,
    checksum_matches,
    file_checksum,
    recorded_checksum,
    sha256_file,
)
from .reader import (  # noqa: F401
    _PREFETCH,
    _READ_AHEAD_CHUNK,
    SKIPPED_COLUMNS,
    FeatureStore,
    Selection,
    _read_ahead,
    _schema,
    _Shard,
    _short,
    _skipped_frame,
    concat_stores,
    model_identity,
    open_store,
    read_meta,
    read_skipped,
    row_class_ids,
)
from .verify import (  # noqa: F401
    _HASH_THREADS,
    Damage,
    RepairResult,
    _describe_mismatch,
    _file_damage,
    _index_differs,
    _repair_meta,
    _skipped_damage,
    model_mismatch,
    open_verified,
    repair_store,
    verify_store,
)
from .writer import (  # noqa: F401
    StoreWriter,
    _jsonable,
    _shard_name,
    _ShardRecord,
    write_store,
)

__all__ = [
    "FORMAT_VERSION",
    "RESERVED_COLUMNS",
    "Damage",
    "FeatureStore",
    "Selection",
    "StoreWriter",
    "atomic_write",
    "concat_stores",
    "model_identity",
    "model_mismatch",
    "open_store",
    "open_verified",
    "read_meta",
    "read_skipped",
    "repair_store",
    "row_class_ids",
    "verify_store",
    "write_store",
]
