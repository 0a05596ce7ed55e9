"""Vectorised bootstrap of one reference score set against many subsets, for many detectors.

The protocols need percentile CIs for thousands of (detector, subset) pairs: 24 detectors x 64
grid cells of 5,000 OOD samples against 50,000 ID samples, 1,000 resamples each. Calling
:func:`semshift.metrics.bootstrap_ci` per pair would redraw and re-sort the ID side every time.
Here the work is shared:

- **draws** (per block of resamples): the reference multiplicities are drawn once and every
  subset's multiplicities once, in sample order; they are shared by every detector (a paired
  bootstrap: the same resampled images for every detector);
- **per detector**: the reference multiplicities are permuted into that detector's ascending
  score order and cumulated once per resample (``cum[b, i]`` = resampled reference samples among
  the ``i`` lowest scores; resample-major int32 arrays, so each resample is one contiguous row);
- **per subset**: the positions of its scores among the sorted reference scores are found once
  (``searchsorted``); each resample's AUROC is then a dot product of the subset's
  multiplicities with ``cum`` read at those positions (ties count 1/2), exactly as in
  :func:`semshift.metrics.stats._auroc_block`, in integer arithmetic (exact). FPR@95 reads the
  resampled ID threshold off ``cum`` and counts the subset samples above it: samples above every
  threshold of a block count in one matrix-vector product, only the few between the block's
  smallest and largest threshold are compared per resample;
- detectors run in worker threads, and the next block is drawn while the current one is
  processed (NumPy releases the GIL); the values do not depend on the number of threads.

Seed semantics: ``numpy.random.default_rng(seed)``; per block of ``b`` resamples the reference
indices ``(b, n_ref)`` are drawn, then each subset's ``(b, n_c)`` in subset order, with
``b = max(1, min(n_resamples, 2**22 // (n_ref + sum n_c)))``. With one subset this is exactly
the stream of :func:`semshift.metrics.bootstrap_ci` on ``concatenate((ref, subset))`` with
``is_ood`` marking the subset, so the CIs are identical to it; with several subsets each
subset's resamples are still a stratified bootstrap of (reference, subset), only the draws differ.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse
from numpy.typing import NDArray

from semshift.detectors import default_threads
from semshift.errors import InputError, SemshiftError
from semshift.metrics import evaluate_many, list_metrics, oscr
from semshift.metrics.ranking import n_required
from semshift.metrics.stats import BLOCK_ELEMENTS
from semshift.protocols.sets import Bootstrap, ScoredSet
from semshift.protocols.tidy import error_row

__all__ = ["BootstrapStats", "percentile_ci", "ranked_bootstrap"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int32]

#: statistics :func:`ranked_bootstrap` can resample
STATS = ("auroc", "fpr95", "oscr", "auroc_correct", "auroc_incorrect", "acc")


@dataclass
class BootstrapStats:
    """Resampled statistics, each of shape (n_detectors, n_subsets, n_resamples).

    A (detector, subset) pair without scores is NaN throughout. ``acc`` (resampled fraction of
    correct reference samples) does not depend on the subset; it is stored per subset anyway.
    """

    values: dict[str, FloatArray]

    def ci(self, stat: str, level: float) -> tuple[FloatArray, FloatArray]:
        """Percentile interval per (detector, subset): two arrays (n_detectors, n_subsets)."""
        return percentile_ci(self.values[stat], level)


def percentile_ci(samples: FloatArray, level: float) -> tuple[FloatArray, FloatArray]:
    """Percentile interval over the last axis (linear interpolation, as ``bootstrap_ci``).

    NaN resamples (a statistic undefined in that resample) are left out; all-NaN rows give
    NaN bounds.

    Parameters
    ----------
    samples : ndarray of float, shape (..., n_resamples)
    level : float
        Confidence level in (0, 1).

    Returns
    -------
    low, high : ndarray of float, shape (...)
    """
    alpha = (1.0 - float(level)) / 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: NaN bounds
        q = np.nanquantile(samples, [alpha, 1.0 - alpha], axis=-1)
    return q[0], q[1]


def _n_threads(threads: int | None) -> int:
    return max(1, int(threads)) if threads is not None else default_threads()


_PROCESS_BLOCK = 32  # resamples processed together (draw blocks are merged up to this many)


def _blocks(
    rng: np.random.Generator,
    n_ref: int,
    sizes: Sequence[int],
    n_resamples: int,
    ref_last: bool = False,
) -> Iterator[tuple[IntArray, IntArray]]:
    """Multiplicities per block of resamples, as int32: reference (b, n_ref) and all subsets
    concatenated (b, sum n_c), each in sample order.

    Draws follow the documented stream (draw blocks of the ``bootstrap_ci`` size); consecutive
    draw blocks are merged into blocks of at least ``_PROCESS_BLOCK`` resamples, which changes
    nothing in the values. ``ref_last`` draws the subsets first and the reference after them.
    """
    total = n_ref + int(sum(sizes))
    block = max(1, min(n_resamples, BLOCK_ELEMENTS // max(total, 1)))
    target = max(block, min(_PROCESS_BLOCK, n_resamples))
    done = 0
    while done < n_resamples:
        # draw blocks of the bootstrap_ci size until the processing block is full
        draws = []
        n_b = 0
        while done + n_b < n_resamples and n_b < target:
            b = min(block, n_resamples - done - n_b)
            draws.append(b)
            n_b += b
        w_ref = np.empty((n_b, n_ref), dtype=np.int32)
        w_sub = np.empty((n_b, total - n_ref), dtype=np.int32)
        row = 0
        for b in draws:
            rows = slice(row, row + b)
            if not ref_last:
                _counts_into(w_ref[rows], rng.integers(0, n_ref, size=(b, n_ref)))
            off = 0
            for n in sizes:
                _counts_into(w_sub[rows, off : off + n], rng.integers(0, n, size=(b, n)))
                off += n
            if ref_last:
                _counts_into(w_ref[rows], rng.integers(0, n_ref, size=(b, n_ref)))
            row += b
        done += n_b
        yield w_ref, w_sub


def _positions(r_sorted: FloatArray, x: FloatArray) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """``searchsorted(r_sorted, x)`` on the left and on the right, each in the order of ``x``.

    The queries are searched in ascending order (each search starts where the last ended and
    reads the sorted array front to back), then put back in place.
    """
    o = np.argsort(x, kind="stable")
    xs = x[o]
    lt = np.empty(x.size, dtype=np.intp)
    le = np.empty(x.size, dtype=np.intp)
    lt[o] = np.searchsorted(r_sorted, xs, side="left")
    le[o] = np.searchsorted(r_sorted, xs, side="right")
    return lt, le


def _counts_into(out: NDArray[Any], idx: NDArray[np.int64]) -> None:
    """``out[r] = resample_counts(idx, n)[r]`` for every row, written in place (n = out's
    width): one ``bincount`` per resample, so no offset index matrix and no int64 copy of the
    counts (the same values as :func:`semshift.metrics.stats.resample_counts`)."""
    n = out.shape[1]
    for r in range(idx.shape[0]):
        out[r] = np.bincount(idx[r], minlength=n)


def _count_prefix(v: IntArray, limit: int) -> NDArray[np.intp]:
    """Per row of the non-negative ``v`` (b, n): how many of the running sums
    ``v[:, :1].sum(), ..., v[:, :n - 1].sum()`` are at most ``limit`` (the running sum of the
    last column left out).

    The running sums grow along the row, so those at most ``limit`` form a prefix: only the
    leading columns are summed, as far as every row has passed ``limit`` (a resample holds
    about one image per column, so a little over ``limit`` columns), all of them otherwise.
    """
    n = v.shape[1]
    m = min(n - 1, 2 * limit + 64)
    while True:
        head = np.cumsum(v[:, :m], axis=1, dtype=np.int32)  # at most n: exact
        if m >= n - 1 or bool((head[:, -1] > limit).all()):
            return np.count_nonzero(head <= limit, axis=1)
        m = min(n - 1, 4 * m)


def _narrow(w: IntArray) -> NDArray[Any]:
    """Multiplicities as uint8 when they fit (rows stay cache-resident in a permuting gather)."""
    return w.astype(np.uint8) if w.max() <= 255 else w


def _transposed(w: IntArray) -> IntArray:
    """Multiplicities one row per image, (n, b), for products over the images."""
    return np.ascontiguousarray(w.T)


def _each_block(
    workers: ThreadPoolExecutor,
    blocks: Iterator[tuple[IntArray, IntArray]],
    plans: Sequence[Any],
    block: Callable[..., None],
    prepare_ref: Callable[[IntArray], Any],
) -> None:
    """Run ``block(d, plan, prepare_ref(w_ref), w_sub, resample slice)`` in ``workers`` for
    every detector with a plan, block of draws after block; the next block is drawn (and its
    reference multiplicities prepared) on a helper thread meanwhile."""

    def draw() -> tuple[Any, IntArray] | None:
        cur = next(blocks, None)
        return None if cur is None else (prepare_ref(cur[0]), cur[1])

    with ThreadPoolExecutor(max_workers=1) as drawer:
        nxt = drawer.submit(draw)
        start = 0
        while (cur := nxt.result()) is not None:
            nxt = drawer.submit(draw)
            w_ref, w_sub = cur
            sl = slice(start, start + w_sub.shape[0])
            start += w_sub.shape[0]
            jobs = [
                workers.submit(block, d, p, w_ref, w_sub, sl)
                for d, p in enumerate(plans)
                if p is not None
            ]
            for job in jobs:
                job.result()


#: sums of non-negative int32 terms below this stay exact in int32 arithmetic
_INT32_LIMIT = 2**31
#: cumulated counts (doubled with ties) up to this are gathered as uint16
_UINT16_MAX = int(np.iinfo(np.uint16).max)

_Plan = tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp], bool, NDArray[np.bool_]]


def _below_dot(cm: IntArray, plan: _Plan, w_sub: IntArray, bounds: NDArray[np.intp]) -> FloatArray:
    """Per subset and resample, sum over the subset's samples of multiplicity x (cumulated
    reference weight below the sample, ties counted 1/2): shape (n_sub, b).

    ``cm`` (b, n_ref + 1) and ``w_sub`` (b, sum n_c): every resample is a contiguous row, so the
    gathers read one cache-resident row at a time. Integer arithmetic (uint16 or int32
    gathers, int32 or int64 sums, each only where every value fits), so the result is exact.
    """
    _, lt, le, ties, _ = plan
    out = np.empty((bounds.size - 1, w_sub.shape[0]), dtype=np.int64)
    # a subset's resample holds n_c images and cm is at most its last column, so every
    # product and partial sum is at most n_c * max(cm) (x2 with ties): int32 when that fits
    top = int(cm[:, -1].max()) * (2 if ties else 1)
    if top <= _UINT16_MAX:  # gathered values (x2 with ties) fit uint16: half the bytes to read
        cm = cm.astype(np.uint16)
    for c in range(bounds.size - 1):  # one subset at a time: its gathers stay in cache
        a, e = bounds[c], bounds[c + 1]
        g = np.take(cm, lt[a:e], axis=1)
        if ties:
            g += np.take(cm, le[a:e], axis=1)
        if (e - a) * top < _INT32_LIMIT:
            out[c] = np.einsum("bj,bj->b", w_sub[:, a:e], g)
        else:
            out[c] = np.einsum("bj,bj->b", w_sub[:, a:e], g, dtype=np.int64)
    if not ties:
        return out.astype(np.float64)
    return np.multiply(out, 0.5, dtype=np.float64)


def _accepted(
    w_sub: IntArray, le: NDArray[np.intp], i_fpr: NDArray[np.intp], bounds: NDArray[np.intp]
) -> NDArray[np.int64]:
    """Per subset and resample, the resampled subset samples with ``le > i_fpr[b]``.

    Rows with ``le`` above every threshold of the block count in every resample (one
    matrix-vector product per subset); only the rows between the smallest and the largest
    threshold are compared per resample.
    """
    lo, hi = int(i_fpr.min()), int(i_fpr.max())
    always = (le > hi).astype(np.int32)
    out = np.empty((bounds.size - 1, w_sub.shape[0]), dtype=np.int64)
    for c in range(bounds.size - 1):
        a, e = bounds[c], bounds[c + 1]
        # at most n_c resampled images: exact in int32
        out[c] = np.einsum("bj,j->b", w_sub[:, a:e], always[a:e])
    band = np.flatnonzero((le > lo) & (le <= hi))
    if band.size:
        hit = le[band][:, None] > i_fpr[None, :]  # (n_band, b)
        part = np.where(hit, w_sub[:, band].T, 0).astype(np.int64)
        seg = np.searchsorted(bounds, band, side="right") - 1
        np.add.at(out, seg, part)
    return out


def ranked_bootstrap(
    ref: Sequence[FloatArray | None],
    subsets: Sequence[Sequence[FloatArray | None]],
    *,
    n_resamples: int,
    seed: int,
    stats: Sequence[str] = ("auroc",),
    correct: NDArray[np.bool_] | None = None,
    tpr: float = 0.95,
    threads: int | None = None,
) -> BootstrapStats:
    """Bootstrap ranking statistics of a reference set (positive) against many subsets.

    Parameters
    ----------
    ref : sequence of ndarray of float or None, one per detector, each shape (n_ref,)
        Reference (positive, "ID") scores per detector; None = detector unavailable.
    subsets : sequence (per detector) of sequences (per subset) of ndarray or None
        Negative ("OOD") scores per detector and subset, shape (n_c,); None = unavailable.
        Subset sizes must agree across detectors.
    n_resamples : int
        Number of resamples (>= 1).
    seed : int
        Seed of ``numpy.random.default_rng`` (see the module docstring for the stream).
    stats : sequence of str
        Any of ``auroc`` (ID positive, ties 1/2), ``fpr95`` (FPR at ``tpr`` ID recall,
        ``id_recall`` convention), ``oscr`` (exact OSCR), ``auroc_correct`` /
        ``auroc_incorrect`` (AUROC of the correct / misclassified reference samples vs the
        subset; NaN in a resample without such samples) and ``acc`` (fraction correct). The
        last four need ``correct``.
    correct : ndarray of bool, shape (n_ref,), optional
        True for correctly classified reference samples.
    tpr : float, default 0.95
        Recall level of ``fpr95``.
    threads : int, optional
        Worker threads over detectors; default: the CPUs this process may use (at most 8).
        Results do not depend on it.

    Returns
    -------
    BootstrapStats

    Notes
    -----
    Cost per detector and block of ``b`` resamples: a row gather and cumulative sum of
    ``n_ref x b`` for the reference, then one row gather of ``sum n_c x b`` (two with ties,
    twice with ``correct``) and the products; the draws are shared by all detectors.
    """
    unknown = sorted(set(stats) - set(STATS))
    if unknown:
        raise ValueError(f"ranked_bootstrap: unknown statistic(s) {unknown}; known: {STATS}")
    n_det = len(ref)
    n_sub = len(subsets[0]) if subsets else 0
    n_ref = next((r.size for r in ref if r is not None), 0)
    sizes = [next((x.size for s in subsets if (x := s[c]) is not None), 0) for c in range(n_sub)]
    need_correct = bool({"oscr", "auroc_correct", "auroc_incorrect", "acc"} & set(stats))
    if need_correct and correct is None:
        raise ValueError("ranked_bootstrap: oscr / auroc_correct / acc need the correct mask")
    out = {s: np.full((n_det, n_sub, n_resamples), np.nan) for s in stats}
    if n_ref == 0 or n_sub == 0 or min(sizes) == 0:
        return BootstrapStats(out)
    bounds = np.concatenate(([0], np.cumsum(sizes))).astype(np.intp)
    k_fpr = n_required(float(tpr), n_ref)
    n0 = np.asarray(sizes, dtype=np.float64)[:, None]  # (n_sub, 1)

    def plan_of(d: int) -> _Plan | None:
        # sort order of the reference, positions of all subset scores among it
        r = ref[d]
        have = np.array([subsets[d][c] is not None for c in range(n_sub)])
        if r is None or not have.any():
            return None
        order = np.argsort(r, kind="stable")
        r_sorted = r[order]
        parts = [
            s if s is not None else np.zeros(n) for s, n in zip(subsets[d], sizes, strict=True)
        ]
        sub = np.concatenate(parts)
        lt, le = _positions(r_sorted, sub)
        return order, lt, le, bool((lt != le).any()), have

    def block(d: int, plan: _Plan, w_ref: NDArray[Any], w_sub: IntArray, sl: slice) -> None:
        # every statistic of detector d on one block of resamples (writes out[...][d] only)
        order, _, le, _, have = plan
        b = w_ref.shape[0]
        w_sorted = np.take(w_ref, order, axis=1)  # (b, n_ref)
        cum = np.zeros((b, n_ref + 1), dtype=np.int32)
        np.cumsum(w_sorted, axis=1, dtype=np.int32, out=cum[:, 1:])
        u = None  # pairs (reference above subset sample) per subset and resample
        if "auroc" in stats or "auroc_incorrect" in stats:
            u = n_ref * n0 - _below_dot(cum, plan, w_sub, bounds)
        if "auroc" in stats:
            assert u is not None
            out["auroc"][d, have, sl] = (u / (n_ref * n0))[have]
        if "fpr95" in stats:
            i_fpr = np.count_nonzero(cum[:, :-1] <= n_ref - k_fpr, axis=1) - 1  # (b,)
            out["fpr95"][d, have, sl] = (_accepted(w_sub, le, i_fpr, bounds) / n0)[have]
        if not need_correct:
            return
        assert correct is not None
        cum_c = np.zeros((b, n_ref + 1), dtype=np.int32)
        np.cumsum(w_sorted * correct[order][None, :], axis=1, dtype=np.int32, out=cum_c[:, 1:])
        n_c = cum_c[:, -1][None, :].astype(np.float64)  # (1, b) resampled correct count
        above_c = n_c * n0 - _below_dot(cum_c, plan, w_sub, bounds)  # (n_sub, b)
        if "oscr" in stats:
            out["oscr"][d, have, sl] = (above_c / (n_ref * n0))[have]
        with np.errstate(invalid="ignore", divide="ignore"):
            if "auroc_correct" in stats:
                out["auroc_correct"][d, have, sl] = (above_c / (n_c * n0))[have]
            if "auroc_incorrect" in stats:
                assert u is not None
                n_w = n_ref - n_c
                above_w = u - above_c  # the pairs split into correct and incorrect
                out["auroc_incorrect"][d, have, sl] = (above_w / (n_w * n0))[have]
        if "acc" in stats:
            out["acc"][d, have, sl] = np.broadcast_to(n_c / n_ref, (n_sub, b))[have]

    # Detectors run in threads (NumPy releases the GIL in take / cumsum / einsum / sort); each
    # writes its own rows of ``out``, so the result does not depend on the scheduling.
    with ThreadPoolExecutor(max_workers=_n_threads(threads)) as pool:
        plans = list(pool.map(plan_of, range(n_det)))
        blocks = _blocks(np.random.default_rng(seed), n_ref, sizes, n_resamples)
        # uint8 rows stay cache-resident in the permuting gather
        _each_block(pool, blocks, plans, block, _narrow)
    return BootstrapStats(out)


# -- shared evaluation of one reference side against many subsets -------------------------------

#: metrics whose CI the fast bootstrap computes; other metrics get NaN bounds
CI_METRICS = ("auroc", "fpr95", "oscr")


@dataclass
class Side:
    """Scores of one side of a comparison, per detector, or why a detector has none.

    ``keys`` are the result-row columns naming the side (``set``, ``split``, levels).
    """

    n: int
    scores: dict[str, FloatArray]
    errors: dict[str, str]
    keys: dict[str, Any]

    def get(self, detector: str) -> FloatArray | str:
        """The scores of ``detector``, or its error message."""
        if detector in self.scores:
            return self.scores[detector]
        return self.errors.get(detector, f"detector {detector!r} has no scores on {self.label}")

    @property
    def label(self) -> str:
        """The side's set name(s), for messages."""
        return f"set {self.keys.get('set')!r}"


