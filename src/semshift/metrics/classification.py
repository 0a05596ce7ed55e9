"""Closed-set classification metrics: accuracy, macro-F1, confusion matrix and mIoU.

Class ids are non-negative integers; ``-1`` marks an unknown sample in label arrays (package
convention) and is rejected here unless a function says otherwise, so that no sample is
dropped silently.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from semshift.errors import InputError
from semshift.metrics._validation import as_labels, check_same_length
from semshift.metrics.registry import register_metric

__all__ = ["accuracy", "confusion_matrix", "iou_per_class", "macro_f1", "miou"]


def _pred_labels(
    pred: ArrayLike, labels: ArrayLike, known_only: bool
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    p = as_labels(pred, "pred")
    y = as_labels(labels, "labels", allow_unknown=True)
    check_same_length(pred=p, labels=y)
    unknown = y < 0
    if unknown.any():
        if not known_only:
            first = int(np.flatnonzero(unknown)[0])
            raise InputError(
                f"labels contain {int(unknown.sum())} unknown sample(s) (-1), first at index "
                f"{first}; closed-set metrics use known samples only: pass known_only=True to "
                f"leave them out explicitly, or select labels >= 0 yourself"
            )
        keep = ~unknown
        if not keep.any():
            raise InputError("labels contain only unknown samples (-1): nothing to evaluate")
        p, y = p[keep], y[keep]
    return p, y


@register_metric(
    "accuracy",
    higher_is_better=True,
    inputs=("pred", "labels"),
    description="Closed-set top-1 accuracy on known samples",
)
def accuracy(pred: ArrayLike, labels: ArrayLike, *, known_only: bool = False) -> float:
    """Closed-set top-1 accuracy: the fraction of samples with ``pred == labels``.

    Parameters
    ----------
    pred : array_like of int, shape (n,)
        Predicted class ids (>= 0).
    labels : array_like of int, shape (n,)
        True class ids (>= 0; ``-1`` = unknown, allowed only with ``known_only=True``).
    known_only : bool, default False
        Leave out samples labelled ``-1`` (closed-set accuracy of an open-set test set).
        Without it such samples raise, so nothing is dropped silently.

    Returns
    -------
    float
        In [0, 1].

    References
    ----------
    .. [1] Vaze et al., "Open-Set Recognition: a Good Closed-Set Classifier is All You Need?",
       ICLR 2022 (closed-set accuracy reported beside AUROC and OSCR).

    Examples
    --------
    >>> from semshift.metrics import accuracy
    >>> accuracy([0, 1, 2, 2], [0, 1, 1, 2])
    0.75
    >>> accuracy([0, 1, 2], [0, -1, 1], known_only=True)
    0.5
    """
    p, y = _pred_labels(pred, labels, known_only)
    return float(np.count_nonzero(p == y)) / y.size


@register_metric(
    "macro_f1",
    higher_is_better=True,
    inputs=("pred", "labels"),
    description="Macro-averaged F1 over classes present in labels or predictions",
)
def macro_f1(
    pred: ArrayLike,
    labels: ArrayLike,
    *,
    num_classes: int | None = None,
    known_only: bool = False,
) -> float:
    """Unweighted mean over classes of F1 = 2 TP / (2 TP + FP + FN).

    The mean runs over the classes that occur in ``labels`` or ``pred`` (sklearn's
    ``f1_score(labels, pred, average="macro")``); a class that is only predicted scores 0.

    Parameters
    ----------
    pred : array_like of int, shape (n,)
        Predicted class ids (>= 0).
    labels : array_like of int, shape (n,)
        True class ids (>= 0; ``-1`` only with ``known_only=True``).
    num_classes : int, optional
        If given, every id must be below it (a check; the mean still runs over present
        classes).
    known_only : bool, default False
        Leave out samples labelled ``-1``.

    Returns
    -------
    float
        In [0, 1].

    References
    ----------
    .. [1] Bacchin et al., "SOOD-ImageNet: a Large-Scale Dataset for Semantic
       Out-Of-Distribution Image Classification and Semantic Segmentation", ECCV 2024.

    Examples
    --------
    >>> from semshift.metrics import macro_f1
    >>> round(macro_f1([0, 0, 1, 1], [0, 1, 1, 1]), 6)  # F1: 2/3 and 4/5
    0.733333
    """
    p, y = _pred_labels(pred, labels, known_only)
    size = int(max(p.max(), y.max())) + 1
    if num_classes is not None:
        _check_range(p, y, num_classes)
        size = num_classes
    tp = np.bincount(y[p == y], minlength=size)
    n_true = np.bincount(y, minlength=size)
    n_pred = np.bincount(p, minlength=size)
    denom = n_true + n_pred  # = 2 TP + FP + FN
    present = denom > 0
    return float(np.mean(2.0 * tp[present] / denom[present]))


def _check_range(p: NDArray[np.int64], y: NDArray[np.int64], num_classes: int) -> None:
    for name, arr in (("pred", p), ("labels", y)):
        bad = np.flatnonzero(arr >= num_classes)
        if bad.size:
            raise InputError(
                f"{name} has {bad.size} id(s) >= num_classes={num_classes}; first at index "
                f"{bad[0]} (value {arr[bad[0]]})"
            )


def confusion_matrix(
    pred: ArrayLike,
    target: ArrayLike,
    num_classes: int,
    ignore_index: int | None = 255,
) -> NDArray[np.int64]:
    """Accumulated confusion matrix, rows = target class, columns = predicted class.

    Works on any shape (class predictions or segmentation maps); both arrays are flattened.
    Positions whose target equals ``ignore_index`` are left out (the documented segmentation
    convention); any other id outside ``[0, num_classes)`` raises. Sum matrices over images to
    accumulate a split.

    Parameters
    ----------
    pred : array_like of int, any shape
        Predicted class ids in ``[0, num_classes)``.
    target : array_like of int, same shape as ``pred``
        True class ids in ``[0, num_classes)`` or ``ignore_index``.
    num_classes : int
        Number of classes C.
    ignore_index : int or None, default 255
        Target value to leave out; ``None`` leaves nothing out.

    Returns
    -------
    ndarray of int64, shape (C, C)
        ``M[i, j]`` = number of positions with target i predicted as j.

    References
    ----------
    .. [1] Bacchin et al., SOOD-ImageNet, ECCV 2024 (mIoU from the accumulated matrix).

    Examples
    --------
    >>> from semshift.metrics import confusion_matrix
    >>> confusion_matrix([[0, 1], [1, 1]], [[0, 1], [255, 0]], num_classes=2)
    array([[1, 1],
           [0, 1]])
    """
    if not isinstance(num_classes, int | np.integer) or num_classes < 1:
        raise InputError(f"num_classes must be a positive integer, got {num_classes!r}")
    p = np.asarray(pred)
    t = np.asarray(target)
    for name, arr in (("pred", p), ("target", t)):
        if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
            raise InputError(f"{name} must hold integer class ids, got dtype {arr.dtype}")
    if p.shape != t.shape:
        raise InputError(f"shape mismatch: pred has shape {p.shape} but target has {t.shape}")
    if p.size == 0:
        raise InputError("pred and target are empty: at least one position is needed")
    p = p.ravel().astype(np.int64, copy=False)
    t = t.ravel().astype(np.int64, copy=False)
    if ignore_index is not None:
        keep = t != ignore_index
        p, t = p[keep], t[keep]
    for name, arr in (("pred", p), ("target", t)):
        bad = np.flatnonzero((arr < 0) | (arr >= num_classes))
        if bad.size:
            extra = f" or ignore_index={ignore_index}" if name == "target" else ""
            raise InputError(
                f"{name} has {bad.size} id(s) outside [0, {num_classes}){extra}; first bad "
                f"value {arr[bad[0]]} (index {bad[0]} after removing ignored positions)"
            )
    counts = np.bincount(t * num_classes + p, minlength=num_classes * num_classes)
    return counts.reshape(num_classes, num_classes).astype(np.int64, copy=False)


def _as_confusion(confusion: ArrayLike) -> NDArray[np.int64]:
    m = np.asarray(confusion)
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] == 0:
        raise InputError(f"confusion must be a non-empty square (C, C) matrix, got {m.shape}")
    if not np.issubdtype(m.dtype, np.integer) or m.dtype == np.bool_:
        raise InputError(f"confusion must hold integer counts, got dtype {m.dtype}")
    if (m < 0).any():
        raise InputError("confusion holds negative counts")
    if m.sum() == 0:
        raise InputError("confusion is all zeros: no position was counted")
    return m.astype(np.int64, copy=False)


def iou_per_class(confusion: ArrayLike) -> NDArray[np.float64]:
    """Per-class intersection over union, TP / (TP + FP + FN); NaN where the class is absent.

    Parameters
    ----------
    confusion : array_like of int, shape (C, C)
        Rows = target, columns = prediction (:func:`confusion_matrix`).

    Returns
    -------
    ndarray of float64, shape (C,)
        NaN for classes that neither occur in the target nor are predicted.

    Examples
    --------
    >>> from semshift.metrics import iou_per_class
    >>> iou_per_class([[2, 1, 0], [0, 1, 0], [0, 0, 0]])
    array([0.66666667, 0.5       ,        nan])
    """
    m = _as_confusion(confusion)
    tp = np.diag(m).astype(np.float64)
    union = m.sum(axis=0) + m.sum(axis=1) - np.diag(m)
    return np.divide(tp, union, out=np.full(tp.size, np.nan), where=union > 0)


@register_metric(
    "miou",
    higher_is_better=True,
    inputs=("confusion",),
    description="Mean IoU over classes present in target or prediction (accumulated matrix)",
)
def miou(confusion: ArrayLike) -> float:
    """Mean intersection over union from an accumulated confusion matrix.

    Per-class IoU = TP / (TP + FP + FN); the mean runs over classes present in the target or
    the prediction (classes with TP + FP + FN = 0 are left out, as mmsegmentation does).

    Parameters
    ----------
    confusion : array_like of int, shape (C, C)
        Rows = target, columns = prediction, accumulated over the whole split.

    Returns
    -------
    float
        In [0, 1].

    References
    ----------
    .. [1] Bacchin et al., SOOD-ImageNet, ECCV 2024.
    .. [2] Everingham et al., "The PASCAL Visual Object Classes (VOC) Challenge", IJCV 2010.

    Examples
    --------
    >>> from semshift.metrics import miou
    >>> round(miou([[2, 1, 0], [0, 1, 0], [0, 0, 0]]), 6)  # (2/3 + 1/2) / 2
    0.583333
    """
    return float(np.nanmean(iou_per_class(confusion)))
