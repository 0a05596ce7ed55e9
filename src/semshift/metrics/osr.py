"""Open-set recognition: the OSCR curve area (Dhamija et al. 2018), exact and ARPL variants."""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from semshift.errors import InputError
from semshift.metrics._validation import as_bool, as_scores, check_both_classes
from semshift.metrics.rankcore import RankCore
from semshift.metrics.registry import register_metric

__all__ = ["oscr"]

_VARIANTS = ("exact", "arpl")


def check_correct(correct: ArrayLike, is_ood: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """Validate ``correct``: boolean, same length as ``is_ood`` and False on every OOD sample."""
    c = as_bool(correct, "correct", is_ood.size)
    wrong = np.flatnonzero(c & is_ood)
    if wrong.size:
        raise InputError(
            f"correct is True for {wrong.size} OOD sample(s), first at index {wrong[0]}; "
            f"correct must mark correctly classified *known* samples (False for OOD)"
        )
    return c


@register_metric(
    "oscr",
    higher_is_better=True,
    inputs=("scores", "is_ood", "correct"),
    description="OSCR, exact area under CCR vs FPR (ties count 1/2)",
)
@register_metric(
    "oscr_arpl",
    higher_is_better=True,
    inputs=("scores", "is_ood", "correct"),
    description="OSCR as the ARPL/SSB reference code computes it (off-by-one included)",
    variant="arpl",
)
def oscr(
    scores: ArrayLike,
    is_ood: ArrayLike,
    correct: ArrayLike,
    variant: Literal["exact", "arpl"] = "exact",
) -> float:
    """Open-Set Classification Rate: area under the CCR vs FPR curve.

    CCR(t) = #{known, correctly classified, s > t} / N_known and
    FPR(t) = #{unknown, s > t} / N_unknown.

    ``variant="exact"`` (default)
        OSCR = (1 / (N_known N_unknown)) sum over correct knowns i and unknowns j of
        ``[s_i > s_j] + 0.5 [s_i = s_j]``, i.e. accuracy x AUROC(correct known vs unknown).
        Its maximum is the closed-set accuracy (reached when every unknown scores below every
        correct known).
    ``variant="arpl"``
        What ``compute_oscr`` in ARPL's ``core/evaluation.py`` (reused by the SSB authors)
        returns: known and unknown scores are concatenated (knowns first) and sorted; at each
        sorted position k < n - 1 the curve point is CC = #correct knowns after position k
        and FP = #unknowns at position >= k; points (0, 0), (0, 0) and (1, 1) are added and
        the trapezoid rule is applied. This off-by-one gives 1 - 1 / (2 N_known N_unknown) for
        perfect separation. The reference sorts with NumPy's default (unstable) argsort, so its
        result under ties depends on the sort; this variant uses a stable sort (on ties, knowns
        before unknowns, each in input order), which makes it deterministic.

    Parameters
    ----------
    scores : array_like of float, shape (n,)
        Normality ("known-ness") scores, higher = more in-distribution.
    is_ood : array_like of bool, shape (n,)
        True = unknown sample.
    correct : array_like of bool, shape (n,)
        True = known sample whose closed-set prediction is correct; must be False for unknowns.
    variant : {"exact", "arpl"}, default "exact"

    Returns
    -------
    float
        In [0, closed-set accuracy] for ``"exact"``.

    References
    ----------
    .. [1] Dhamija, Guenther & Boult, "Reducing Network Agnostophobia", NeurIPS 2018.
    .. [2] Chen et al., "Adversarial Reciprocal Points Learning for Open Set Recognition"
       (ARPL), TPAMI 2021; code: github.com/iCGY96/ARPL, ``core/evaluation.py``.
    .. [3] Vaze et al., "Open-Set Recognition: a Good Closed-Set Classifier is All You Need?",
       ICLR 2022.

    Examples
    --------
    >>> from semshift.metrics import oscr
    >>> s = [0.9, 0.8, 0.7, 0.2, 0.1]
    >>> ood = [False, False, False, True, True]
    >>> correct = [True, False, True, False, False]
    >>> round(oscr(s, ood, correct), 6)  # accuracy 2/3, unknowns all below
    0.666667
    >>> oscr([2.0, 1.0], [False, True], [True, False], variant="arpl")  # 1 - 1/(2*1*1)
    0.5
    """
    if variant not in _VARIANTS:
        raise InputError(f"variant must be one of {_VARIANTS}, got {variant!r}")
    s = as_scores(scores)
    m = as_bool(is_ood, "is_ood", s.size)
    n_known, _ = check_both_classes(m, "oscr", pos="known", neg="unknown")
    c = check_correct(correct, m)
    if variant == "arpl":
        return _oscr_arpl(s, m, c)
    n_correct = int(np.count_nonzero(c))
    if n_correct == 0:
        return 0.0
    core = RankCore(np.sort(s[c]), np.sort(s[m]))
    return core.auroc() * n_correct / n_known


def _oscr_arpl(s: NDArray[np.floating], m: NDArray[np.bool_], c: NDArray[np.bool_]) -> float:
    """Vectorised replica of ARPL's ``compute_oscr`` (see :func:`oscr`)."""
    known, unknown = ~m, m
    n_known = int(np.count_nonzero(known))
    n_unknown = s.size - n_known
    predict = np.concatenate((s[known], s[unknown]))
    k_target = np.concatenate((c[known], np.zeros(n_unknown, dtype=bool)))
    u_target = np.concatenate((np.zeros(n_known, dtype=bool), np.ones(n_unknown, dtype=bool)))
    idx = np.argsort(predict, kind="stable")
    s_k = k_target[idx].astype(np.int64)
    s_u = u_target[idx].astype(np.int64)
    n = predict.size
    # suffix sums: cc[k] = sum(s_k[k + 1:]), fp[k] = sum(s_u[k:]) for k = 0 .. n - 2
    suffix_k = np.cumsum(s_k[::-1])[::-1]
    suffix_u = np.cumsum(s_u[::-1])[::-1]
    cc = np.zeros(n + 2)
    fp = np.zeros(n + 2)
    cc[: n - 1] = suffix_k[1:] / n_known
    fp[: n - 1] = suffix_u[: n - 1] / n_unknown
    cc[n + 1] = 1.0
    fp[n + 1] = 1.0
    # The reference sorts the (FPR, CCR) points in reverse lexicographic order.
    order = np.lexsort((cc, fp))[::-1]
    x, y = fp[order], cc[order]
    return float(np.sum((x[:-1] - x[1:]) * (y[:-1] + y[1:]) / 2.0))
