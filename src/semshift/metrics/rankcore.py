"""The shared sorted ranking every threshold-free metric is computed from (:class:`RankCore`):
the ID scores and the OOD scores each sorted once, plus the position of every OOD score in the
stable merge of the two (ID before OOD within a tie); tie runs and the block merge behind it.

Cumulative-count notation used in the comments: the distinct score values ``v_1 < ... < v_K``;
``A_k`` = #ID scores <= v_k, ``B_k`` = #OOD scores <= v_k, ``n1`` = #ID, ``n0`` = #OOD.
"""

from __future__ import annotations

import math
import sys
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from semshift.errors import InputError
from semshift.metrics._validation import (
    as_bool,
    as_scores,
    check_both_classes,
    check_finite,
)

__all__ = ["RankCore", "n_required", "tie_runs"]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]


def n_required(frac: float, n: int) -> int:
    """Smallest k in 1..n with k / n >= frac, robust to ``frac * n`` rounding up (0.07 * 100).

    The number of ID scores a threshold at recall ``frac`` keeps (the ``id_recall`` convention
    of :func:`fpr_at_tpr`, and :func:`semshift.metrics.threshold_at_recall`).

    Examples
    --------
    >>> n_required(0.95, 20), n_required(0.07, 100), n_required(1.0, 3)
    (19, 7, 3)
    """
    k = math.ceil(frac * n)
    if k > 1 and (k - 1) / n >= frac:
        k -= 1
    return min(max(k, 1), n)


Runs = tuple[IntArray, IntArray] | None


def tie_runs(x: NDArray[np.floating]) -> Runs:
    """First and last index of every run of equal values in sorted ``x``; None if all distinct."""
    n = x.size
    neq = np.not_equal(x[1:], x[:-1])
    n_runs = int(np.count_nonzero(neq)) + 1
    if n_runs >= n:
        return None
    # Written block by block: the index arrays are filled in cache-sized pieces (no full-size
    # temporaries, which cost more than the arithmetic on large inputs).
    first = np.empty(n_runs, dtype=np.int64)
    last = np.empty(n_runs, dtype=np.int64)
    first[0], last[-1] = 0, n - 1
    k = 0
    for b0 in range(0, n - 1, _BLOCK):
        idx = np.flatnonzero(neq[b0 : b0 + _BLOCK])
        c = idx.size
        np.add(idx, b0, out=last[k : k + c])
        np.add(idx, b0 + 1, out=first[k + 1 : k + 1 + c])
        k += c
    return first, last


_BLOCK = 1 << 16  # elements per piece of the blockwise passes: their buffers stay in cache
_EXACT_GAP = 1 << 50  # below this n1 n0, the detection-error gaps are compared as integers


def _label_keys(s: NDArray[np.floating], m: NDArray[np.bool_]) -> FloatArray | None:
    """The scores with the class label stored in their lowest mantissa bit, or None.

    Possible when no score uses that bit, e.g. every float32 (or float16) score, also when
    stored as float64: there the low 29 bits are zero. The bit is set so that, within a tie,
    the ID key sorts first: ``bit = is_ood`` for a positive score (setting it moves the value
    up) and ``not is_ood`` for a negative one (setting it moves the value down); scores that
    differ keep their order, because they differ above that bit. ``-0.0`` is stored as
    ``+0.0`` (equal scores must get equal keys). One ``np.sort`` of the keys then gives the
    stable merge of the two classes (:meth:`RankCore.from_keys`).
    """
    if s.dtype not in (np.float16, np.float32, np.float64):
        return None
    n = s.size
    keys = np.empty(n, dtype=np.float64)
    bits = keys.view(np.int64)
    low = bits.view(np.uint8)[(0 if sys.byteorder == "little" else 7) :: 8]  # lowest bytes
    flip = np.empty(min(n, _BLOCK), bool)
    check = s.dtype == np.float64  # a float32 or float16 score leaves the bit free
    for b0 in range(0, n, _BLOCK):
        b1 = min(b0 + _BLOCK, n)
        kb, lab, lb = keys[b0:b1], flip[: b1 - b0], low[b0:b1]
        np.add(s[b0:b1], 0.0, out=kb)  # float64, and -0.0 + 0.0 = +0.0
        if check and np.bitwise_or.reduce(bits[b0:b1]) & 1:
            return None
        np.less(kb, 0.0, out=lab)
        np.not_equal(lab, m[b0:b1], out=lab)  # is_ood, flipped for negative scores
        np.bitwise_or(lb, lab.view(np.uint8), out=lb)
    return keys


def _key_labels(bits: IntArray, out: IntArray) -> IntArray:
    """The label bit of sorted label keys (1 = OOD), see ``_label_keys``."""
    np.right_shift(bits, 63, out=out)  # -1 for a negative score: its label bit is flipped
    np.bitwise_xor(out, bits, out=out)
    return np.bitwise_and(out, 1, out=out)


