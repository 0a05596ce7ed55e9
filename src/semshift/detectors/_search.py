"""Exact top-k maximum inner product search, with faiss when installed (knn, nnguide, grood).

Two backends give the same neighbours (up to float32 rounding of tied products):

- ``"faiss"``: ``faiss.IndexFlatIP`` (exact, brute force, multi-threaded).
- ``"numpy"``: blocked float32 matrix products. Each query block is compared with successive
  bank chunks; a running top-k per query is kept, and after the first chunk only products above
  the current k-th best are gathered, so the (n_queries x n_bank) matrix is never materialised.
  Ties at the k-th value go to the lower bank index.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

import numpy as np
from numpy.typing import NDArray

from semshift.errors import InputError

from . import _common
from ._base import Detector

__all__ = ["BACKENDS", "InnerProductIndex", "SearchDetector", "faiss_available", "resolve_backend"]

BACKENDS = ("auto", "numpy", "faiss")
#: Bank rows compared with a query block at once in the numpy backend.
BANK_CHUNK = 8192


def faiss_available() -> bool:
    """Whether the optional ``faiss`` module (package faiss-cpu) can be imported."""
    return importlib.util.find_spec("faiss") is not None


def resolve_backend(owner: str, backend: str) -> str:
    """Map ``"auto"`` to ``"faiss"`` when importable, else ``"numpy"``; check explicit choices.

    Raises
    ------
    InputError
        Unknown backend, or ``"faiss"`` requested without faiss installed.
    """
    if backend not in BACKENDS:
        raise InputError(f"{owner}: `backend` must be one of {BACKENDS}, got {backend!r}")
    if backend == "auto":
        return "faiss" if faiss_available() else "numpy"
    if backend == "faiss" and not faiss_available():
        raise InputError(
            f"{owner}: backend='faiss' needs the faiss-cpu package (pip install faiss-cpu); "
            "use backend='numpy' or 'auto' for the exact blocked NumPy search"
        )
    return backend


class SearchDetector(Detector):
    """A detector with a ``backend`` hyperparameter for :class:`InnerProductIndex`: its
    parameter check also refuses ``backend="faiss"`` when faiss is not installed."""

    backend: str

    def _check_params(self) -> None:
        super()._check_params()
        resolve_backend(self.name, self.backend)


def _merge(
    best_v: NDArray[np.float32],
    best_i: NDArray[np.int64],
    rows: NDArray[np.intp],
    vals: NDArray[np.float32],
    idx: NDArray[np.int64],
) -> tuple[NDArray[np.float32], NDArray[np.int64]]:
    """Merge (row, value, index) candidates into per-row top-k lists (value desc, index asc)."""
    m, k = best_v.shape
    all_r = np.concatenate([np.repeat(np.arange(m), k), rows])
    all_v = np.concatenate([best_v.ravel(), vals])
    all_i = np.concatenate([best_i.ravel(), idx])
    order = np.lexsort((all_i, -all_v, all_r))
    counts = np.bincount(all_r, minlength=m)
    starts = np.cumsum(counts) - counts
    take = order[starts[:, None] + np.arange(k)]
    return all_v[take], all_i[take]


def _search_numpy(
    queries: NDArray[np.float32], bank: NDArray[np.float32], k: int
) -> tuple[NDArray[np.float32], NDArray[np.int64]]:
    n, nb = queries.shape[0], bank.shape[0]
    chunk = min(nb, max(k, BANK_CHUNK))
    # Per query row and bank column: the float32 product, a partition copy and two masks.
    q_step = max(1, _common.BLOCK_BYTES // (chunk * 12))
    out_v = np.empty((n, k), dtype=np.float32)
    out_i = np.empty((n, k), dtype=np.int64)
    for qs in range(0, n, q_step):
        q = queries[qs : qs + q_step]
        m = q.shape[0]
        # First chunk (at least k columns): its own top-k, ties to the lower index.
        prod = q @ bank[:chunk].T
        cols = np.nonzero(_common.topk_mask(prod, k))[1].reshape(m, k)  # ascending per row
        vals = np.take_along_axis(prod, cols, axis=1)
        order = np.argsort(-vals, axis=1, kind="stable")
        best_v = np.take_along_axis(vals, order, axis=1)
        best_i = np.take_along_axis(cols, order, axis=1).astype(np.int64)
        for bs in range(chunk, nb, chunk):
            prod = q @ bank[bs : bs + chunk].T
            mask = prod > best_v[:, -1:]  # only products beating the current k-th best
            if prod.shape[1] > k and np.count_nonzero(mask) > 4 * k * m:
                mask &= _common.topk_mask(prod, k)
            rows, cols_c = np.nonzero(mask)
            best_v, best_i = _merge(best_v, best_i, rows, prod[rows, cols_c], cols_c + np.int64(bs))
        out_v[qs : qs + m] = best_v
        out_i[qs : qs + m] = best_i
    return out_v, out_i


class InnerProductIndex:
    """Exact top-k inner product search over a fixed float32 bank.

    Parameters
    ----------
    bank : float32 array (n_bank, D)
        Vectors to search (the faiss backend copies them into its index, the numpy one keeps a
        reference).
    backend : {"numpy", "faiss"}
        Resolved backend (see :func:`resolve_backend`).
    """

    def __init__(self, bank: NDArray[np.float32], backend: str) -> None:
        self.backend = backend
        self.n_bank = int(bank.shape[0])
        self._bank: NDArray[np.float32] | None = None
        self._index: Any = None
        if backend == "faiss":
            faiss = importlib.import_module("faiss")
            self._index = faiss.IndexFlatIP(int(bank.shape[1]))
            self._index.add(np.ascontiguousarray(bank, dtype=np.float32))
        else:
            self._bank = np.ascontiguousarray(bank, dtype=np.float32)

    def search(
        self, queries: NDArray[np.float32], k: int
    ) -> tuple[NDArray[np.float32], NDArray[np.int64]]:
        """The ``k`` largest inner products per query, sorted descending, and their bank indices.

        Parameters
        ----------
        queries : float32 array (n, D)
        k : int
            Number of neighbours, at most ``n_bank``.

        Returns
        -------
        values : float32 array (n, k)
        indices : int64 array (n, k)
        """
        q = np.ascontiguousarray(queries, dtype=np.float32)
        if self._index is not None:
            vals, idx = self._index.search(q, k)
            return np.asarray(vals, dtype=np.float32), np.asarray(idx, dtype=np.int64)
        assert self._bank is not None
        return _search_numpy(q, self._bank, k)

    def rows(self, indices: NDArray[np.int64]) -> NDArray[np.float32]:
        """Bank rows ``indices`` (m,) -> float32 (m, D)."""
        if self._index is not None:
            return np.asarray(self._index.reconstruct_batch(indices), dtype=np.float32)
        assert self._bank is not None
        return self._bank[indices]
