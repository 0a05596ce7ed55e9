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
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import io
import json
import mmap
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd
import xxhash
from numpy.typing import NDArray

from semshift import __version__
from semshift.errors import InputError

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
    "verify_store",
    "write_store",
]

#: Version of the on-disk layout, bumped when it changes incompatibly.
FORMAT_VERSION = 1
#: Index columns the store manages; every other column is a free group column.
RESERVED_COLUMNS = ("sample_id", "path", "label", "shard", "row")
#: Rows per block of :meth:`Selection.blocks` by default.
DEFAULT_BLOCK_ROWS = 65_536
#: Checksum algorithm of the files a store records (see :class:`_HashingWriter`).
CHECKSUM = "xxh3_128"

F32 = NDArray[np.float32]


# --------------------------------------------------------------------------- atomic file writes
class _HashingWriter:
    """A write-only file wrapper feeding every byte to the checksum (hashing costs no re-read).

    The checksum is XXH3-128 (``xxhash``): it detects damaged or partial files as well as a
    cryptographic hash would, at ~13 GB/s instead of SHA-256's ~1.5 GB/s, so checksumming adds a
    few percent to a store write instead of doubling it. Stores written by semshift < 0.2 recorded
    SHA-256 (key ``sha256``); they still verify.
    """

    #: writes at least this large are hashed while a helper thread writes them (the file write
    #: releases the GIL; the hash does not)
    OVERLAP_BYTES = 1 << 20

    def __init__(self, f: IO[bytes]) -> None:
        self.f = f
        self.h = xxhash.xxh3_128()
        self.size = 0
        self._pool: ThreadPoolExecutor | None = None

    def write(self, data: bytes | memoryview) -> int:
        n = len(data) if isinstance(data, bytes) else data.nbytes
        if n < self.OVERLAP_BYTES:
            self.h.update(data)
            written = self.f.write(data)
        else:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="semshift-write")
            job = self._pool.submit(self.f.write, data)
            try:
                self.h.update(data)
            finally:
                written = job.result()
        self.size += n
        return written

    def finish(self) -> str:
        """The checksum, ``"xxh3_128:<hex>"``; ends the helper thread."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        return f"{CHECKSUM}:{self.h.hexdigest()}"


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def atomic_write(path: str | Path, write: Any, *, fsync: bool = True) -> tuple[str, int]:
    """Write ``path`` atomically: ``write(f)`` fills a temporary file, which is renamed into place.

    Parameters
    ----------
    path : str or Path
        Final file name. Until the rename, the data lives in ``.NAME.tmp-PID`` in the same folder;
        a kill or a full disk leaves at most that temporary file, never a partial ``path``.
    write : callable
        ``write(f)`` receives a binary file-like object with ``write``.
    fsync : bool
        Flush the file and its folder to disk before and after the rename (default).

    Returns
    -------
    (checksum ``"xxh3_128:<hex>"``, size in bytes) of what was written.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            hw = _HashingWriter(f)
            try:
                write(hw)
            finally:
                digest = hw.finish()
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if fsync:
        _fsync_dir(path.parent)
    return digest, hw.size


def _write_npy(path: Path, arr: np.ndarray, *, fsync: bool = True) -> tuple[str, int]:
    """``.npy`` format 1.0, the data written straight from the array's buffer (no copy)."""
    arr = np.ascontiguousarray(arr)
    if arr.dtype.hasobject:
        raise InputError(f"{path.name}: object arrays cannot be stored")

    def write(f: Any) -> None:
        np.lib.format.write_array_header_1_0(f, np.lib.format.header_data_from_array_1_0(arr))
        flat = arr.reshape(-1).view(np.uint8).data
        step = 16 << 20
        for start in range(0, flat.nbytes, step):
            f.write(flat[start : start + step])

    return atomic_write(path, write, fsync=fsync)


def _write_parquet(path: Path, frame: pd.DataFrame, *, fsync: bool = True) -> tuple[str, int]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(frame, preserve_index=False)
    sink = pa.BufferOutputStream()
    # dictionary encoding only where values repeat (label, shard, group columns): on the
    # one-per-row columns it is built and thrown away (1,000,000 rows: written in 0.11 s instead
    # of 0.18 s, read in 0.05 s instead of 0.12 s)
    unique = {"sample_id", "path", "row"}
    pq.write_table(table, sink, use_dictionary=[c for c in table.column_names if c not in unique])
    data = sink.getvalue().to_pybytes()
    return atomic_write(path, lambda f: f.write(data), fsync=fsync)


def _write_json(path: Path, obj: Any, *, fsync: bool = True) -> tuple[str, int]:
    data = (json.dumps(obj, indent=1, sort_keys=True) + "\n").encode()
    return atomic_write(path, lambda f: f.write(data), fsync=fsync)


def sha256_file(path: str | Path, chunk: int = 1 << 22) -> str:
    """SHA-256 hex digest of a file, read in 4 MiB chunks (model weights are identified by it)."""
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            sha.update(block)
    return sha.hexdigest()


def file_checksum(path: str | Path, chunk: int = 1 << 22) -> str:
    """XXH3-128 checksum of a file as the store records it, ``"xxh3_128:<hex>"``."""
    h = xxhash.xxh3_128()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return f"{CHECKSUM}:{h.hexdigest()}"


def recorded_checksum(info: Mapping[str, Any]) -> str:
    """The checksum a file entry of ``meta.json`` records (``sha256:<hex>`` for old stores)."""
    if "checksum" in info:
        return str(info["checksum"])
    return f"sha256:{info['sha256']}"


def checksum_matches(path: Path, info: Mapping[str, Any]) -> bool:
    """Whether the file ``path`` has the checksum recorded in ``info``."""
    algo, _, digest = recorded_checksum(info).partition(":")
    if algo == "sha256":
        return sha256_file(path) == digest
    return file_checksum(path) == f"{algo}:{digest}"


# --------------------------------------------------------------------------- writer
def _shard_name(k: int) -> str:
    return f"{k:05d}"


@dataclass
class _ShardRecord:
    """What a shard's commit record says: rows, and per file its name, size and SHA-256."""

    shard: int
    rows: int
    files: dict[str, dict[str, Any]]
    skipped: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "shard": self.shard,
            "rows": self.rows,
            "files": self.files,
            "skipped": self.skipped,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> _ShardRecord:
        return cls(int(obj["shard"]), int(obj["rows"]), dict(obj["files"]), list(obj["skipped"]))