class _KeyScan:
    """What the threshold-free metrics need, read off sorted label keys in one blockwise pass.

    A run is a maximal stretch of equal keys: equal scores of one class. Within a tie group the
    ID run comes first, so the runs are exactly the within-class runs of equal scores that
    :class:`RankCore`'s metrics sum over. Each metric's per-run terms are those of the RankCore
    method it replaces, computed from the same integers with the same float operations; the
    average-precision terms are written to one array each and summed once in run order, so
    every value is bitwise the one the sorted-class path gives.

    Each class is handled in its own index space, without per-run label arrays or prefix sums:
    per block of merged positions, ``pos_ood`` / ``pos_id`` = the positions of the block's OOD /
    ID scores (one ``flatnonzero`` each), so a score's index there (plus the class's count
    before the block) is its index within its class. A run ends where the next key differs;
    taking those end flags at ``pos_ood`` (``pos_id``) gives the class indices of the run ends,
    hence the run lengths (differences of consecutive ends: a class's runs are contiguous in
    its index space) and their merged positions. A run that spans blocks is completed in the
    block of its last score. The sum of R (AUROC) needs no runs: each OOD score adds the
    number of ID scores before it.

    Tied ID-OOD pairs: a tie group holding both classes is an ID run directly followed by an
    OOD run whose key differs from it in the label bit only (``key ^ previous key == 1``); it
    adds the product of the two run lengths, read off the run-start flags around that position:
    in the block for two runs of one score each (one pair), by :meth:`_tied_pairs` otherwise.
    """

    def __init__(self, keys: FloatArray, n_id: int) -> None:
        bits = keys.view(np.int64)
        self.bits = bits
        n = bits.size
        n1, n0 = n_id, n - n_id
        self.n, self.n1, self.n0 = n, n1, n0
        self.sum_r = self.tied = 0  # sum over OOD scores of R (RankCore.auroc), tied pairs
        self.gap_runs = self.gap_single = math.inf
        self.d_min = 1 << 62  # smallest exact R n0 - (l + 1) n1 so far (see _gap_runs)
        self.ood_ties = False
        terms_in, terms_out = np.empty(n1), np.empty(n0)
        k_in = k_out = 0
        # Keys of negative scores come first; their label bit is flipped (see _label_keys).
        n_neg = int(np.searchsorted(keys, 0.0))
        w = min(n, _BLOCK)
        xor = np.empty(w, dtype=np.int64)
        starts = np.empty(n + 1, dtype=bool)  # a run starts at i (and one past the end)
        starts[0] = starts[n] = True
        cross = np.empty(w, dtype=bool)  # an OOD run tied with the ID run before starts at b0 + i
        tied_at: list[IntArray] = []  # the other positions where cross is set
        is_ood, is_id, flag = np.empty(w, bool), np.empty(w, bool), np.empty(w, bool)
        buf = np.empty((6, w), dtype=np.int64)  # scratch: fresh memory costs page faults
        c_ood = 0  # OOD scores before the block
        last_ood = last_id = 0  # scores of the class up to the end of its last completed run
        cp_id: list[int] = []  # per block: the ID scores before it (checkpoints of position)
        for b0 in range(0, n, _BLOCK):
            b1 = min(b0 + _BLOCK, n)
            m = b1 - b0
            cp_id.append(b0 - c_ood)
            lo = max(b0, 1)  # key changes at lo..b1-1
            x = xor[lo - b0 : m]
            np.bitwise_xor(bits[lo:b1], bits[lo - 1 : b1 - 1], out=x)
            np.not_equal(x, 0, out=starts[lo:b1])
            if b1 < n:
                starts[b1] = bits[b1] != bits[b1 - 1]
            ends = starts[b0 + 1 : b1 + 1]  # a run ends at b0 + i
            tie = np.equal(x, 1, out=cross[lo - b0 : m])
            if tie.any():
                at = np.flatnonzero(tie)
                at += lo
                single = starts[at - 1]
                single &= starts[at + 1]  # an ID and an OOD run of one score each: one pair
                n_single = int(np.count_nonzero(single))
                self.tied += n_single
                if n_single < at.size:
                    tied_at.append(at[~single])
            t, ood = buf[0, :m], is_ood[:m]
            np.bitwise_and(bits[b0:b1], 1, out=t)
            k = min(max(n_neg - b0, 0), m)
            if k:
                np.equal(t[:k], 0, out=ood[:k])
            if k < m:
                np.not_equal(t[k:], 0, out=ood[k:])
            pos_ood = np.flatnonzero(ood)
            pos_id = np.flatnonzero(np.logical_not(ood, out=is_id[:m]))
            c_id = b0 - c_ood
            n_ood = pos_ood.size
            # auroc: each OOD score adds R = the ID scores before it, b0 + pos - (its OOD index)
            self.sum_r += int(pos_ood.sum()) + n_ood * c_id - n_ood * (n_ood - 1) // 2
            # OOD runs ending in the block (ap_out, detection_error): with l the OOD index of the
            # run's last score and e its merged position, ln (l + 1) / (e + 1), and R = e - l.
            idx = np.flatnonzero(ends.take(pos_ood, out=flag[:n_ood], mode="clip"))
            c = idx.size
            if c:
                e, last1, ln, end1, t1, t2 = (b[:c] for b in buf)
                pos_ood.take(idx, out=e, mode="clip")
                np.add(idx, c_ood + 1, out=last1)  # l + 1
                ln[0] = last1[0] - last_ood
                np.subtract(last1[1:], last1[:-1], out=ln[1:])
                last_ood = int(last1[-1])
                np.add(e, b0 + 1, out=end1)  # e + 1; R = e - l = end1 - last1
                # R >= c_id (the run ends in the block) and l + 1 <= c_ood + n_ood: skip the
                # block when that bound on R n0 - (l + 1) n1 exceeds the smallest value so far.
                if n1 * n0 >= _EXACT_GAP or c_id * n0 - (c_ood + n_ood) * n1 <= self.d_min:
                    self._gap_runs(end1, last1, t1, t2)
                if not self.ood_ties:
                    self.ood_ties = bool((ln > 1).any())
                    gap = np.multiply(last1, -(1.0 + n1 / n0))
                    gap += end1 - 1
                    self.gap_single = min(self.gap_single, float(gap.min()))
                np.multiply(ln, last1, out=ln)  # exact integers, as in RankCore.ap_out
                np.true_divide(ln, end1, out=terms_out[k_out : k_out + c])
                k_out += c
            # ID runs ending in the block (ap_in): a run of ln equal ID scores, first ID index f
            # and first merged position p, adds ln (n1 - f) / (n - p).
            idx = np.flatnonzero(ends.take(pos_id, out=flag[: m - n_ood], mode="clip"))
            c = idx.size
            if c:
                q, last1, ln, a = (b[:c] for b in buf[:4])
                pos_id.take(idx, out=q, mode="clip")  # merged position of the run's last score
                np.add(idx, c_id + 1, out=last1)  # f + ln; f = the previous run's f + ln
                ln[0] = last1[0] - last_id
                np.subtract(last1[1:], last1[:-1], out=ln[1:])
                a[0] = n1 - last_id
                np.subtract(n1, last1[:-1], out=a[1:])  # n1 - f
                last_id = int(last1[-1])
                d = np.subtract(n - b0 - 1, q, out=q)
                d += ln  # n - p
                np.multiply(a, ln, out=a)  # as in RankCore.ap_in
                np.true_divide(a, d, out=terms_in[k_in : k_in + c])
                k_in += c
            c_ood += n_ood
        if tied_at:
            self.tied += self._tied_pairs(keys, starts, np.concatenate(tied_at))
        self.cp_pos = np.arange(0, n, _BLOCK)
        self.cp_id = np.array(cp_id)
        self.ap_in = float(terms_in[:k_in].sum()) / n1
        self.ap_out = float(terms_out[:k_out].sum()) / n0
        if self.ood_ties:  # RankCore.detection_error, with and without OOD tie runs
            self.detection_error = 0.5 * (1.0 + min(0.0, self.gap_runs))
        else:
            self.detection_error = 0.5 * (1.0 + min(0.0, (self.gap_single + 1.0) / n1))

    @staticmethod
    def _tied_pairs(keys: FloatArray, starts: NDArray[np.bool_], at: IntArray) -> int:
        """Tied ID-OOD pairs: at each position in ``at`` an OOD run starts after an ID run of the
        same score; the sum of the products of their lengths.

        A run's length is the distance to the nearest run start (``starts``, one past the end
        included) before or after that position; short runs, the common case, are resolved by a
        few look-ups, longer ones by binary search of the sorted keys for their first and last
        position.
        """
        length = []
        for step in (-1, 1):
            ln = np.ones(at.size, dtype=np.int64)
            todo = np.flatnonzero(~starts[at + step])
            k = 1
            while todo.size and k < 4:
                k += 1
                ln[todo] = k
                todo = todo[~starts[at[todo] + k * step]]
            if todo.size:
                p = at[todo]
                if step < 0:  # the ID run ends at p - 1
                    ln[todo] = p - np.searchsorted(keys, keys[p - 1], side="left")
                else:
                    ln[todo] = np.searchsorted(keys, keys[p], side="right") - p
            length.append(ln)
        return int(np.dot(length[0], length[1]))

    def _gap_runs(self, end1: IntArray, last1: IntArray, d: IntArray, t: IntArray) -> None:
        """Track min of R / n1 - (l + 1) / n0 over OOD runs (RankCore.detection_error).

        ``R = end1 - last1``; ``d`` and ``t`` are scratch of the same size. When n1 n0 < 2**50,
        the rounded values (error below 1.5 * 2**-52) keep the order of the exact ones, which
        differ by at least 1 / (n1 n0): only the runs with the smallest exact value
        R n0 - (l + 1) n1 = end1 n0 - last1 n, an integer, are evaluated in floating point.
        """
        n1, n0 = self.n1, self.n0
        if n1 * n0 < _EXACT_GAP:
            np.multiply(end1, n0, out=d)
            d -= np.multiply(last1, self.n, out=t)
            d_min = int(d.min())
            if d_min > self.d_min:
                return
            at = np.flatnonzero(d == d_min)
            end1, last1 = end1.take(at), last1.take(at)
            if d_min < self.d_min:
                self.d_min, self.gap_runs = d_min, math.inf
        gap = (end1 - last1) / n1
        gap -= last1 / n0
        self.gap_runs = min(self.gap_runs, float(gap.min()))

    def position(self, index: int, ood: bool) -> int:
        """Merged position of the class's ``index``-th smallest score (0-based)."""
        before = self.cp_pos - self.cp_id if ood else self.cp_id
        b = int(np.searchsorted(before, index, side="right")) - 1
        pos, need = int(self.cp_pos[b]), index - int(before[b])
        while True:
            chunk = self.bits[pos : pos + _BLOCK]
            lab = _key_labels(chunk, np.empty_like(chunk))
            idx = np.flatnonzero(lab if ood else lab == 0)
            if idx.size > need:
                return pos + int(idx[need])
            need -= idx.size
            pos += chunk.size


