"""Writing a store: :class:`StoreWriter` (shards appended atomically, each recorded after it is
flushed, so an interrupted extraction resumes) and :func:`write_store` for arrays in memory."""

from __future__ import annotations

import contextlib
import io
import json
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from semshift import __version__
from semshift.errors import InputError

from ._io import (
    FORMAT_VERSION,
    RESERVED_COLUMNS,
    _write_json,
    _write_npy,
    _write_parquet,
    atomic_write,
    checksum_matches,
)
from ._meta import _shard_name
from .reader import open_store

if TYPE_CHECKING:
    from .reader import FeatureStore


# --------------------------------------------------------------------------- writer
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