def check_metrics(metrics: Sequence[str], where: str, extra: Sequence[str] = ()) -> list[str]:
    """Validate metric names: ``(scores, is_ood)`` registry metrics or one of ``extra``."""
    if isinstance(metrics, str):
        metrics = [metrics]
    out: list[str] = []
    allowed = list_metrics(inputs=("scores", "is_ood"))
    for m in metrics:
        if m not in allowed and m not in extra:
            raise InputError(
                f"{where}: unknown metric {m!r}; use one of {sorted([*allowed, *extra])}"
            )
        if m not in out:
            out.append(m)
    if not out:
        raise InputError(f"{where}: metrics is empty; name at least one metric")
    return out


def _point_values(
    ref: FloatArray,
    subs: dict[int, FloatArray],
    metrics: list[str],
    correct: NDArray[np.bool_] | None,
) -> dict[tuple[int, str], float | str]:
    """Point value (or error message) per (subset index, metric)."""
    out: dict[tuple[int, str], float | str] = {}
    ranking = [m for m in metrics if m != "oscr"]
    if ranking and subs:
        try:
            table = evaluate_many(ref, subs, ranking)
            for k, m, v in zip(table["subset"], table["metric"], table["value"], strict=True):
                out[(int(k), str(m))] = float(v)
        except SemshiftError:  # find the subset(s) that fail, one at a time
            for k, sub in subs.items():
                try:
                    table = evaluate_many(ref, {k: sub}, ranking)
                    for m, v in zip(table["metric"], table["value"], strict=True):
                        out[(k, str(m))] = float(v)
                except SemshiftError as err:
                    out.update({(k, m): str(err) for m in ranking})
    if "oscr" in metrics:
        assert correct is not None
        for k, sub in subs.items():
            s = np.concatenate((ref, sub))
            is_ood = np.zeros(s.size, dtype=bool)
            is_ood[ref.size :] = True
            c = np.zeros(s.size, dtype=bool)
            c[: ref.size] = correct
            try:
                out[(k, "oscr")] = oscr(s, is_ood, c)
            except SemshiftError as err:
                out[(k, "oscr")] = str(err)
    return out


