"""Fit a zero-shot method the way the proposed-splits paper does, and score the test images.

1. Hyperparameters: every point of the method's grid is fitted on the ``train`` images (train
   classes) and scored by per-class top-1 on the ``val`` images over the val classes only (a
   zero-shot task on held-out seen classes). The test sets are never looked at.
2. The best point (the first on ties, in grid order) is refitted on ``trainval``.
3. ``test_seen`` and ``test_unseen`` images are scored against every class; the GZSL and ZSL
   accuracies follow from that one score matrix (:func:`semshift.metrics.gzsl`).
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from semshift.errors import InputError
from semshift.metrics import per_class_accuracy
from semshift.training.zsl.data import ZSLData, ZSLSplit
from semshift.training.zsl.registry import ZSLMethod, get_zsl_method

__all__ = [
    "GridPoint",
    "ZSLOutcome",
    "evaluate_zsl",
    "grid_candidates",
    "idle_cores",
    "select_hyperparameters",
]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


@dataclass(frozen=True)
class GridPoint:
    """One hyperparameter set and its val per-class top-1 (fit on train, val classes only)."""

    params: dict[str, Any]
    val_top1: float


@dataclass(frozen=True)
class ZSLOutcome:
    """A method fitted on one split version and its scores on the test images.

    Attributes
    ----------
    dataset, method, split : str
        Dataset name, registry name, split version (``v1`` / ``v2``).
    params : dict
        The hyperparameters the final model was fitted with.
    grid : tuple of GridPoint
        Every hyperparameter set tried and its val score (empty when none was searched).
    scores : ndarray, shape (n_test, C)
        Scores of the test images (``test_seen`` rows, then ``test_unseen``) against every
        class; column c is class c, higher = more compatible.
    labels : ndarray of int, shape (n_test,)
    seen, unseen : ndarray of int
        Class indices of the seen (trainval) and unseen (test_unseen) classes.
    seconds : float
        Wall time of selection, final fit and scoring.
    """

    dataset: str
    method: str
    split: str
    params: dict[str, Any]
    grid: tuple[GridPoint, ...]
    scores: F64
    labels: I64
    seen: I64
    unseen: I64
    seconds: float


def idle_cores() -> int:
    """BLAS threads for fitting: one per idle core (CPU count minus the 1-minute load average),
    at least 1.

    The fits multiply many small matrices; on a busy machine two BLAS threads that wait on each
    other at every product ran SYNC's grid 36x slower than one thread (61 s against 1.7 s, 2
    cores at load 4).
    """
    try:
        load = os.getloadavg()[0]
    except OSError:  # pragma: no cover - platforms without a load average
        return os.cpu_count() or 1
    return max(1, int((os.cpu_count() or 1) - load + 0.5))


def grid_candidates(
    method: type[ZSLMethod],
    grid: Mapping[str, Sequence[Any]] | None = None,
    fixed: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The product of ``grid`` (default: the method's own), with ``fixed`` values taking
    precedence (a fixed hyperparameter is not searched)."""
    fixed = dict(fixed or {})
    g = dict(method.grid if grid is None else grid)
    known = set(method.defaults())
    for key in (*g, *fixed):
        if key not in known:
            raise InputError(
                f"{method.name}: unknown hyperparameter {key!r}; known: {', '.join(sorted(known))}"
            )
    keys = [k for k in g if k not in fixed]
    combos = itertools.product(*(tuple(g[k]) for k in keys))
    return [{**dict(zip(keys, combo, strict=True)), **fixed} for combo in combos]


def _relabel(y: I64, classes: I64) -> I64:
    return np.searchsorted(classes, y).astype(np.int64)


def select_hyperparameters(
    method: type[ZSLMethod],
    X_train: F64,
    y_train: I64,
    X_val: F64,
    y_val: I64,
    embeddings: F64,
    candidates: Sequence[Mapping[str, Any]],
) -> tuple[dict[str, Any], tuple[GridPoint, ...]]:
    """Fit every candidate on the train images and score the val images over the val classes.

    ``y_train`` and ``y_val`` index the rows of ``embeddings`` (every class); train and val
    classes must be disjoint. Returns the best candidate (first on ties) and every grid point.
    """
    tr_classes, va_classes = np.unique(y_train), np.unique(y_val)
    if np.intersect1d(tr_classes, va_classes).size:
        raise InputError("train and val share classes; val classes must be held out")
    ytr = _relabel(y_train, tr_classes)
    yva = _relabel(y_val, va_classes)
    S_val = embeddings[va_classes]
    points = []
    for params, model in zip(
        candidates,
        method.fit_grid(X_train, ytr, embeddings[tr_classes], candidates),
        strict=True,
    ):
        acc = per_class_accuracy(model.predict(X_val, S_val), yva)
        points.append(GridPoint(dict(params), acc))
    best = max(range(len(points)), key=lambda i: (points[i].val_top1, -i))
    return dict(points[best].params), tuple(points)


def evaluate_zsl(
    data: ZSLData,
    method: str,
    *,
    split: str = "v2",
    grid: Mapping[str, Sequence[Any]] | None = None,
    params: Mapping[str, Any] | None = None,
    threads: int | None = None,
) -> ZSLOutcome:
    """Select hyperparameters on val, refit on trainval and score the test images.

    Parameters
    ----------
    data : ZSLData
    method : registry name (:func:`~semshift.training.zsl.list_zsl_methods`)
    split : ``"v2"`` (default) or ``"v1"`` (:meth:`ZSLData.split`)
    grid : hyperparameter grid replacing the method's (``{}``: no search, defaults)
    params : hyperparameters fixed at these values (not searched)
    threads : BLAS threads while fitting (default :func:`idle_cores`); results do not depend
        on it beyond floating-point summation order

    Raises
    ------
    InputError
        An unknown hyperparameter, or a split the data cannot give (see :meth:`ZSLData.split`).
    UnknownNameError
        An unknown method.
    """
    from threadpoolctl import threadpool_limits

    cls = get_zsl_method(method)
    sp = data.split(split)
    with threadpool_limits(limits=threads or idle_cores(), user_api="blas"):
        return _evaluate(data, cls, sp, grid, params)


def _evaluate(
    data: ZSLData,
    cls: type[ZSLMethod],
    sp: ZSLSplit,
    grid: Mapping[str, Sequence[Any]] | None,
    params: Mapping[str, Any] | None,
) -> ZSLOutcome:
    t0 = time.perf_counter()
    X, y, S = data.features, data.labels, data.embeddings
    candidates = grid_candidates(cls, grid, params)
    if len(candidates) > 1:
        chosen, points = select_hyperparameters(
            cls, X[sp.train], y[sp.train], X[sp.val], y[sp.val], S, candidates
        )
    else:
        chosen, points = dict(candidates[0]) if candidates else {}, ()
    seen = np.unique(y[sp.trainval])
    model = cls(**chosen).fit(X[sp.trainval], _relabel(y[sp.trainval], seen), S[seen])
    test = np.concatenate((sp.test_seen, sp.test_unseen))
    scores = model.decision_function(X[test], S)
    return ZSLOutcome(
        dataset=data.name,
        method=cls.name,
        split=sp.version,
        params={**cls.defaults(), **chosen},
        grid=points,
        scores=scores,
        labels=y[test],
        seen=seen,
        unseen=np.unique(y[sp.test_unseen]),
        seconds=time.perf_counter() - t0,
    )
