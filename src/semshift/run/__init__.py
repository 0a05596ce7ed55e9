"""semshift.run: ``semshift run`` and ``semshift evaluate``, one module per stage.

A run configuration (:mod:`~semshift.run.config`) goes through the stages
:mod:`~semshift.run.split` (split manifests, built by the split builder registry),
:mod:`~semshift.run.extract` (feature stores, verified on every run: :mod:`~semshift.run.verify`),
:mod:`~semshift.run.search` (hyperparameters chosen on validation data, when configured),
:mod:`~semshift.run.score` (detectors fitted and applied), :mod:`~semshift.run.evaluate`
(the protocol registry over the scored sets) and :mod:`~semshift.run.report`, each cached by
content hash (:mod:`~semshift.run.cache`) and each returning a typed result that the next
stage takes. :func:`run` strings them together.

>>> from semshift.run import STAGES
>>> STAGES
('split', 'extract', 'search', 'score', 'evaluate', 'report')
"""

from semshift.run.config import RunConfig, load_config
from semshift.run.context import STAGES, StageRecord
from semshift.run.from_stores import config_from_stores
from semshift.run.runner import RunResult, run

__all__ = [
    "STAGES",
    "RunConfig",
    "RunResult",
    "StageRecord",
    "config_from_stores",
    "load_config",
    "run",
]
