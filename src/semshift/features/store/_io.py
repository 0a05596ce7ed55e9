"""The store's files: format constants, atomic writes (file, then fsync, then rename) that hash
what they write, and the checksums (XXH3-128; SHA-256 for stores written before it)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import xxhash
from numpy.typing import NDArray

from semshift.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

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
