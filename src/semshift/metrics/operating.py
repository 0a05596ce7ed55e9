"""Operating-point metrics: what a fixed rejection threshold on the normality score does.

An engineer ships a classifier with a rejection rule "accept when score >= t", not an AUROC.
:func:`threshold_at_recall` picks t as the ``id_recall`` convention of FPR@95 does (the
largest t keeping at least ``recall`` of the ID scores); :func:`operating_rates` says, for any
set of samples, which fraction the rule rejects and which fraction it lets through although
the sample is wrong (an OOD sample, or a misclassified ID sample).

These are not registry metrics (:mod:`semshift.metrics.registry`): their threshold is chosen
on one set (ID validation scores) and applied to another, so they are not functions of one
``(scores, is_ood)`` pair. The protocol that applies them is
:func:`semshift.protocols.operating.operating_point` (docs/methods.md#operating-point).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from numpy.typing import ArrayLike

from semshift.errors import InputError
from semshift.metrics._validation import as_bool, as_scores
from semshift.metrics.ranking import n_required

__all__ = ["OperatingRates", "check_recall", "operating_rates", "threshold_at_recall"]


def check_recall(recall: float) -> float:
    """Return ``recall`` as a float, or raise :class:`InputError` unless it is in (0, 1].

    Examples
    --------
    >>> check_recall(0.95)
    0.95
    """
    ok = isinstance(recall, int | float | np.integer | np.floating) and not isinstance(
        recall, bool | np.bool_
    )
    if not ok or not 0.0 < float(recall) <= 1.0:
        raise InputError(f"recall must be a number in (0, 1], got {recall!r}")
    return float(recall)


def threshold_at_recall(id_scores: ArrayLike, recall: float = 0.95) -> float:
    """The largest threshold t such that at least ``recall`` of the ID scores are >= t.

    With k = ceil(recall n) (:func:`semshift.metrics.ranking.n_required`, robust to
    ``recall * n`` rounding up), t is the k-th largest ID score: the threshold of FPR@95's
    ``id_recall`` convention (:func:`semshift.metrics.fpr_at_tpr`). Accepting ``score >= t``
    keeps at least ``recall`` of ``id_scores`` (more when scores tie at t).

    Parameters
    ----------
    id_scores : array_like of float, shape (n,)
        Normality scores of ID samples (higher = more in-distribution), typically the ID
        validation set's.
    recall : float, default 0.95
        Fraction of ID samples to keep, in (0, 1].

    Returns
    -------
    float
        One of the ``id_scores``.

    Raises
    ------
    InputError
        Empty, non-numeric or non-finite scores, or ``recall`` outside (0, 1].

    References
    ----------
    .. [1] Liang, Li & Srikant, "Enhancing the Reliability of Out-of-Distribution Image
       Detection in Neural Networks" (ODIN), ICLR 2018: the threshold at 95% TPR.

    Examples
    --------
    >>> threshold_at_recall([5, 4, 3, 2, 1], recall=0.8)  # 4 of 5 scores are >= 2
    2.0
    >>> threshold_at_recall([0.1, 0.9, 0.5, 0.7], recall=0.5)
    0.7
    """
    r = check_recall(recall)
    s = as_scores(id_scores, "id_scores")
    n = s.size
    i = n - n_required(r, n)  # index of the k-th largest in ascending order
    return float(np.partition(s, i)[i])


@dataclass(frozen=True)
class OperatingRates:
    """What the rule "accept when score >= threshold" does on one set of samples.

    Attributes
    ----------
    threshold : float
        The threshold t.
    rejection_rate : float
        Fraction of the samples with score < t.
    accepted_wrong_rate : float
        Fraction of **all** samples that are accepted (score >= t) and wrong (an OOD sample
        or a misclassified ID sample): the errors the classifier ships.
    n : int
        Number of samples.
    """

    threshold: float
    rejection_rate: float
    accepted_wrong_rate: float
    n: int

    def as_dict(self) -> dict[str, float | int]:
        """The fields as a dict."""
        return asdict(self)


def operating_rates(scores: ArrayLike, threshold: float, *, correct: ArrayLike) -> OperatingRates:
    """Rejection rate and accepted-and-wrong rate of the rule "accept when score >= threshold".

    Ties at the threshold are accepted (``>=``), as in :func:`threshold_at_recall`.

    Parameters
    ----------
    scores : array_like of float, shape (n,)
        Normality scores, higher = more in-distribution.
    threshold : float
        The threshold t; ``-inf`` accepts everything, ``+inf`` rejects everything.
    correct : array_like of bool, shape (n,)
        True = a known-class sample the classifier got right; False for every OOD sample and
        every misclassified ID sample.

    Returns
    -------
    OperatingRates
        ``rejection_rate`` = #(score < t) / n; ``accepted_wrong_rate`` =
        #(score >= t and not correct) / n. Both in [0, 1]; lower is better for the second.

    Raises
    ------
    InputError
        Empty or non-finite scores, a NaN or non-numeric threshold, non-boolean ``correct``
        or a length mismatch.

    Examples
    --------
    >>> r = operating_rates([0.9, 0.2, 0.5, 0.7], 0.5, correct=[True, True, False, False])
    >>> r.rejection_rate, r.accepted_wrong_rate  # 0.2 rejected; 0.5 and 0.7 accepted, wrong
    (0.25, 0.5)
    """
    s = as_scores(scores, "scores")
    c = as_bool(correct, "correct", s.size)
    ok = isinstance(threshold, int | float | np.integer | np.floating) and not isinstance(
        threshold, bool | np.bool_
    )
    if not ok or np.isnan(float(threshold)):
        raise InputError(f"threshold must be a real number (not NaN), got {threshold!r}")
    t = float(threshold)
    accepted = s >= t
    n = s.size
    n_rejected = n - int(np.count_nonzero(accepted))
    n_wrong = int(np.count_nonzero(accepted & ~c))
    return OperatingRates(t, n_rejected / n, n_wrong / n, n)
