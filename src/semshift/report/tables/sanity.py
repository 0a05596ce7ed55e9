"""The random-model sanity-check table."""

from __future__ import annotations

import math
from typing import Any

from semshift.report._load import as_results, level_sort_key, ordered_unique
from semshift.report.tables._core import (
    _EMPTY,
    Cell,
    Column,
    ResultsLike,
    Table,
    _build,
    _cell,
    _detectors,
    _ErrorIndex,
    _lookup,
    _need,
    _rows,
)

__all__ = ["sanity_table"]


def _outside_band(cell: Cell, delta: float) -> bool:
    """True when the CI (or the value, without a CI) lies entirely outside 0.5 +- delta."""
    lo, hi = (cell.ci_low, cell.ci_high) if math.isfinite(cell.ci_low) else (cell.value, cell.value)
    return bool(hi < 0.5 - delta or lo > 0.5 + delta)


def _furthest(
    rows: Any, key: Any, delta: float, *, errors_first: bool = True
) -> dict[tuple[str, str], Cell]:
    """Per key, the cell furthest from 0.5, † marked; an error cell wins over values when
    ``errors_first`` (a failed set), else it shows only where there is no value (a random
    model with no correct image has no failure AUROC, the others do)."""
    worst: dict[tuple[str, str], Cell] = {}
    for r in rows.itertuples(index=False):
        k = key(r)
        cell = _cell(r)
        prev = worst.get(k)
        error_wins = errors_first or not prev.ok if prev is not None else True
        if prev is None or (prev.error is None and cell.error is not None and error_wins):
            worst[k] = cell
        elif cell.ok and (not prev.ok or abs(cell.value - 0.5) > abs(prev.value - 0.5)):
            worst[k] = cell
    return {
        k: Cell(
            c.value, c.ci_low, c.ci_high, c.error, "†" if c.ok and _outside_band(c, delta) else ""
        )
        for k, c in worst.items()
    }


def sanity_table(results: ResultsLike, *, delta: float = 0.05, ci: bool = True) -> Table:
    """Random-model sanity check (ImageNet-OOD section 4.2), one row per detector.

    For each set, the AUROC of the random-init model (seed) furthest from 0.5, with its CI,
    marked ``†`` when that CI lies outside 0.5 +- ``delta``; then the runner's ``flagged``
    verdict. With the failure-detection goal (``failure.auroc`` rows): one more AUROC column,
    the value furthest from 0.5 over every set and seed, and its ``failure.flagged`` verdict.
    """
    res = as_results(results)
    rows = _rows(res, "sanity")
    rows = rows[rows["detector"].notna()]
    _need(rows, "sanity")
    errs = _ErrorIndex(rows)
    au = rows[rows["metric"] == "auroc"]
    sets = sorted((str(s) for s in ordered_unique(au["set"])), key=level_sort_key)
    seeds = ordered_unique(rows.loc[rows["metric"].isin(["auroc", "failure.auroc"]), "split"])
    worst = _furthest(au, lambda r: (str(r.detector), str(r.set)), delta)
    flags = _lookup(rows[rows["metric"] == "flagged"], ("detector",))
    fail = rows[rows["metric"] == "failure.auroc"]
    fail_worst = _furthest(fail, lambda r: (str(r.detector), ""), delta, errors_first=False)
    fail_flags = _lookup(rows[rows["metric"] == "failure.flagged"], ("detector",))
    detectors = _detectors(rows)
    columns = [Column(s, group="AUROC", direction=None) for s in sets]
    has_flag, has_fail = bool(flags), bool(fail_worst)
    if has_flag:
        columns.append(Column("Flagged", direction=None, kind="flag"))
    if has_fail:
        columns += [Column("AUROC", group="Failure", direction=None),
                    Column("Flagged", group="Failure", direction=None, kind="flag")]  # fmt: skip
    cells = [
        [worst.get((d, s)) or errs.get(d, s) for s in sets]
        + ([flags.get((d,), _EMPTY)] if has_flag else [])
        + ([fail_worst.get((d, ""), _EMPTY), fail_flags.get((d,), _EMPTY)] if has_fail else [])
        for d in detectors
    ]
    return _build(
        "sanity",
        "Random-model sanity check (ImageNet-OOD section 4.2)",
        f"AUROC x100 of the detectors on {len(seeds)} randomly initialised model(s); per set the "
        f"model furthest from 0.5 is shown. † = its CI lies outside 0.5 ± {delta:g}; a "
        "well-behaved detector gives about 50 everywhere."
        + (
            " Failure: correctly classified ID images vs the misclassified ones and each set "
            "(ImageNet-OOD appendix F), the value furthest from 0.5 over sets and models."
            if has_fail
            else ""
        )
        + " No best marked.",
        "Detector",
        detectors,
        columns,
        cells,
        ci=ci,
    )
