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
holds (``store.arrays(name)``, 1-D, higher = more in-distribution), and
:func:`fit_model_detectors` fits those that learn from ID training images (``fits``) on a
labelled image source before any scoring. No detector is named here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from torch import Tensor

from semshift.detectors import ModelLevelDetector, get, list_detectors
from semshift.errors import InputError, NotFittedError, UnknownNameError, close_matches
from semshift.features.data import ImageDataset, ImageSource, normalize_batch
from semshift.features.models import ModelAdapter

__all__ = [
    "check_model_detectors",
    "fit_model_detectors",
    "fit_subset",
    "get_model_detector",
    "score_batch",
]


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
        close = close_matches(str(spec), known, n=2)
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
    NotFittedError
        A detector that learns from ID training images (``fits``) and has not been fitted.
    """
    names = [d.name for d in detectors]
    if {"logits", "features"} & set(names) or len(set(names)) != len(names):
        raise InputError(f"score names must be distinct and not logits/features: {names}")
    for det in detectors:
        for model in models:
            det.check(model)
        if not det.is_fitted:
            raise NotFittedError(
                f"{det.name}.score_batch: fit it on labelled ID training images first "
                "(fit_model_detectors; a run fits it on the id_train images, semshift extract "
                "on --fit-images)"
            )


def score_batch(
    detectors: Sequence[ModelLevelDetector], model: ModelAdapter, x: Tensor
) -> dict[str, NDArray[np.float32]]:
    """Every detector's scores (n,) on a batch of normalised images, as float32 NumPy arrays."""
    return {d.name: d.score_batch(model, x).float().cpu().numpy() for d in detectors}


def fit_subset(source: ImageSource, max_images: int | None = None) -> ImageSource:
    """The labelled images of ``source`` a fit reads: every one, or ``max_images`` of them at
    evenly spaced positions ``floor(linspace(0, n - 1, max_images))`` (deterministic).

    Raises
    ------
    InputError
        No labelled image, or ``max_images`` < 1.
    """
    known = np.flatnonzero(np.asarray(source.labels) >= 0)
    if max_images is not None:
        if int(max_images) < 1:
            raise InputError(f"max_images must be >= 1, got {max_images}")
        if int(max_images) < len(known):
            known = known[np.floor(np.linspace(0, len(known) - 1, int(max_images))).astype(int)]
    if len(known) == 0:
        raise InputError(f"{source.root}: no labelled image to fit model-level detectors on")
    return source.take(known)


def fit_model_detectors(
    detectors: Sequence[ModelLevelDetector],
    model: ModelAdapter,
    source: ImageSource,
    *,
    preset: str = "imagenet",
    batch_size: int = 64,
    workers: int = 0,
    device: str | Any = "auto",
    max_images: int | None = None,
) -> list[ModelLevelDetector]:
    """Fit the detectors that learn from ID training images (``fits``) on ``source``.

    The images are preprocessed as extraction does (``preset``, the model's normalisation),
    in float32 without autocast, in source order; unreadable images are left out. Detectors
    that do not fit are returned unchanged.

    Parameters
    ----------
    max_images : int, optional
        Fit on this many labelled images at evenly spaced positions (:func:`fit_subset`).

    Returns
    -------
    list of ModelLevelDetector
        The same detectors, those with ``fits`` now fitted (their ``describe()`` records the
        images' fingerprint and the state's digest).

    Raises
    ------
    InputError
        A detector the model cannot run, no labelled image, a label outside the model's head,
        or no readable image.
    """
    import torch

    from semshift.features.device import resolve_device

    fitting = [d for d in detectors if d.fits]
    if not fitting:
        return list(detectors)
    for det in fitting:
        det.check(model)
    sub = fit_subset(source, max_images)
    labels = np.asarray(sub.labels, np.int64)
    if labels.max() >= model.num_classes:
        raise InputError(
            f"{source.root}: label {int(labels.max())} outside the head of {model.name!r} "
            f"({model.num_classes} classes); the fit needs the model's own training classes"
        )
    dev = resolve_device(device)
    model.to(dev)
    model.module.eval()
    dataset = ImageDataset(sub, preset, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), normalize=False)
    loader: torch.utils.data.DataLoader[Any] = torch.utils.data.DataLoader(
        dataset,  # type: ignore[arg-type]
        batch_size=batch_size,
        shuffle=False,
        num_workers=workers,
    )

    def batches() -> Any:
        readable = 0
        for x, idx, errs in loader:
            ok = [j for j, e in enumerate(errs) if not e]
            if not ok:
                continue
            readable += len(ok)
            xb = normalize_batch(x[ok].to(dev), model.mean, model.std)
            yb = torch.as_tensor(labels[np.asarray(idx)[ok]], device=dev)
            yield xb, yb
        if readable == 0:
            raise InputError(f"{source.root}: no readable image to fit model-level detectors on")

    fingerprint = sub.fingerprint()
    for det in fitting:
        det.fit_model(model, batches, source=fingerprint)
    return list(detectors)
