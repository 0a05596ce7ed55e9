"""Generalized zero-shot learning accuracy (Xian et al., proposed splits): ts, tr, H, ZSL top-1."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from semshift.errors import InputError
from semshift.metrics._validation import as_labels, check_same_length

__all__ = ["GZSLResult", "gzsl", "per_class_accuracy"]


@dataclass(frozen=True)
class GZSLResult:
    """GZSL accuracies, all per-class top-1 averaged over classes.

    Attributes
    ----------
    ts : float
        Unseen-class test images, predicted over all classes.
    tr : float
        Seen-class test images, predicted over all classes.
    h : float
        Harmonic mean 2 ts tr / (ts + tr) (0 when both are 0).
    zsl_top1 : float
        Unseen-class test images, predicted over the unseen classes only; NaN when no ZSL
        prediction is available (1-D ``pred`` without ``zsl_pred``).
    """

    ts: float
    tr: float
    h: float
    zsl_top1: float

    def as_dict(self) -> dict[str, float]:
        """The fields as a plain dict."""
        return asdict(self)


def per_class_accuracy(pred: ArrayLike, labels: ArrayLike) -> float:
    """Top-1 accuracy of each class present in ``labels``, averaged over those classes.

    Parameters
    ----------
    pred, labels : array_like of int, shape (n,)
        Predicted and true class ids.

    Returns
    -------
    float

    References
    ----------
    .. [1] Xian et al., "Zero-Shot Learning - A Comprehensive Evaluation of the Good, the Bad
       and the Ugly", TPAMI 2019, eq. 4.

    Examples
    --------
    >>> from semshift.metrics import per_class_accuracy
    >>> per_class_accuracy([0, 0, 0, 1], [0, 0, 0, 1])
    1.0
    >>> per_class_accuracy([0, 0, 0, 0], [0, 0, 0, 1])  # class 0: 1, class 1: 0
    0.5
    """
    p = as_labels(pred, "pred")
    y = as_labels(labels, "labels")
    check_same_length(pred=p, labels=y)
    return _per_class(p, y)


def _per_class(p: NDArray[np.int64], y: NDArray[np.int64]) -> float:
    classes, inverse = np.unique(y, return_inverse=True)
    hits = np.bincount(inverse, weights=(p == y).astype(np.float64), minlength=classes.size)
    return float(np.mean(hits / np.bincount(inverse, minlength=classes.size)))


def _class_set(x: Sequence[int] | ArrayLike, name: str) -> NDArray[np.int64]:
    arr = np.asarray(x)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer) or arr.ndim != 1:
        raise InputError(f"{name} must be a 1-D sequence of integer class ids")
    if arr.size == 0:
        raise InputError(f"{name} is empty")
    if np.unique(arr).size != arr.size:
        raise InputError(f"{name} has repeated class ids")
    if (arr < 0).any():
        raise InputError(f"{name} has negative class ids")
    return arr.astype(np.int64)


def gzsl(
    pred: ArrayLike,
    labels: ArrayLike,
    seen_classes: Sequence[int] | ArrayLike,
    unseen_classes: Sequence[int] | ArrayLike,
    *,
    zsl_pred: ArrayLike | None = None,
    calibration: float = 0.0,
) -> GZSLResult:
    """GZSL accuracies ts, tr and their harmonic mean H, plus ZSL top-1.

    Every accuracy is per-class top-1 averaged over the classes present in the evaluated test
    images (Xian et al.'s proposed protocol).

    Parameters
    ----------
    pred : array_like, shape (n,) of int or (n, C) of float
        GZSL predictions over all classes (class ids), or a score matrix whose column c is the
        score of class c. With a score matrix, GZSL predictions are the argmax over the seen
        and unseen classes, and ZSL predictions (unseen test images) the argmax over the unseen
        classes only.
    labels : array_like of int, shape (n,)
        True class ids; each must be in ``seen_classes`` or ``unseen_classes``.
    seen_classes, unseen_classes : sequence of int
        Disjoint class id sets.
    zsl_pred : array_like of int, shape (n,), optional
        ZSL predictions (over unseen classes) when ``pred`` holds class ids; only its entries
        at unseen-class test images are used.
    calibration : float, default 0
        Calibrated stacking (Chao et al.): with a score matrix, ``calibration`` is subtracted
        from the seen classes' scores before the GZSL argmax (ZSL top-1 is unaffected).
        Needs a score matrix when non-zero.

    Returns
    -------
    GZSLResult

    Raises
    ------
    InputError
        Overlapping class sets, a label in neither set, no seen or no unseen test image,
        a score matrix with too few columns, or a shape mismatch.

    References
    ----------
    .. [1] Xian et al., "Zero-Shot Learning - A Comprehensive Evaluation of the Good, the Bad
       and the Ugly", TPAMI 2019 (proposed splits; ts, tr, H).
    .. [2] Chao, W.-L., Changpinyo, S., Gong, B. and Sha, F., "An empirical study and analysis
       of generalized zero-shot learning for object recognition in the wild", ECCV 2016
       (calibrated stacking).

    Examples
    --------
    >>> from semshift.metrics import gzsl
    >>> r = gzsl([0, 1, 1, 2], [0, 1, 2, 2], seen_classes=[0, 1], unseen_classes=[2])
    >>> r.tr, r.ts, round(r.h, 6)
    (1.0, 0.5, 0.666667)
    """
    seen = _class_set(seen_classes, "seen_classes")
    unseen = _class_set(unseen_classes, "unseen_classes")
    both = np.intersect1d(seen, unseen)
    if both.size:
        raise InputError(f"seen and unseen classes overlap: {both[:10].tolist()}")
    y = as_labels(labels, "labels")
    outside = np.flatnonzero(~np.isin(y, np.concatenate((seen, unseen))))
    if outside.size:
        raise InputError(
            f"{outside.size} label(s) are in neither seen_classes nor unseen_classes; first at "
            f"index {outside[0]} (class {y[outside[0]]})"
        )
    is_unseen = np.isin(y, unseen)
    if is_unseen.all() or not is_unseen.any():
        raise InputError(
            f"gzsl needs test images of both seen and unseen classes, got "
            f"{int((~is_unseen).sum())} seen and {int(is_unseen.sum())} unseen"
        )
    raw = np.asarray(pred)
    if not np.isfinite(calibration):
        raise InputError(f"calibration must be a finite number, got {calibration}")
    if calibration != 0.0 and raw.ndim != 2:
        raise InputError("calibrated stacking (calibration != 0) needs a score matrix pred")
    zsl: NDArray[np.int64] | None
    if raw.ndim == 2:
        if not np.issubdtype(raw.dtype, np.number) or raw.dtype == np.bool_:
            raise InputError(f"a score matrix pred must be numeric, got dtype {raw.dtype}")
        if raw.shape[0] != y.size:
            raise InputError(f"shape mismatch: pred has {raw.shape[0]} rows, labels {y.size}")
        n_classes = int(max(seen.max(), unseen.max())) + 1
        if raw.shape[1] < n_classes:
            raise InputError(
                f"pred has {raw.shape[1]} columns but class ids go up to {n_classes - 1}"
            )
        if not np.isfinite(raw).all():
            raise InputError("pred scores contain NaN or inf")
        every = np.concatenate((seen, unseen))
        shift = np.concatenate((np.full(seen.size, float(calibration)), np.zeros(unseen.size)))
        p = every[np.argmax(raw[:, every] - shift, axis=1)]
        zsl = unseen[np.argmax(raw[:, unseen], axis=1)]
    else:
        p = as_labels(raw, "pred", allow_unknown=True)
        check_same_length(pred=p, labels=y)
        zsl = None
        if zsl_pred is not None:
            zsl = as_labels(zsl_pred, "zsl_pred", allow_unknown=True)
            check_same_length(zsl_pred=zsl, labels=y)
    ts = _per_class(p[is_unseen], y[is_unseen])
    tr = _per_class(p[~is_unseen], y[~is_unseen])
    h = 2.0 * ts * tr / (ts + tr) if ts + tr > 0 else 0.0
    zsl_top1 = _per_class(zsl[is_unseen], y[is_unseen]) if zsl is not None else float("nan")
    return GZSLResult(ts=ts, tr=tr, h=h, zsl_top1=zsl_top1)