_MERGE_BLOCK = 1 << 17  # merged elements per block: cache-sized, small reusable buffers


def _block_merge(
    id_sorted: NDArray[np.floating], ood_sorted: NDArray[np.floating]
) -> tuple[IntArray, IntArray, bool]:
    """Positions of the OOD and of the ID scores in their stable merge (ID first on ties).

    The merge runs block by block: the OOD scores are cut into consecutive blocks, each block
    takes the ID scores up to (and equal to) its last OOD score, and each pair of short sorted
    runs is merged by NumPy's stable argsort (timsort: a linear merge of two runs). Blocks keep
    the merge buffers small and cache-resident, which is faster than one merge of n elements.

    Returns ``(pos_ood, pos_id, cross)``; ``cross`` tells whether an ID score equals an OOD
    score. Within a tie group the last ID score directly precedes the first OOD score, and all
    ID scores equal to a block's last OOD score are in that block, so checking adjacent merged
    pairs inside each block finds every such tie.
    """
    n1, n0 = id_sorted.size, ood_sorted.size
    pos_ood = np.empty(n0, dtype=np.int64)
    pos_id = np.empty(n1, dtype=np.int64)
    step = max(1, round(_MERGE_BLOCK * n0 / (n1 + n0)))
    b_start = np.arange(0, n0, step)
    b_end = np.minimum(b_start + step, n0)
    a_end = np.searchsorted(id_sorted, ood_sorted[b_end - 1], side="right")
    a_end[-1] = n1
    a_start = np.concatenate(([0], a_end[:-1]))
    cross = False
    for a0, a1, b0, b1 in zip(a_start, a_end, b_start, b_end, strict=True):
        seg = np.concatenate((id_sorted[a0:a1], ood_sorted[b0:b1]))
        order = np.argsort(seg, kind="stable")
        is_ood = order >= a1 - a0
        np.add(np.flatnonzero(is_ood), a0 + b0, out=pos_ood[b0:b1])
        np.add(np.flatnonzero(~is_ood), a0 + b0, out=pos_id[a0:a1])
        if not cross:
            vals = seg[order]
            tie = vals[1:] == vals[:-1]
            tie &= is_ood[1:]
            tie &= ~is_ood[:-1]
            cross = bool(tie.any())
    return pos_ood, pos_id, cross