def compare_rows(
    protocol: str,
    detectors: Sequence[str],
    ref: Side,
    subsets: Sequence[Side],
    metrics: Sequence[str],
    bootstrap: Bootstrap,
    *,
    correct: NDArray[np.bool_] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Result rows of ``ref`` (positive) against every subset (negative), per detector.

    Point values come from :func:`semshift.metrics.evaluate_many` (reference sorted once per
    detector) and :func:`semshift.metrics.oscr`; CIs of :data:`CI_METRICS` from
    :func:`ranked_bootstrap` (one paired run for all detectors). A detector without scores
    on a side, or a metric that raises on a subset, gives error rows. ``n_id`` / ``n_ood`` are
    the reference / subset sizes; ``extra`` adds columns to every row.
    """
    extra = dict(extra or {})
    rows: list[dict[str, Any]] = []
    points: dict[str, dict[tuple[int, str], float | str]] = {}
    for det in detectors:
        r = ref.get(det)
        subs: dict[int, FloatArray] = {}
        for k, side in enumerate(subsets):
            s = side.get(det)
            if not isinstance(r, str) and not isinstance(s, str):
                subs[k] = s
        points[det] = {} if isinstance(r, str) else _point_values(r, subs, list(metrics), correct)
    ci_stats = [m for m in metrics if m in CI_METRICS]
    lows: dict[str, FloatArray] = {}
    highs: dict[str, FloatArray] = {}
    if bootstrap.enabled and ci_stats and ref.n > 0 and all(s.n > 0 for s in subsets):
        ref_arrays: list[FloatArray | None] = []
        sub_arrays: list[list[FloatArray | None]] = []
        for det in detectors:
            r = ref.get(det)
            ref_arrays.append(None if isinstance(r, str) else r)
            per_sub: list[FloatArray | None] = []
            for k, side in enumerate(subsets):
                s = side.get(det)
                ok = not isinstance(s, str) and all(
                    isinstance(points[det].get((k, m)), float) for m in ci_stats
                )
                per_sub.append(s if ok and not isinstance(s, str) else None)
            sub_arrays.append(per_sub)
        st = ranked_bootstrap(
            ref_arrays,
            sub_arrays,
            n_resamples=bootstrap.n_resamples,
            seed=bootstrap.seed,
            stats=ci_stats,
            correct=correct,
        )
        for m in ci_stats:
            lows[m], highs[m] = st.ci(m, bootstrap.level)
    for d, det in enumerate(detectors):
        r = ref.get(det)
        for k, side in enumerate(subsets):
            s = side.get(det)
            base = {"protocol": protocol, **extra, **side.keys, "detector": det}
            base.update(n_id=ref.n, n_ood=side.n)
            for m in metrics:
                if isinstance(r, str) or isinstance(s, str):
                    msg = r if isinstance(r, str) else s
                    rows.append(error_row(error=str(msg), metric=m, **base))
                    continue
                v = points[det][(k, m)]
                if isinstance(v, str):
                    rows.append(error_row(error=v, metric=m, **base))
                    continue
                row = {**base, "metric": m, "value": v}
                if m in lows:
                    row.update(ci_low=lows[m][d, k], ci_high=highs[m][d, k])
                rows.append(row)
    return rows


def mean_ci(values: NDArray[np.float64], bootstrap: Bootstrap) -> tuple[float, float]:
    """Percentile CI of the mean of ``values`` (n,) over resampled samples; NaN when off."""
    if not bootstrap.enabled or values.size == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(bootstrap.seed)
    n = values.size
    block = max(1, min(bootstrap.n_resamples, BLOCK_ELEMENTS // n))
    stats = np.empty(bootstrap.n_resamples)
    done = 0
    while done < bootstrap.n_resamples:
        b = min(block, bootstrap.n_resamples - done)
        stats[done : done + b] = values[rng.integers(0, n, size=(b, n))].mean(axis=1)
        done += b
    low, high = percentile_ci(stats, bootstrap.level)
    return float(low), float(high)


def detector_names(*groups: Sequence[ScoredSet]) -> list[str]:
    """Every detector named by any set (scores or errors), in order of first appearance."""
    seen: dict[str, None] = {}
    for sets in groups:
        for s in sets:
            seen.update(dict.fromkeys(s.scores))
            seen.update(dict.fromkeys(s.errors))
    return list(seen)


def pool(
    sets: Sequence[ScoredSet],
    detectors: Sequence[str],
    keys: Mapping[str, Any],
    mask: Sequence[NDArray[np.bool_]] | None = None,
) -> Side:
    """The rows of several sets (optionally masked per set) as one side.

    A detector missing on any member set has no scores on the pool; its error names the
    member set.
    """
    masks = list(mask) if mask is not None else [np.ones(s.n, dtype=bool) for s in sets]
    n = int(sum(int(m.sum()) for m in masks))
    scores: dict[str, FloatArray] = {}
    errors: dict[str, str] = {}
    for det in detectors:
        missing = next((s for s in sets if det not in s.scores), None)
        if missing is not None:
            errors[det] = f"set {missing.name!r}: {missing.missing(det)}"
        else:
            parts = [s.scores[det][m] for s, m in zip(sets, masks, strict=True)]
            scores[det] = np.concatenate(parts)
    return Side(n=n, scores=scores, errors=errors, keys=dict(keys))


def check_id_test(id_test: ScoredSet, where: str) -> None:
    """Raise unless ``id_test`` is a ScoredSet with role ``id_test``."""
    if not isinstance(id_test, ScoredSet) or id_test.role != "id_test":
        got = id_test.role if isinstance(id_test, ScoredSet) else type(id_test).__name__
        raise InputError(f"{where}: id_test must be a ScoredSet with role 'id_test', got {got!r}")


def check_sets(sets: Sequence[ScoredSet], where: str) -> list[ScoredSet]:
    """Raise unless ``sets`` are ScoredSets with distinct names; return them as a list."""
    out = list(sets)
    for s in out:
        if not isinstance(s, ScoredSet):
            raise InputError(f"{where}: sets must be ScoredSet objects, got {type(s).__name__}")
    names = [s.name for s in out]
    dup = sorted({x for x in names if names.count(x) > 1})
    if dup:
        raise InputError(f"{where}: set name(s) {dup} appear more than once; names must be unique")
    return out


POOL_STATS = (
    "newclass",
    "failure",
    "acc",
    "auroc_correct",
    "auroc_incorrect",
    "auroc_correct_vs_incorrect",
    "oscr",
)


def _segment_sums(order: NDArray[np.intp], pos: NDArray[np.intp]) -> tuple[Any, Any, int]:
    """The sparse one-hot matrices (int32 and int16, (n_pos, n_p)) whose product with a block
    of pool multiplicities (in sample order) sums them per segment of the ranked pool between
    the positions ``pos``, and the longest segment. Pool image i (rank r: ``order[r] = i``)
    counts at every ``pos[j] > r``. The int16 matrix reads half the bytes: usable in a block
    whose largest multiplicity times the longest segment fits int16 (every sum then does)."""
    n_p = order.size
    seg = np.empty(n_p, dtype=np.intp)
    seg[order] = np.searchsorted(pos, np.arange(n_p), side="right")  # ranks searched in order
    used = np.flatnonzero(seg < pos.size)
    onehot = scipy.sparse.csr_matrix(
        (np.ones(used.size, dtype=np.int32), (seg[used], used)), shape=(pos.size, n_p)
    )
    onehot16 = scipy.sparse.csr_matrix(
        (np.ones(used.size, dtype=np.int16), onehot.indices, onehot.indptr), shape=onehot.shape
    )
    return onehot, onehot16, int(np.diff(onehot.indptr).max(initial=0))


def pool_bootstrap(
    pool_scores: Sequence[FloatArray | None],
    set_scores: Sequence[Sequence[FloatArray | None]],
    corrects: Sequence[NDArray[np.bool_]],
    *,
    n_resamples: int,
    seed: int,
    fpr95: bool = False,
    within: bool = True,
    ref_last: bool = False,
    threads: int | None = None,
) -> dict[str, FloatArray]:
    """Resampled statistics of known-class sets against one OOD pool, each (n_det, n_sets, B).

    Keys: ``newclass`` (AUROC set vs pool), ``failure``, ``acc``, ``auroc_correct``,
    ``auroc_incorrect``, ``auroc_correct_vs_incorrect``, ``oscr`` (= U_C / (n_S n_P)) and, with
    ``fpr95``, ``fpr95`` (FPR of the pool at 95% recall of the set, ``id_recall``).
    ``within=False`` skips the within-set pairs (``failure`` and
    ``auroc_correct_vs_incorrect`` are then NaN).

    One paired bootstrap for everything: the OOD pool is the reference (sorted by ``-score``
    and cumulated once per detector and resample), each member set (id_test, covariate sets)
    a subset resampled as a whole. Per set and resample, with multiplicities ``v`` and the
    set's correct mask ``c``:

    - ``U_S`` = pairs (set image above pool image, ties 1/2) = sum_j v_j (n_P - above_j),
      ``above_j`` = resampled pool images above image j (one gather of ``cum``);
    - ``U_C`` = the same sum over correct images only (same gather, masked weights);
    - ``U_CW`` = pairs (correct above misclassified) within the set, from a cumulative sum over
      the set's own sorted order;

    so newclass = U_S / (n_S n_P), failure = (U_C + U_CW) / (n_c (n_w + n_P)), acc = n_c / n_S,
    auroc_correct = U_C / (n_c n_P), auroc_incorrect = (U_S - U_C) / (n_w n_P) and
    auroc_correct_vs_incorrect = U_CW / (n_c n_w), with the resampled counts n_c, n_w.
    Draws follow :func:`_blocks` (pool first, then each set; ``ref_last``: the sets first,
    which for one set is the stream of :func:`semshift.metrics.bootstrap_ci` on (set, pool)).
    """
    n_det, n_sets = len(set_scores), len(corrects)
    sizes = [int(c.size) for c in corrects]
    n_p = next((p.size for p in pool_scores if p is not None), 0)
    keys = [*POOL_STATS, "fpr95"] if fpr95 else list(POOL_STATS)
    out = {k: np.full((n_det, n_sets, n_resamples), np.nan) for k in keys}
    if n_p == 0:
        return out
    bounds = np.concatenate(([0], np.cumsum(sizes))).astype(np.intp)
    n_s = np.asarray(sizes, dtype=np.float64)

    def plan_of(d: int) -> Any:
        p = pool_scores[d]
        have = [x is not None for x in set_scores[d]]
        if p is None or not any(have):
            return None
        order = np.argsort(-p, kind="stable")
        r_sorted = -p[order]
        sub = -np.concatenate(
            [x if x is not None else np.zeros(n) for x, n in zip(set_scores[d], sizes, strict=True)]
        )
        lt, le = _positions(r_sorted, sub)
        ties = bool((lt != le).any())
        # The only pool cumulative counts ever read are at the set images' positions: cut the
        # ranked pool at those positions and sum each resample's multiplicities per segment
        # (a sparse one-hot product over the pool in sample order, so no per-resample
        # permutation of the pool); their running sum gives the counts at every position.
        pos = np.unique(np.concatenate((lt, le)) if ties or fpr95 else lt)
        onehot, onehot16, longest = _segment_sums(order, pos)
        members: list[Any] = []
        for k, (x, c) in enumerate(zip(set_scores[d], corrects, strict=True)):
            if x is None:
                members.append(None)
                continue
            # the set in its own ascending score order (the within-set pairs need that order)
            o = np.argsort(x, kind="stable")
            xs, cs = x[o], c[o]
            wrong = np.flatnonzero(~cs)
            seg_k = slice(bounds[k], bounds[k + 1])
            members.append(
                (
                    bounds[k] + o,
                    cs.astype(np.int32),
                    np.searchsorted(pos, lt[seg_k][o]),
                    np.searchsorted(pos, le[seg_k][o]),
                    wrong,
                    np.searchsorted(xs, xs[wrong], side="left"),
                    np.searchsorted(xs, xs[wrong], side="right"),
                )
            )
        return (onehot, onehot16, longest), ties, np.array(have), members

    def block(d: int, plan: Any, ref: _PoolRef, w_sub: IntArray, sl: slice) -> None:
        (onehot, onehot16, longest), ties, have, members = plan
        b = w_sub.shape[0]
        # per segment sums (n_pos, b), then resample-major for a fast running sum (cumsum
        # along the last axis of a C-contiguous array is an order of magnitude faster)
        if longest * ref.top <= _INT16_MAX:
            seg = np.ascontiguousarray((onehot16 @ ref.t16).T, dtype=np.int32)
        else:
            assert ref.t32 is not None
            seg = np.ascontiguousarray((onehot @ ref.t32).T)
        cum = np.cumsum(seg, axis=1, dtype=np.int32)  # (b, n_pos): pool images above
        scale = 2 if ties else 1
        for k in range(n_sets):
            if not have[k]:
                continue
            rows, cs, lt_i, le_i, wrong, w_lt, w_le = members[k]
            vs = np.take(w_sub, rows, axis=1)  # (b, n_S), the set in ascending score order
            g = np.take(cum, lt_i, axis=1)  # resampled pool images above each set image
            if ties:
                g += np.take(cum, le_i, axis=1)  # (x2: ties count 1/2)
            above = np.einsum("bj,bj->b", vs, g, dtype=np.int64) / scale
            vc = vs * cs
            n_c = vc.sum(axis=1, dtype=np.int64).astype(np.float64)
            above_c = np.einsum("bj,bj->b", vc, g, dtype=np.int64) / scale
            u_s = n_p * n_s[k] - above
            u_c = n_p * n_c - above_c
            u_cw = np.full(b, np.nan)
            if within:
                cc = np.zeros((b, sizes[k] + 1), dtype=np.int32)
                np.cumsum(vc, axis=1, dtype=np.int32, out=cc[:, 1:])
                # misclassified images: resampled correct images above them, ties 1/2 (x2)
                below2 = np.take(cc, w_lt, axis=1) + np.take(cc, w_le, axis=1)
                vw = np.take(vs, wrong, axis=1)
                u_cw = np.einsum("bj,bj->b", vw, 2 * n_c[:, None] - below2) / 2
            n_w = n_s[k] - n_c
            with np.errstate(invalid="ignore", divide="ignore"):
                out["newclass"][d, k, sl] = u_s / (n_s[k] * n_p)
                out["failure"][d, k, sl] = (u_c + u_cw) / (n_c * (n_w + n_p))
                out["acc"][d, k, sl] = n_c / n_s[k]
                out["auroc_correct"][d, k, sl] = u_c / (n_c * n_p)
                out["auroc_incorrect"][d, k, sl] = (u_s - u_c) / (n_w * n_p)
                out["auroc_correct_vs_incorrect"][d, k, sl] = u_cw / (n_c * n_w)
            out["oscr"][d, k, sl] = u_c / (n_s[k] * n_p)
            if fpr95:
                # threshold: the k-th largest resampled set score; pool images >= it, which
                # is the pool count at that image's "right" position
                k_fpr = n_required(0.95, sizes[k])
                i_b = _count_prefix(vs, sizes[k] - k_fpr)
                out["fpr95"][d, k, sl] = cum[np.arange(b), le_i[i_b]] / n_p

    with ThreadPoolExecutor(max_workers=_n_threads(threads)) as workers:
        plans = list(workers.map(plan_of, range(n_det)))
        longest = max((p[0][2] for p in plans if p is not None), default=0)
        blocks = _blocks(np.random.default_rng(seed), n_p, sizes, n_resamples, ref_last)
        # the pool transposed once per block (one row per image), shared by every detector
        _each_block(workers, blocks, plans, block, lambda w: _PoolRef.of(w, longest))
    return out


_INT16_MAX = int(np.iinfo(np.int16).max)


@dataclass
class _PoolRef:
    """One block's pool multiplicities, one row per image (n_p, b): int16 (``t16``), and
    int32 (``t32``) only when some detector's segment sums could pass the int16 range."""

    t16: NDArray[np.int16]
    t32: IntArray | None
    top: int  # the largest multiplicity

    @classmethod
    def of(cls, w_ref: IntArray, longest: int) -> _PoolRef:
        top = int(w_ref.max(initial=0))
        t16 = np.ascontiguousarray(w_ref.T, dtype=np.int16)  # multiplicities < 2^15
        return cls(t16, _transposed(w_ref) if longest * top > _INT16_MAX else None, top)
