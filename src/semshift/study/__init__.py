"""semshift.study: many models x datasets x seeds, each cell an ordinary run, aggregated.

A study file (:mod:`~semshift.study.config`) names models (or zoos, :mod:`~semshift.study.zoos`),
datasets (catalog benchmarks or data blocks), detectors, protocols and seeds;
:func:`run_study` runs every (model, dataset, seed) cell through :func:`semshift.run.run`
(:mod:`~semshift.study.execute`: serially, in worker processes or on Ray; cached, so re-runs
and added models cost only what is new), then writes the tidy table, the means over models with
bootstrap CIs, detector ranks and the accuracy-vs-AUROC relation across models
(:mod:`~semshift.study.aggregate`) and a report (:mod:`semshift.report.study`).
"""

from semshift.study.aggregate import (
    accuracy_relation,
    aggregate_over_models,
    detector_ranks,
    mean_ranks,
    model_values,
)
from semshift.study.config import Cell, Study, StudyConfig, load_study
from semshift.study.execute import CellOutcome, run_cells
from semshift.study.runner import StudyResult, collect_results, run_study
from semshift.study.zoos import ZOOS, Zoo, get_zoo, list_zoos, register_zoo

__all__ = [
    "ZOOS",
    "Cell",
    "CellOutcome",
    "Study",
    "StudyConfig",
    "StudyResult",
    "Zoo",
    "accuracy_relation",
    "aggregate_over_models",
    "collect_results",
    "detector_ranks",
    "get_zoo",
    "list_zoos",
    "load_study",
    "mean_ranks",
    "model_values",
    "register_zoo",
    "run_cells",
    "run_study",
]
