"""Failure detection and the ImageNet-OOD settings: AURC, e-AURC, AUGRC, label builders and
the AUROC decomposition.

Two evaluation settings of Yang et al. (ImageNet-OOD) are built by the label helpers:

- *new-class detection* (:func:`newclass_labels`): positives = every ID-class image,
  covariate-shifted ones included; negatives = semantic-shift images (label ``-1``);
- *failure detection* (:func:`failure_labels`): positives = correctly classified ID images;
  negatives = misclassified ID images plus every semantic-shift image.

Both return a boolean "negative" mask usable as ``is_ood`` in the ranking metrics and as
``error`` in :func:`aurc`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import xlogy

from semshift.metrics._validation import (
    as_bool,
    as_labels,
    as_scores,
    check_both_classes,
    check_same_length,
)
from semshift.metrics.osr import check_correct
from semshift.metrics.rankcore import RankCore
from semshift.metrics.registry import register_metric

__all__ = [
    "AUROCDecomposition",
    "augrc",
    "aurc",
    "auroc_decomposition",
    "correct_known",
    "eaurc",
    "failure_labels",
    "newclass_labels",
]


def newclass_labels(labels: ArrayLike) -> NDArray[np.bool_]:
    """Negatives of the new-class detection setting: the semantic-shift samples.

    Parameters
    ----------
    labels : array_like of int, shape (n,)
        Class ids, ``-1`` = semantic-shift (unknown) sample. Covariate-shifted images of ID
        classes carry their class id and count as positives.

    Returns
    -------
    ndarray of bool, shape (n,)
        True = negative (use as ``is_ood``).

    References
    ----------
    .. [1] Yang et al., "ImageNet-OOD: Deciphering Modern Out-of-Distribution Detection
       Algorithms", ICLR 2024.

    Examples
    --------
    >>> from semshift.metrics import newclass_labels
    >>> newclass_labels([3, -1, 0])
    array([False,  True, False])
    """
    return as_labels(labels, "labels", allow_unknown=True) < 0


def correct_known(pred: ArrayLike, labels: ArrayLike) -> NDArray[np.bool_]:
    """True for known samples whose predicted class is right (the ``correct`` argument).

    Parameters
    ----------
    pred : array_like of int, shape (n,)
        Predicted class ids (``-1`` = the classifier rejected the sample; never correct).
    labels : array_like of int, shape (n,)
        True class ids, ``-1`` = unknown sample.

    Returns
    -------
    ndarray of bool, shape (n,)

    Examples
    --------
    >>> from semshift.metrics import correct_known
    >>> correct_known([1, 2, 0], [1, 0, -1])
    array([ True, False, False])
    """
    p = as_labels(pred, "pred", allow_unknown=True)
    y = as_labels(labels, "labels", allow_unknown=True)
    check_same_length(pred=p, labels=y)
    return (y >= 0) & (p == y)


def failure_labels(pred: ArrayLike, labels: ArrayLike) -> NDArray[np.bool_]:
    """Negatives of the failure-detection setting: misclassified ID plus every unknown sample.

    Parameters
    ----------
    pred : array_like of int, shape (n,)
        Predicted class ids.
    labels : array_like of int, shape (n,)
        True class ids, ``-1`` = semantic-shift (unknown) sample.

    Returns
    -------
    ndarray of bool, shape (n,)
        True = failure / negative (use as ``is_ood`` or as ``error``).

    References
    ----------
    .. [1] Yang et al., ImageNet-OOD, ICLR 2024.
    .. [2] Jaeger et al., "A Call to Reflect on Evaluation Practices for Failure Detection in
       Image Classification", ICLR 2023.

    Examples
    --------
    >>> from semshift.metrics import failure_labels
    >>> failure_labels([1, 2, 0], [1, 0, -1])
    array([False,  True,  True])
    """
    return ~correct_known(pred, labels)


def _risk_coverage(
    scores: ArrayLike, error: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
    """Coverage and cumulative error count at every distinct threshold, descending."""
    s = as_scores(scores)
    e = as_bool(error, "error", s.size)
    order = np.argsort(s, kind="stable")[::-1]
    s_desc = s[order]
    cum_err = np.cumsum(e[order])
    ends = np.flatnonzero(np.append(s_desc[1:] != s_desc[:-1], True))
    accepted = (ends + 1).astype(np.float64)
    return accepted, cum_err[ends].astype(np.float64), float(e.mean())


@register_metric(
    "aurc",
    higher_is_better=False,
    inputs=("scores", "error"),
    description="Area under the selective risk-coverage curve (trapezoid, unique thresholds)",
)
def aurc(scores: ArrayLike, error: ArrayLike) -> float:
    """Area under the risk-coverage curve.

    At every distinct threshold t (accept samples with score >= t): coverage = accepted / N,
    selective risk = errors among accepted / accepted. The area is the trapezoid rule over
    coverage from 0 to 1; the curve is extended to coverage 0 at the risk of the first point
    (so constant scores give AURC = error rate, the expected value of a random ranking).

    Parameters
    ----------
    scores : array_like of float, shape (n,)
        Confidence, higher = more trusted (accepted first).
    error : array_like of bool, shape (n,)
        True = the sample is an error (misclassified ID, or OOD; see :func:`failure_labels`).
        A single class is allowed (no errors gives 0).

    Returns
    -------
    float
        In [0, 1]; lower is better.

    References
    ----------
    .. [1] Geifman, Uziel & El-Yaniv, "Bias-Reduced Uncertainty Estimation for Deep Neural
       Classifiers", ICLR 2019.

    Examples
    --------
    >>> from semshift.metrics import aurc
    >>> round(aurc([3, 2, 1], [False, True, False]), 6)  # 1/12 + 5/36 = 2/9
    0.222222
    """
    accepted, errors, _ = _risk_coverage(scores, error)
    n = accepted[-1]
    cov = np.concatenate(([0.0], accepted / n))
    risk = errors / accepted
    risk = np.concatenate((risk[:1], risk))
    return float(np.sum(np.diff(cov) * (risk[1:] + risk[:-1]) / 2.0))


def _aurc_optimal(err: float) -> float:
    # err + (1 - err) ln(1 - err), with 0 ln 0 = 0
    return float(err + xlogy(1.0 - err, 1.0 - err))


@register_metric(
    "eaurc",
    higher_is_better=False,
    inputs=("scores", "error"),
    description="Excess AURC: AURC - AURC*, AURC* = err + (1 - err) ln(1 - err)",
)
def eaurc(scores: ArrayLike, error: ArrayLike) -> float:
    """Excess AURC: ``aurc - (err + (1 - err) ln(1 - err))``, err = overall error rate.

    AURC* is the area of the optimal ranking (all errors last) in the continuous limit, so
    e-AURC of a perfect ranking is 0 up to the discretisation error of the trapezoid rule
    (tiny, of either sign).

    Parameters
    ----------
    scores : array_like of float, shape (n,)
        Confidence, higher = more trusted.
    error : array_like of bool, shape (n,)
        True = error (OOD counts as an error).

    Returns
    -------
    float
        Lower is better.

    References
    ----------
    .. [1] Geifman, Uziel & El-Yaniv, ICLR 2019.

    Examples
    --------
    >>> from semshift.metrics import eaurc
    >>> round(eaurc([3, 2, 1], [False, True, False]), 6)  # 2/9 - (1/3 + 2/3 ln 2/3)
    0.159199
    """
    _, _, err = _risk_coverage(scores, error)
    return aurc(scores, error) - _aurc_optimal(err)


@register_metric(
    "augrc",
    higher_is_better=False,
    inputs=("scores", "error"),
    description="Area under the generalized risk-coverage curve (errors accepted / N)",
)
def augrc(scores: ArrayLike, error: ArrayLike) -> float:
    """Area under the generalized risk-coverage curve.

    Generalized risk = errors accepted / N (the joint probability of acceptance and error);
    trapezoid over coverage from (0, 0) through every distinct threshold, which is the expected
    area under random tie-breaking. The optimum is AUGRC* = err^2 / 2.

    Parameters
    ----------
    scores : array_like of float, shape (n,)
        Confidence, higher = more trusted.
    error : array_like of bool, shape (n,)
        True = error.

    Returns
    -------
    float
        In [0, 1]; lower is better.

    References
    ----------
    .. [1] Traub et al., "Overcoming Common Flaws in the Evaluation of Selective
       Classification Systems", NeurIPS 2024.

    Examples
    --------
    >>> from semshift.metrics import augrc
    >>> round(augrc([3, 2, 1], [False, True, False]), 6)  # 1/18 + 1/9
    0.166667
    """
    accepted, errors, _ = _risk_coverage(scores, error)
    n = accepted[-1]
    cov = np.concatenate(([0.0], accepted / n))
    risk = np.concatenate(([0.0], errors / n))
    return float(np.sum(np.diff(cov) * (risk[1:] + risk[:-1]) / 2.0))


@dataclass(frozen=True)
class AUROCDecomposition:
    """The terms of the ImageNet-OOD AUROC decomposition (eq. 2).

    ``auroc = acc * auroc_correct + (1 - acc) * auroc_incorrect`` holds exactly (to rounding).

    Attributes
    ----------
    auroc : float
        AUROC(ID vs OOD).
    acc : float
        Fraction of ID samples classified correctly.
    auroc_correct : float
        AUROC(correct ID vs OOD); NaN when no ID sample is correct.
    auroc_incorrect : float
        AUROC(incorrect ID vs OOD); NaN when every ID sample is correct.
    auroc_correct_vs_incorrect : float
        AUROC(correct ID vs incorrect ID); NaN unless both exist.
    n_correct, n_incorrect, n_ood : int
        Sample counts.
    """

    auroc: float
    acc: float
    auroc_correct: float
    auroc_incorrect: float
    auroc_correct_vs_incorrect: float
    n_correct: int
    n_incorrect: int
    n_ood: int

    def as_dict(self) -> dict[str, float | int]:
        """The fields as a plain dict."""
        return asdict(self)


def auroc_decomposition(
    scores: ArrayLike, is_ood: ArrayLike, correct: ArrayLike
) -> AUROCDecomposition:
    """Split AUROC(ID vs OOD) into the contributions of correct and misclassified ID samples.

    AUROC(ID vs OOD) = acc AUROC(correct-ID vs OOD) + (1 - acc) AUROC(incorrect-ID vs OOD),
    with acc the fraction of ID samples classified correctly; also reports
    AUROC(correct-ID vs incorrect-ID).

    Parameters
    ----------
    scores : array_like of float, shape (n,)
        Normality scores, higher = more in-distribution.
    is_ood : array_like of bool, shape (n,)
        True = OOD (semantic shift).
    correct : array_like of bool, shape (n,)
        True = ID sample classified correctly (False for every OOD sample).

    Returns
    -------
    AUROCDecomposition

    References
    ----------
    .. [1] Yang et al., "ImageNet-OOD: Deciphering Modern Out-of-Distribution Detection
       Algorithms", ICLR 2024, eq. 2 and Table 4.

    Examples
    --------
    >>> from semshift.metrics import auroc_decomposition
    >>> d = auroc_decomposition([4, 3, 2, 1], [False, False, False, True],
    ...                         [True, False, True, False])
    >>> d.auroc, d.acc, d.auroc_correct_vs_incorrect
    (1.0, 0.6666666666666666, 0.5)
    """
    s = as_scores(scores)
    m = as_bool(is_ood, "is_ood", s.size)
    check_both_classes(m, "auroc_decomposition")
    c = check_correct(correct, m)
    wrong = ~m & ~c
    sorted_ood = np.sort(s[m])
    sorted_c = np.sort(s[c])
    sorted_w = np.sort(s[wrong])
    n_c, n_w = sorted_c.size, sorted_w.size
    nan = float("nan")
    total = RankCore(np.sort(s[~m]), sorted_ood).auroc()
    a_c = RankCore(sorted_c, sorted_ood).auroc() if n_c else nan
    a_w = RankCore(sorted_w, sorted_ood).auroc() if n_w else nan
    a_cw = RankCore(sorted_c, sorted_w).auroc() if n_c and n_w else nan
    return AUROCDecomposition(
        auroc=total,
        acc=n_c / (n_c + n_w),
        auroc_correct=a_c,
        auroc_incorrect=a_w,
        auroc_correct_vs_incorrect=a_cw,
        n_correct=n_c,
        n_incorrect=n_w,
        n_ood=sorted_ood.size,
    )
