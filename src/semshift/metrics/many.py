"""One ID score set against many OOD subsets: sort the ID scores once, rank each subset."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from semshift.errors import InputError
from semshift.metrics import ranking
from semshift.metrics._validation import as_scores, check_same_length
from semshift.metrics.rankcore import RankCore, tie_runs
from semshift.metrics.registry import MetricSpec, get_metric

__all__ = ["DEFAULT_METRICS", "evaluate_many"]

DEFAULT_METRICS = ("auroc", "fpr95", "aupr_in", "aupr_out")

MetricArg = str | Callable[..., float]


def _fast(spec: MetricSpec) -> Callable[[RankCore], float] | None:
    """A reader of the shared rank core for the ranking metrics, None for anything else."""
    f, kw = spec.function, dict(spec.kwargs)
    if f is ranking.auroc:
        return RankCore.auroc
    if f is ranking.fpr_at_tpr:
        tpr, conv = float(kw.get("tpr", 0.95)), str(kw.get("convention", "id_recall"))
        return lambda core: core.fpr(tpr, conv)
    if f is ranking.fpr_at_tpr_openood:
        tpr_o = float(kw.get("tpr", 0.95))
        return lambda core: core.fpr_openood(tpr_o)
    if f is ranking.aupr_in:
        method = str(kw.get("method", "ap"))
        return lambda core: core.aupr("id", method)
    if f is ranking.aupr_out:
        method = str(kw.get("method", "ap"))
        return lambda core: core.aupr("ood", method)
    if f is ranking.detection_error:
        return RankCore.detection_error
    return None


def _resolve(
    metrics: Sequence[MetricArg] | MetricArg,
) -> list[tuple[str, Callable[[RankCore], float] | None, Callable[..., float]]]:
    """``(name, fast reader or None, callable(scores, is_ood))`` per requested metric."""
    if isinstance(metrics, str) or callable(metrics):
        metrics = [metrics]
    out: list[tuple[str, Callable[[RankCore], float] | None, Callable[..., float]]] = []
    for m in metrics:
        if isinstance(m, str | MetricSpec):
            spec = get_metric(m) if isinstance(m, str) else m
            if spec.inputs != ("scores", "is_ood"):
                raise InputError(
                    f"metric {spec.name!r} needs inputs {spec.inputs}; evaluate_many takes "
                    f"metrics of (scores, is_ood) only"
                )
            out.append((spec.name, _fast(spec), spec))
        elif callable(m):
            out.append((getattr(m, "__name__", repr(m)), None, m))
        else:
            raise InputError(f"metrics must be registry names or callables, got {m!r}")
    if not out:
        raise InputError("metrics is empty: name at least one metric")
    return out


def _subsets(
    ood_sets: Mapping[Any, ArrayLike] | ArrayLike, groups: ArrayLike | None
) -> list[tuple[Any, NDArray[np.floating]]]:
    if isinstance(ood_sets, Mapping):
        if groups is not None:
            raise InputError("groups is only used when ood_sets is an array, not a dict")
        if not ood_sets:
            raise InputError("ood_sets is empty: give at least one OOD subset")
        return [(k, as_scores(v, f"ood_sets[{k!r}]")) for k, v in ood_sets.items()]
    scores = as_scores(ood_sets, "ood_sets")
    if groups is None:
        raise InputError("ood_sets is an array: pass groups (one subset label per score)")
    g = np.asarray(groups)
    if g.ndim != 1:
        raise InputError(f"groups must be 1-D, got shape {g.shape}")
    check_same_length(ood_sets=scores, groups=g)
    keys, inverse = np.unique(g, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.cumsum(np.bincount(inverse, minlength=keys.size))[:-1]
    parts = np.split(scores[order], bounds)
    return [(k.item() if hasattr(k, "item") else k, p) for k, p in zip(keys, parts, strict=True)]


def evaluate_many(
    id_scores: ArrayLike,
    ood_sets: Mapping[Any, ArrayLike] | ArrayLike,
    metrics: Sequence[MetricArg] | MetricArg = DEFAULT_METRICS,
    *,
    groups: ArrayLike | None = None,
) -> pd.DataFrame:
    """Evaluate one ID score array against many OOD subsets.

    The ID scores are validated and sorted once; each subset is sorted and ranked against them
    (``np.searchsorted`` or a linear merge), and every ranking metric is read off the shared
    :class:`~semshift.metrics.rankcore.RankCore`. Values equal the single-metric functions on
    ``(concatenate(id, subset), is_ood)`` exactly.

    Parameters
    ----------
    id_scores : array_like of float, shape (n_id,)
        Normality scores of the ID set, higher = more in-distribution.
    ood_sets : mapping of name -> array_like of float, or array_like of float, shape (m,)
        The OOD subsets: a dict of score arrays, or all OOD scores in one array with their
        subset label in ``groups``.
    metrics : sequence of str or callable, default ("auroc", "fpr95", "aupr_in", "aupr_out")
        Registry names of ``(scores, is_ood)`` metrics (see
        ``list_metrics(inputs=("scores", "is_ood"))``), or callables ``f(scores, is_ood)``
        (evaluated per subset on the concatenated arrays).
    groups : array_like, shape (m,), optional
        Subset label of every OOD score when ``ood_sets`` is an array; subsets are then ordered
        by ``np.unique`` of the labels.

    Returns
    -------
    pandas.DataFrame
        Tidy table with columns ``subset``, ``metric``, ``value``, ``n_id``, ``n_ood``; one row
        per (subset, metric), subsets in input order, metrics in the requested order.

    Raises
    ------
    InputError
        Bad scores (NaN/inf, empty, not 1-D), an empty subset or mapping, a metric that does not
        take ``(scores, is_ood)``, or ``groups`` missing / of the wrong length.

    References
    ----------
    .. [1] Long et al., "Rethinking the Evaluation of Out-of-Distribution Detection: A Sorites
       Paradox" (IS-OOD), NeurIPS 2024 Datasets and Benchmarks: 64 shift-grid cells per
       detector.

    Examples
    --------
    >>> from semshift.metrics import evaluate_many
    >>> df = evaluate_many([3.0, 2.0], {"near": [2.5], "far": [0.0]}, ["auroc"])
    >>> df[["subset", "value"]].to_numpy().tolist()
    [['near', 0.5], ['far', 1.0]]
    """
    resolved = _resolve(metrics)
    ids = as_scores(id_scores, "id_scores")
    id_sorted = np.sort(ids)
    id_runs = tie_runs(id_sorted)
    subsets = _subsets(ood_sets, groups)
    rows: list[tuple[Any, str, float, int, int]] = []
    for key, sub in subsets:
        core = RankCore(id_sorted, np.sort(sub), id_runs=id_runs)
        is_ood = None
        for name, fast, func in resolved:
            if fast is not None:
                value = fast(core)
            else:
                if is_ood is None:
                    both = np.concatenate((ids, sub))
                    is_ood = np.zeros(both.size, dtype=bool)
                    is_ood[ids.size :] = True
                value = float(func(both, is_ood))
            rows.append((key, name, float(value), ids.size, sub.size))
    return pd.DataFrame(rows, columns=["subset", "metric", "value", "n_id", "n_ood"])
