"""Decoded images shared by extractions of the same image set with different models.

A study runs one cell per (model, dataset, seed), and every cell of a dataset decodes, resizes
and crops the same images again before its own model sees them. Inside :func:`shared_decoding`
(which :func:`semshift.study.run_study` enters around its cells) the first extraction of an
image set keeps its uint8 batches, and a later extraction of the same set with the same
preprocessing reads them instead of decoding the files again: the features are computed from
the identical uint8 tensors, so every number is unchanged.

A set is kept only when it fits the memory budget (``max_bytes``, default
:func:`default_budget`: an eighth of the physical memory, at most 2 GiB); the least recently
used sets make room for a new one. Sets whose images are corrupted by a callable without a
``describe()`` are never kept (nothing names what was applied). Outside the context nothing is
kept: a single extraction pays nothing for this.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterator
from typing import Any

__all__ = ["DecodedMemo", "active_memo", "default_budget", "shared_decoding"]

#: Upper bound of :func:`default_budget`.
MAX_DEFAULT_BYTES = 2 * 2**30


def default_budget() -> int:
    """An eighth of the physical memory, at most :data:`MAX_DEFAULT_BYTES`."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return MAX_DEFAULT_BYTES // 4
    return int(min(MAX_DEFAULT_BYTES, total // 8))


Batch = tuple[Any, Any, Any]  # (uint8 images (n, 3, C, C), sample indices, error strings)


class DecodedMemo:
    """The uint8 batches of whole image sets, by key, within a byte budget (thread-safe).

    Examples
    --------
    >>> memo = DecodedMemo(max_bytes=100)
    >>> import torch
    >>> rec = memo.recorder("set-a")
    >>> rec.add((torch.zeros(2, 3, 2, 2, dtype=torch.uint8), torch.tensor([0, 1]), ("", "")))
    >>> rec.commit()
    >>> len(memo.get("set-a")), memo.nbytes
    (1, 24)
    """

    def __init__(self, max_bytes: int | None = None) -> None:
        self.max_bytes = default_budget() if max_bytes is None else int(max_bytes)
        self._sets: OrderedDict[Hashable, tuple[list[Batch], int]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0

    @property
    def nbytes(self) -> int:
        """Bytes of image data held."""
        with self._lock:
            return sum(n for _, n in self._sets.values())

    def get(self, key: Hashable) -> list[Batch] | None:
        """The batches kept under ``key`` (most recently used from now), or None."""
        with self._lock:
            got = self._sets.get(key)
            if got is None:
                return None
            self._sets.move_to_end(key)
            self.hits += 1
            return got[0]

    def recorder(self, key: Hashable) -> _Recorder:
        """A recorder whose :meth:`~_Recorder.commit` keeps the batches added to it."""
        return _Recorder(self, key)

    def _put(self, key: Hashable, batches: list[Batch], nbytes: int) -> None:
        with self._lock:
            self._sets.pop(key, None)
            held = sum(n for _, n in self._sets.values())
            while self._sets and held + nbytes > self.max_bytes:
                _, (_, n) = self._sets.popitem(last=False)
                held -= n
            self._sets[key] = (batches, nbytes)


class _Recorder:
    """Collects one extraction's batches; gives up (frees them) once over the budget."""

    def __init__(self, memo: DecodedMemo, key: Hashable) -> None:
        self.memo, self.key = memo, key
        self.batches: list[Batch] | None = []
        self.nbytes = 0

    def add(self, batch: Batch) -> None:
        if self.batches is None:
            return
        x, idx, errs = batch
        # a copy in this process's memory: a batch from a loader worker holds a shared-memory
        # file descriptor, and hundreds kept open would exhaust the process's descriptors
        x = x.clone()
        self.nbytes += x.element_size() * x.numel()
        if self.nbytes > self.memo.max_bytes:
            self.batches = None  # the set does not fit: keep nothing
            return
        self.batches.append((x, idx.clone(), tuple(errs)))

    def commit(self) -> None:
        if self.batches is not None:
            self.memo._put(self.key, self.batches, self.nbytes)
        self.batches = None


_ACTIVE: list[DecodedMemo] = []
_ACTIVE_LOCK = threading.Lock()


def active_memo() -> DecodedMemo | None:
    """The memo of the innermost :func:`shared_decoding` context, or None outside one."""
    with _ACTIVE_LOCK:
        return _ACTIVE[-1] if _ACTIVE else None


@contextlib.contextmanager
def shared_decoding(max_bytes: int | None = None) -> Iterator[DecodedMemo]:
    """Within the block, extractions of an image set already decoded reuse its batches.

    Parameters
    ----------
    max_bytes : int, optional
        Memory budget for the kept image data (default :func:`default_budget`); 0 keeps nothing.
    """
    memo = DecodedMemo(max_bytes)
    with _ACTIVE_LOCK:
        _ACTIVE.append(memo)
    try:
        yield memo
    finally:
        with _ACTIVE_LOCK:
            _ACTIVE.remove(memo)
