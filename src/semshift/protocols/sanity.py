"""Random-model sanity check (ImageNet-OOD section 4.2): detectors on randomly initialised
networks should not separate ID from OOD."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import Field

from semshift.errors import InputError
from semshift.protocols._bootstrap import check_sets, compare_rows, detector_names, pool
from semshift.protocols.registry import (
    ProtocolInputs,
    RandomModelsConfig,
    ReportSection,
    register_protocol,
)
from semshift.protocols.sets import DEFAULT_BOOTSTRAP, Bootstrap, ScoredSet
from semshift.protocols.tidy import error_row, results_frame

__all__ = ["sanity"]


GOALS = ("newclass", "failure")


def sanity(
    runs: Mapping[int, Sequence[ScoredSet]],
    *,
    delta: float = 0.05,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    goals: Sequence[str] = GOALS,
) -> pd.DataFrame:
    """AUROC of every detector on randomly initialised models, and a flag per detector.

    Rows (protocol ``sanity``):

    - per seed (ascending), non-ID set and detector: ``auroc`` of the seed's ``id_test`` vs
      that set (``ood`` and ``covariate`` sets alike), with its bootstrap CI, ``split`` =
      ``seed<k>``, ``set`` = the set's name;
    - per detector: ``flagged`` = 1.0 when any of its AUROC CIs lies entirely outside
      ``[0.5 - delta, 0.5 + delta]`` (``ci_low > 0.5 + delta`` or ``ci_high < 0.5 - delta``),
      else 0.0; with bootstrap off the point value is used instead of the CI. ``set`` null,
      ``split`` = ``all``. A detector with no AUROC at all gets an error row instead.
    - with the ``failure`` goal (ImageNet-OOD appendix F), per seed, non-ID set and detector:
      ``failure.auroc`` of the seed's correctly classified ``id_test`` images (positives)
      against its misclassified ones together with the set's images (negatives), and per
      detector ``failure.flagged`` by the same rule. A seed whose model classifies no ID image
      correctly (or every one) gives error rows (``n/a``): there is nothing to separate.

    Parameters
    ----------
    runs : mapping of int -> sequence of ScoredSet
        Seed of the random initialisation -> the sets scored by that model: exactly one
        ``id_test`` set and the others.
    delta : float, default 0.05
        Half-width of the band around 0.5 a well-behaved detector stays in, in [0, 0.5).
    bootstrap : Bootstrap, default Bootstrap()
        CI settings (the same seed for every model).
    goals : sequence of str, default ("newclass", "failure")
        ``newclass``: ID test vs each set (the ``auroc`` rows and ``flagged``); ``failure``:
        correct vs incorrect-or-set (the ``failure.*`` rows).

    Returns
    -------
    pandas.DataFrame
        The tidy table (:data:`semshift.protocols.tidy.RESULT_COLUMNS`).

    Raises
    ------
    InputError
        No run, a run without exactly one ``id_test`` set or with no other set, a bad delta.

    References
    ----------
    .. [1] Yang et al., "ImageNet-OOD: Deciphering Modern Out-of-Distribution Detection
       Algorithms", ICLR 2024, section 4.2 (randomly initialised networks).

    Examples
    --------
    >>> import numpy as np
    >>> from semshift.protocols import Bootstrap, ScoredSet, sanity
    >>> idt = ScoredSet("id_test", "id_test", [0, 1], [0, 0], {"msp": np.array([0.9, 0.8])})
    >>> ood = ScoredSet("ood", "ood", [-1, -1], [0, 0], {"msp": np.array([0.1, 0.2])})
    >>> df = sanity({0: [idt, ood]}, bootstrap=Bootstrap(0))
    >>> df[["split", "metric", "value"]].values.tolist()  # doctest: +NORMALIZE_WHITESPACE
    [['seed0', 'auroc', 1.0], ['seed0', 'failure.auroc', 1.0], ['all', 'flagged', 1.0],
     ['all', 'failure.flagged', 1.0]]
    """
    unknown = [g for g in goals if g not in GOALS]
    if unknown or not goals:
        raise InputError(f"sanity: goals must be among {', '.join(GOALS)}, got {list(goals)}")
    if not isinstance(delta, int | float) or not 0.0 <= float(delta) < 0.5:
        raise InputError(f"sanity: delta must be a number in [0, 0.5), got {delta!r}")
    if not runs:
        raise InputError("sanity: runs is empty; give at least one seed's scored sets")
    rows: list[dict[str, Any]] = []
    ordered = sorted(runs.items(), key=lambda kv: kv[0])
    detectors = detector_names(*[list(v) for _, v in ordered])
    for seed, sets in ordered:
        all_sets = check_sets(sets, f"sanity seed {seed}")
        ids = [s for s in all_sets if s.role == "id_test"]
        others = [s for s in all_sets if s.role != "id_test"]
        if len(ids) != 1 or not others:
            raise InputError(
                f"sanity seed {seed}: needs exactly one id_test set and at least one other set, "
                f"got {len(ids)} id_test and {len(others)} other(s)"
            )
        extra = {"split": f"seed{seed}"}
        if "newclass" in goals:
            ref = pool(ids, detectors, {"set": ids[0].name})
            sides = [pool([s], detectors, {"set": s.name}) for s in others]
            rows += compare_rows("sanity", detectors, ref, sides, ["auroc"], bootstrap, extra=extra)
        if "failure" in goals:
            rows += _failure_rows(ids[0], others, detectors, bootstrap, extra)
    frame = results_frame(rows)
    flags = [
        _flag(frame, det, metric, delta, bootstrap.enabled)
        for metric in [m for g, m in (("newclass", "auroc"), ("failure", "failure.auroc"))
                       if g in goals]
        for det in detectors
    ]  # fmt: skip
    return pd.concat([frame, results_frame(flags)], ignore_index=True)


def _failure_rows(
    idt: ScoredSet,
    others: Sequence[ScoredSet],
    detectors: Sequence[str],
    bootstrap: Bootstrap,
    extra: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """Correct ID images vs the incorrect ones and each set (the failure-detection goal)."""
    correct = np.asarray(idt.preds) == np.asarray(idt.labels)
    if not correct.any() or correct.all():
        why = "no ID test image is" if not correct.any() else "every ID test image is"
        return [
            error_row(
                error=f"n/a: {why} classified correctly by this random model",
                protocol="sanity",
                set=s.name,
                detector=d,
                metric="failure.auroc",
                **extra,
            )
            for s in others
            for d in detectors
        ]
    ref = pool([idt], detectors, {"set": idt.name}, mask=[correct])
    sides = [
        pool([idt, s], detectors, {"set": s.name}, mask=[~correct, np.ones(s.n, dtype=bool)])
        for s in others
    ]
    rows = compare_rows("sanity", detectors, ref, sides, ["auroc"], bootstrap, extra=extra)
    for r in rows:
        r["metric"] = f"failure.{r['metric']}"
    return rows


def _flag(
    frame: pd.DataFrame, det: str, metric: str, delta: float, with_ci: bool
) -> dict[str, Any]:
    """The detector's verdict on ``metric`` (``auroc`` -> ``flagged``, ``failure.auroc`` ->
    ``failure.flagged``): 1.0 when a CI (or value) lies outside 0.5 +- delta."""
    hi, lo = 0.5 + float(delta), 0.5 - float(delta)
    name = "flagged" if metric == "auroc" else metric.replace("auroc", "flagged")
    base = {"protocol": "sanity", "split": "all", "detector": det, "metric": name}
    r = frame[(frame["detector"] == det) & (frame["metric"] == metric) & frame["error"].isna()]
    if r.empty:
        return error_row(error="n/a: no AUROC without error to judge", **base)
    if with_ci:
        out = (r["ci_low"] > hi) | (r["ci_high"] < lo)
    else:
        out = (r["value"] > hi) | (r["value"] < lo)
    return {**base, "value": 1.0 if bool(np.any(out.to_numpy())) else 0.0}


class SanityConfig(RandomModelsConfig):
    """``protocols.sanity``: ``n_models`` random-init copies of the model (or precomputed
    ``stores``); a detector is flagged when a set's AUROC is outside ``0.5 +/- delta``."""

    delta: float = Field(default=0.05, ge=0.0, lt=0.5)
    #: ``newclass`` (ID test vs each set) and ``failure`` (correct vs incorrect-or-set)
    goals: tuple[Literal["newclass", "failure"], ...] = Field(
        default=("newclass", "failure"), min_length=1
    )


@register_protocol(
    "sanity", SanityConfig, "random-model sanity check (ImageNet-OOD section 4.2)",
    needs_random_models=True, order=40,
    sections=[ReportSection("sanity", "Random-model sanity check",
                            builder="sanity_section")],
)  # fmt: skip
def _run_sanity(inputs: ProtocolInputs, config: SanityConfig) -> pd.DataFrame:
    return sanity(
        dict(inputs.random_models),
        delta=config.delta,
        bootstrap=inputs.bootstrap,
        goals=config.goals,
    )
