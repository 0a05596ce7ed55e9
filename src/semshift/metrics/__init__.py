"""semshift.metrics: every measure of the seed papers as pure NumPy functions.

Convention: ``scores`` are normality scores (higher = more in-distribution) and ``is_ood`` is a
boolean array (True = OOD / unknown / negative). Values are fractions in [0, 1].

Where things live:

- ``ranking``: AUROC, FPR@TPR (two conventions), AUPR-In/Out, detection error, and
  :func:`ranking_metrics` (all of them from one sort);
- ``classification``: accuracy, macro-F1, confusion matrix, mIoU;
- ``osr``: OSCR (exact and ARPL variants);
- ``operating``: a fixed rejection threshold (at an ID recall) and what it rejects and lets
  through wrongly;
- ``failure``: AURC, e-AURC, AUGRC, the ImageNet-OOD label builders and AUROC decomposition;
- ``shift``: per-cell shift grids and level correlation / sensitivity (IS-OOD);
- ``zsl``: GZSL ts / tr / H and ZSL top-1;
- ``stats``: bootstrap confidence intervals and DeLong's test;
- ``many``: one ID set against many OOD subsets;
- ``registry``: the metric registry (name, direction, required inputs).
"""

from __future__ import annotations

from semshift.metrics.classification import (
    accuracy,
    confusion_matrix,
    iou_per_class,
    macro_f1,
    miou,
)
from semshift.metrics.failure import (
    AUROCDecomposition,
    augrc,
    aurc,
    auroc_decomposition,
    correct_known,
    eaurc,
    failure_labels,
    newclass_labels,
)
from semshift.metrics.many import DEFAULT_METRICS, evaluate_many
from semshift.metrics.operating import OperatingRates, operating_rates, threshold_at_recall
from semshift.metrics.osr import oscr
from semshift.metrics.ranking import (
    RankingMetrics,
    aupr_in,
    aupr_out,
    auroc,
    detection_error,
    fpr_at_tpr,
    fpr_at_tpr_openood,
    ranking_metrics,
)
from semshift.metrics.registry import (
    METRICS,
    MetricSpec,
    get_metric,
    list_metrics,
    register_metric,
)
from semshift.metrics.shift import level_means, level_trend, shift_grid
from semshift.metrics.stats import (
    BootstrapCI,
    DeLongResult,
    bootstrap_ci,
    delong_mean_test,
    delong_test,
)
from semshift.metrics.zsl import GZSLResult, gzsl, per_class_accuracy

__all__ = [
    "DEFAULT_METRICS",
    "METRICS",
    "AUROCDecomposition",
    "BootstrapCI",
    "DeLongResult",
    "GZSLResult",
    "MetricSpec",
    "OperatingRates",
    "RankingMetrics",
    "accuracy",
    "augrc",
    "aupr_in",
    "aupr_out",
    "aurc",
    "auroc",
    "auroc_decomposition",
    "bootstrap_ci",
    "confusion_matrix",
    "correct_known",
    "delong_mean_test",
    "delong_test",
    "detection_error",
    "eaurc",
    "evaluate_many",
    "failure_labels",
    "fpr_at_tpr",
    "fpr_at_tpr_openood",
    "get_metric",
    "gzsl",
    "iou_per_class",
    "level_means",
    "level_trend",
    "list_metrics",
    "macro_f1",
    "miou",
    "newclass_labels",
    "operating_rates",
    "oscr",
    "per_class_accuracy",
    "ranking_metrics",
    "register_metric",
    "shift_grid",
    "threshold_at_recall",
]
