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

from typing import TYPE_CHECKING

from semshift.lazy import lazy_names

if TYPE_CHECKING:
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
    from ._meta import _shard_name, model_identity, read_meta  # noqa: F401
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
        open_store,
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
        _ShardRecord,
        write_store,
    )

#: where each name is defined: the package imports a module on the first use of one of its
#: names, so `semshift store verify` reads a store without pandas (reader / writer import it)
_LAZY: dict[str, str] = {
    "CHECKSUM": "_io",
    "DEFAULT_BLOCK_ROWS": "_io",
    "F32": "_io",
    "FORMAT_VERSION": "_io",
    "RESERVED_COLUMNS": "_io",
    "_fsync_dir": "_io",
    "_HashingWriter": "_io",
    "_write_json": "_io",
    "_write_npy": "_io",
    "_write_parquet": "_io",
    "atomic_write": "_io",
    "checksum_matches": "_io",
    "file_checksum": "_io",
    "recorded_checksum": "_io",
    "sha256_file": "_io",
    "_PREFETCH": "reader",
    "_READ_AHEAD_CHUNK": "reader",
    "SKIPPED_COLUMNS": "reader",
    "FeatureStore": "reader",
    "Selection": "reader",
    "_read_ahead": "reader",
    "_schema": "reader",
    "_Shard": "reader",
    "_short": "reader",
    "_skipped_frame": "reader",
    "concat_stores": "reader",
    "model_identity": "_meta",
    "open_store": "reader",
    "read_meta": "_meta",
    "read_skipped": "reader",
    "row_class_ids": "reader",
    "_HASH_THREADS": "verify",
    "Damage": "verify",
    "RepairResult": "verify",
    "_describe_mismatch": "verify",
    "_file_damage": "verify",
    "_index_differs": "verify",
    "_repair_meta": "verify",
    "_skipped_damage": "verify",
    "model_mismatch": "verify",
    "open_verified": "verify",
    "repair_store": "verify",
    "verify_store": "verify",
    "StoreWriter": "writer",
    "_jsonable": "writer",
    "_shard_name": "_meta",
    "_ShardRecord": "writer",
    "write_store": "writer",
}


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


__getattr__, __dir__ = lazy_names(__name__, {n: f".{m}" for n, m in _LAZY.items()})
