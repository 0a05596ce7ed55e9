"""OOD detectors behind one API and one registry; every score is higher = more in-distribution.

>>> import numpy as np
>>> from semshift import detectors
>>> det = detectors.get("energy").fit()
>>> det.score(logits=np.array([[0.0, 0.0]])).round(4)
array([0.6931])

Use :func:`get` to build a detector by name, :func:`list_detectors` for the names and
:func:`check_params` to check hyperparameters before any work; each class declares the inputs
it consumes in ``fit_requires``, ``score_requires`` and ``requires``, and the values each
hyperparameter accepts in ``_parameter_constraints`` (:class:`Interval`, :class:`StrOptions`,
:class:`Boolean`, or None) and the candidates a hyperparameter search tries in
``search_space`` (:func:`get_search_space`, :func:`check_search_space`). The registry also
declares the model-level detectors (``list_detectors(level="model")``: odin, rankfeat,
...), which need the network and are computed during feature extraction
(:mod:`semshift.features.model_detectors`).
:func:`score_many` scores several fitted detectors on the same inputs, computing what they
share once (:class:`SharedResults`) and running them side by side in threads.
"""

from __future__ import annotations

from ._base import INPUT_NAMES, LEVELS, Detector
from ._many import ManyFits, ManyScores, default_threads, fit_many, score_many
from ._params import Boolean, Constraint, Interval, StrOptions
from ._registry import (
    DETECTORS,
    check_params,
    check_search_space,
    get,
    get_class,
    get_search_space,
    list_detectors,
    register_detector,
)
from ._search import faiss_available
from ._shared import SharedResults
from .model_level import ModelLevelDetector

__all__ = [
    "DETECTORS",
    "INPUT_NAMES",
    "LEVELS",
    "Boolean",
    "Constraint",
    "Detector",
    "Interval",
    "ManyFits",
    "ManyScores",
    "ModelLevelDetector",
    "SharedResults",
    "StrOptions",
    "check_params",
    "check_search_space",
    "default_threads",
    "faiss_available",
    "fit_many",
    "get",
    "get_class",
    "get_search_space",
    "list_detectors",
    "register_detector",
    "score_many",
]


def _import_detector_modules() -> None:
    """Import every public module of this package: each registers its detectors on import.

    A new detector is one new module (plus its test); no list here names it.
    """
    import importlib
    import pkgutil

    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


_import_detector_modules()
