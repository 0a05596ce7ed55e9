"""Random-model sanity check (ImageNet-OOD section 4.2): detectors on randomly initialised
networks should not separate ID from OOD."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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


def sanity(
    runs: Mapping[int, Sequence[ScoredSet]],
    *,
    delta: float = 0.05,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
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

    Parameters
    ----------
    runs : mapping of int -> sequence of ScoredSet
        Seed of the random initialisation -> the sets scored by that model: exactly one
        ``id_test`` set and the others.
    delta : float, default 0.05
        Half-width of the band around 0.5 a well-behaved detector stays in, in [0, 0.5).
    bootstrap : Bootstrap, default Bootstrap()
        CI settings (the same seed for every model).

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
    >>> idt = ScoredSet("id_test", "id_test", [0, 0], [0, 0], {"msp": np.array([0.9, 0.8])})
    >>> ood = ScoredSet("ood", "ood", [-1, -1], [0, 0], {"msp": np.array([0.1, 0.2])})
    >>> df = sanity({0: [idt, ood]}, bootstrap=Bootstrap(0))
    >>> df[["split", "metric", "value"]].values.tolist()
    [['seed0', 'auroc', 1.0], ['all', 'flagged', 1.0]]
    """
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
        ref = pool(ids, detectors, {"set": ids[0].name})
        sides = [pool([s], detectors, {"set": s.name}) for s in others]
        rows += compare_rows(
            "sanity", detectors, ref, sides, ["auroc"], bootstrap, extra={"split": f"seed{seed}"}
        )
    frame = results_frame(rows)
    hi, lo = 0.5 + float(delta), 0.5 - float(delta)
    flags: list[dict[str, Any]] = []
    for det in detectors:
        r = frame[(frame["detector"] == det) & frame["error"].isna()]
        base = {"protocol": "sanity", "split": "all", "detector": det, "metric": "flagged"}
        if r.empty:
            flags.append(error_row(error="n/a: no AUROC without error to judge", **base))
            continue
        if bootstrap.enabled:
            out = (r["ci_low"] > hi) | (r["ci_high"] < lo)
        else:
            out = (r["value"] > hi) | (r["value"] < lo)
        flags.append({**base, "value": 1.0 if bool(np.any(out.to_numpy())) else 0.0})
    return pd.concat([frame, results_frame(flags)], ignore_index=True)


class SanityConfig(RandomModelsConfig):
    """``protocols.sanity``: ``n_models`` random-init copies of the model (or precomputed
    ``stores``); a detector is flagged when a set's AUROC is outside ``0.5 +/- delta``."""

    delta: float = Field(default=0.05, ge=0.0, lt=0.5)


@register_protocol(
    "sanity", SanityConfig, "random-model sanity check (ImageNet-OOD section 4.2)",
    needs_random_models=True, order=40,
    sections=[ReportSection("sanity", "Random-model sanity check",
                            builder="sanity_section")],
)  # fmt: skip
def _run_sanity(inputs: ProtocolInputs, config: SanityConfig) -> pd.DataFrame:
    return sanity(dict(inputs.random_models), delta=config.delta, bootstrap=inputs.bootstrap)
