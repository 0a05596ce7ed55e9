"""semshift.training.zsl: the thirteen zero-shot methods of the proposed-splits evaluation.

Where things live:

- :mod:`~semshift.training.zsl.registry`: :class:`ZSLMethod` (the ``fit(X, y, S)`` /
  ``decision_function(X, S)`` contract, declared defaults, constraints and val grids) and the
  one registry (:func:`list_zsl_methods`, :func:`get_zsl_method`);
- :mod:`~semshift.training.zsl.lampert`: DAP and IAP (attribute classifiers, the MAP rule);
- :mod:`~semshift.training.zsl.cmt`: CMT and CMT* (its novelty detection for GZSL);
- :mod:`~semshift.training.zsl.sse`: SSE (semantic similarity embedding, SSE-ReLU);
- :mod:`~semshift.training.zsl.gfzsl`: GFZSL (class Gaussians regressed from embeddings);
- :mod:`~semshift.training.zsl.closed_form`: ESZSL and SAE;
- :mod:`~semshift.training.zsl.ranking`: ALE, DEVISE, SJE and LATEM (vectorised SGD);
- :mod:`~semshift.training.zsl.conse`: CONSE; :mod:`~semshift.training.zsl.sync`: SYNC;
- :mod:`~semshift.training.zsl.data`: :class:`ZSLData`, the ``res101.mat`` /
  ``att_splits.mat`` reader and writer, and semshift's split + feature store + embeddings;
- :mod:`~semshift.training.zsl.evaluate`: hyperparameters chosen on val classes, the final fit
  on trainval, the test score matrix (:func:`evaluate_zsl`).

The accuracies (per-class top-1, ts / tr / H, calibrated stacking) are
:func:`semshift.metrics.gzsl`; the result rows and the ``zsl`` protocol are in
:mod:`semshift.protocols.gzsl`.
"""

from semshift.training.zsl.closed_form import ESZSL, SAE
from semshift.training.zsl.cmt import CMT, CMTStar
from semshift.training.zsl.conse import CONSE
from semshift.training.zsl.data import (
    SETS,
    SPLIT_VERSIONS,
    ZSLData,
    ZSLSplit,
    read_semshift_zsl,
    read_xlsa,
    read_zsl_data,
    write_xlsa,
)
from semshift.training.zsl.evaluate import (
    GridPoint,
    ZSLOutcome,
    evaluate_zsl,
    grid_candidates,
    select_hyperparameters,
)
from semshift.training.zsl.gfzsl import GFZSL
from semshift.training.zsl.lampert import DAP, IAP
from semshift.training.zsl.ranking import ALE, DEVISE, LATEM, SJE, BilinearRanking
from semshift.training.zsl.registry import (
    ZSL_METHODS,
    ZSLMethod,
    get_zsl_method,
    list_zsl_methods,
    register_zsl_method,
)
from semshift.training.zsl.sse import SSE
from semshift.training.zsl.sync import SYNC

__all__ = [
    "ALE",
    "CMT",
    "CONSE",
    "DAP",
    "DEVISE",
    "ESZSL",
    "GFZSL",
    "IAP",
    "LATEM",
    "SAE",
    "SETS",
    "SJE",
    "SPLIT_VERSIONS",
    "SSE",
    "SYNC",
    "ZSL_METHODS",
    "BilinearRanking",
    "CMTStar",
    "GridPoint",
    "ZSLData",
    "ZSLMethod",
    "ZSLOutcome",
    "ZSLSplit",
    "evaluate_zsl",
    "get_zsl_method",
    "grid_candidates",
    "list_zsl_methods",
    "read_semshift_zsl",
    "read_xlsa",
    "read_zsl_data",
    "register_zsl_method",
    "select_hyperparameters",
    "write_xlsa",
]
