"""The table the CLI prints for a results table."""

from __future__ import annotations

from semshift.errors import InputError
from semshift.report._load import as_results
from semshift.report.tables._core import ResultsLike, Table
from semshift.report.tables.declared import declared_table
from semshift.report.tables.generalisation import generalisation_table
from semshift.report.tables.graded import graded_level_table, graded_metrics
from semshift.report.tables.gzsl import gzsl_table
from semshift.report.tables.newclass import decomposition_table, newclass_failure_table
from semshift.report.tables.operating import operating_point_overview_table
from semshift.report.tables.osr import osr_table
from semshift.report.tables.sanity import sanity_table

__all__ = ["headline_table"]


def headline_table(results: ResultsLike, *, ci: bool = False) -> Table:
    """The table the CLI prints: the OSR table when present, else the first protocol's table
    (for a protocol registered beside semshift's, the first table section it declares).

    CIs are hidden by default to keep it narrow in a terminal.
    """
    res = as_results(results)
    present = set(res["protocol"])
    if "osr" in present:
        return osr_table(res, ci=ci)
    if present & {"newclass", "failure"}:
        return newclass_failure_table(res, ci=ci)
    if "decomposition" in present:
        return decomposition_table(res, ci=ci)
    if "graded" in present:
        # no cell with a value (every cell n/a, e.g. too small): the AUROC table shows the n/a
        metric = next(iter(graded_metrics(res)), "auroc")
        return graded_level_table(res, metric=metric, ci=ci)
    if "operating_point" in present:
        return operating_point_overview_table(res, ci=ci)
    if "sanity" in present:
        return sanity_table(res, ci=ci)
    if "generalisation" in present:
        return generalisation_table(res)
    if "gzsl" in present:
        return gzsl_table(res)
    declared = declared_table(res)  # a protocol registered with a table section (a plugin's)
    if declared is not None:
        return declared
    raise InputError(
        "results have no rows of a known protocol (osr, newclass, failure, decomposition, graded, "
        f"operating_point, sanity, generalisation, gzsl); found {sorted(present)}"
    )
