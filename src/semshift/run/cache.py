"""Content-hash cache of the runner's stage outputs, under ``<output>/.cache/``.

Layout::

    .cache/
      files.json                       file -> checksum, memoised by (size, mtime) so a weights
                                       file or predictions CSV is hashed once, not per run
      split/<key>/split.json           built split manifests
      extract/<key>/                   feature stores extracted by the runner
      sets/<key>.npz                   labels, predictions and level columns of one set
      score/<key>/<set key>.npy        one fitted detector's scores of one set
      score/<key>/error.json           why that detector's fit failed, when the inputs caused it
      score/<key>/<set key>.error.json why scoring that set failed, likewise
      evaluate/<key>/results.parquet   the tidy table of one evaluation

A key is the SHA-256 (24 hex digits) of a canonical JSON description of everything the output
depends on: settings, and the content hashes of the input stores (their ``meta.json`` shard
checksums, never a re-hash of the arrays). An entry counts only once complete: arrays and
tables are written atomically (temporary name, rename), so a killed run never leaves a partial
entry that a later run would trust.

>>> stable_hash({"b": 1, "a": [1, 2]}) == stable_hash({"a": [1, 2], "b": 1})
True
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from semshift.features.store import atomic_write, file_checksum, read_meta, recorded_checksum

__all__ = ["KEY_LENGTH", "StageCache", "stable_hash", "store_fingerprint"]

#: Hex digits of a cache key (96 bits).
KEY_LENGTH = 24


def _canonical(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, list | tuple):
        return [_canonical(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return {"__array__": hashlib.sha256(np.ascontiguousarray(obj).tobytes()).hexdigest(),
                "dtype": str(obj.dtype), "shape": list(obj.shape)}  # fmt: skip
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    if obj is None or isinstance(obj, str | int | float | bool):
        return obj
    return repr(obj)


def stable_hash(obj: Any) -> str:
    """SHA-256 of a canonical JSON form of ``obj`` (key order and tuple/list do not matter).

    Returns
    -------
    str
        The first :data:`KEY_LENGTH` hex digits.
    """
    text = json.dumps(_canonical(obj), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_LENGTH]


def store_fingerprint(path: str | Path) -> str:
    """Content hash of a feature store from its ``meta.json`` alone (nothing else is read).

    It covers every shard file's recorded SHA-256 (arrays and per-shard index, so labels and
    group columns too), the head's checksum, the array schema and the class list: the same value
    as hashing :meth:`semshift.features.FeatureStore.checksums` plus the head.

    Raises
    ------
    InputError
        ``path`` is not a finished store.
    """
    meta = read_meta(path)
    checksums = {
        info["file"]: recorded_checksum(info)
        for sh in meta.get("shards", [])
        for info in sh["files"].values()
    }
    classes = meta.get("classes") or {}
    return stable_hash(
        {
            "checksums": checksums,
            "head": (meta.get("head") or {}).get(
                "checksum", (meta.get("head") or {}).get("sha256")
            ),
            "arrays": meta.get("arrays"),
            "classes": classes.get("ids") if isinstance(classes, Mapping) else classes,
        }
    )


class StageCache:
    """The ``.cache`` folder of one output directory.

    Parameters
    ----------
    root : Path
        ``<output>/.cache`` (created on first write).
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._files: dict[str, Any] | None = None

    def dir(self, stage: str, key: str) -> Path:
        """The folder of one entry (not created)."""
        return self.root / stage / key

    # ---------------------------------------------------------------- files
    def file_checksum(self, path: str | Path) -> str:
        """Checksum of a file (XXH3-128, as stores record), memoised by (path, size, mtime)."""
        p = Path(path).resolve()
        st = p.stat()
        stamp = [st.st_size, st.st_mtime_ns]
        if self._files is None:
            memo = self.root / "files.json"
            try:
                self._files = json.loads(memo.read_text()) if memo.is_file() else {}
            except (OSError, json.JSONDecodeError):
                self._files = {}
        entry = self._files.get(str(p))
        if entry is not None and entry.get("stamp") == stamp:
            return str(entry["checksum"])
        sha = file_checksum(p)
        self._files[str(p)] = {"stamp": stamp, "checksum": sha}
        self.root.mkdir(parents=True, exist_ok=True)
        self.write_json(self.root / "files.json", self._files)
        return sha

    # ---------------------------------------------------------------- atomic I/O
    @staticmethod
    def write_json(path: Path, obj: Any) -> None:
        data = (json.dumps(obj, indent=1, sort_keys=True, default=str) + "\n").encode()
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda f: f.write(data), fsync=False)

    @staticmethod
    def write_text(path: Path, text: str) -> None:
        data = text.encode("utf-8")
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda f: f.write(data), fsync=False)

    @staticmethod
    def read_json(path: Path) -> Any:
        try:
            return json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            return None

    @staticmethod
    def write_array(path: Path, arr: np.ndarray) -> None:
        buf = io.BytesIO()
        np.save(buf, np.ascontiguousarray(arr), allow_pickle=False)
        data = buf.getvalue()
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda f: f.write(data), fsync=False)

    @staticmethod
    def read_array(path: Path) -> np.ndarray | None:
        """The array at ``path`` (never unpickled), or None when absent or unreadable."""
        try:
            return np.load(path, allow_pickle=False)
        except (OSError, ValueError):
            return None

    @staticmethod
    def write_arrays(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
        buf = io.BytesIO()
        np.savez(buf, **{k: np.asarray(v) for k, v in arrays.items()})  # type: ignore[arg-type]
        data = buf.getvalue()
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda f: f.write(data), fsync=False)

    @staticmethod
    def read_arrays(path: Path) -> dict[str, np.ndarray] | None:
        """Arrays of an ``.npz`` (never unpickled), or None when absent or unreadable."""
        try:
            with np.load(path, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        except (OSError, ValueError):
            return None

    @staticmethod
    def write_frame(path: Path, frame: pd.DataFrame) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        frame.to_parquet(tmp, index=False)
        tmp.replace(path)

    @staticmethod
    def read_frame(path: Path) -> pd.DataFrame | None:
        try:
            return pd.read_parquet(path)
        except (OSError, ValueError):
            return None
