"""SOOD-style generalisation protocol: accuracy and macro-F1 under covariate shift and their
relative drop from the ID test set."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from semshift.errors import SemshiftError
from semshift.metrics import accuracy, macro_f1
from semshift.metrics.stats import BLOCK_ELEMENTS
from semshift.protocols._bootstrap import check_id_test, check_sets, percentile_ci
from semshift.protocols.registry import (
    ProtocolConfig,
    ProtocolInputs,
    ReportSection,
    register_protocol,
)
from semshift.protocols.sets import DEFAULT_BOOTSTRAP, Bootstrap, ScoredSet
from semshift.protocols.tidy import error_row, results_frame

__all__ = ["generalisation"]

FloatArray = NDArray[np.float64]


def _resampled(
    labels: NDArray[np.int64], preds: NDArray[np.int64], rng: np.random.Generator, n_res: int
) -> tuple[FloatArray, FloatArray]:
    """Accuracy and macro-F1 of every bootstrap resample of the samples, shape (n_res,) each.

    Macro-F1 per resample: F1_c = 2 TP_c / (#label c + #pred c) over the classes present in the
    resample's labels or predictions (as :func:`semshift.metrics.macro_f1`).
    """
    n = labels.size
    n_cls = int(max(labels.max(), preds.max())) + 1
    block = max(1, min(n_res, BLOCK_ELEMENTS // max(n, n_cls)))
    acc = np.empty(n_res)
    f1 = np.empty(n_res)
    done = 0
    while done < n_res:
        b = min(block, n_res - done)
        idx = rng.integers(0, n, size=(b, n))
        y, p = labels[idx], preds[idx]
        hit = y == p
        offset = (np.arange(b) * n_cls)[:, None]
        size = b * n_cls
        tp = np.bincount((y + offset)[hit], minlength=size).reshape(b, n_cls)
        support = np.bincount((y + offset).ravel(), minlength=size).reshape(b, n_cls)
        support += np.bincount((p + offset).ravel(), minlength=size).reshape(b, n_cls)
        present = support > 0
        f1_c = np.divide(2.0 * tp, support, out=np.zeros((b, n_cls)), where=present)
        acc[done : done + b] = hit.mean(axis=1)
        f1[done : done + b] = f1_c.sum(axis=1) / present.sum(axis=1)
        done += b
    return acc, f1


def generalisation(
    id_test: ScoredSet,
    sets: Sequence[ScoredSet],
    *,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> pd.DataFrame:
    """Closed-set accuracy and macro-F1 of ``id_test`` and each covariate set, and the drops.

    Rows (protocol ``generalisation``, detector null, ``split`` = the set's ``split`` such as
    ``easy`` / ``hard`` when given):

    - per set (``id_test`` first, then every ``covariate`` set in order): ``accuracy`` and
      ``macro_f1`` (:func:`semshift.metrics.macro_f1`, mean over the classes present in labels
      or predictions), ``n_id`` = the set size;
    - per covariate set: ``accuracy.relative_drop`` and ``macro_f1.relative_drop`` =
      (id - set) / id (an error row when the ID value is 0);
    - when one covariate set has split ``easy`` and one ``hard`` (SOOD's test splits):
      ``accuracy.delta_easy_hard`` and ``macro_f1.delta_easy_hard`` = (hard - easy) / easy, the
      paper's Delta (negative when Hard is worse; SOOD Table 1 prints it x100), on the hard
      set's row (``split`` hard).

    CIs: percentile bootstrap over resampled images of each set (``id_test`` drawn first,
    then each set from the same generator); the drop's CI pairs resample k of ``id_test``
    with resample k of the set. ``ood`` sets are not used (their labels are unknown).
    A prediction of ``-1`` (no prediction) makes macro-F1 fail for that set: error rows.

    Parameters
    ----------
    id_test : ScoredSet
        The ID test set.
    sets : sequence of ScoredSet
        Evaluation sets; the ``covariate`` ones are used.
    bootstrap : Bootstrap, default Bootstrap()
        CI settings.

    Returns
    -------
    pandas.DataFrame
        The tidy table (:data:`semshift.protocols.tidy.RESULT_COLUMNS`).

    References
    ----------
    .. [1] Bacchin et al., "SOOD-ImageNet: a Large-Scale Dataset for Semantic
       Out-Of-Distribution Image Classification and Semantic Segmentation", ECCV 2024
       (Easy / Hard test splits, macro-F1 and its drop).

    Examples
    --------
    >>> from semshift.protocols import Bootstrap, ScoredSet, generalisation
    >>> idt = ScoredSet("id_test", "id_test", [0, 1, 1, 0], [0, 1, 1, 0], {})
    >>> hard = ScoredSet("hard", "covariate", [0, 1, 1, 0], [0, 1, 0, 0], {}, split="hard")
    >>> df = generalisation(idt, [hard], bootstrap=Bootstrap(0))
    >>> df[["set", "metric", "value"]].round(4).values.tolist()
    [['id_test', 'accuracy', 1.0], ['id_test', 'macro_f1', 1.0],
     ['hard', 'accuracy', 0.75], ['hard', 'macro_f1', 0.7333],
     ['hard', 'accuracy.relative_drop', 0.25], ['hard', 'macro_f1.relative_drop', 0.2667]]
    """
    check_id_test(id_test, "generalisation")
    cov = [s for s in check_sets(sets, "generalisation") if s.role == "covariate"]
    rng = np.random.default_rng(bootstrap.seed)
    rows: list[dict[str, Any]] = []
    id_values: dict[str, float | str] = {}
    id_boot: dict[str, FloatArray] = {}
    by_split: dict[str, tuple[ScoredSet, dict[str, float | str], dict[str, FloatArray]]] = {}
    for s in [id_test, *cov]:
        values: dict[str, float | str] = {}
        for m, f in (("accuracy", accuracy), ("macro_f1", macro_f1)):
            try:
                values[m] = float(f(s.preds, s.labels))
            except SemshiftError as err:
                values[m] = str(err)
        boot: dict[str, FloatArray] = {}
        if bootstrap.enabled and not any(isinstance(v, str) for v in values.values()):
            boot["accuracy"], boot["macro_f1"] = _resampled(
                s.labels, s.preds, rng, bootstrap.n_resamples
            )
        base: dict[str, Any] = {
            "protocol": "generalisation",
            "set": s.name,
            "split": s.split,
            "n_id": s.n,
        }
        for m, v in values.items():
            if isinstance(v, str):
                rows.append(error_row(error=v, metric=m, **base))
                continue
            row = {**base, "metric": m, "value": v}
            if m in boot:
                low, high = percentile_ci(boot[m], bootstrap.level)
                row.update(ci_low=float(low), ci_high=float(high))
            rows.append(row)
        if s is id_test:
            id_values, id_boot = values, boot
            continue
        if s.split in ("easy", "hard"):
            by_split[s.split] = (s, values, boot) if s.split not in by_split else (s, {}, {})
        for m, v in values.items():
            key: dict[str, Any] = {**base, "metric": f"{m}.relative_drop"}
            ref = id_values[m]
            if isinstance(ref, str) or isinstance(v, str):
                rows.append(error_row(error=ref if isinstance(ref, str) else str(v), **key))
                continue
            if ref == 0:
                rows.append(error_row(error=f"n/a: the ID test {m} is 0", **key))
                continue
            row = {**key, "value": (ref - v) / ref}
            if m in boot and m in id_boot:
                with np.errstate(invalid="ignore", divide="ignore"):
                    drops = (id_boot[m] - boot[m]) / id_boot[m]
                low, high = percentile_ci(drops, bootstrap.level)
                row.update(ci_low=float(low), ci_high=float(high))
            rows.append(row)
    rows += _easy_hard(by_split, bootstrap)
    return results_frame(rows)


def _easy_hard(
    by_split: dict[str, tuple[ScoredSet, dict[str, float | str], dict[str, FloatArray]]],
    bootstrap: Bootstrap,
) -> list[dict[str, Any]]:
    """SOOD's Delta: (hard - easy) / easy of each metric, when exactly one set has each split
    (a second set of a split leaves empty values: no Delta)."""
    if set(by_split) != {"easy", "hard"}:
        return []
    (_, easy, easy_boot), (hard_set, hard, hard_boot) = by_split["easy"], by_split["hard"]
    rows: list[dict[str, Any]] = []
    for m in ("accuracy", "macro_f1"):
        e, h = easy.get(m), hard.get(m)
        if not isinstance(e, float) or not isinstance(h, float):
            continue  # a failed metric has its error row already; two sets of a split: none
        key: dict[str, Any] = {"protocol": "generalisation", "set": hard_set.name, "split": "hard",
               "n_id": hard_set.n, "metric": f"{m}.delta_easy_hard"}  # fmt: skip
        if e == 0:
            rows.append(error_row(error=f"n/a: the Easy {m} is 0", **key))
            continue
        row: dict[str, Any] = {**key, "value": (h - e) / e}
        if m in easy_boot and m in hard_boot:
            with np.errstate(invalid="ignore", divide="ignore"):
                deltas = (hard_boot[m] - easy_boot[m]) / easy_boot[m]
            low, high = percentile_ci(deltas, bootstrap.level)
            row.update(ci_low=float(low), ci_high=float(high))
        rows.append(row)
    return rows


class GeneralisationConfig(ProtocolConfig):
    """``protocols.generalisation``: no settings."""


@register_protocol(
    "generalisation", GeneralisationConfig,
    "closed-set accuracy and macro-F1 under covariate shift, relative drop (SOOD)",
    order=50, on_stores=True,
    sections=[ReportSection("generalisation", "Generalisation under covariate shift",
                            builder="generalisation_section")],
)  # fmt: skip
def _run_generalisation(inputs: ProtocolInputs, config: GeneralisationConfig) -> pd.DataFrame:
    return generalisation(inputs.id_test, inputs.others)
