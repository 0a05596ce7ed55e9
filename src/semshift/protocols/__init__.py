"""semshift.protocols: the evaluation protocols of the seed papers over scored sets.

Each protocol function takes :class:`ScoredSet` objects (labels, predictions and per-detector
normality scores) and returns the tidy results table (:data:`RESULT_COLUMNS`). Where things
live: ``sets`` (ScoredSet, Bootstrap), ``tidy`` (the table), ``osr``, ``newclass``
(new-class vs failure detection and the AUROC decomposition), ``graded`` (IS-OOD grid),
``sanity`` (random-model check), ``generalisation`` (SOOD), ``gzsl``. The runner behind
``semshift run`` (:func:`run`) lives in ``config`` (the YAML config), ``cache`` (content-hash
stage cache) and ``runner`` (stages split, extract, score, evaluate, report).
"""

from semshift.protocols.config import RunConfig, load_config
from semshift.protocols.generalisation import generalisation
from semshift.protocols.graded import graded, level_order
from semshift.protocols.gzsl import gzsl
from semshift.protocols.newclass import newclass_failure
from semshift.protocols.osr import osr
from semshift.protocols.runner import RunResult, StageRecord, run
from semshift.protocols.sanity import sanity
from semshift.protocols.sets import DEFAULT_BOOTSTRAP, Bootstrap, ScoredSet
from semshift.protocols.tidy import RESULT_COLUMNS, error_row, results_frame

__all__ = [
    "DEFAULT_BOOTSTRAP",
    "RESULT_COLUMNS",
    "Bootstrap",
    "RunConfig",
    "RunResult",
    "ScoredSet",
    "StageRecord",
    "error_row",
    "generalisation",
    "graded",
    "gzsl",
    "level_order",
    "load_config",
    "newclass_failure",
    "osr",
    "results_frame",
    "run",
    "sanity",
]
