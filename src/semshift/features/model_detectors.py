"""Model-level detectors in extraction: built from the registry, checked, run on each batch.

A model-level detector is an ordinary entry of the detector registry
(``semshift.detectors.list_detectors(level="model")``): its module in
:mod:`semshift.detectors` declares its hyperparameters, what it needs of the network
(``model_requires``) and computes its scores on a batch
(:meth:`~semshift.detectors.ModelLevelDetector.score_batch`, through the
:class:`~semshift.detectors.model_level.ModelView` that a
:class:`~semshift.features.models.ModelAdapter` implements). This module only executes them:
:func:`get_model_detector` builds one by name (hyperparameters checked),
:func:`check_model_detectors` checks each against the models before any image is read, and
:func:`score_batch` computes every detector on a batch as the float32 score columns the store
holds (``store.arrays(name)``, 1-D, higher = more in-distribution). No detector is named here.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from torch import Tensor

from semshift.detectors import ModelLevelDetector, get, list_detectors
from semshift.errors import InputError, UnknownNameError
from semshift.features.models import ModelAdapter

__all__ = ["check_model_detectors", "get_model_detector", "score_batch"]


def get_model_detector(spec: str | ModelLevelDetector, **params: Any) -> ModelLevelDetector:
    """A model-level detector by registry name with its declared defaults (``params`` override).

    Parameters
    ----------
    spec : str or ModelLevelDetector
        A name from ``semshift.detectors.list_detectors(level="model")``, or a detector
        already built (returned as is, ``params`` must then be empty; its hyperparameters are
        checked with the model by :func:`check_model_detectors`).
    **params
        Hyperparameters, checked by :func:`semshift.detectors.check_params`.

    Raises
    ------
    UnknownNameError
        Unknown name (close matches and the known model-level names are listed).
    InputError
        A post-hoc detector's name, or a hyperparameter the detector does not have or does
        not accept.
    """
    if isinstance(spec, ModelLevelDetector):
        if params:
            raise InputError(
                f"{spec.name}: give hyperparameters to the detector's constructor, not beside "
                f"an already built detector ({', '.join(params)})"
            )
        return spec
    known = list_detectors(level="model")
    if not isinstance(spec, str) or spec not in known:
        if spec in list_detectors(level="post_hoc"):
            raise InputError(
                f"{spec!r} is a post-hoc detector (fitted and scored on stored features, e.g. "
                f"by semshift evaluate), not a model-level one; model-level: {', '.join(known)}"
            )
        close = difflib.get_close_matches(str(spec), known, n=2)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise UnknownNameError(
            f"unknown model-level detector {spec!r}{hint}; known: {', '.join(known)}"
        )
    det = get(spec, **params)
    assert isinstance(det, ModelLevelDetector)
    return det


def check_model_detectors(
    detectors: Sequence[ModelLevelDetector], models: Sequence[ModelAdapter]
) -> None:
    """Check score names, hyperparameters, and that every model provides what each detector needs.

    Raises
    ------
    InputError
        Two detectors with one name, a name that is ``logits`` or ``features``, a
        hyperparameter outside its constraints, or a model lacking what a detector declares in
        ``model_requires`` (the message names both).
    """
    names = [d.name for d in detectors]
    if {"logits", "features"} & set(names) or len(set(names)) != len(names):
        raise InputError(f"score names must be distinct and not logits/features: {names}")
    for det in detectors:
        for model in models:
            det.check(model)


def score_batch(
    detectors: Sequence[ModelLevelDetector], model: ModelAdapter, x: Tensor
) -> dict[str, NDArray[np.float32]]:
    """Every detector's scores (n,) on a batch of normalised images, as float32 NumPy arrays."""
    return {d.name: d.score_batch(model, x).float().cpu().numpy() for d in detectors}
