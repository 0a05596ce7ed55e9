"""Feature stores are verified in full every time a run reads them.

A damaged store (a flipped byte in a shard, a truncated file, a changed ``index.parquet`` or
``skipped.csv``) must never give results with exit 0. :class:`VerifiedStores` opens every store
a run reads through :func:`semshift.features.store.open_verified`: every file the store's
``meta.json`` records (shard arrays and indices, head, ``index.parquet``, ``skipped.csv``) is
hashed against its recorded XXH3 checksum and the commit records are compared with it. Stores
written before the index's or ``skipped.csv``'s checksum was recorded have their index
compared with the shards' own indices and ``skipped.csv``'s contents checked instead.

Nothing is remembered between runs: an earlier memo keyed on each file's size and modification
time let a file changed in place with both kept through unverified (a re-run into the same
output folder). Hashing costs about one read of the store, which also brings into the page
cache the pages the scoring reads next: a 1.60 GB store verifies in 0.26-0.28 s from the page
cache and 0.5-0.9 s from disk (``benchmarks/bench_verify.py``, 2 shared CPU cores), so an
ImageNet-1k training store (15.6 GB) takes about 3 s warm. Only a store this run has just
written itself (:meth:`VerifiedStores.remember`) is not hashed again in the same run. That the
stores come from one classifier is checked by the extract stage over all of them
(``data.mixed_models`` allows a cross-model study). See docs/methods.md#store-verification.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from semshift.errors import InputError
from semshift.features.store import FeatureStore, open_store, open_verified, read_meta
from semshift.run.cache import StageCache

__all__ = ["VerifiedStores"]


class VerifiedStores:
    """Opens feature stores for a run, verifying each in full (see the module docstring).

    Parameters
    ----------
    cache : StageCache
        The run's cache (where the run writes the stores it extracts).
    """

    def __init__(self, cache: StageCache) -> None:
        self.cache = cache
        self._written: dict[Path, dict[str, object]] = {}  # written by this run: its meta.json
        self.hashed: list[str] = []  # stores hashed by this run (for the stage record)

    def remember(self, store: FeatureStore) -> None:
        """Record a store this run has just written (not hashed again in this run)."""
        assert store.path is not None
        self._written[store.path.resolve()] = store.meta

    def open(self, path: Path, where: str) -> FeatureStore:
        """Open the store at ``path``, verifying it unless this run has just written it.

        Raises
        ------
        InputError
            One line: ``where``, the store and the damaged or missing file.
        """
        written = self._written.get(Path(path).resolve())
        if written is not None:
            with contextlib.suppress(InputError):
                if read_meta(path) == written:
                    return open_store(path)
        store = open_verified({where: path}, same_model=False)[where]
        self.hashed.append(str(path))
        return store
