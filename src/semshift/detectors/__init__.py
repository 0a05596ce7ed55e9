"""Post-hoc OOD detectors behind one API; every score is higher = more in-distribution.

>>> import numpy as np
>>> from semshift import detectors
>>> det = detectors.get("energy").fit()
>>> det.score(logits=np.array([[0.0, 0.0]])).round(4)
array([0.6931])

Use :func:`get` to build a detector by name, :func:`list_detectors` for the names; each class
declares the inputs it consumes in ``fit_requires``, ``score_requires`` and ``requires``.
:func:`score_many` scores several fitted detectors on the same inputs, computing what they
share once (:class:`SharedResults`) and running them side by side in threads.
"""

from __future__ import annotations

from . import (
    ash,
    dice,
    fdbd,
    gradnorm,
    klm,
    knn,
    logit,
    mahalanobis,
    max_cosine,
    nnguide,
    openmax,
    react,
    scale,
    she,
    temp_scaling,
    vim,
)
from ._base import INPUT_NAMES, Detector
from ._many import ManyFits, ManyScores, default_threads, fit_many, score_many
from ._registry import get, get_class, list_detectors, register_detector
from ._search import faiss_available
from ._shared import SharedResults

__all__ = [
    "INPUT_NAMES",
    "Detector",
    "ManyFits",
    "ManyScores",
    "SharedResults",
    "default_threads",
    "faiss_available",
    "fit_many",
    "get",
    "get_class",
    "list_detectors",
    "register_detector",
    "score_many",
]

del ash, dice, fdbd, gradnorm, klm, knn, logit, mahalanobis, max_cosine, nnguide, openmax
del react, scale, she, temp_scaling, vim
