"""Threshold-free detection metrics from one shared sorted ranking.

Every function takes ``scores`` (higher = more in-distribution) and a boolean ``is_ood``
(True = OOD / unknown / negative) and is exact: ties are handled as stated per metric, nothing
is binned. All of them are computed from the same object, :class:`_RankCore`: the ID scores and
the OOD scores each sorted once, plus the position of every OOD score in the stable merge of the
two (ID before OOD within a tie). :func:`ranking_metrics` returns all of them from that one sort,
which is what :func:`semshift.metrics.evaluate_many` and the benchmarks use.

Cumulative-count notation used in the comments: the distinct score values ``v_1 < ... < v_K``;
``A_k`` = #ID scores <= v_k, ``B_k`` = #OOD scores <= v_k, ``n1`` = #ID, ``n0`` = #OOD.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from semshift.errors import InputError
from semshift.metrics._validation import as_bool, as_scores, check_both_classes
from semshift.metrics.registry import register_metric

__all__ = [
    "RankingMetrics",
    "aupr_in",
    "aupr_out",
    "auroc",
    "detection_error",
    "fpr_at_tpr",
    "fpr_at_tpr_openood",
    "n_required",
    "ranking_metrics",
]

Convention = Literal["id_recall", "ood_recall"]
AuprMethod = Literal["ap", "trapezoid"]
Conventions = Literal["exact", "openood"]
_CONVENTIONS = ("id_recall", "ood_recall")
_AUPR_METHODS = ("ap", "trapezoid")
_CONVENTION_SETS = ("exact", "openood")

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


def _runs(x: NDArray[np.floating]) -> Runs:
    """First and last index of every run of equal values in sorted ``x``; None if all distinct."""
    neq = x[1:] != x[:-1]
    if neq.all():
        return None
    boundary = np.flatnonzero(neq)
    first = np.concatenate(([0], boundary + 1))
    last = np.concatenate((boundary, [x.size - 1]))
    return first, last


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


class _RankCore:
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
        Runs of equal ID scores as returned by ``_runs`` (pass it when the ID side is reused);
        computed when not given.
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
        self.id_sorted = id_sorted
        self.ood_sorted = ood_sorted
        n1, n0 = int(id_sorted.size), int(ood_sorted.size)
        self.n_id, self.n_ood, self.n = n1, n0, n1 + n0
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
    def from_scores(cls, scores: ArrayLike, is_ood: ArrayLike, what: str) -> _RankCore:
        """Validate ``(scores, is_ood)`` and build the core (one in-place sort per class)."""
        s = as_scores(scores)
        m = as_bool(is_ood, "is_ood", s.size)
        n_id, _ = check_both_classes(m, what)
        both = np.empty(s.size, dtype=s.dtype)
        np.compress(~m, s, out=both[:n_id])
        np.compress(m, s, out=both[n_id:])
        both[:n_id].sort()
        both[n_id:].sort()
        return cls(both[:n_id], both[n_id:])

    # -- lazily derived state -------------------------------------------------------------

    @property
    def pos_ood(self) -> IntArray:
        """Position of the j-th smallest OOD score in the merged ascending order, shape (n0,).

        Computed on first use (the FPR needs only the two sorted arrays).
        """
        if self._pos_ood is None:
            sa, sb = self.id_sorted, self.ood_sorted
            if self._merge == "search":
                pos = np.searchsorted(sa, sb, side="right")
                pos += np.arange(self.n_ood)
            else:
                pos, self._pos_id, self._cross = _block_merge(sa, sb)
            self._pos_ood = pos
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
            self._id_runs = _runs(self.id_sorted)
        return self._id_runs

    @property
    def ood_runs(self) -> Runs:
        """``(first, last)`` indices of the runs of equal OOD scores, or None if all distinct."""
        if isinstance(self._ood_runs, str):
            self._ood_runs = _runs(self.ood_sorted)
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
        sum_r = int(self.pos_ood.sum()) - n0 * (n0 - 1) // 2
        return (n1 * n0 - sum_r + 0.5 * self.tied_pairs()) / (n1 * n0)

    def fpr(self, tpr: float, convention: str) -> float:
        """FPR at the threshold reaching ``tpr`` recall of the class given by ``convention``."""
        sa, sb, n1, n0 = self.id_sorted, self.ood_sorted, self.n_id, self.n_ood
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


def _check_tpr(tpr: float, convention: str) -> None:
    if convention not in _CONVENTIONS:
        raise InputError(f"convention must be one of {_CONVENTIONS}, got {convention!r}")
    if not (isinstance(tpr, int | float | np.floating) and 0.0 < float(tpr) <= 1.0):
        raise InputError(f"tpr must be a number in (0, 1], got {tpr!r}")


def _check_method(method: str) -> None:
    if method not in _AUPR_METHODS:
        raise InputError(f"method must be one of {_AUPR_METHODS}, got {method!r}")


def _check_conventions(conventions: str) -> None:
    if conventions not in _CONVENTION_SETS:
        raise InputError(f"conventions must be one of {_CONVENTION_SETS}, got {conventions!r}")


@register_metric(
    "auroc",
    higher_is_better=True,
    inputs=("scores", "is_ood"),
    description="AUROC, ID positive (Mann-Whitney; ties count 1/2)",
)
@register_metric(
    "auroc_openood",
    higher_is_better=True,
    inputs=("scores", "is_ood"),
    description="AUROC as OpenOOD v1.5 reports it (the same value as auroc, ties included)",
)
def auroc(scores: ArrayLike, is_ood: ArrayLike) -> float:
    """Area under the ROC curve with ID as the positive class.

    AUROC = P(s_id > s_ood) + 0.5 P(s_id = s_ood) over all ID/OOD pairs (the Mann-Whitney
    statistic divided by n_id n_ood); equal to ``roc_auc_score(~is_ood, scores)``.

    Parameters
    ----------
    scores : array_like of float, shape (n,)
        Normality scores, higher = more in-distribution.
    is_ood : array_like of bool, shape (n,)
        True = OOD / unknown / negative.

    Returns
    -------
    float
        In [0, 1]; 0.5 = chance, 1 = every ID score above every OOD score.

    Raises
    ------
    InputError
        NaN/inf scores, empty or one-class input, non-boolean ``is_ood``, shape mismatch.

    References
    ----------
    .. [1] Hendrycks & Gimpel, "A Baseline for Detecting Misclassified and Out-of-Distribution
       Examples in Neural Networks", ICLR 2017.
    .. [2] Mann & Whitney, "On a test of whether one of two random variables is stochastically
       larger than the other", Ann. Math. Statist. 1947.

    Examples
    --------
    >>> from semshift.metrics import auroc
    >>> auroc([0.9, 0.8, 0.3, 0.8], [False, False, True, True])
    0.875
    """
    return _RankCore.from_scores(scores, is_ood, "auroc").auroc()


@register_metric(
    "fpr95",
    higher_is_better=False,
    inputs=("scores", "is_ood"),
    description="FPR of OOD at 95% ID recall (convention id_recall: ODIN/SSB/classic)",
    tpr=0.95,
    convention="id_recall",
)
@register_metric(
    "fpr95_ood_recall",
    higher_is_better=False,
    inputs=("scores", "is_ood"),
    description="FPR of ID at 95% OOD recall (convention ood_recall: OpenOOD>=1.5, pytorch-ood)",
    tpr=0.95,
    convention="ood_recall",
)
def fpr_at_tpr(
    scores: ArrayLike,
    is_ood: ArrayLike,
    tpr: float = 0.95,
    convention: Convention = "id_recall",
) -> float:
    """False positive rate at a fixed true positive rate (FPR@95TPR by default).

    Two conventions are in use; always report which one was used.

    ``"id_recall"`` (default; ODIN, SSB and the classic OOD literature)
        The threshold t is the largest value such that at least ``tpr`` of the ID scores are
        >= t (k = ceil(tpr n_id) ID scores, so t = the k-th largest ID score).
        FPR = fraction of OOD scores >= t (OOD accepted as ID).
    ``"ood_recall"`` (OpenOOD >= v1.5 since 2023-08-10, pytorch-ood)
        OOD is the positive class, detected when score <= t; t is the smallest value such that
        at least ``tpr`` of the OOD scores are <= t (the k-th smallest OOD score,
        k = ceil(tpr n_ood)). FPR = fraction of ID scores <= t (ID flagged as OOD).

    Ties at the threshold count as accepted in both conventions (``>=`` / ``<=``).
    OpenOOD v1.5's own code gives ``"ood_recall"`` values without ties but can give a higher
    FPR with ties; :func:`fpr_at_tpr_openood` reproduces it.

    Parameters
    ----------
    scores : array_like of float, shape (n,)
        Normality scores, higher = more in-distribution.
    is_ood : array_like of bool, shape (n,)
        True = OOD / unknown / negative.
    tpr : float, default 0.95
        Required recall in (0, 1].
    convention : {"id_recall", "ood_recall"}, default "id_recall"
        Which class the recall is measured on (see above).

    Returns
    -------
    float
        In [0, 1]; lower is better.

    References
    ----------
    .. [1] Liang, Li & Srikant, "Enhancing the Reliability of Out-of-Distribution Image
       Detection in Neural Networks" (ODIN), ICLR 2018.
    .. [2] Zhang et al., "OpenOOD v1.5: Enhanced Benchmark for Out-of-Distribution Detection",
       2023 (issues #177 and #308 on the change of convention).

    Examples
    --------
    >>> from semshift.metrics import fpr_at_tpr
    >>> s = [5, 4, 3, 2, 1, 3.5, 2.5, 0]
    >>> ood = [False] * 5 + [True] * 3
    >>> fpr_at_tpr(s, ood, tpr=0.8)  # t = 2 (4 of 5 ID >= 2): OOD 3.5, 2.5 pass
    0.6666666666666666
    >>> fpr_at_tpr(s, ood, tpr=0.6, convention="ood_recall")  # t = 2.5: ID 1, 2 caught
    0.4
    """
    _check_tpr(tpr, convention)
    return _RankCore.from_scores(scores, is_ood, "fpr_at_tpr").fpr(float(tpr), convention)


@register_metric(
    "fpr95_openood",
    higher_is_better=False,
    inputs=("scores", "is_ood"),
    description="FPR of ID at 95% OOD recall exactly as OpenOOD v1.5 computes it "
    "(sklearn roc_curve with drop_intermediate; differs from fpr95_ood_recall on ties)",
    tpr=0.95,
)
def fpr_at_tpr_openood(scores: ArrayLike, is_ood: ArrayLike, tpr: float = 0.95) -> float:
    """FPR@TPR exactly as OpenOOD v1.5's evaluator computes it, ties included.

    OpenOOD (``openood/evaluators/metrics.py``, ``auc_and_fpr_recall(conf, label, tpr_th)``)
    takes OOD as the positive class and runs ``fpr_list, tpr_list, _ =
    sklearn.metrics.roc_curve(ood_indicator, -conf)`` (default ``drop_intermediate=True``),
    then ``fpr = fpr_list[np.argmax(tpr_list >= tpr_th)]``. ``tpr`` here is that ``tpr_th``.
    Reproduced from the shared sort without calling sklearn (see
    ``_RankCore.openood_roc_points``).

    Without ties this equals ``fpr_at_tpr(..., convention="ood_recall")``. With ties it can be
    higher: sklearn drops ROC points that lie inside a straight run of equal steps, so the
    first kept point reaching ``tpr`` can lie past the exact threshold
    (docs/methods.md#openood-conventions).

    Parameters
    ----------
    scores : array_like of float, shape (n,)
        Normality scores, higher = more in-distribution.
    is_ood : array_like of bool, shape (n,)
        True = OOD / unknown / negative.
    tpr : float, default 0.95
        Required OOD recall in (0, 1] (OpenOOD's ``tpr_th``).

    Returns
    -------
    float
        Fraction of ID scores flagged as OOD, in [0, 1]; lower is better.

    References
    ----------
    .. [1] Zhang et al., "OpenOOD v1.5: Enhanced Benchmark for Out-of-Distribution
       Detection", arXiv:2306.09301, 2023.

    Examples
    --------
    >>> from semshift.metrics import fpr_at_tpr, fpr_at_tpr_openood
    >>> s = [0, 1, 1, 2, 2, 3, 3]  # OOD at 0, then three tied pairs of one ID and one OOD
    >>> ood = [True, False, True, False, True, False, True]
    >>> fpr_at_tpr(s, ood, tpr=0.5, convention="ood_recall")  # t = 1: ID 1 caught
    0.3333333333333333
    >>> fpr_at_tpr_openood(s, ood, tpr=0.5)  # the ROC point at t = 1 is dropped, next is t = 3
    1.0
    """
    _check_tpr(tpr, "ood_recall")
    return _RankCore.from_scores(scores, is_ood, "fpr_at_tpr_openood").fpr_openood(float(tpr))


@register_metric(
    "aupr_in",
    higher_is_better=True,
    inputs=("scores", "is_ood"),
    description="AUPR-In (ID positive), average precision",
)
@register_metric(
    "aupr_in_trapezoid",
    higher_is_better=True,
    inputs=("scores", "is_ood"),
    description="AUPR-In (ID positive), trapezoidal area under the PR curve (OpenOOD)",
    method="trapezoid",
)
@register_metric(
    "aupr_in_openood",
    higher_is_better=True,
    inputs=("scores", "is_ood"),
    description="AUPR-In as OpenOOD v1.5 reports it (= aupr_in_trapezoid, ties included)",
    method="trapezoid",
)
def aupr_in(scores: ArrayLike, is_ood: ArrayLike, method: AuprMethod = "ap") -> float:
    """Area under the precision-recall curve with ID positive and ``scores`` as the ranking.

    Parameters
    ----------
    scores : array_like of float, shape (n,)
        Normality scores, higher = more in-distribution.
    is_ood : array_like of bool, shape (n,)
        True = OOD / unknown / negative.
    method : {"ap", "trapezoid"}, default "ap"
        ``"ap"``: average precision, sum over distinct thresholds of (R_k - R_{k-1}) P_k, equal
        to ``sklearn.metrics.average_precision_score(~is_ood, scores)``. ``"trapezoid"``: area
        under the PR curve with linear interpolation between the points of every distinct
        threshold and (recall 0, precision 1), equal to
        ``sklearn.metrics.auc(recall, precision)`` on ``precision_recall_curve`` (what
        OpenOOD reports).

    Returns
    -------
    float
        In [0, 1].

    References
    ----------
    .. [1] Davis & Goadrich, "The Relationship Between Precision-Recall and ROC Curves",
       ICML 2006.
    .. [2] Hendrycks & Gimpel, ICLR 2017 (AUPR-In / AUPR-Out). OpenOOD had the two swapped
       from 2023-08-10 to 2023-12-18 (its issue #211).

    Examples
    --------
    >>> from semshift.metrics import aupr_in
    >>> round(aupr_in([3, 2, 1], [False, True, False]), 6)  # (1 + 2/3) / 2
    0.833333
    """
    _check_method(method)
    return _RankCore.from_scores(scores, is_ood, "aupr_in").aupr("id", method)


@register_metric(
    "aupr_out",
    higher_is_better=True,
    inputs=("scores", "is_ood"),
    description="AUPR-Out (OOD positive, score -s), average precision",
)
@register_metric(
    "aupr_out_trapezoid",
    higher_is_better=True,
    inputs=("scores", "is_ood"),
    description="AUPR-Out (OOD positive, score -s), trapezoidal area (OpenOOD)",
    method="trapezoid",
)
@register_metric(
    "aupr_out_openood",
    higher_is_better=True,
    inputs=("scores", "is_ood"),
    description="AUPR-Out as OpenOOD v1.5 reports it (= aupr_out_trapezoid, ties included)",
    method="trapezoid",
)
def aupr_out(scores: ArrayLike, is_ood: ArrayLike, method: AuprMethod = "ap") -> float:
    """Area under the precision-recall curve with OOD positive, ranked by ``-scores``.

    Equal to ``average_precision_score(is_ood, -scores)`` (``method="ap"``); see
    :func:`aupr_in` for the two methods.

    Parameters
    ----------
    scores : array_like of float, shape (n,)
        Normality scores, higher = more in-distribution.
    is_ood : array_like of bool, shape (n,)
        True = OOD / unknown / negative.
    method : {"ap", "trapezoid"}, default "ap"

    Returns
    -------
    float
        In [0, 1].

    References
    ----------
    .. [1] Hendrycks & Gimpel, ICLR 2017.

    Examples
    --------
    >>> from semshift.metrics import aupr_out
    >>> aupr_out([3, 2, 1], [False, True, False])  # OOD ranked 2nd of 3 by -score
    0.5
    """
    _check_method(method)
    return _RankCore.from_scores(scores, is_ood, "aupr_out").aupr("ood", method)


@register_metric(
    "detection_error",
    higher_is_better=False,
    inputs=("scores", "is_ood"),
    description="Detection error: min over thresholds of 0.5 (1 - TPR) + 0.5 FPR",
)
def detection_error(scores: ArrayLike, is_ood: ArrayLike) -> float:
    """Minimum misclassification probability with equal ID/OOD priors.

    ``min_t 0.5 (1 - TPR(t)) + 0.5 FPR(t)`` over every threshold t (accept as ID when
    score >= t), including accepting nothing or everything (both give 0.5).

    Parameters
    ----------
    scores : array_like of float, shape (n,)
        Normality scores, higher = more in-distribution.
    is_ood : array_like of bool, shape (n,)
        True = OOD / unknown / negative.

    Returns
    -------
    float
        In [0, 0.5]; lower is better.

    References
    ----------
    .. [1] Liang, Li & Srikant, ODIN, ICLR 2018.

    Examples
    --------
    >>> from semshift.metrics import detection_error
    >>> detection_error([4, 3, 2, 1], [False, True, False, True])  # t = 4: 0.5 * 0.5 + 0
    0.25
    """
    return _RankCore.from_scores(scores, is_ood, "detection_error").detection_error()


@dataclass(frozen=True)
class RankingMetrics:
    """All ranking metrics of one ``(scores, is_ood)`` pair, from one sort.

    Attributes
    ----------
    auroc, fpr, aupr_in, aupr_out, detection_error : float
        As the functions of the same names; ``fpr`` at ``tpr`` with ``convention``
        (with ``conventions="openood"``: :func:`fpr_at_tpr_openood`).
    tpr : float
        Recall level of ``fpr``.
    convention : str
        FPR convention, ``"id_recall"`` or ``"ood_recall"`` (the latter under
        ``conventions="openood"``, whose FPR is measured at OOD recall).
    aupr_method : str
        ``"ap"`` or ``"trapezoid"`` (the latter under ``conventions="openood"``).
    n_id, n_ood : int
        Sample counts.
    conventions : str
        ``"exact"`` or ``"openood"``: whether ``fpr``, ``aupr_in`` and ``aupr_out`` follow
        OpenOOD v1.5's evaluator (see :func:`ranking_metrics`).
    """

    auroc: float
    fpr: float
    aupr_in: float
    aupr_out: float
    detection_error: float
    tpr: float
    convention: str
    aupr_method: str
    n_id: int
    n_ood: int
    conventions: str = "exact"

    def as_dict(self) -> dict[str, float | int | str]:
        """The fields as a plain dict."""
        return asdict(self)


def ranking_metrics(
    scores: ArrayLike,
    is_ood: ArrayLike,
    *,
    tpr: float = 0.95,
    convention: Convention = "id_recall",
    aupr_method: AuprMethod = "ap",
    conventions: Conventions = "exact",
) -> RankingMetrics:
    """AUROC, FPR@TPR, AUPR-In, AUPR-Out and detection error from a single shared sort.

    The ID and OOD scores are each sorted once and merged (stable, linear time); every metric
    is then read off cumulative counts. Values equal the single-metric functions exactly.

    ``conventions="openood"`` reproduces the four numbers of OpenOOD v1.5's leaderboard
    (``openood/evaluators/metrics.py``, ``compute_all_metrics`` ->
    ``auc_and_fpr_recall(conf, label, tpr_th)``) to within 1e-12, ties included, without
    calling sklearn at run time. It changes these fields:

    ``fpr``
        :func:`fpr_at_tpr_openood`: ``fpr_list[np.argmax(tpr_list >= tpr_th)]`` on
        ``roc_curve(is_ood, -scores)`` with its default ``drop_intermediate=True``; ``tpr``
        is used as OpenOOD's ``tpr_th``. Equal to the ``"ood_recall"`` convention without
        ties; on ties it can be higher (docs/methods.md#openood-conventions).
    ``aupr_in``, ``aupr_out``
        ``auc(recall, precision)`` on ``precision_recall_curve(~is_ood, scores)`` and
        ``precision_recall_curve(is_ood, -scores)``: ``aupr_method="trapezoid"``, which
        already equals OpenOOD's values with ties.

    ``auroc`` is not changed: OpenOOD's ``auc(fpr_list, tpr_list)`` is the trapezoid under the
    ROC curve, which equals the Mann-Whitney AUROC (the points sklearn drops are collinear and
    a tied group is a diagonal segment). ``detection_error`` is not part of OpenOOD's output
    and keeps its definition.

    Precedence: ``conventions="openood"`` fixes the FPR rule and the AUPR method, so
    ``convention`` and ``aupr_method`` are not used (they are still validated); the record
    states what was used: ``convention="ood_recall"``, ``aupr_method="trapezoid"``,
    ``conventions="openood"``.

    Parameters
    ----------
    scores : array_like of float, shape (n,)
        Normality scores, higher = more in-distribution.
    is_ood : array_like of bool, shape (n,)
        True = OOD / unknown / negative.
    tpr : float, default 0.95
        Recall level for the FPR.
    convention : {"id_recall", "ood_recall"}, default "id_recall"
        FPR convention, see :func:`fpr_at_tpr`.
    aupr_method : {"ap", "trapezoid"}, default "ap"
        See :func:`aupr_in`.
    conventions : {"exact", "openood"}, default "exact"
        ``"exact"``: the definitions above. ``"openood"``: OpenOOD v1.5's FPR@TPR and AUPR
        computations (see above); takes precedence over ``convention`` and ``aupr_method``.

    Returns
    -------
    RankingMetrics

    References
    ----------
    .. [1] Hendrycks & Gimpel, ICLR 2017; Liang et al. (ODIN), ICLR 2018.
    .. [2] Zhang et al., "OpenOOD v1.5: Enhanced Benchmark for Out-of-Distribution
       Detection", arXiv:2306.09301, 2023.

    Examples
    --------
    >>> from semshift.metrics import ranking_metrics
    >>> r = ranking_metrics([0.9, 0.8, 0.3, 0.8], [False, False, True, True])
    >>> r.auroc, r.fpr, r.convention
    (0.875, 0.5, 'id_recall')
    >>> s, ood = [0, 1, 1, 2, 2, 3, 3], [True, False, True, False, True, False, True]
    >>> o = ranking_metrics(s, ood, tpr=0.5, conventions="openood")
    >>> o.fpr, o.convention, o.aupr_method, o.conventions
    (1.0, 'ood_recall', 'trapezoid', 'openood')
    >>> ranking_metrics(s, ood, tpr=0.5, convention="ood_recall").fpr  # exact: t = 1
    0.3333333333333333
    """
    _check_tpr(tpr, convention)
    _check_method(aupr_method)
    _check_conventions(conventions)
    core = _RankCore.from_scores(scores, is_ood, "ranking_metrics")
    if conventions == "openood":
        convention, aupr_method = "ood_recall", "trapezoid"
        fpr = core.fpr_openood(float(tpr))
    else:
        fpr = core.fpr(float(tpr), convention)
    return RankingMetrics(
        auroc=core.auroc(),
        fpr=fpr,
        aupr_in=core.aupr("id", aupr_method),
        aupr_out=core.aupr("ood", aupr_method),
        detection_error=core.detection_error(),
        tpr=float(tpr),
        convention=convention,
        aupr_method=aupr_method,
        n_id=core.n_id,
        n_ood=core.n_ood,
        conventions=conventions,
    )
