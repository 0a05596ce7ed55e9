"""Feature stores are verified the first time a run reads them.

A damaged store (a flipped byte in a shard, a truncated file) must never give results with
exit 0. :func:`verify_store` re-hashes every shard file against the XXH3 checksums its
``meta.json`` records (:meth:`semshift.features.FeatureStore.verify`) and the head against its
recorded checksum. Hashing costs far less than reading the data for scoring, and is done once:
the verification is remembered in ``<output>/.cache/verified.json`` under a key made of the
store's recorded checksums and each file's size and modification time, so a re-run on unchanged
files hashes nothing, and any write to a shard file (which changes its mtime) makes the next run
verify again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from semshift.errors import InputError
from semshift.features.store import FeatureStore, open_store, verify_store
from semshift.run.cache import StageCache, stable_hash

__all__ = ["VerifiedStores"]


def _files(store: FeatureStore) -> list[tuple[Path, dict[str, Any]]]:
    """Every file of the store with its recorded checksum entry (shards, then the head)."""
    meta = store.meta
    assert store.path is not None
    out = [
        (store.path / "shards" / info["file"], info)
        for sh in meta.get("shards", [])
        for info in sh["files"].values()
    ]
    head = meta.get("head") or {}
    if head.get("file") and (head.get("checksum") or head.get("sha256")):
        out.append((store.path / head["file"], head))
    return out


class VerifiedStores:
    """Opens feature stores for a run, verifying each once per content and file stamps.

    Parameters
    ----------
    cache : StageCache
        The run's cache; the verification memo is ``verified.json`` in it.
    """

    def __init__(self, cache: StageCache) -> None:
        self.cache = cache
        self._memo_path = cache.root / "verified.json"
        self._memo: dict[str, str] | None = None
        self.hashed: list[str] = []  # stores hashed by this run (for the stage record)

    def _load(self) -> dict[str, str]:
        if self._memo is None:
            memo = self.cache.read_json(self._memo_path)
            self._memo = dict(memo) if isinstance(memo, dict) else {}
        return self._memo

    @staticmethod
    def stamp(store: FeatureStore) -> str:
        """Key of the store's current state: recorded checksums, sizes and mtimes of its files."""
        parts = []
        for f, info in _files(store):
            try:
                st = os.stat(f)
            except OSError:
                return ""  # a missing file: never counts as verified
            parts.append([info["file"], info.get("checksum", info.get("sha256")),
                          st.st_size, st.st_mtime_ns])  # fmt: skip
        return stable_hash(parts)

    def remember(self, store: FeatureStore) -> None:
        """Record a store this run has just written as verified (nothing to hash)."""
        memo = self._load()
        assert store.path is not None
        memo[str(store.path.resolve())] = self.stamp(store)
        self.cache.write_json(self._memo_path, memo)

    def open(self, path: Path, where: str) -> FeatureStore:
        """Open the store at ``path``, verifying it unless unchanged since its last verification.

        Raises
        ------
        InputError
            One line: ``where``, the store and the damaged or missing file.
        """
        try:
            store = open_store(path)
        except InputError as err:
            raise InputError(f"{where}: {err}") from None
        memo = self._load()
        assert store.path is not None
        key = str(store.path.resolve())
        stamp = self.stamp(store)
        if stamp and memo.get(key) == stamp:
            return store
        damages = verify_store(path)
        if damages:
            listed = ", ".join(str(d) for d in damages[:4])
            more = f" and {len(damages) - 4} more" if len(damages) > 4 else ""
            raise InputError(
                f"{where}: feature store {path} is damaged: {listed}{more}; run `semshift store "
                f"repair {path}`, then the extraction again (it recomputes only those shards)"
            )
        self.hashed.append(str(path))
        memo[key] = stamp
        self.cache.write_json(self._memo_path, memo)
        return store
