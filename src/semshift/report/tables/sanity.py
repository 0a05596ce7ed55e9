"""The random-model sanity-check table."""

from __future__ import annotations

import math

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


def sanity_table(results: ResultsLike, *, delta: float = 0.05, ci: bool = True) -> Table:
    """Random-model sanity check (ImageNet-OOD section 4.2), one row per detector.

    For each set, the AUROC of the random-init model (seed) furthest from 0.5, with its CI,
    marked ``†`` when that CI lies outside 0.5 +- ``delta``; last column: the runner's
    ``flagged`` verdict.
    """
    res = as_results(results)
    rows = _rows(res, "sanity")
    rows = rows[rows["detector"].notna()]
    _need(rows, "sanity")
    errs = _ErrorIndex(rows)
    au = rows[rows["metric"] == "auroc"]
    sets = sorted((str(s) for s in ordered_unique(au["set"])), key=level_sort_key)
    worst: dict[tuple[str, str], Cell] = {}
    seeds = ordered_unique(au["split"])
    for r in au.itertuples(index=False):
        key = (str(r.detector), str(r.set))
        cell = _cell(r)
        prev = worst.get(key)
        if prev is None or (prev.error is None and cell.error is not None):
            worst[key] = cell
        elif cell.ok and (not prev.ok or abs(cell.value - 0.5) > abs(prev.value - 0.5)):
            worst[key] = cell
    worst = {
        k: Cell(
            c.value, c.ci_low, c.ci_high, c.error, "†" if c.ok and _outside_band(c, delta) else ""
        )
        for k, c in worst.items()
    }
    flags = _lookup(rows[rows["metric"] == "flagged"], ("detector",))
    detectors = _detectors(rows)
    columns = [Column(s, group="AUROC", direction=None) for s in sets]
    has_flag = bool(flags)
    if has_flag:
        columns.append(Column("Flagged", direction=None, kind="flag"))
    cells = [
        [worst.get((d, s)) or errs.get(d, s) for s in sets]
        + ([flags.get((d,), _EMPTY)] if has_flag else [])
        for d in detectors
    ]
    return _build(
        "sanity",
        "Random-model sanity check (ImageNet-OOD section 4.2)",
        f"AUROC x100 of the detectors on {len(seeds)} randomly initialised model(s); per set the "
        f"model furthest from 0.5 is shown. † = its CI lies outside 0.5 ± {delta:g}; a "
        "well-behaved detector gives about 50 everywhere. No best marked.",
        "Detector",
        detectors,
        columns,
        cells,
        ci=ci,
    )
