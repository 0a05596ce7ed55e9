"""Open-set recognition protocol (SSB Table 1): closed-set accuracy, AUROC and OSCR per split."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from semshift.metrics import DEFAULT_METRICS, accuracy
from semshift.protocols._bootstrap import (
    check_id_test,
    check_metrics,
    check_sets,
    compare_rows,
    detector_names,
    mean_ci,
    percentile_ci,
    pool,
    pool_bootstrap,
)
from semshift.protocols.registry import (
    ProtocolConfig,
    ProtocolInputs,
    ReportSection,
    register_protocol,
)
from semshift.protocols.sets import DEFAULT_BOOTSTRAP, Bootstrap, ScoredSet
from semshift.protocols.tidy import results_frame

__all__ = ["osr"]


def osr(
    id_test: ScoredSet,
    sets: Sequence[ScoredSet],
    *,
    metrics: Sequence[str] = DEFAULT_METRICS,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> pd.DataFrame:
    """Open-set recognition: closed-set accuracy, then AUROC, OSCR and ranking metrics per split.

    The known side is ``id_test``; the unknown side of a row is the pool of every ``ood`` set
    with the same ``split`` (``set`` = their names joined by ``+``). When no ``ood`` set has a
    split, each forms its own pool under its name; when some have one, the sets without a split
    (e.g. the corrupted copies that fill a graded grid) are left to the other protocols.
    Covariate sets are not part of this protocol (SSB evaluates
    ID test images against semantic-shift images; see :func:`newclass_failure`).

    Rows (protocol ``osr``):

    - ``accuracy`` of ``id_test`` (``detector`` null, ``set`` = id_test's name), with a
      bootstrap CI over resampled ID images;
    - per detector and pool: ``auroc``, ``oscr`` (exact variant of
      :func:`semshift.metrics.oscr`: correct = ``preds == labels`` on ID), then the other
      ``metrics`` in the given order.

    ``n_id`` = ID test size, ``n_ood`` = pool size. CIs (percentile; ID and pool resampled
    separately, the same resamples for every detector; one run of
    :func:`semshift.protocols._bootstrap.pool_bootstrap` per pool, seeded with
    ``bootstrap.seed``) are computed for ``auroc``, ``oscr`` and ``fpr95``; for each of them the
    interval equals :func:`semshift.metrics.bootstrap_ci` on (id_test, pool) with the same seed.
    Other metrics (AUPR, ``fpr95_ood_recall``, detection error) have NaN bounds. A detector
    missing on ``id_test`` or on a pool member gives error rows, as does a metric that fails.

    Parameters
    ----------
    id_test : ScoredSet
        The ID test set (role ``id_test``).
    sets : sequence of ScoredSet
        Evaluation sets; the ``ood`` ones are used.
    metrics : sequence of str, default ("auroc", "fpr95", "aupr_in", "aupr_out")
        Registry names of ``(scores, is_ood)`` metrics, reported after ``auroc`` and ``oscr``.
    bootstrap : Bootstrap, default Bootstrap()
        CI settings; ``Bootstrap(n_resamples=0)`` turns CIs off.

    Returns
    -------
    pandas.DataFrame
        The tidy table (:data:`semshift.protocols.tidy.RESULT_COLUMNS`).

    Raises
    ------
    InputError
        ``id_test`` without role ``id_test``, duplicate set names, an unknown metric.

    References
    ----------
    .. [1] Vaze et al., "Open-Set Recognition: a Good Closed-Set Classifier is All You Need?",
       ICLR 2022, Table 1 (Acc, AUROC and OSCR on SSB Easy / Hard).
    .. [2] Dhamija, Guenther & Boult, "Reducing Network Agnostophobia", NeurIPS 2018 (OSCR).

    Examples
    --------
    >>> import numpy as np
    >>> from semshift.protocols import ScoredSet, Bootstrap, osr
    >>> idt = ScoredSet("id_test", "id_test", [0, 1, 1], [0, 1, 0],
    ...                 {"msp": np.array([0.9, 0.8, 0.4])})
    >>> easy = ScoredSet("easy", "ood", [-1, -1], [0, 0], {"msp": np.array([0.5, 0.1])},
    ...                  split="easy")
    >>> df = osr(idt, [easy], metrics=["auroc"], bootstrap=Bootstrap(0))
    >>> df[["set", "detector", "metric", "value"]].round(4).values.tolist()
    [['id_test', None, 'accuracy', 0.6667],
     ['easy', 'msp', 'auroc', 0.8333],
     ['easy', 'msp', 'oscr', 0.6667]]
    """
    check_id_test(id_test, "osr")
    all_sets = check_sets(sets, "osr")
    names = check_metrics(["auroc", "oscr", *metrics], "osr", extra=("oscr",))
    correct = id_test.correct
    rows: list[dict[str, Any]] = []
    acc = accuracy(id_test.preds, id_test.labels)
    low, high = mean_ci(correct.astype(np.float64), bootstrap)
    rows.append(
        {
            "protocol": "osr",
            "set": id_test.name,
            "split": id_test.split,
            "metric": "accuracy",
            "value": acc,
            "ci_low": low,
            "ci_high": high,
            "n_id": id_test.n,
        }
    )
    ood = [s for s in all_sets if s.role == "ood"]
    if any(s.split is not None for s in ood):  # the others are e.g. graded-grid cells
        ood = [s for s in ood if s.split is not None]
    groups: dict[str, list[ScoredSet]] = {}
    for s in ood:
        groups.setdefault(s.split if s.split is not None else f"\0{s.name}", []).append(s)
    detectors = detector_names([id_test], ood)
    ref = pool([id_test], detectors, {"set": id_test.name})
    pools = [
        pool(
            members,
            detectors,
            {
                "set": "+".join(m.name for m in members),
                "split": None if key.startswith("\0") else key,
            },
        )
        for key, members in groups.items()
    ]
    if not pools:
        return results_frame(rows)
    # point values (and error rows) first; CIs from one pool-ranked bootstrap per pool
    pair_rows = compare_rows("osr", detectors, ref, pools, names, Bootstrap(0), correct=correct)
    if bootstrap.enabled:
        ok = {(r["set"], r["detector"]) for r in pair_rows if r.get("error") is None}
        for side in pools:
            use = {det: (side.keys["set"], det) in ok for det in detectors}
            negatives = [side.scores.get(det) if use[det] else None for det in detectors]
            knowns = [[id_test.scores[det] if use[det] else None] for det in detectors]
            st = pool_bootstrap(
                negatives,
                knowns,
                [correct],
                n_resamples=bootstrap.n_resamples,
                seed=bootstrap.seed,
                fpr95=True,
                within=False,
                ref_last=True,
            )
            bounds = {m: percentile_ci(st[_STAT[m]][:, 0], bootstrap.level) for m in _STAT}
            where = {det: d for d, det in enumerate(detectors)}
            for r in pair_rows:
                m = r["metric"]
                if r["set"] == side.keys["set"] and m in bounds and r.get("error") is None:
                    d = where[r["detector"]]
                    r.update(ci_low=float(bounds[m][0][d]), ci_high=float(bounds[m][1][d]))
    return results_frame(rows + pair_rows)


_STAT = {"auroc": "newclass", "oscr": "oscr", "fpr95": "fpr95"}  # CI metric -> pool statistic


class OsrConfig(ProtocolConfig):
    """``protocols.osr``: ranking metrics beside AUROC and OSCR (default: the run's metrics)."""

    metrics: list[str] | None = None


@register_protocol(
    "osr", OsrConfig, "open-set recognition: accuracy, AUROC and OSCR per OOD split (SSB)",
    metric_keys=("metrics",), order=10, on_stores=True,
    sections=[
        ReportSection("osr", "Open-set recognition", builder="osr_section"),
        ReportSection("osr_class_pairs", "Open-set classes and their nearest known class",
                      builder="semshift.report.split_pairs:class_pairs_section"),
    ],
)  # fmt: skip
def _run_osr(inputs: ProtocolInputs, config: OsrConfig) -> pd.DataFrame:
    metrics = config.metrics or list(inputs.metrics)
    return osr(inputs.id_test, inputs.others, metrics=metrics, bootstrap=inputs.bootstrap)
