"""Threshold-free detection metrics from one shared sorted ranking.

Every function takes ``scores`` (higher = more in-distribution) and a boolean ``is_ood``
(True = OOD / unknown / negative) and is exact: ties are handled as stated per metric, nothing
is binned. All of them are computed from the same object,
:class:`~semshift.metrics.rankcore.RankCore`: the ID scores and
the OOD scores each sorted once, plus the position of every OOD score in the stable merge of the
two (ID before OOD within a tie). :func:`ranking_metrics` returns all of them from that one sort,
which is what :func:`semshift.metrics.evaluate_many` and the benchmarks use.

Cumulative-count notation used in the comments: the distinct score values ``v_1 < ... < v_K``;
``A_k`` = #ID scores <= v_k, ``B_k`` = #OOD scores <= v_k, ``n1`` = #ID, ``n0`` = #OOD.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from semshift.errors import InputError
from semshift.metrics.rankcore import RankCore, n_required
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
    return RankCore.from_scores(scores, is_ood, "auroc").auroc()


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
    return RankCore.from_scores(scores, is_ood, "fpr_at_tpr").fpr(float(tpr), convention)


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
    ``RankCore.openood_roc_points``).

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
    return RankCore.from_scores(scores, is_ood, "fpr_at_tpr_openood").fpr_openood(float(tpr))


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
    return RankCore.from_scores(scores, is_ood, "aupr_in").aupr("id", method)


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
    return RankCore.from_scores(scores, is_ood, "aupr_out").aupr("ood", method)


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
    return RankCore.from_scores(scores, is_ood, "detection_error").detection_error()


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
    core = RankCore.from_scores(scores, is_ood, "ranking_metrics")
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
