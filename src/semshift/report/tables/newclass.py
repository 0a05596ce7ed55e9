"""ImageNet-OOD tables: new-class vs failure detection (Table 1) and the AUROC decomposition
(Table 4)."""

from __future__ import annotations

from semshift.report._load import as_results, ordered_unique
from semshift.report.tables._core import (
    Column,
    ResultsLike,
    Table,
    _build,
    _detectors,
    _ErrorIndex,
    _lookup,
    _need,
    _rows,
    metric_direction,
    metric_label,
)

__all__ = ["decomposition_table", "newclass_failure_table"]


def newclass_failure_table(
    results: ResultsLike, *, metric: str = "auroc", ci: bool = True
) -> Table:
    """ImageNet-OOD Table 1: new-class and failure detection, one row per detector.

    Column groups ``New-class detection`` and ``Failure detection`` (those present); in each,
    one column per covariate set (``<set> vs OOD``) and ``ID vs OOD`` (the ``id_test`` rows).

    References
    ----------
    .. [1] Yang et al., "ImageNet-OOD: Deciphering Modern Out-of-Distribution Detection
       Algorithms", ICLR 2024, Table 1.
    """
    res = as_results(results)
    rows = _rows(res, ("newclass", "failure"))
    errs = {p: _ErrorIndex(rows[rows["protocol"] == p]) for p in ("newclass", "failure")}
    rows = rows[((rows["metric"] == metric) | rows["metric"].isna()) & rows["detector"].notna()]
    _need(rows, "newclass / failure")
    sets = [str(s) for s in ordered_unique(rows["set"])]
    sets = [s for s in sets if s != "id_test"] + (["id_test"] if "id_test" in sets else [])
    lookup = _lookup(rows, ("detector", "protocol", "set"))
    groups = [
        (p, name)
        for p, name in (("newclass", "New-class detection"), ("failure", "Failure detection"))
        if (rows["protocol"] == p).any()
    ]
    columns, keys = [], []
    for p, name in groups:
        for s in sets:
            label = "ID vs OOD" if s == "id_test" else f"{s} vs OOD"
            columns.append(Column(label, group=name, direction=metric_direction(metric)))
            keys.append((p, s))
    detectors = _detectors(rows)
    cells = [[lookup.get((d, p, s)) or errs[p].get(d, s) for p, s in keys] for d in detectors]
    return _build(
        "newclass_failure",
        f"New-class vs failure detection, {metric_label(metric)} (ImageNet-OOD Table 1)",
        f"{metric_label(metric)} x100 of each covariate-shift set and of ID test against the "
        "pooled semantic OOD. New-class: positives = every image of a known class. Failure: "
        "positives = correctly classified images; negatives = misclassified ones and OOD.",
        "Detector",
        detectors,
        columns,
        cells,
        ci=ci,
    )


_DECOMPOSITION = (
    ("acc", "Acc"),
    ("auroc", "AUROC ID vs OOD"),
    ("auroc_correct", "AUROC correct vs OOD"),
    ("auroc_incorrect", "AUROC incorrect vs OOD"),
    ("auroc_correct_vs_incorrect", "AUROC correct vs incorrect"),
)


def decomposition_table(results: ResultsLike, *, ci: bool = True) -> Table:
    """ImageNet-OOD Table 4: the AUROC decomposition over correct and incorrect ID samples.

    AUROC = acc x AUROC(correct vs OOD) + (1 - acc) x AUROC(incorrect vs OOD).

    References
    ----------
    .. [1] Yang et al., ImageNet-OOD, ICLR 2024, eq. 2 and Table 4.
    """
    res = as_results(results)
    rows = _rows(res, "decomposition")
    rows = rows[rows["detector"].notna()]
    _need(rows, "decomposition")
    errs = _ErrorIndex(rows)
    lookup = _lookup(rows, ("detector", "metric"))
    present = set(rows["metric"])
    metrics = [(m, label) for m, label in _DECOMPOSITION if m in present]
    columns = [Column(label, direction=None if m == "acc" else "max") for m, label in metrics]
    detectors = _detectors(rows)
    cells = [[lookup.get((d, m)) or errs.get(d, None) for m, _ in metrics] for d in detectors]
    return _build(
        "decomposition",
        "AUROC decomposition (ImageNet-OOD Table 4)",
        "ID test vs pooled OOD, x100: AUROC = Acc x AUROC(correct vs OOD) + (1 - Acc) x "
        "AUROC(incorrect vs OOD).",
        "Detector",
        detectors,
        columns,
        cells,
        ci=ci,
    )