class StoreWriter:
    """Write a store shard by shard; resumable.

    Parameters
    ----------
    path : str or Path
        Store directory (created).
    arrays : mapping of str to tuple of int
        Array name -> per-row shape, e.g. ``{"logits": (C,), "features": (D,)}``; all float32.
    run : mapping, optional
        What produced the data (model, weights, data fingerprint, shard size, ...). Saved as
        ``run.json``; resuming into a directory whose ``run.json`` differs is refused, so shards
        of two different runs never mix.
    fsync : bool
        Make every shard durable before its commit record is written (default). The flushes run
        on a background thread: :meth:`write_shard` returns once the shard's files are written
        and renamed into place, and the shard is committed (counted in :attr:`done`) when its
        files are on disk and its record is written, while the caller computes the next shard.
        At most :attr:`MAX_PENDING` shards wait; :meth:`flush` and :meth:`finalize` wait for all
        and raise the first flush error.

    Raises
    ------
    InputError
        ``path`` holds a finished store or a different run, or is a file.
    """

    #: shards whose flush and commit may be under way at once (the caller waits beyond this)
    MAX_PENDING = 2

    def __init__(
        self,
        path: str | Path,
        *,
        arrays: Mapping[str, Sequence[int]],
        run: Mapping[str, Any] | None = None,
        fsync: bool = True,
    ) -> None:
        self.path = Path(path)
        self.arrays = {name: tuple(int(s) for s in shape) for name, shape in arrays.items()}
        if not self.arrays:
            raise InputError("a store needs at least one array (e.g. logits)")
        for name in self.arrays:
            if not name.replace("_", "").isalnum():
                raise InputError(f"array name {name!r} must be letters, digits and underscores")
        self.fsync = fsync
        self.run = json.loads(json.dumps(dict(run or {}), sort_keys=True))
        self.run["arrays"] = {k: list(v) for k, v in self.arrays.items()}
        if self.path.exists() and not self.path.is_dir():
            raise InputError(f"store path {self.path} exists and is not a directory")
        if (self.path / "meta.json").exists():
            raise InputError(
                f"{self.path} already holds a finished store; choose another output directory "
                "or delete it"
            )
        self.shard_dir = self.path / "shards"
        self.shard_dir.mkdir(parents=True, exist_ok=True)
        run_file = self.path / "run.json"
        if run_file.exists():
            from semshift.textio import read_json

            try:  # UTF-8 and JSON checked, the file named (a traceback, before)
                old = read_json(run_file, "extraction record", hint="")
            except InputError as err:
                raise InputError(
                    f"{err}; the unfinished extraction in {self.path} cannot be resumed without "
                    "its record of the settings: extract into another output directory, or "
                    "delete this one to start again"
                ) from None
            if old != self.run:
                keys = sorted(k for k in set(old) | set(self.run) if old.get(k) != self.run.get(k))
                diffs = "; ".join(f"{k}: {old.get(k)!r} vs now {self.run.get(k)!r}" for k in keys)
                raise InputError(
                    f"{self.path} holds an unfinished extraction with different settings "
                    f"({diffs[:400]}); use another output directory or delete it"
                )
        else:
            _write_json(run_file, self.run, fsync=fsync)
        for tmp in list(self.path.glob(".*.tmp-*")) + list(self.shard_dir.glob(".*.tmp-*")):
            tmp.unlink(missing_ok=True)  # leftovers of a killed write: never trusted
        self._records: dict[int, _ShardRecord] = {}
        self._frames: dict[int, pd.DataFrame] = {}
        self._init_commits()
        self._load_records()

    @classmethod
    def attach(
        cls, path: str | Path, *, arrays: Mapping[str, Sequence[int]], fsync: bool = True
    ) -> StoreWriter:
        """A writer for a second process (e.g. a Ray worker) of a run another writer opened.

        Nothing is verified, cleaned or loaded: the process only calls :meth:`write_shard` for
        shards assigned to it. Shard files have distinct names and temporary files carry the
        process id, so several processes can write into one store.
        """
        self = cls.__new__(cls)
        self.path = Path(path)
        self.arrays = {name: tuple(int(s) for s in shape) for name, shape in arrays.items()}
        self.fsync = fsync
        self.shard_dir = self.path / "shards"
        if not (self.path / "run.json").is_file():
            raise InputError(f"{self.path}: no run.json; open the store with StoreWriter first")
        self.run = json.loads((self.path / "run.json").read_text())
        self._records = {}
        self._frames = {}
        self._init_commits()
        return self

    def _init_commits(self) -> None:
        self._pending: list[tuple[int, _ShardRecord, pd.DataFrame, Future[None]]] = []
        self._committer: ThreadPoolExecutor | None = None

    def reload(self) -> None:
        """Re-read the commit records (after other processes wrote shards)."""
        self.flush()
        self._records = {}
        self._load_records()

    def _load_records(self) -> None:
        for rec_file in sorted(self.shard_dir.glob("[0-9]*.json")):
            try:
                k = int(rec_file.stem)
                rec = _ShardRecord.from_json(json.loads(rec_file.read_text()))
            except (ValueError, KeyError, TypeError, OSError, json.JSONDecodeError):
                rec_file.unlink(missing_ok=True)
                continue
            if rec.shard == k and self._verify(rec):
                self._records[k] = rec
            else:  # damaged: forget it, the shard will be recomputed
                rec_file.unlink(missing_ok=True)

    def _verify(self, rec: _ShardRecord) -> bool:
        for info in rec.files.values():
            f = self.shard_dir / info["file"]
            if not f.is_file() or f.stat().st_size != info["size"]:
                return False
            if not checksum_matches(f, info):
                return False
        return True

    @property
    def done(self) -> set[int]:
        """Shards committed: written, on disk and recorded (a restarted run skips them).

        Waits for the shards still being flushed (see :meth:`flush`).
        """
        self.flush()
        return set(self._records)

    def flush(self) -> None:
        """Wait until every shard given to :meth:`write_shard` is committed.

        Raises
        ------
        OSError
            The first error of a background flush (e.g. a full disk); that shard stays
            uncommitted, the ones before it are kept.
        """
        self._reap(0)

    def _reap(self, keep: int) -> None:
        """Commit the oldest pending shards until at most ``keep`` are still pending."""
        try:
            while len(self._pending) > keep:
                k, rec, frame, fut = self._pending[0]
                fut.result()
                self._pending.pop(0)
                self._records[k] = rec
                self._frames[k] = frame
        except BaseException:
            # the later shards are committed independently; wait for them so their files are
            # not left half-flushed, and keep what succeeded
            for k, rec, frame, fut in self._pending[1:]:
                with contextlib.suppress(Exception):
                    fut.result()
                    self._records[k] = rec
                    self._frames[k] = frame
            self._pending = []
            raise
        finally:
            if not self._pending and self._committer is not None:
                self._committer.shutdown()
                self._committer = None

    def _commit(self, rec: _ShardRecord) -> None:
        """Background: flush shard ``rec``'s files, then write its record (durably).

        The record's folder ``fsync`` also makes the data files' renames durable (same folder);
        should a crash keep the record but lose a data file, the record fails verification on
        the next start and the shard is recomputed.
        """
        for info in rec.files.values():
            fd = os.open(self.shard_dir / info["file"], os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _write_json(self.shard_dir / f"{_shard_name(rec.shard)}.json", rec.to_json(), fsync=True)

    def write_shard(
        self,
        k: int,
        arrays: Mapping[str, np.ndarray],
        index: pd.DataFrame,
        skipped: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        """Write shard ``k`` atomically: its arrays, its index rows, then its commit record.

        With ``fsync`` on, the record is written on a background thread once the files are on
        disk; the shard counts as :attr:`done` from then on (see :meth:`flush`).

        Parameters
        ----------
        k : int
            Shard number (shards are concatenated in this order).
        arrays : mapping of str to array (n, ...)
            One entry per array of the schema, float32-castable, ``n`` rows each.
        index : DataFrame (n rows)
            At least ``sample_id`` (int), ``path`` (str) and ``label`` (int, -1 = unknown);
            other columns are group columns.
        skipped : sequence of mapping
            Samples of this shard that were not stored: ``sample_id``, ``path``, ``reason``.
        """
        n = len(index)
        missing = [c for c in ("sample_id", "path", "label") if c not in index.columns]
        if missing:
            raise InputError(f"shard {k}: index lacks column(s) {', '.join(missing)}")
        if set(arrays) != set(self.arrays):
            raise InputError(
                f"shard {k}: arrays {sorted(arrays)} do not match the schema {sorted(self.arrays)}"
            )
        files: dict[str, dict[str, Any]] = {}
        name = _shard_name(k)
        shaped = {key: np.asarray(arrays[key], dtype=np.float32) for key in self.arrays}
        for key, tail in self.arrays.items():
            if shaped[key].shape != (n, *tail):
                raise InputError(
                    f"shard {k}: array {key!r} has shape {shaped[key].shape}, expected {(n, *tail)}"
                )
        frame = index.reset_index(drop=True).copy()
        frame["sample_id"] = frame["sample_id"].astype(np.int64)
        frame["label"] = frame["label"].astype(np.int64)
        frame["path"] = frame["path"].astype(str)
        index_name = f"{name}.index.parquet"
        # the index is encoded and written on a helper thread while this one writes the arrays
        # (Parquet encoding and file writes release the GIL); the commit record waits for both.
        # Nothing is flushed here: with fsync on, _commit flushes the files in the background.
        with ThreadPoolExecutor(1, thread_name_prefix="semshift-index") as pool:
            index_job = pool.submit(_write_parquet, self.shard_dir / index_name, frame, fsync=False)
            try:
                for key, arr in shaped.items():
                    fname = f"{name}.{key}.npy"
                    sha, size = _write_npy(self.shard_dir / fname, arr, fsync=False)
                    files[key] = {"file": fname, "checksum": sha, "size": size}
            except BaseException:
                with contextlib.suppress(Exception):  # its own error is secondary to this one
                    index_job.result()
                (self.shard_dir / index_name).unlink(missing_ok=True)
                raise
            sha, size = index_job.result()
        files["index"] = {"file": index_name, "checksum": sha, "size": size}
        rec = _ShardRecord(k, n, files, [_jsonable(dict(s)) for s in skipped])
        if not self.fsync:
            _write_json(self.shard_dir / f"{name}.json", rec.to_json(), fsync=False)
            self._records[k] = rec
            self._frames[k] = frame  # finalize() needs not read it back
            return
        self._reap(self.MAX_PENDING - 1)  # an earlier shard's flush error surfaces here
        if self._committer is None:
            self._committer = ThreadPoolExecutor(1, thread_name_prefix="semshift-commit")
        self._pending.append((k, rec, frame, self._committer.submit(self._commit, rec)))

    def finalize(
        self,
        meta: Mapping[str, Any] | None = None,
        *,
        head: tuple[np.ndarray, np.ndarray] | None = None,
        n_shards: int | None = None,
        extra_skipped: Sequence[Mapping[str, Any]] = (),
    ) -> FeatureStore:
        """Write ``index.parquet``, ``head.npz``, ``skipped.csv`` and, last, ``meta.json``.

        Parameters
        ----------
        meta : mapping, optional
            Descriptive fields (model, layer, preprocessing, classes, dataset, ...), stored as is.
        head : (W, b), optional
            Linear head, W (C, D) and b (C,).
        n_shards : int, optional
            The number of shards expected; finalising with any of ``0 .. n_shards - 1`` missing
            is refused. Default: the written shards must be ``0 .. max``.
        extra_skipped : sequence of mapping
            Skipped samples that belong to no shard (``sample_id``, ``path``, ``reason``), e.g.
            files excluded while listing the data; listed first in ``skipped.csv``.
        """
        self.flush()
        expected = range(n_shards if n_shards is not None else max(self._records, default=-1) + 1)
        missing = [k for k in expected if k not in self._records]
        if missing:
            raise InputError(f"{self.path}: shard(s) {missing[:10]} not written yet")
        recs = [self._records[k] for k in expected]
        frames = []
        for rec in recs:
            part = self._frames.get(rec.shard)
            if part is None:  # written by an earlier run or another process
                part = pd.read_parquet(self.shard_dir / rec.files["index"]["file"])
            part = part.copy()
            part["shard"] = np.int32(rec.shard)
            part["row"] = np.arange(len(part), dtype=np.int32)
            frames.append(part)
        index = (
            pd.concat(frames, ignore_index=True)
            if frames
            else pd.DataFrame({c: [] for c in RESERVED_COLUMNS})
        )
        groups = [c for c in index.columns if c not in RESERVED_COLUMNS]
        index = index[[*RESERVED_COLUMNS, *groups]]
        index_sha, index_size = _write_parquet(self.path / "index.parquet", index, fsync=self.fsync)
        skipped = [_jsonable(dict(s)) for s in extra_skipped]
        skipped += [s for rec in recs for s in rec.skipped]
        skipped_frame = pd.DataFrame(skipped, columns=["sample_id", "path", "reason"])
        data = skipped_frame.to_csv(index=False).encode()
        skipped_sha, skipped_size = atomic_write(
            self.path / "skipped.csv", lambda f: f.write(data), fsync=self.fsync
        )
        head_info = None
        if head is not None:
            w = np.ascontiguousarray(head[0], dtype=np.float32)
            b = np.ascontiguousarray(head[1], dtype=np.float32)
            if w.ndim != 2 or b.shape != (w.shape[0],):
                raise InputError(f"head: W must be (C, D) and b (C,), got {w.shape} and {b.shape}")
            buf = io.BytesIO()
            np.savez(buf, W=w, b=b)
            data = buf.getvalue()
            sha, _ = atomic_write(self.path / "head.npz", lambda f: f.write(data), fsync=self.fsync)
            head_info = {"file": "head.npz", "checksum": sha, "shape": list(w.shape)}
        full = {
            **_jsonable(dict(meta or {})),
            "format": FORMAT_VERSION,
            "semshift_version": __version__,
            "arrays": {k: {"shape": list(v), "dtype": "float32"} for k, v in self.arrays.items()},
            "groups": groups,
            "n_rows": len(index),
            "n_skipped": len(skipped),
            "head": head_info,
            "index": {"file": "index.parquet", "checksum": index_sha, "size": index_size},
            "skipped": {"file": "skipped.csv", "checksum": skipped_sha, "size": skipped_size},
            "shards": [{"shard": r.shard, "rows": r.rows, "files": r.files} for r in recs],
        }
        _write_json(self.path / "meta.json", full, fsync=self.fsync)
        return open_store(self.path, _index=index)


def _jsonable(obj: Any) -> Any:
    """Convert NumPy scalars/arrays and paths inside ``obj`` into plain JSON values."""
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    return obj


def write_store(
    path: str | Path,
    *,
    index: pd.DataFrame,
    arrays: Mapping[str, np.ndarray],
    head: tuple[np.ndarray, np.ndarray] | None = None,
    meta: Mapping[str, Any] | None = None,
    shard_size: int = 65_536,
    fsync: bool = True,
) -> FeatureStore:
    """Write arrays that are already in memory (or memory-mapped) as a store.

    Parameters
    ----------
    path : str or Path
        New store directory.
    index : DataFrame (n rows)
        ``path`` and optionally ``sample_id`` (default ``0 .. n-1``), ``label`` (default -1) and
        group columns.
    arrays : mapping of str to array (n, ...)
        e.g. ``{"logits": (n, C), "features": (n, D)}``; stored as float32.
    head : (W, b), optional
        W (C, D), b (C,).
    meta : mapping, optional
        Descriptive fields for ``meta.json``.
    shard_size : int
        Rows per shard.
    """
    if shard_size < 1:
        raise InputError(f"shard_size must be >= 1, got {shard_size}")
    n = len(index)
    for key, arr in arrays.items():
        if np.shape(arr)[0] != n:
            raise InputError(f"array {key!r} has {np.shape(arr)[0]} rows but the index has {n}")
    frame = index.reset_index(drop=True).copy()
    if "sample_id" not in frame:
        frame["sample_id"] = np.arange(n, dtype=np.int64)
    if "label" not in frame:
        frame["label"] = -1
    if "path" not in frame:
        raise InputError("the index needs a 'path' column")
    writer = StoreWriter(
        path,
        arrays={k: tuple(np.shape(v)[1:]) for k, v in arrays.items()},
        run={"source": "write_store"},
        fsync=fsync,
    )
    n_shards = max(1, -(-n // shard_size))
    for k in range(n_shards):
        sl = slice(k * shard_size, min(n, (k + 1) * shard_size))
        writer.write_shard(k, {key: arr[sl] for key, arr in arrays.items()}, frame.iloc[sl])
    return writer.finalize(meta, head=head, n_shards=n_shards)


# --------------------------------------------------------------------------- reader
@dataclass(frozen=True)
class _Shard:
    root: Path  # the shards/ folder
    number: int
    rows: int
    files: Mapping[str, Mapping[str, Any]]


def _schema(meta: Mapping[str, Any]) -> dict[str, Any]:
    """What two stores must share to be concatenated."""
    classes = meta.get("classes") or {}
    head = meta.get("head") or {}
    return {
        "arrays": meta.get("arrays"),
        "model": meta.get("model"),
        "layer": meta.get("layer"),
        "weights": meta.get("weights"),
        "preprocessing": meta.get("preprocessing"),
        "classes": classes.get("ids") if isinstance(classes, Mapping) else classes,
        "head": head.get("checksum", head.get("sha256")),
    }


class FeatureStore:
    """An opened store (see the module docstring); use :func:`open_store` to get one.

    Attributes
    ----------
    path : Path or None
        Directory (``None`` for a concatenation of several stores).
    meta : dict
        The contents of ``meta.json``.
    index : DataFrame
        One row per sample: ``sample_id``, ``path``, ``label``, ``shard``, ``row`` and the group
        columns. Read on first use: labels and group selections read only their own columns
        (the ``path`` column of a large store is most of the index).
    skipped : DataFrame
        The manifest of skipped images: ``sample_id``, ``path``, ``reason``.
    """

    def __init__(
        self,
        path: Path | None,
        meta: dict[str, Any],
        index: pd.DataFrame | None,
        shards: list[_Shard],
        skipped: pd.DataFrame,
        head_file: Path | None,
        *,
        index_file: Path | None = None,
        columns: Sequence[str] = (),
    ) -> None:
        self.path = path
        self.meta = meta
        self.skipped = skipped
        self._index = index
        self._index_file = index_file
        self._columns = list(index.columns) if index is not None else list(columns)
        self._column_cache: dict[str, pd.Series] = {}
        self._labels: NDArray[np.int64] | None = None
        self._shards = shards
        self._head_file = head_file
        self._head: tuple[F32, F32] | None = None
        self._mmaps: dict[tuple[int, str], np.ndarray] = {}
        self._offsets = np.concatenate([[0], np.cumsum([s.rows for s in shards])]).astype(np.int64)

    # ---------------------------------------------------------------- index
    @property
    def index(self) -> pd.DataFrame:
        if self._index is None:
            self._index = self._read_index(None)
            self._column_cache.clear()
        return self._index

    def _column(self, name: str) -> pd.Series:
        """One index column, read alone from ``index.parquet`` while the index is not loaded."""
        if self._index is not None:
            return self._index[name]
        col = self._column_cache.get(name)
        if col is None:
            col = self._column_cache[name] = self._read_index([name])[name]
        return col

    def _read_index(self, columns: list[str] | None) -> pd.DataFrame:
        f = self._index_file
        assert f is not None, "a store without an index frame has an index file"
        try:
            frame = pd.read_parquet(f, columns=columns)
        except (OSError, ValueError) as err:
            raise InputError(f"{f}: unreadable ({err})") from None
        if len(frame) != len(self):
            raise InputError(
                f"{f}: {len(frame)} rows but the shards hold {len(self)}; the store is damaged "
                "(semshift store repair)"
            )
        return frame

    # ---------------------------------------------------------------- description
    def __len__(self) -> int:
        return int(self._offsets[-1])

    def __repr__(self) -> str:
        where = self.path if self.path is not None else "<concatenation>"
        shapes = ", ".join(f"{k} {tuple(v['shape'])}" for k, v in self.array_specs.items())
        return f"FeatureStore({where}: {len(self)} rows; {shapes}; groups {self.groups})"

    @property
    def n_shards(self) -> int:
        return len(self._shards)

    @property
    def array_specs(self) -> dict[str, dict[str, Any]]:
        """Array name -> ``{"shape": per-row shape, "dtype": "float32"}``."""
        return dict(self.meta["arrays"])

    @property
    def array_names(self) -> list[str]:
        return list(self.meta["arrays"])

    @property
    def groups(self) -> list[str]:
        """The free group columns of the index."""
        return [c for c in self._columns if c not in RESERVED_COLUMNS]

    @property
    def labels(self) -> NDArray[np.int64]:
        """Labels of all rows, (n,) int64 (-1 = unknown); read-only."""
        if self._labels is None:
            labels = self._column("label").to_numpy(np.int64, copy=True)
            labels.flags.writeable = False
            self._labels = labels
        return self._labels

    @property
    def head(self) -> tuple[F32, F32]:
        """The linear head ``(W, b)``: W (C, D), b (C,), float32.

        Raises
        ------
        InputError
            The store has no head (e.g. written without one).
        """
        if self._head is None:
            if self._head_file is None:
                raise InputError(f"{self._where()} has no head (head.npz)")
            with np.load(self._head_file, allow_pickle=False) as z:
                self._head = (z["W"].astype(np.float32), z["b"].astype(np.float32))
        return self._head

    @property
    def has_head(self) -> bool:
        return self._head_file is not None

    def _where(self) -> str:
        return f"store {self.path}" if self.path is not None else "the concatenated store"

    # ---------------------------------------------------------------- arrays
    def _array(self, shard: int, name: str, scattered: bool = False) -> np.ndarray:
        """Shard ``shard``'s array ``name``, memory-mapped read-only on first use.

        ``scattered=True`` gives a second map advised ``MADV_RANDOM``: gathering rows spread over
        a shard then reads only those pages, not the kernel's read-ahead around each of them
        (measured: every 100th row of a 2.6 GB shard in 0.06 s instead of 7 s).
        """
        key = (shard, name + "#scattered" if scattered else name)
        arr = self._mmaps.get(key)
        if arr is not None:
            return arr
        if scattered:
            arr = self._array(shard, name)
            if isinstance(arr, np.memmap):
                arr = np.load(arr.filename, mmap_mode="r", allow_pickle=False)  # type: ignore[arg-type]
                raw = getattr(arr, "_mmap", None)
                if raw is not None and hasattr(mmap, "MADV_RANDOM"):
                    raw.madvise(mmap.MADV_RANDOM)
            self._mmaps[key] = arr
            return arr
        sh = self._shards[shard]
        tail = tuple(self.meta["arrays"][name]["shape"])
        if sh.rows == 0:
            arr = np.zeros((0, *tail), np.float32)
        else:
            f = sh.root / sh.files[name]["file"]
            try:
                arr = np.load(f, mmap_mode="r", allow_pickle=False)
            except (OSError, ValueError) as err:
                raise InputError(f"{f}: cannot read shard array ({err})") from None
            if arr.shape != (sh.rows, *tail) or arr.dtype != np.float32:
                raise InputError(
                    f"{f}: shard array has shape {arr.shape} and dtype {arr.dtype}, meta.json "
                    f"says {(sh.rows, *tail)} float32; the store is damaged (semshift store repair)"
                )
        self._mmaps[key] = arr
        return arr

    def _prefetch(self, shard: int, names: Sequence[str]) -> Future[None] | None:
        """Read shard ``shard``'s ``names`` files into the page cache on a background thread.

        Returns the job's future (``None`` when there is nothing to read).

        Sequential block iteration calls this for the next shard while the current one is being
        consumed, so the read of one shard overlaps the work on the previous one (a single large
        ``.npy`` gets the same from the kernel's read-ahead, which restarts small at each new
        file). Best effort: where ``os.preadv`` is missing nothing is read ahead, and an I/O
        error is ignored here and surfaces, if real, when the shard is mapped.
        """
        if not hasattr(os, "preadv") or not 0 <= shard < len(self._shards):
            return None
        sh = self._shards[shard]
        files = [sh.root / sh.files[n]["file"] for n in names if n in sh.files and sh.rows]
        return _PREFETCH.submit(_read_ahead, files) if files else None

    def _check_names(self, names: Sequence[str]) -> None:
        for name in names:
            if name not in self.meta["arrays"]:
                close = difflib.get_close_matches(name, self.array_names, n=3)
                hint = f" (did you mean {', '.join(close)}?)" if close else ""
                raise InputError(
                    f"{self._where()} has no array {name!r}{hint}; it has "
                    f"{', '.join(self.array_names)}"
                )

    def gather(self, positions: NDArray[np.integer[Any]], name: str) -> np.ndarray:
        """Rows ``positions`` (increasing positions in :attr:`index`) of array ``name``.

        A run of consecutive rows inside one shard is returned as a read-only memory-mapped view
        (no copy); anything else is gathered into a new array of just those rows.

        Returns
        -------
        array (len(positions), ...) float32
        """
        self._check_names([name])
        pos = np.asarray(positions, dtype=np.int64)
        tail = tuple(self.meta["arrays"][name]["shape"])
        if pos.size == 0:
            return np.zeros((0, *tail), np.float32)
        shard_of = np.searchsorted(self._offsets, pos, side="right") - 1
        first, last = int(shard_of[0]), int(shard_of[-1])
        contiguous = pos[-1] - pos[0] + 1 == pos.size
        if first == last and contiguous:
            lo = int(pos[0] - self._offsets[first])
            return self._array(first, name)[lo : lo + pos.size]
        out = np.empty((pos.size, *tail), np.float32)
        bounds = np.searchsorted(shard_of, np.arange(first, last + 2))
        for j, s in enumerate(range(first, last + 1)):
            a, b = int(bounds[j]), int(bounds[j + 1])
            if a == b:
                continue
            local = pos[a:b] - self._offsets[s]
            span = int(local[-1] - local[0] + 1)
            if span == b - a:
                out[a:b] = self._array(s, name)[int(local[0]) : int(local[-1]) + 1]
            else:  # sparse selections: no read-ahead around each row
                out[a:b] = self._array(s, name, scattered=(b - a) < span // 4)[local]
        return out

    # ---------------------------------------------------------------- selection
    def all(self) -> Selection:
        """Every row, as a :class:`Selection`."""
        return Selection(self, np.arange(len(self), dtype=np.int64))

    def select(self, mask: Any = None, /, **groups: Any) -> Selection:
        """Rows whose group columns have the given values (all conditions must hold).

        Parameters
        ----------
        mask : boolean array (n,), optional
            An extra row mask over :attr:`index`.
        **groups
            Column name -> a value or a list/tuple/set of accepted values, e.g.
            ``select(split="ood", sem_level=[1, 2])``. ``label`` and ``path`` work too.

        Raises
        ------
        InputError
            A column does not exist.
        """
        keep = np.ones(len(self), dtype=bool)
        if mask is not None:
            m = np.asarray(mask)
            if m.dtype != bool or m.shape != (len(self),):
                raise InputError(
                    f"select(): the mask must be a boolean array of shape ({len(self)},), "
                    f"got {m.dtype} {m.shape}"
                )
            keep &= m
        for col, value in groups.items():
            if col not in self._columns:
                close = difflib.get_close_matches(col, self._columns, n=3)
                hint = f" (did you mean {', '.join(close)}?)" if close else ""
                raise InputError(
                    f"select(): {self._where()} has no column {col!r}{hint}; group columns: "
                    f"{', '.join(self.groups) or 'none'}"
                )
            values = list(value) if isinstance(value, list | tuple | set | frozenset) else [value]
            keep &= self._column(col).isin(values).to_numpy()
        return Selection(self, np.flatnonzero(keep))

    def arrays(self, *names: str) -> tuple[np.ndarray, ...]:
        """``self.all().arrays(*names)``."""
        return self.all().arrays(*names)

    def blocks(self, *names: str, rows: int = DEFAULT_BLOCK_ROWS) -> Iterator[dict[str, Any]]:
        """``self.all().blocks(*names, rows=rows)``."""
        return self.all().blocks(*names, rows=rows)

    def verify(self) -> None:
        """Recompute every shard file's checksum and compare with ``meta.json``.

        Raises
        ------
        InputError
            A file is missing or its checksum differs (naming the file).
        """
        for sh in self._shards:
            for info in sh.files.values():
                f = sh.root / info["file"]
                hint = f"; run `semshift store repair {self.path}`" if self.path else ""
                if not f.is_file():
                    raise InputError(f"{f}: shard file missing{hint}")
                if not checksum_matches(f, info):
                    raise InputError(
                        f"{f}: checksum differs from meta.json; the store is damaged{hint}"
                    )

    def checksums(self) -> dict[str, str]:
        """Shard file name -> checksum recorded in ``meta.json`` (``"xxh3_128:<hex>"``)."""
        return {
            info["file"]: recorded_checksum(info)
            for sh in self._shards
            for info in sh.files.values()
        }


class Selection:
    """A subset of a store's rows (in store order); arrays are read only when asked for.

    Attributes
    ----------
    store : FeatureStore
    positions : array (n,) int64
        Increasing row positions in ``store.index``.
    """

    def __init__(self, store: FeatureStore, positions: NDArray[np.int64]) -> None:
        self.store = store
        self.positions = positions

    def __len__(self) -> int:
        return int(self.positions.size)

    def __repr__(self) -> str:
        return f"Selection({len(self)} of {len(self.store)} rows)"

    @property
    def index(self) -> pd.DataFrame:
        """The index rows of the selection."""
        return self.store.index.iloc[self.positions]

    @property
    def labels(self) -> NDArray[np.int64]:
        """(n,) int64 labels (-1 = unknown)."""
        return self.store.labels[self.positions]

    def select(self, mask: Any = None, /, **groups: Any) -> Selection:
        """Narrow the selection further (same arguments as :meth:`FeatureStore.select`)."""
        if mask is not None:
            m = np.asarray(mask)
            if m.dtype != bool or m.shape != (len(self),):
                raise InputError(
                    f"select(): the mask must be a boolean array of shape ({len(self)},), "
                    f"got {m.dtype} {m.shape}"
                )
            full = np.zeros(len(self.store), bool)
            full[self.positions[m]] = True
        else:
            full = None
        inner = self.store.select(full, **groups)
        return Selection(self.store, np.intersect1d(self.positions, inner.positions))

    def arrays(self, *names: str) -> tuple[np.ndarray, ...]:
        """Plain arrays of the selected rows, one per name, in the order given.

        Parameters
        ----------
        *names : str
            Array names, e.g. ``"logits"`` (n, C) and ``"features"`` (n, D).

        Returns
        -------
        tuple of array (n, ...) float32
            NumPy arrays any detector or metric accepts. A selection that is one contiguous run of
            rows within a shard comes back as a read-only memory map (no copy); otherwise only the
            selected rows are read into memory.
        """
        if not names:
            raise InputError("arrays(): name at least one array, e.g. arrays('logits')")
        return tuple(self.store.gather(self.positions, name) for name in names)

    def inputs(self, *names: str) -> dict[str, Any]:
        """Keyword arguments for ``Detector.fit`` / ``Detector.score``.

        Parameters
        ----------
        *names : str
            Any of ``"logits"``, ``"features"``, ``"head"`` (the pair (W, b)) and ``"labels"``;
            default: logits, features, plus head when the store has one.

        Examples
        --------
        ``detector.fit(**sel.inputs("features", "head", "labels"))``
        """
        names = names or (
            "logits",
            "features",
            *(("head",) if self.store.has_head else ()),
        )
        out: dict[str, Any] = {}
        for name in names:
            if name == "head":
                out["head"] = self.store.head
            elif name == "labels":
                out["labels"] = self.labels
            else:
                out[name] = self.store.gather(self.positions, name)
        return out

    def blocks(self, *names: str, rows: int = DEFAULT_BLOCK_ROWS) -> Iterator[dict[str, Any]]:
        """Iterate over the selection in blocks of at most ``rows`` rows.

        Yields
        ------
        dict
            ``"positions"`` (m,) row positions in the store index, ``"labels"`` (m,) and one
            array (m, ...) per requested name. Only one block is in memory at a time.
        """
        if rows < 1:
            raise InputError(f"blocks(): rows must be >= 1, got {rows}")
        names = names or tuple(self.store.array_names)
        self.store._check_names(names)
        labels = self.labels
        # Shards the selection reads densely (a quarter of their rows or more) are read ahead a
        # block ahead, on a background thread: while one block is consumed, the next block's
        # shards are read. A block waits for its own shards' read-ahead, so the disk sees one
        # sequential stream, not that stream and the block's page faults competing. Sparse
        # selections read single pages and gain nothing from it.
        offsets = self.store._offsets
        # positions are increasing: the selection's rows in shard s are [cuts[s], cuts[s + 1])
        cuts = np.searchsorted(self.positions, offsets)
        counts = np.diff(cuts)
        spans = np.diff(offsets)
        dense = {int(s) for s in np.flatnonzero((counts > 0) & (4 * counts >= spans))}
        asked: dict[int, Future[None] | None] = {}

        def shards(a: int, b: int) -> range:  # the shards of rows [a, b) of the selection
            if a >= b:
                return range(0)
            first = int(np.searchsorted(cuts, a, side="right")) - 1
            return range(first, int(np.searchsorted(cuts, b - 1, side="right")))

        def prefetch(a: int, b: int) -> None:
            for s in shards(a, b):
                if s in dense and s not in asked:
                    asked[s] = self.store._prefetch(s, names)

        n = len(self)
        for start in range(0, n, rows):
            stop = min(start + rows, n)
            pos = self.positions[start:stop]
            if dense:
                prefetch(start, stop)
                prefetch(stop, min(stop + rows, n))
                for s in shards(start, stop):
                    job = asked.get(s)
                    if job is not None:
                        job.result()  # never raises: the read-ahead is best effort
            block: dict[str, Any] = {"positions": pos, "labels": labels[start : start + rows]}
            for name in names:
                block[name] = self.store.gather(pos, name)
            yield block


#: the read-ahead's read size, and its scratch buffer (one per background thread)
_READ_AHEAD_CHUNK = 8 << 20


def _read_ahead(files: Sequence[Path]) -> None:
    """Read ``files`` into the page cache: one sequential stream of 8 MiB reads.

    Measured on a virtual disk, this beat ``posix_fadvise(WILLNEED)``, which queues the whole
    file at once and competes with the reader's own page faults (median cold pass over a 2 GB
    store 2.2 s against 2.8 s, plain ``np.load(mmap_mode="r")`` 1.9-2.3 s). Chunks already in
    the page cache (probed with ``RWF_NOWAIT``) are not copied again. Best effort: errors are
    ignored here and surface, if real, when the shard is mapped.
    """
    buf = bytearray(_READ_AHEAD_CHUNK)
    probe = bytearray(4096)
    nowait = getattr(os, "RWF_NOWAIT", None)
    for f in files:
        try:
            fd = os.open(f, os.O_RDONLY)
        except OSError:
            continue
        try:
            off = 0
            while True:
                if nowait is not None:
                    try:
                        cached = os.preadv(fd, [probe], off, nowait)
                    except OSError:  # EAGAIN: not cached (or the flag is unsupported here)
                        cached = -1
                    if cached == 0:
                        break
                    if cached > 0:
                        off += _READ_AHEAD_CHUNK
                        continue
                got = os.preadv(fd, [buf], off)
                if got <= 0:
                    break
                off += got
        except OSError:
            pass
        finally:
            os.close(fd)


#: one background thread reads ahead for every store (one sequential stream for the disk)
_PREFETCH = ThreadPoolExecutor(max_workers=1, thread_name_prefix="semshift-prefetch")


# --------------------------------------------------------------------------- open / concat
def model_identity(meta: Mapping[str, Any]) -> dict[str, Any]:
    """What identifies the classifier a store was extracted with, from its ``meta.json``:
    the model's name, its weights (their checksum, else their name), the head's checksum and
    the feature layer (None where the store does not record one)."""
    head = meta.get("head") or {}
    return {
        "model": meta.get("model"),
        "weights": meta.get("weights_sha256") or meta.get("weights"),
        "head": head.get("checksum") if isinstance(head, Mapping) else None,
        "layer": meta.get("layer"),
    }


def read_meta(path: str | Path) -> dict[str, Any]:
    """The ``meta.json`` of a finished store, or a one-line error saying what ``path`` is.

    Raises
    ------
    InputError
        An unfinished extraction (``run.json`` without ``meta.json``: run it again to finish
        it), not a store at all, or an unreadable ``meta.json``.
    """
    root = Path(path)
    meta_file = root / "meta.json"
    if not meta_file.is_file():
        if (root / "run.json").is_file():
            raise InputError(
                f"{root} is an unfinished extraction (no meta.json); run the extraction again "
                "to finish it"
            )
        if not root.exists():
            raise InputError(f"feature store {root} does not exist")
        if root.is_file():
            raise InputError(f"{root} is a file; a feature store is a folder (with meta.json)")
        raise InputError(f"{root} is not a feature store (no meta.json)")
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(
            f"{meta_file}: unreadable ({err}); `semshift store repair {root}` rebuilds it from "
            "the shards"
        ) from None
    if not isinstance(meta, dict):
        raise InputError(
            f"{meta_file}: not a store's meta.json (expected a JSON object); `semshift store "
            f"repair {root}` rebuilds it from the shards"
        )
    return meta


def open_store(path: str | Path, *, _index: pd.DataFrame | None = None) -> FeatureStore:
    """Open a finished store lazily (reads ``meta.json``; the index and arrays on demand).

    ``_index`` is internal: the writer hands over the index it has just written, so finishing a
    store does not read it back.

    Raises
    ------
    InputError
        ``path`` is not a store, is unfinished, or its files disagree with ``meta.json``.
    """
    root = Path(path)
    meta_file = root / "meta.json"
    meta = read_meta(root)
    if meta.get("format") != FORMAT_VERSION:
        raise InputError(
            f"{meta_file}: store format {meta.get('format')!r}, this semshift reads format "
            f"{FORMAT_VERSION}"
        )
    index_file = root / "index.parquet"
    if _index is None:  # the index itself is read on first use; its footer now
        import pyarrow.parquet as pq

        try:
            footer = pq.read_metadata(index_file)
            n_index, columns = footer.num_rows, footer.schema.to_arrow_schema().names
        except (OSError, ValueError) as err:
            raise InputError(f"{index_file}: unreadable ({err})") from None
    else:
        n_index, columns = len(_index), list(_index.columns)
    shards = [
        _Shard(root / "shards", int(s["shard"]), int(s["rows"]), s["files"]) for s in meta["shards"]
    ]
    if sum(s.rows for s in shards) != n_index:
        raise InputError(
            f"{root}: index.parquet has {n_index} rows but the shards hold "
            f"{sum(s.rows for s in shards)}; the store is damaged (semshift store repair)"
        )
    skipped = read_skipped(root / "skipped.csv")
    head_file = root / "head.npz" if meta.get("head") else None
    return FeatureStore(
        root, meta, _index, shards, skipped, head_file, index_file=index_file, columns=columns
    )


#: Columns of a store's ``skipped.csv``, in order.
SKIPPED_COLUMNS = ("sample_id", "path", "reason")


def read_skipped(path: str | Path) -> pd.DataFrame:
    """A store's ``skipped.csv``: ``sample_id`` (int64), ``path``, ``reason`` (str).

    A missing or zero-byte file (stores of early versions) is an empty table.

    Raises
    ------
    InputError
        One line naming the file: not UTF-8 text, not a CSV, other columns than
        :data:`SKIPPED_COLUMNS`, or a ``sample_id`` that is not an integer (its line is named).
    """
    f = Path(path)
    frame = _skipped_frame(f)
    if isinstance(frame, str):
        raise InputError(
            f"{f}: {frame}; the store is damaged (semshift store verify; semshift store repair)"
        )
    return frame


def _skipped_frame(f: Path) -> pd.DataFrame | str:
    """The table of :func:`read_skipped`, or what is wrong with it (without the file name)."""
    from semshift.textio import read_csv

    if not f.is_file() or f.stat().st_size == 0:
        return pd.DataFrame({"sample_id": np.zeros(0, np.int64), "path": [], "reason": []})
    what = f"skipped-images table {f}"
    try:
        frame = read_csv(f, "skipped-images table", dtype=str, keep_default_na=False)
    except InputError as err:  # its advice (save as UTF-8, ...) is not for a store's file
        text = str(err).split("; ")[0]
        return (
            text[len(what) :].lstrip(",: ").removeprefix("is ") if text.startswith(what) else text
        )
    if tuple(frame.columns) != SKIPPED_COLUMNS:
        got = ", ".join(map(str, frame.columns))
        return f"columns {got}, expected {', '.join(SKIPPED_COLUMNS)}"
    ids = frame["sample_id"].astype(str).str.strip()
    bad = ~ids.str.fullmatch(r"[-+]?[0-9]{1,18}").to_numpy(bool)
    if bad.any():
        r = int(np.argmax(bad))
        return f"line {r + 2}: sample_id {ids.iloc[r]!r} is not an integer"
    return frame.assign(sample_id=ids.to_numpy().astype(np.int64))


def concat_stores(stores: Iterable[FeatureStore | str | Path]) -> FeatureStore:
    """Concatenate stores of the same schema into one (a view: nothing is copied).

    The schema is: array names and shapes, model, layer, weights, preprocessing, class list and
    head. Group columns may differ: a column missing from one store is empty (NA) for its rows.
    A ``source`` column (the store directory) is added unless present.

    Raises
    ------
    InputError
        Fewer than one store, or schemas differ (the message names each differing field).
    """
    opened = [s if isinstance(s, FeatureStore) else open_store(s) for s in stores]
    if not opened:
        raise InputError("concat_stores() needs at least one store")
    ref = _schema(opened[0].meta)
    for k, st in enumerate(opened[1:], 1):
        other = _schema(st.meta)
        diff = [key for key in ref if ref[key] != other[key]]
        if diff:
            parts = "; ".join(f"{key}: {_short(ref[key])} vs {_short(other[key])}" for key in diff)
            raise InputError(
                f"cannot concatenate {opened[0]._where()} and {st._where()} (store {k}): "
                f"different schema ({parts})"
            )
    frames: list[pd.DataFrame] = []
    shards: list[_Shard] = []
    skipped: list[pd.DataFrame] = []
    for st in opened:
        frame = st.index.copy()
        frame["shard"] = (frame["shard"].astype(np.int64) + len(shards)).astype(np.int32)
        if "source" not in frame.columns:
            frame["source"] = str(st.path) if st.path is not None else "<concatenation>"
        frames.append(frame)
        shards.extend(st._shards)
        skipped.append(st.skipped)
    index = pd.concat(frames, ignore_index=True)
    groups = [c for c in index.columns if c not in RESERVED_COLUMNS]
    index = index[[*RESERVED_COLUMNS, *groups]]
    meta = dict(opened[0].meta)
    meta.update(
        n_rows=len(index),
        groups=groups,
        sources=[str(s.path) for s in opened],
        shards=[{"shard": i, "rows": s.rows, "files": dict(s.files)} for i, s in enumerate(shards)],
    )
    return FeatureStore(
        None,
        meta,
        index,
        shards,
        pd.concat(skipped, ignore_index=True),
        opened[0]._head_file,
    )


def _short(value: Any, n: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 3] + "..."


@dataclass(frozen=True)
class Damage:
    """One damaged part of a finished store (:func:`verify_store`).

    Attributes
    ----------
    shard : int or None
        The shard it belongs to; None for a file of the whole store (index, head).
    file : str
        The file, relative to the store's folder.
    problem : str
        What is wrong (missing, size or checksum differs from ``meta.json``, ...).
    """

    shard: int | None
    file: str
    problem: str

    def __str__(self) -> str:
        where = f"shard {self.shard} " if self.shard is not None else ""
        return f"{where}({self.file}: {self.problem})"


def _file_damage(root: Path, rel: str, info: Mapping[str, Any]) -> str | None:
    f = root / rel
    if not f.is_file():
        return "missing"
    size = info.get("size")
    if size is not None and f.stat().st_size != int(size):
        return f"{f.stat().st_size} bytes, meta.json records {size}"
    if not checksum_matches(f, info):
        return "checksum differs from meta.json"
    return None


#: Threads :func:`verify_store` hashes shard files on (at most; fewer CPUs, fewer threads).
_HASH_THREADS = 4


def verify_store(path: str | Path) -> list[Damage]:
    """Every damaged part of a finished store, by recomputing what ``meta.json`` records.

    Checked: each shard's files (arrays and per-shard index: presence, size, checksum), each
    shard's commit record (``shards/NNNNN.json``: present and agreeing with ``meta.json``), the
    head, the store's ``index.parquet`` (its checksum; stores written before it was
    recorded are compared with the shards' own indices instead) and ``skipped.csv`` (its
    checksum where ``meta.json`` records it; then, older stores too, its contents: a UTF-8 CSV
    of ``sample_id, path, reason`` with integer sample ids and ``n_skipped`` rows).

    Returns
    -------
    list of Damage
        Empty when the store is intact.

    Raises
    ------
    InputError
        ``path`` is not a finished store (unfinished: run the extraction again).
    """
    root = Path(path)
    meta = read_meta(root)
    out: list[Damage] = []
    intact_indices = True
    shards = meta.get("shards", [])
    files = [(f"shards/{info['file']}", info) for sh in shards for info in sh["files"].values()]
    # the shard files are hashed on a few threads (XXH3 releases the GIL; on 2 busy cores a
    # 1.6 GB store hashed in 0.17-0.25 s instead of 0.31 s on one)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    workers = max(1, min(_HASH_THREADS, len(files), cpus or 1))
    with ThreadPoolExecutor(workers, thread_name_prefix="semshift-verify") as pool:
        problems = iter(list(pool.map(lambda f: _file_damage(root, *f), files)))
    for sh in shards:
        k = int(sh["shard"])
        for kind, info in sh["files"].items():
            problem = next(problems)
            if problem is not None:
                out.append(Damage(k, f"shards/{info['file']}", problem))
                intact_indices &= kind != "index"
        rec_file = root / "shards" / f"{_shard_name(k)}.json"
        rel = f"shards/{rec_file.name}"
        try:
            rec = json.loads(rec_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            out.append(Damage(k, rel, "commit record missing"))
            continue
        except (OSError, ValueError) as err:
            out.append(Damage(k, rel, f"commit record unreadable ({err})"))
            continue
        if not isinstance(rec, dict) or rec.get("files") != sh["files"]:
            out.append(Damage(k, rel, "commit record disagrees with meta.json"))
    head = meta.get("head") or {}
    if head.get("file") and (head.get("checksum") or head.get("sha256")):
        problem = _file_damage(root, head["file"], head)
        if problem is not None:
            out.append(Damage(None, head["file"], problem))
    index = meta.get("index")
    if isinstance(index, Mapping) and index.get("checksum"):
        problem = _file_damage(root, "index.parquet", index)
        if problem is not None:
            out.append(Damage(None, "index.parquet", problem))
    elif intact_indices:  # older stores: the index must equal the shards' own indices
        problem = _index_differs(root, meta)
        if problem is not None:
            out.append(Damage(None, "index.parquet", problem))
    problem = _skipped_damage(root, meta)
    if problem is not None:
        out.append(Damage(None, "skipped.csv", problem))
    return out


def _skipped_damage(root: Path, meta: Mapping[str, Any]) -> str | None:
    """What is wrong with ``skipped.csv``: its recorded checksum (where ``meta.json`` has
    one), then its contents (every store): a UTF-8 CSV of :data:`SKIPPED_COLUMNS` with integer
    sample ids, as many rows as ``meta.json``'s ``n_skipped``."""
    info = meta.get("skipped")
    if isinstance(info, Mapping) and info.get("checksum"):
        problem = _file_damage(root, "skipped.csv", info)
        if problem is not None:
            return problem
    frame = _skipped_frame(root / "skipped.csv")
    if isinstance(frame, str):
        return frame
    n = meta.get("n_skipped")
    if isinstance(n, int) and len(frame) != n:
        return f"{len(frame)} rows, meta.json records {n}"
    return None


def model_mismatch(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The fields of :func:`model_identity` in which two stores' ``meta.json`` disagree.

    Only the fields both record are compared: a store written without a head (or a model name)
    agrees on it with any store.

    Returns
    -------
    dict of str to (value in ``a``, value in ``b``)
        Empty when nothing recorded disagrees.
    """
    ia, ib = model_identity(a), model_identity(b)
    return {k: (ia[k], ib[k]) for k in ia if None not in (ia[k], ib[k]) and ia[k] != ib[k]}


def _describe_mismatch(diff: Mapping[str, tuple[Any, Any]]) -> str:
    def short(v: Any) -> str:  # checksums by their first 12 hex digits, names quoted
        digest = str(v).rsplit(":", 1)[-1]
        return digest[:12] if isinstance(v, str) and len(digest) > 24 else repr(v)

    return ", ".join(f"{k} {short(b)} vs {short(a)}" for k, (a, b) in diff.items())


def open_verified(
    stores: Mapping[str, str | Path],
    *,
    same_model: bool | Iterable[tuple[str, str]] = True,
) -> dict[str, FeatureStore]:
    """Open the stores a command reads: each verified in full, and of one model where asked.

    The one way a command opens stores (``semshift evaluate`` and ``run`` through
    :class:`semshift.run.verify.VerifiedStores`, ``ensemble``, ``splits ambiguity``, ``zsl
    run``). Every file ``meta.json`` records is hashed again on every call
    (:func:`verify_store`: shard arrays and indices, commit records, head, ``index.parquet``,
    ``skipped.csv``); nothing is remembered between calls, so a file changed in place with its
    size and modification time kept is refused too. The cost is one read of the store's files
    (XXH3 on up to four threads): a 1.60 GB store (131,072 rows x 1,000 logits + 2,048
    features, 32 files) verifies in 0.26-0.28 s from the page cache and 0.5-0.9 s with the
    page cache dropped, against 0.18-0.20 s and 0.9-1.3 s to read the same files without
    hashing (``python benchmarks/bench_verify.py``, 2 shared CPU cores of a virtual machine).
    See docs/methods.md#store-verification.

    Parameters
    ----------
    stores : mapping of str to path
        What each store is for, as the messages name it (``"--id-store"``, ``"--member 1"``,
        ``"data.id_test"``) -> its folder. A folder given under several names is verified once.
    same_model : bool or iterable of (str, str)
        True (default): every store comes from the classifier of the first (the recorded
        fields of :func:`model_identity` agree, see :func:`model_mismatch`); False: no check
        (an ensemble's members are different networks); pairs of names: the two stores of
        each pair come from one classifier (an ensemble member and its training store).

    Returns
    -------
    dict of str to FeatureStore
        In the order of ``stores``.

    Raises
    ------
    InputError
        One line: the name, the store and what is wrong: not a finished store, damaged (the
        damaged files, and the repair command), or from another model than the store it must
        agree with (both named, with the fields that differ).
    """
    out: dict[str, FeatureStore] = {}
    opened: dict[Path, FeatureStore] = {}
    for name, path in stores.items():
        key = Path(path).resolve()
        if key not in opened:
            try:
                damages = verify_store(path)
                if not damages:
                    opened[key] = open_store(path)
            except InputError as err:
                raise InputError(f"{name}: {err}") from None
            if damages:
                listed = ", ".join(str(d) for d in damages[:4])
                more = f" and {len(damages) - 4} more" if len(damages) > 4 else ""
                raise InputError(
                    f"{name}: feature store {path} is damaged: {listed}{more}; run `semshift "
                    f"store repair {path}`, then the extraction again (it recomputes only those "
                    "shards)"
                )
        out[name] = opened[key]
    names = list(out)
    if same_model is True:
        pairs = [(names[0], n) for n in names[1:]]
    else:
        pairs = [] if same_model is False else list(same_model)
    for a, b in pairs:
        diff = model_mismatch(out[a].meta, out[b].meta)
        if diff:
            raise InputError(
                f"{b}: store {out[b].path} comes from another model than {a} (store "
                f"{out[a].path}): {_describe_mismatch(diff)}; these stores must come from one "
                "classifier"
            )
    return out


def _index_differs(root: Path, meta: Mapping[str, Any]) -> str | None:
    try:
        index = pd.read_parquet(root / "index.parquet")
    except Exception as err:  # any failure of the parquet reader means damage
        return f"unreadable ({type(err).__name__})"
    frames = []
    for sh in meta.get("shards", []):
        part = pd.read_parquet(root / "shards" / sh["files"]["index"]["file"])
        part["shard"] = np.int32(sh["shard"])
        part["row"] = np.arange(len(part), dtype=np.int32)
        frames.append(part)
    if not frames:
        return None
    want = pd.concat(frames, ignore_index=True)
    want = want[[c for c in index.columns if c in want.columns]]
    if len(want) != len(index) or not want.equals(index[want.columns]):
        return "differs from the shards' own indices"
    return None


def _repair_meta(root: Path, problem: str) -> RepairResult:
    """:func:`repair_store` for a store whose ``meta.json`` cannot be read (``problem``)."""
    from semshift.textio import read_json

    run_file = root / "run.json"
    try:
        run = read_json(run_file, "extraction record", hint="")
    except InputError as err:
        raise InputError(
            f"{problem}; it cannot be rebuilt: {err} (run.json records the settings the shards "
            f"were extracted with). Nothing in {root} can be recovered: extract the store "
            "again into a new folder (or delete this one first)"
        ) from None
    if not isinstance(run, dict):
        raise InputError(
            f"{problem}; it cannot be rebuilt: {run_file} is not an extraction record (a JSON "
            f"object). Extract the store again into a new folder (or delete this one first)"
        )
    damages = [Damage(None, "meta.json", problem.removeprefix(f"{root / 'meta.json'}: "))]
    kept, removed = 0, []
    for rec_file in sorted((root / "shards").glob("[0-9]*.json")):
        try:
            rec = _ShardRecord.from_json(json.loads(rec_file.read_text(encoding="utf-8")))
            intact = rec.shard == int(rec_file.stem) and all(
                (root / "shards" / info["file"]).is_file()
                and checksum_matches(root / "shards" / info["file"], info)
                for info in rec.files.values()
            )
        except (OSError, ValueError, KeyError, TypeError):
            rec, intact = None, False
        if intact:
            kept += 1
            continue
        k = int(rec_file.stem) if rec_file.stem.isdigit() else -1
        removed.append(k)
        damages.append(Damage(k, f"shards/{rec_file.name}", "files differ from this record"))
        for info in rec.files.values() if rec is not None else ():
            (root / "shards" / str(info.get("file", ""))).unlink(missing_ok=True)
        rec_file.unlink(missing_ok=True)
    (root / "meta.json").unlink()  # first of the store-wide files: unfinished from here on
    for name in ("index.parquet", "head.npz", "skipped.csv"):
        (root / name).unlink(missing_ok=True)
    return RepairResult(sorted(removed), kept, damages)


@dataclass(frozen=True)
class RepairResult:
    """What :func:`repair_store` removed.

    Attributes
    ----------
    removed_shards : list of int
        Shards whose files and commit records were removed (recomputed by the next extraction).
    kept_shards : int
        Intact shards the next extraction keeps.
    damages : list of Damage
        What :func:`verify_store` found.
    """

    removed_shards: list[int]
    kept_shards: int
    damages: list[Damage]


def repair_store(path: str | Path) -> RepairResult:
    """Make a damaged store resumable so that the next extraction recomputes only the damage.

    The damaged shards' files and commit records are removed, and so are the store-wide files
    (``meta.json``, ``index.parquet``, ``head.npz``, ``skipped.csv``) that the extraction
    writes again when it finishes; the extraction's record (``run.json``) and the intact
    shards stay. Running the same extraction again (the same ``semshift extract`` command, or
    the ``semshift run`` whose cache holds the store) then recomputes only the removed shards.
    An intact store is left as it is.

    A ``meta.json`` that cannot be read is rebuilt the same way: it and the other store-wide
    files are removed, each shard is checked against its own commit record
    (``shards/NNNNN.json``) and the damaged ones removed, and the next extraction writes
    ``meta.json`` again from ``run.json`` and the kept shards.

    Raises
    ------
    InputError
        Not a finished store, or a store without a readable extraction record (``run.json``),
        which could not be resumed (the message says what cannot be recovered).
    """
    root = Path(path)
    try:
        damages = verify_store(root)
        meta = read_meta(root)
    except InputError as err:
        if not (root / "meta.json").is_file():
            raise  # not a finished store (unfinished, or no store at all)
        # meta.json unreadable: rebuilt by the extraction (the message's repair hint dropped)
        return _repair_meta(root, str(err).split("; `semshift store repair")[0])
    if not damages:
        return RepairResult([], len(meta.get("shards", [])), [])
    if not (root / "run.json").is_file():
        raise InputError(
            f"{root}: no run.json (the extraction's record), so no extraction can resume it; "
            "extract the store again into a new folder"
        )
    bad = sorted({d.shard for d in damages if d.shard is not None})
    by_shard = {int(sh["shard"]): sh for sh in meta.get("shards", [])}
    (root / "meta.json").unlink()  # first: the store is unfinished from here on
    for k in bad:
        for info in by_shard[k]["files"].values():
            (root / "shards" / info["file"]).unlink(missing_ok=True)
        (root / "shards" / f"{_shard_name(k)}.json").unlink(missing_ok=True)
    for name in ("index.parquet", "head.npz", "skipped.csv"):
        (root / name).unlink(missing_ok=True)
    return RepairResult(bad, len(by_shard) - len(bad), damages)