def _split_classes(
    s: NDArray[np.floating], m: NDArray[np.bool_], n_id: int
) -> NDArray[np.floating]:
    """The ID scores followed by the OOD scores, each in input order.

    Compressed block by block: one ``np.compress`` of the whole array builds a full-size index
    array first, which costs more than the copy itself on large inputs.
    """
    n = s.size
    both = np.empty(n, dtype=s.dtype)
    is_id = np.empty(min(n, _BLOCK), dtype=bool)
    i, j = 0, n_id
    for b0 in range(0, n, _BLOCK):
        b1 = min(b0 + _BLOCK, n)
        ood, sb = m[b0:b1], s[b0:b1]
        c = int(np.count_nonzero(ood))
        np.compress(ood, sb, out=both[j : j + c])
        np.compress(np.logical_not(ood, out=is_id[: b1 - b0]), sb, out=both[i : i + b1 - b0 - c])
        i, j = i + b1 - b0 - c, j + c
    return both


class RankCore:
    """Sorted ID / OOD scores and their stable merge: the state every ranking metric reads.

    The merged order puts, within a tie, every ID score before every OOD score. Then a group of
    equal values starts at its first ID score (if any) and ends at its last OOD score (if any),
    so every metric can be written with the within-class runs of equal values only, in O(n)
    after the sort and without a table over the merged array.

    Parameters
    ----------
    id_sorted : ndarray of float, shape (n1,)
        ID scores, ascending.
    ood_sorted : ndarray of float, shape (n0,)
        OOD scores, ascending.
    id_runs : tuple of ndarray or None, optional
        Runs of equal ID scores as returned by :func:`tie_runs` (pass it when the ID side is
        reused); computed when not given.
    merge : {"auto", "search", "sort"}
        How OOD positions in the merge are found: ``"search"`` = ``np.searchsorted`` of the OOD
        scores into the ID scores (cheap when n0 << n1), ``"sort"`` = blockwise stable argsort
        of the two sorted runs (linear-time merges in NumPy's timsort, see ``_block_merge``).
    """

    def __init__(
        self,
        id_sorted: NDArray[np.floating],
        ood_sorted: NDArray[np.floating],
        *,
        id_runs: Runs | Literal["compute"] = "compute",
        merge: Literal["auto", "search", "sort"] = "auto",
    ) -> None:
        self._id_sorted: NDArray[np.floating] | None = id_sorted
        self._ood_sorted: NDArray[np.floating] | None = ood_sorted
        self._setup(int(id_sorted.size), int(ood_sorted.size), id_runs, merge)

    def _setup(
        self,
        n1: int,
        n0: int,
        id_runs: Runs | Literal["compute"],
        merge: Literal["auto", "search", "sort"],
    ) -> None:
        self.n_id, self.n_ood, self.n = n1, n0, n1 + n0
        # Set by from_keys: the sorted label keys and their run scan (None otherwise).
        self._keys: FloatArray | None = None
        self._scan: _KeyScan | None = None
        if merge == "auto":
            merge = "search" if n0 * math.log2(n1 + 1) <= 4 * (n1 + n0) else "sort"
        self._merge = merge
        # Scratch buffers (large inputs: fresh memory costs as much as the arithmetic).
        self._int_scratch: IntArray | None = None
        self._float_scratch: FloatArray | None = None
        self._counts: FloatArray | None = None
        self._pos_ood: IntArray | None = None
        self._cross: bool | None = None  # any ID score equal to an OOD score (None: unknown)
        self._pos_id: IntArray | None = None
        self._id_runs: Runs | Literal["compute"] = id_runs
        self._ood_runs: Runs | Literal["compute"] = "compute"
        self._r: IntArray | None = None

    @classmethod
    def from_scores(cls, scores: ArrayLike, is_ood: ArrayLike, what: str) -> RankCore:
        """Validate ``(scores, is_ood)`` and build the core.

        When no score uses its lowest mantissa bit (float32 or float16 scores, also stored as
        float64), the class label goes into that bit and one sort of the keys gives the merge
        (:meth:`from_keys`); otherwise each class is sorted in place and merged blockwise.

        On the key path the scores are checked for NaN / inf after the sort, where it takes
        two look-ups (NaN sorts last, -inf first, and an infinite score with its label bit set
        is a NaN), instead of a pass over the scores; the errors and their order stay those of
        :func:`as_scores` followed by :func:`as_bool`.
        """
        s = as_scores(scores, finite=False)
        try:
            m = as_bool(is_ood, "is_ood", s.size)
            n_id, _ = check_both_classes(m, what)
        except InputError:
            check_finite(s, "scores")  # a score error comes first, as in as_scores
            raise
        keys = _label_keys(s, m)
        if keys is not None:
            keys.sort()
            if not (math.isfinite(keys[0]) and math.isfinite(keys[-1])):
                check_finite(s, "scores")
            return cls.from_keys(keys, n_id)
        check_finite(s, "scores")
        both = _split_classes(s, m, n_id)
        both[:n_id].sort()
        both[n_id:].sort()
        return cls(both[:n_id], both[n_id:])

    @classmethod
    def from_keys(cls, keys: FloatArray, n_id: int) -> RankCore:
        """The core from the sorted keys of ``_label_keys`` (``n_id`` of them ID).

        ``auroc``, ``fpr``, ``ap_in``, ``ap_out`` and ``detection_error`` are then read off
        one blockwise scan of the keys (:class:`_KeyScan`); the sorted classes and the merge
        positions, which the other methods read, are decoded from the keys on first use.
        """
        core = object.__new__(cls)
        core._id_sorted = core._ood_sorted = None
        core._setup(n_id, keys.size - n_id, "compute", "sort")
        core._keys = keys
        return core

    def _decode_keys(self, keys: FloatArray) -> None:
        """Sorted ID / OOD scores and their merge positions, from the sorted label keys."""
        n_id = self.n_id
        n, n0 = self.n, self.n_ood
        bits = keys.view(np.int64)
        id_sorted, ood_sorted = np.empty(n_id), np.empty(n0)
        pos_id, pos_ood = np.empty(n_id, dtype=np.int64), np.empty(n0, dtype=np.int64)
        w = min(n, _BLOCK)
        scratch, ood_buf, id_buf = np.empty(w, np.int64), np.empty(w, bool), np.empty(w, bool)
        i = j = 0
        for b0 in range(0, n, _BLOCK):
            b1 = min(b0 + _BLOCK, n)
            bb, t, is_ood, is_id = (
                bits[b0:b1],
                scratch[: b1 - b0],
                ood_buf[: b1 - b0],
                id_buf[: b1 - b0],
            )
            np.right_shift(bb, 63, out=t)
            np.bitwise_xor(t, bb, out=t)
            np.bitwise_and(t, 1, out=t)  # the label bit, unflipped for negative scores
            np.not_equal(t, 0, out=is_ood)
            np.logical_not(is_ood, out=is_id)
            q = np.flatnonzero(is_ood)
            c = q.size
            np.add(q, b0, out=pos_ood[j : j + c])
            np.add(np.flatnonzero(is_id), b0, out=pos_id[i : i + b1 - b0 - c])
            np.bitwise_and(bb, -2, out=t)  # the score itself (its lowest bit was 0)
            v = t.view(np.float64)
            np.compress(is_ood, v, out=ood_sorted[j : j + c])
            np.compress(is_id, v, out=id_sorted[i : i + b1 - b0 - c])
            i += b1 - b0 - c
            j += c
        self._id_sorted, self._ood_sorted = id_sorted, ood_sorted
        self._pos_ood, self._pos_id = pos_ood, pos_id

    @property
    def id_sorted(self) -> NDArray[np.floating]:
        """ID scores, ascending, shape (n1,)."""
        if self._id_sorted is None:
            assert self._keys is not None
            self._decode_keys(self._keys)
        assert self._id_sorted is not None
        return self._id_sorted

    @property
    def ood_sorted(self) -> NDArray[np.floating]:
        """OOD scores, ascending, shape (n0,)."""
        if self._ood_sorted is None:
            assert self._keys is not None
            self._decode_keys(self._keys)
        assert self._ood_sorted is not None
        return self._ood_sorted

    @property
    def scan(self) -> _KeyScan | None:
        """The run scan of the label keys (cores built by ``from_keys`` only), else None."""
        if self._scan is None and self._keys is not None:
            self._scan = _KeyScan(self._keys, self.n_id)
        return self._scan

    # -- lazily derived state -------------------------------------------------------------

    @property
    def pos_ood(self) -> IntArray:
        """Position of the j-th smallest OOD score in the merged ascending order, shape (n0,).

        Computed on first use (the FPR needs only the two sorted arrays).
        """
        if self._pos_ood is None and self._keys is not None:
            self._decode_keys(self._keys)
        if self._pos_ood is None:
            sa, sb = self.id_sorted, self.ood_sorted
            if self._merge == "search":
                pos = np.searchsorted(sa, sb, side="right")
                pos += np.arange(self.n_ood)
            else:
                pos, self._pos_id, self._cross = _block_merge(sa, sb)
            self._pos_ood = pos
        assert self._pos_ood is not None
        return self._pos_ood

    @property
    def pos_id(self) -> IntArray:
        """Position of the i-th smallest ID score in the merged order, shape (n1,)."""
        pos_ood = self.pos_ood  # the block merge sets pos_id as well
        if self._pos_id is None:
            is_id = np.ones(self.n, dtype=bool)
            is_id[pos_ood] = False
            self._pos_id = np.flatnonzero(is_id)
        return self._pos_id

    @property
    def id_runs(self) -> Runs:
        """``(first, last)`` indices of the runs of equal ID scores, or None if all distinct."""
        if isinstance(self._id_runs, str):
            self._id_runs = tie_runs(self.id_sorted)
        return self._id_runs

    @property
    def ood_runs(self) -> Runs:
        """``(first, last)`` indices of the runs of equal OOD scores, or None if all distinct."""
        if isinstance(self._ood_runs, str):
            self._ood_runs = tie_runs(self.ood_sorted)
        return self._ood_runs

    def n_id_le(self, j: IntArray | None = None) -> IntArray:
        """R_j = #ID scores <= the j-th smallest OOD score (all j, or the given indices)."""
        if j is None:
            if self._r is None:
                self._r = self.pos_ood - np.arange(self.n_ood)
            return self._r
        return self.pos_ood[j] - j

    def _int_buf(self, k: int) -> IntArray:
        if self._int_scratch is None or self._int_scratch.size < k:
            self._int_scratch = np.empty(max(self.n_id, self.n_ood), dtype=np.int64)
        return self._int_scratch[:k]

    def _float_buf(self, k: int) -> FloatArray:
        if self._float_scratch is None:
            self._float_scratch = np.empty(max(self.n_id, self.n_ood), dtype=np.float64)
        return self._float_scratch[:k]

    def counts(self, k: int) -> FloatArray:
        """1.0, 2.0, ..., k as float64 (k <= max(n1, n0)), cached."""
        if self._counts is None:
            self._counts = np.arange(1, max(self.n_id, self.n_ood) + 1, dtype=np.float64)
        return self._counts[:k]

    def tied_pairs(self) -> int:
        """Number of (ID, OOD) pairs with equal scores."""
        scan = self.scan
        if scan is not None:
            return scan.tied
        runs = self.ood_runs
        n0 = self.n_ood
        self.pos_ood  # noqa: B018 - the block merge also tells whether cross ties exist
        if self._cross is False:
            return 0
        # The largest ID score <= the OOD value is sa[R - 1]; when R == 0 the index -1 wraps to
        # the maximum, which is then > the OOD value, so the comparison stays False.
        if runs is None:
            below = self._int_buf(n0)
            # R_j - 1 = pos_ood[j] - (j + 1), written into scratch without an index array
            np.subtract(self.pos_ood, self.counts(n0), out=below, casting="unsafe")
            out = self._float_buf(n0) if self.id_sorted.dtype == np.float64 else None
            near = np.take(self.id_sorted, below, out=out, mode="wrap")
            tied = np.flatnonzero(near == self.ood_sorted)
            if tied.size == 0:
                return 0
            r_tied = below[tied] + 1
        else:
            last = runs[1]
            r = self.n_id_le(last)
            tied = np.flatnonzero(np.take(self.id_sorted, r - 1) == self.ood_sorted[last])
            if tied.size == 0:
                return 0
            r_tied = r[tied]
        id_runs = self.id_runs
        if id_runs is None:
            n_id_equal = np.ones(tied.size, dtype=np.int64)
        else:
            first = id_runs[0]
            n_id_equal = r_tied - first[np.searchsorted(first, r_tied - 1, side="right") - 1]
        if runs is not None:
            n_id_equal *= runs[1][tied] - runs[0][tied] + 1  # times the OOD run length
        return int(n_id_equal.sum())

    # -- metrics ----------------------------------------------------------------------------

    def auroc(self) -> float:
        """Mann-Whitney AUROC, ID positive: P(s_id > s_ood) + 0.5 P(s_id = s_ood)."""
        n1, n0 = self.n_id, self.n_ood
        # sum_j R_j with R_j = pos_ood[j] - j; U = n1 n0 - sum R + 0.5 * #(tied ID-OOD pairs).
        scan = self.scan
        if scan is not None:
            sum_r = scan.sum_r
        else:
            sum_r = int(self.pos_ood.sum()) - n0 * (n0 - 1) // 2
        return (n1 * n0 - sum_r + 0.5 * self.tied_pairs()) / (n1 * n0)

    def fpr(self, tpr: float, convention: str) -> float:
        """FPR at the threshold reaching ``tpr`` recall of the class given by ``convention``."""
        n1, n0, scan = self.n_id, self.n_ood, self.scan
        if scan is not None:
            # A class's k-th score at merged position P has P - k scores of the other class
            # before it: for an ID score those are the OOD scores below it (ties put OOD after
            # ID); for an OOD score, the ID scores <= it.
            if convention == "id_recall":
                i = n1 - n_required(tpr, n1)
                return float(n0 - (scan.position(i, ood=False) - i)) / n0
            j = n_required(tpr, n0) - 1
            return float(scan.position(j, ood=True) - j) / n1
        sa, sb = self.id_sorted, self.ood_sorted
        if convention == "id_recall":
            k = n_required(tpr, n1)
            t = sa[n1 - k]  # largest t with #ID >= t at least k
            return float(n0 - np.searchsorted(sb, t, side="left")) / n0
        k = n_required(tpr, n0)
        t = sb[k - 1]  # smallest t with #OOD <= t at least k
        return float(np.searchsorted(sa, t, side="right")) / n1

    def openood_roc_points(self) -> tuple[IntArray, IntArray]:
        """The points OpenOOD v1.5's ROC curve keeps, as cumulative counts (A, B).

        OpenOOD calls ``sklearn.metrics.roc_curve(is_ood, -scores)`` with its default
        ``drop_intermediate=True``. sklearn (``confusion_matrix_at_thresholds``, formerly
        ``_binary_clf_curve``) puts one point at every distinct score: with ``v_1 < ... < v_K``
        the distinct values, point k is ``(fps, tps) = (A_k, B_k)`` (#ID <= v_k,
        #OOD <= v_k). It then keeps the first and the last point and every interior point
        where the second difference of ``fps`` or of ``tps`` is nonzero, i.e. it drops point k
        when the groups of v_k and v_(k+1) hold the same numbers of ID and OOD scores (k lies
        inside a straight run of equal steps); only then does it prepend (0, 0). Returns the
        kept ``(A, B)``, shape (K',) each, without the prepended origin.
        """
        n = self.n
        vals = np.empty(n, dtype=np.result_type(self.id_sorted, self.ood_sorted))
        vals[self.pos_id] = self.id_sorted
        vals[self.pos_ood] = self.ood_sorted
        ends = np.flatnonzero(vals[1:] != vals[:-1])  # last merged index of each group but one
        ends = np.append(ends, n - 1)
        b = np.searchsorted(self.pos_ood, ends, side="right")  # B_k: OOD positions <= end
        a = ends + 1 - b
        if ends.size > 2:
            keep = np.ones(ends.size, dtype=bool)
            np.logical_or(np.diff(a, 2) != 0, np.diff(b, 2) != 0, out=keep[1:-1])
            a, b = a[keep], b[keep]
        return a, b

    def fpr_openood(self, tpr: float) -> float:
        """FPR as OpenOOD v1.5: ``fpr_list[np.argmax(tpr_list >= tpr)]`` on its ROC curve.

        ``tpr_list = B / n_ood`` and ``fpr_list = A / n_id`` over :meth:`openood_roc_points`
        (float division, as sklearn). The prepended (0, 0) never qualifies because
        ``tpr > 0``, and the last point (TPR 1) always does because ``tpr <= 1``.
        """
        a, b = self.openood_roc_points()
        k = int(np.argmax(b / self.n_ood >= tpr))
        return float(a[k]) / self.n_id

    def ap_in(self) -> float:
        """Average precision with ID positive, ranked by descending score."""
        n1, n = self.n_id, self.n
        if self.scan is not None:
            return self.scan.ap_in
        runs = self.id_runs
        if runs is None:
            # i-th smallest ID (0-based): TP = n1 - i, TP + FP = n - pos_id[i].
            d = np.subtract(n, self.pos_id, out=self._float_buf(n1))
            np.divide(self.counts(n1)[::-1], d, out=d)
            return float(d.sum()) / n1
        # A run of equal ID scores v (first index f): TP = n1 - f and TP + FP = #scores >= v
        # = n - pos_id[f], because the group of v starts at its first ID score.
        first, last = runs
        terms = (last - first + 1) * (n1 - first) / (n - self.pos_id[first])
        return float(terms.sum()) / n1

    def ap_out(self) -> float:
        """Average precision with OOD positive, ranked by ascending score."""
        n0 = self.n_ood
        if self.scan is not None:
            return self.scan.ap_out
        runs = self.ood_runs
        if runs is None:
            # j-th smallest OOD (0-based): TP = j + 1, TP + FP = pos_ood[j] + 1.
            d = np.add(self.pos_ood, 1.0, out=self._float_buf(n0))
            np.divide(self.counts(n0), d, out=d)
            return float(d.sum()) / n0
        # A run of equal OOD scores (last index l) ends its group: TP + FP = pos_ood[l] + 1.
        first, last = runs
        terms = (last - first + 1) * (last + 1) / (self.pos_ood[last] + 1)
        return float(terms.sum()) / n0

    def trapz_in(self) -> float:
        """Area under the PR curve (ID positive), linear interpolation, from (0, 1)."""
        n1, n0 = self.n_id, self.n_ood
        runs = self.id_runs
        first, last = runs if runs is not None else (np.arange(n1),) * 2
        a_ge = n1 - first  # ID scores >= v
        b_ge = n0 - (self.pos_id[first] - first)  # OOD scores >= v
        a_gt = n1 - 1 - last  # ID scores > v
        b_gt = n0 - np.searchsorted(self.ood_sorted, self.id_sorted[last], side="right")
        prec = a_ge / (a_ge + b_ge)  # curve point at threshold v (score >= v)
        above = a_gt + b_gt  # previous point: score > v; (recall 0, precision 1) when empty
        prev = np.divide(a_gt, above, out=np.ones(above.size), where=above > 0)
        return float(np.sum((last - first + 1) * (prec + prev))) / (2 * n1)

    def trapz_out(self) -> float:
        """Area under the PR curve (OOD positive, score -s), linear interpolation."""
        n0 = self.n_ood
        runs = self.ood_runs
        first, last = runs if runs is not None else (np.arange(n0),) * 2
        b_le = last + 1  # OOD scores <= v
        a_le = self.n_id_le(last)  # ID scores <= v
        b_lt = first  # OOD scores < v
        a_lt = np.searchsorted(self.id_sorted, self.ood_sorted[first], side="left")
        prec = b_le / (a_le + b_le)
        below = a_lt + b_lt
        prev = np.divide(b_lt, below, out=np.ones(below.size), where=below > 0)
        return float(np.sum((last - first + 1) * (prec + prev))) / (2 * n0)

    def detection_error(self) -> float:
        """min over thresholds of 0.5 (1 - TPR) + 0.5 FPR (accept as ID when score >= t)."""
        n1, n0 = self.n_id, self.n_ood
        # 0.5 (1 + #ID below t / n1 - #OOD below t / n0) is smallest with t just above the last
        # OOD score of a group: #ID below = R_l, #OOD below = l + 1.
        if self.scan is not None:
            return self.scan.detection_error
        runs = self.ood_runs
        if runs is None:
            # (R_j / n1 - (j + 1) / n0) n1 = pos_ood[j] + 1 - (j + 1) (1 + n1 / n0)
            gap = np.multiply(self.counts(n0), -(1.0 + n1 / n0), out=self._float_buf(n0))
            np.add(gap, self.pos_ood, out=gap)
            return 0.5 * (1.0 + min(0.0, (float(gap.min()) + 1.0) / n1))
        else:
            last = runs[1]
            gap = self.n_id_le(last) / n1 - (last + 1) / n0
        return 0.5 * (1.0 + min(0.0, float(gap.min())))

    def aupr(self, positive: Literal["id", "ood"], method: str) -> float:
        """AUPR-In (``positive="id"``) or AUPR-Out by ``method`` ("ap" or "trapezoid")."""
        if method == "ap":
            return self.ap_in() if positive == "id" else self.ap_out()
        return self.trapz_in() if positive == "id" else self.trapz_out()
