"""Numerical helpers shared by the detectors: row blocks, energy, softmax, class statistics.

Large inputs are processed in row blocks of at most :data:`BLOCK_BYTES` bytes of working memory,
so no helper materialises more than a block-sized temporary (never an N x C x D array). Matrix
products run in float32; sums whose precision matters (class means, covariances, log-sum-exp) are
accumulated in float64.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import numpy as np
import scipy.linalg
import scipy.sparse
from numpy.typing import NDArray

__all__ = [
    "BLOCK_BYTES",
    "CACHE_BYTES",
    "by_cache_blocks",
    "cache_blocks",
    "class_sums",
    "column_mean",
    "energy",
    "exact_percentile",
    "head_logits",
    "l2_normalize",
    "l2_normalize32",
    "log_softmax",
    "logsumexp",
    "moment_about",
    "pinv_sqrt",
    "prepare_head",
    "row_blocks",
    "rowwise_blocks",
    "scatter_matrix",
    "sgemm",
    "softmax",
    "topk_mask",
]

#: Working-memory budget of one row block, in bytes (tests lower it to exercise blocking).
BLOCK_BYTES = 64 * 2**20

F64 = NDArray[np.float64]
F32 = NDArray[np.float32]
AnyArray = NDArray[Any]


def row_blocks(n_rows: int, row_bytes: int, budget: int | None = None) -> Iterator[slice]:
    """Yield slices of consecutive rows whose working set is about :data:`BLOCK_BYTES`.

    Parameters
    ----------
    n_rows : int
        Number of rows to cover.
    row_bytes : int
        Bytes of working memory one row needs.
    budget : int, optional
        Bytes of a block instead of :data:`BLOCK_BYTES`.
    """
    step = max(1, (BLOCK_BYTES if budget is None else budget) // max(int(row_bytes), 1))
    for start in range(0, n_rows, step):
        yield slice(start, min(start + step, n_rows))


#: Working set of one cache-sized row block of element-wise work (exp, log, comparisons, float64
#: copies): about a quarter of one core's L2 cache, so the temporaries of a block stay in cache
#: between the passes over it (measured on (2048, 1,000) logits: the float64 log-sum-exp in
#: blocks of 64 rows takes 0.6 of the time of one block of 2,048 rows).
CACHE_BYTES = 2**20


def cache_blocks(n_rows: int, row_bytes: int) -> Iterator[slice]:
    """Like :func:`row_blocks`, with the budget ``min(CACHE_BYTES, BLOCK_BYTES)``.

    Only for row-wise work (every output row a function of its own input rows), so the result
    does not depend on the block size; products stay on the caller's blocks.
    """
    return row_blocks(n_rows, row_bytes, min(CACHE_BYTES, BLOCK_BYTES))


#: the array type a row-wise function returns
_R = TypeVar("_R", bound=np.ndarray)


def rowwise_blocks(n_rows: int, row_bytes: int, *arrays: AnyArray) -> Iterator[slice]:
    """Row blocks for row-wise work on ``arrays`` (every output row a function of its own
    input rows): :func:`cache_blocks` where every one has C-contiguous rows (the same values
    as one block), else :func:`row_blocks` (an F-ordered array's reductions run across rows, in
    an order that depends on the block)."""
    if all(a.flags.c_contiguous for a in arrays):
        return cache_blocks(n_rows, row_bytes)
    return row_blocks(n_rows, row_bytes)


def by_cache_blocks(fn: Callable[[Any], _R], x: AnyArray, row_bytes: int) -> _R:
    """``fn(x)`` for a row-wise ``fn`` (each output row a function of its own input row),
    computed on :func:`cache_blocks` of ``x`` where its rows are C-contiguous: the same values,
    with the temporaries of a block in cache. Other layouts get one call (an F-ordered
    array's reductions run across rows, in an order that depends on the block)."""
    n = x.shape[0]
    blocks = list(cache_blocks(n, row_bytes)) if x.flags.c_contiguous else []
    if len(blocks) <= 1:
        return fn(x)
    first = fn(x[blocks[0]])
    out: _R = np.empty((n, *first.shape[1:]), dtype=first.dtype)  # type: ignore[assignment]
    out[blocks[0]] = first
    for sl in blocks[1:]:
        out[sl] = fn(x[sl])
    return out


def f32(a: AnyArray) -> F32:
    """``a`` as a C-contiguous float32 array (no copy when it already is one)."""
    return np.ascontiguousarray(a, dtype=np.float32)


def logsumexp(z: AnyArray) -> F64:
    """Row-wise ``log sum exp`` of a block (n, C) -> float64 (n,).

    A float32 block is exponentiated in float32 (five times faster than float64; each term
    is then exact to float32 rounding, like the block itself) and summed in float64.
    """
    return by_cache_blocks(_logsumexp_block, z, 16 * int(z.shape[1]))


def _logsumexp_block(z: AnyArray) -> F64:
    m = z.max(axis=1)
    if z.dtype == np.float32:
        total = np.exp(z - m[:, None]).sum(axis=1, dtype=np.float64)
        return np.log(total) + m.astype(np.float64)
    return np.log(np.exp(z - m[:, None]).sum(axis=1)) + m


def log_softmax(z: F64) -> F64:
    """Row-wise log-softmax of a float64 block (n, C) -> (n, C)."""
    return z - logsumexp(z)[:, None]


def softmax(z: F64) -> F64:
    """Row-wise softmax of a float64 block (n, C) -> (n, C), in cache-sized row blocks."""
    return by_cache_blocks(_softmax_block, z, 16 * int(z.shape[1]))


def _softmax_block(z: F64) -> F64:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    e /= e.sum(axis=1, keepdims=True)
    return e


def energy(logits: AnyArray) -> F64:
    """Energy score ``log sum_c exp(z_c)`` (T = 1) of logits (n, C), in float64 blocks -> (n,)."""
    out = np.empty(logits.shape[0], dtype=np.float64)
    for sl in rowwise_blocks(logits.shape[0], 16 * logits.shape[1], logits):
        out[sl] = logsumexp(np.asarray(logits[sl], dtype=np.float64))
    return out


def head_logits(h32: F32, w32: F32, b: AnyArray) -> F64:
    """Logits ``h @ W.T + b`` of a float32 feature block (n, D): float32 product, float64 out."""
    z = (h32 @ w32.T).astype(np.float64)
    z += np.asarray(b, dtype=np.float64)
    return z


def class_sums(x: AnyArray, labels: NDArray[np.integer[Any]], n_classes: int) -> F64:
    """Per-class sums of the rows of ``x`` (n, D) -> (C, D), accumulated in float64.

    Rows whose label is negative are left out (used to restrict to correctly classified rows
    without copying them). A sparse one-hot product per row block: O(n D) work.
    """
    sums = np.zeros((n_classes, x.shape[1]), dtype=np.float64)
    for sl in row_blocks(x.shape[0], 8 * x.shape[1]):
        lab = np.asarray(labels[sl])
        cols = np.flatnonzero(lab >= 0)
        onehot = scipy.sparse.csr_matrix(
            (np.ones(cols.size), (lab[cols], cols)), shape=(n_classes, lab.size)
        )
        sums += onehot @ np.asarray(x[sl], dtype=np.float64)
    return sums


def scatter_matrix(x: AnyArray, centers: F64, labels: NDArray[np.integer[Any]] | None) -> F64:
    """Sum of outer products of centred rows, ``sum_i (x_i - m_i)(x_i - m_i)^T``, in float64.

    Parameters
    ----------
    x : array (n, D)
        Rows to scatter.
    centers : float64 array (C, D) or (D,)
        Centre per class (with ``labels``) or one centre for every row (``labels`` None).
    labels : int array (n,), optional
        Class of each row, selecting its centre.

    Returns
    -------
    float64 array (D, D)
        Symmetric scatter matrix (divide by n for the covariance).
    """
    d = x.shape[1]
    acc = np.zeros((d, d), dtype=np.float64, order="F")
    for sl in row_blocks(x.shape[0], 16 * d):
        xc = np.array(x[sl], dtype=np.float64)  # one copy, centred in place
        xc -= centers[labels[sl]] if labels is not None else centers
        # Rank-k update of the upper triangle: half the flops of xc.T @ xc.
        acc = scipy.linalg.blas.dsyrk(1.0, xc.T, beta=1.0, c=acc, overwrite_c=1)
    return np.triu(acc) + np.triu(acc, 1).T


def sgemm(a: AnyArray, b: AnyArray) -> F32:
    """``a @ b`` in float32 through SciPy's BLAS, the library of the decompositions.

    NumPy and SciPy each bundle their own OpenBLAS, whose threads spin for a while after a
    call: a NumPy product right after a SciPy decomposition (or the reverse) shares the cores
    with the other library's spinning threads and ran at half speed (measured: a 20,000 x 512
    by 512 x 256 product 62 ms after ``ssyrk``, 31 ms through SciPy). C-contiguous operands
    are passed as the transposed Fortran arrays, so nothing is copied.

    >>> a = np.arange(6, dtype=np.float32).reshape(2, 3)
    >>> sgemm(a, np.ones((3, 2), dtype=np.float32))
    array([[ 3.,  3.],
           [12., 12.]], dtype=float32)
    """
    a, b = f32(a), f32(b)
    out: F32 = scipy.linalg.blas.sgemm(1.0, b.T, a.T).T
    return out


#: Rows per chunk of :func:`moment_about`: fixed (not :data:`BLOCK_BYTES`), so the sum is the
#: same whatever the block budget.
MOMENT_CHUNK = 2048


def moment_about(x: AnyArray, point: F64) -> F64:
    """Second moment about ``point``, ``sum_i (x_i - p)(x_i - p)^T`` (D, D), float32 products.

    The rows are centred on their mean (rounded to float32) in float32; each chunk of
    :data:`MOMENT_CHUNK` rows is one float32 rank-k update, and the chunks are summed in
    float64, so float32 rounding accumulates over at most one chunk, relative to the centred
    (not the raw) magnitudes. The shift to ``point`` is added exactly:
    ``S + s v^T + v s^T + n v v^T`` with ``v = mean - p`` and ``s`` the float64 sum of the
    rounded centred rows. Twice the speed of :func:`scatter_matrix` (float64 products); entries
    agree with it to about 1e-6 of the largest.

    >>> x = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 9.0]], dtype=np.float32)
    >>> p = np.array([1.0, 1.0])
    >>> bool(np.allclose(moment_about(x, p), (x - p).T @ (x - p)))
    True
    """
    n, d = (int(s) for s in x.shape)
    chunks = [slice(s, min(s + MOMENT_CHUNK, n)) for s in range(0, n, MOMENT_CHUNK)]
    total = np.zeros(d, dtype=np.float64)
    for sl in chunks:
        total += np.asarray(x[sl]).sum(axis=0, dtype=np.float64)
    # the centre rounded to float32, so a row minus it is one float32 subtraction; the shift
    # to `point` below is exact for whichever centre is used
    center = (total / n).astype(np.float32)
    acc = np.zeros((d, d), dtype=np.float64)
    sums = np.zeros(d, dtype=np.float64)
    buf = np.empty((min(MOMENT_CHUNK, n), d), dtype=np.float32)
    for sl in chunks:
        y = buf[: sl.stop - sl.start]
        np.subtract(x[sl], center, out=y, dtype=np.float32, casting="same_kind")
        acc += scipy.linalg.blas.ssyrk(1.0, y.T)  # upper triangle of y^T y
        sums += y.sum(axis=0, dtype=np.float64)
    acc = np.triu(acc) + np.triu(acc, 1).T
    v = center.astype(np.float64) - np.asarray(point, dtype=np.float64)
    acc += np.outer(sums, v)
    acc += np.outer(v, sums)
    acc += n * np.outer(v, v)
    return acc


def pinv_sqrt(cov: F64, rtol: float | None = None) -> F64:
    """Whitening projection ``P`` (D, r) with ``P @ P.T == pinvh(cov)``.

    Eigenvalues at or below ``max|eig| * rtol`` are treated as zero; the default
    ``rtol = D * eps`` (float64) is the cut-off of :func:`scipy.linalg.pinvh`, so
    ``||(x - mu) @ P||^2`` is the Mahalanobis distance under the pseudo-inverse. A caller whose
    ``cov`` carries float32 rounding passes ``D * eps32``. The eigendecomposition is LAPACK's
    divide and conquer (``syevd``: a third faster than ``syevr`` at D = 2,048).
    """
    if rtol is None:
        rtol = cov.shape[0] * float(np.finfo(np.float64).eps)
    vals, vecs = scipy.linalg.eigh(cov, driver="evd")
    keep = np.abs(vals) > np.abs(vals).max() * rtol
    keep &= vals > 0
    return np.ascontiguousarray(vecs[:, keep] / np.sqrt(vals[keep]))


def topk_mask(h: AnyArray, k: int) -> NDArray[np.bool_]:
    """Mask of the ``k`` largest entries of each row of ``h`` (n, D); ties go to lower indices.

    Deterministic where ``argpartition``/``topk`` are not: among entries equal to the k-th
    largest value, the ones with the lowest column index are kept.
    """
    n, d = h.shape
    if k >= d:
        return np.ones((n, d), dtype=bool)
    # the mask of a row depends on that row only
    return by_cache_blocks(lambda b: _topk_block(b, k), h, d * (h.itemsize + 4))


def _topk_block(h: AnyArray, k: int) -> NDArray[np.bool_]:
    d = h.shape[1]
    kth = np.partition(h, d - k, axis=1)[:, d - k]
    mask = h > kth[:, None]
    need = k - mask.sum(axis=1)
    tied = h == kth[:, None]
    excess = np.flatnonzero(tied.sum(axis=1) > need)
    if excess.size:  # more ties than places: keep the first `need` of them
        t = tied[excess]
        tied[excess] = t & (np.cumsum(t, axis=1) <= need[excess, None])
    mask |= tied
    return mask


def exact_percentile(x: AnyArray, q: float) -> float:
    """``np.percentile(x, q)`` (linear interpolation) of every entry of ``x``, computed in blocks.

    A strided sample brackets the target ranks; one pass over row blocks counts the entries below
    the bracket and collects those inside it; the order statistics are then selected exactly.
    If the bracket misses, it is widened and the pass repeated (at worst it holds everything), so
    the result always equals ``np.percentile(x.ravel(), q)`` while the working memory stays near
    the bracket size instead of a full copy of ``x``.

    Parameters
    ----------
    x : array (n, D)
        Values (e.g. all ID training activations).
    q : float
        Percentile in [0, 100].

    Returns
    -------
    float
    """
    n_total = x.size
    quant = np.float64(q) / 100.0
    pos = (n_total - 1) * quant  # numpy's virtual index for method="linear"
    r_lo = min(max(int(np.floor(pos)), 0), n_total - 1)
    r_hi = min(r_lo + 1, n_total - 1)
    frac = float(pos - np.floor(pos)) if r_lo < n_total - 1 else 0.0
    rows = x.shape[0]
    step = max(1, rows // max(1, 2_000_000 // max(1, x.shape[1])))
    sample = np.asarray(x[::step]).ravel()
    margin = 0.002 + 4.0 / np.sqrt(sample.size)
    while True:
        qs = np.clip([q / 100.0 - margin, q / 100.0 + margin], 0.0, 1.0)
        lo, hi = (float(v) for v in np.quantile(sample, qs))
        if margin >= 1.0:
            lo, hi = -np.inf, np.inf
        n_lt_lo = n_le_lo = n_lt_hi = n_le_hi = 0
        inside = []
        for sl in row_blocks(rows, x.shape[1] * (x.itemsize + 4)):
            blk = np.asarray(x[sl])
            n_lt_lo += int(np.count_nonzero(blk < lo))
            n_le_lo += int(np.count_nonzero(blk <= lo))
            n_lt_hi += int(np.count_nonzero(blk < hi))
            n_le_hi += int(np.count_nonzero(blk <= hi))
            inside.append(blk[(blk > lo) & (blk < hi)])
        found = []
        between = np.concatenate(inside) if inside else np.empty(0, dtype=x.dtype)
        for r in (r_lo, r_hi):
            if n_lt_lo <= r < n_le_lo:
                found.append(np.asarray(lo, dtype=x.dtype))
            elif n_le_lo <= r < n_lt_hi:
                found.append(np.partition(between, r - n_le_lo)[r - n_le_lo])
            elif n_lt_hi <= r < n_le_hi:
                found.append(np.asarray(hi, dtype=x.dtype))
        if len(found) == 2:
            pair = np.array(found, dtype=x.dtype)
            return float(np.quantile(pair, frac))
        margin *= 8.0


def prepare_head(w: AnyArray, b: AnyArray) -> tuple[F32, F64]:
    """Head weights as a C-contiguous float32 copy (C, D) and the bias as float64 (C,)."""
    return np.array(w, dtype=np.float32, order="C"), np.array(b, dtype=np.float64)


def l2_normalize(x: AnyArray, eps: float = 1e-10) -> F64:
    """Rows of ``x`` divided by ``(||x|| + eps)`` in float64, as the KNN public code does."""
    x64 = np.asarray(x, dtype=np.float64)
    return x64 / (np.linalg.norm(x64, axis=1, keepdims=True) + eps)


def l2_normalize32(x: AnyArray) -> F32:
    """``f32(l2_normalize(x))``, in cache-sized row blocks where the rows are C-contiguous
    (row-wise: the same values as one block, without the (n, D) float64 temporaries)."""
    return by_cache_blocks(lambda b: f32(l2_normalize(b)), x, 24 * int(x.shape[1]))


def column_mean(x: AnyArray) -> F64:
    """Mean of the rows of ``x`` (n, D) -> (D,), accumulated in float64 over row blocks."""
    total = np.zeros(x.shape[1], dtype=np.float64)
    for sl in row_blocks(x.shape[0], 8 * x.shape[1]):
        total += np.asarray(x[sl], dtype=np.float64).sum(axis=0)
    return total / x.shape[0]
