"""Result tables in the seed papers' layouts, rendered to Markdown, HTML and rich.

Every builder takes the tidy results table (docs/design/run.md; a DataFrame, a run's output
directory or its ``results.parquet``) and returns a :class:`Table`. Values are fractions in the
results and are shown x100 with one decimal; the best value of each column is bold (highest for
AUROC / AUPR / OSCR / accuracy / F1 / H, lowest for FPR@95 and other lower-is-better metrics;
the caption says which); a bootstrap CI is shown as ``91.2 [90.8, 91.6]``; a cell whose
detector or set failed shows ``err`` and the error is listed under the table.

Builders: :func:`osr_table` (SSB Table 1), :func:`osr_metrics_table`,
:func:`newclass_failure_table` (ImageNet-OOD Table 1), :func:`decomposition_table`
(ImageNet-OOD Table 4), :func:`graded_level_table` and :func:`graded_trend_table` (IS-OOD),
:func:`operating_point_overview_table` and :func:`operating_point_table` (the rejection
threshold), :func:`sanity_table`, :func:`generalisation_table` (SOOD), :func:`gzsl_table` (GBU)
and :func:`headline_table` (the one the CLI prints). :func:`search_table` takes a hyperparameter
search's ``search.csv`` instead: the values chosen per detector.

The builders live in one module per protocol (``osr``, ``newclass``, ``graded``,
``operating``, ``sanity``, ``generalisation``, ``gzsl``, ``search``, ``headline``) over the
table model of ``_core``; this package re-exports every name.
"""

# ruff: noqa: F401  (this package re-exports every name its modules define)

from __future__ import annotations

from semshift.report.tables._core import (
    _EMPTY,
    _ERROR,
    _HIGHER_IS_BETTER,
    _LABELS,
    _LOWER_IS_BETTER,
    _MISSING,
    Cell,
    Column,
    Direction,
    Kind,
    ResultsLike,
    Table,
    _build,
    _caption,
    _cell,
    _detectors,
    _display_value,
    _ErrorIndex,
    _Errors,
    _group_spans,
    _lookup,
    _md,
    _need,
    _number,
    _rows,
    _split_label,
    _title_case,
    format_cell,
    is_na_note,
    metric_direction,
    metric_label,
)
from semshift.report.tables.declared import (
    declared_table,
    section_table,
)
from semshift.report.tables.generalisation import (
    generalisation_table,
)
from semshift.report.tables.graded import (
    graded_level_table,
    graded_metrics,
    graded_trend_table,
)
from semshift.report.tables.gzsl import (
    _zsl_method,
    gzsl_table,
    zsl_table,
)
from semshift.report.tables.headline import (
    headline_table,
)
from semshift.report.tables.newclass import (
    _DECOMPOSITION,
    decomposition_table,
    newclass_failure_table,
)
from semshift.report.tables.operating import (
    _OP,
    _OP_RATES,
    _op_keys,
    _op_label,
    _recall_text,
    operating_point_detectors,
    operating_point_overview_table,
    operating_point_table,
)
from semshift.report.tables.osr import (
    _OSR_MAIN,
    osr_metrics_table,
    osr_splits,
    osr_table,
)
from semshift.report.tables.sanity import (
    _outside_band,
    sanity_table,
)
from semshift.report.tables.search import (
    search_table,
)

__all__ = [
    "Cell",
    "Column",
    "Table",
    "decomposition_table",
    "generalisation_table",
    "graded_level_table",
    "graded_metrics",
    "graded_trend_table",
    "gzsl_table",
    "headline_table",
    "metric_label",
    "newclass_failure_table",
    "operating_point_detectors",
    "operating_point_overview_table",
    "operating_point_table",
    "osr_metrics_table",
    "osr_table",
    "sanity_table",
    "search_table",
    "zsl_table",
]
