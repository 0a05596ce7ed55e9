"""Building a model by name and loading its weights: :func:`load_model`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from semshift.errors import InputError, UnknownNameError, close_matches

from .adapters import OpenClipAdapter
from .pretrained import (
    _load_open_clip_pretrained,
    _load_timm_pretrained,
    _load_torchvision_weights,
    named_weights_library,
)
from .registry import MODELS, _build_open_clip, _build_timm, _load_entry_point
from .weights import kaiming_init, load_state_dict, load_weights

if TYPE_CHECKING:
    from .adapters import ModelAdapter


def load_model(
    name: str,
    *,
    weights: str | Path | None = None,
    random_init: bool = False,
    seed: int = 0,
    num_classes: int = 1000,
    classnames: Sequence[str] | None = None,
    **kwargs: Any,
) -> ModelAdapter:
    """Build a registered model and load its weights (local file) or initialise it randomly.

    Parameters
    ----------
    name : str
        A name from :func:`list_models`, ``timm/<name>`` or ``open_clip/<name>``.
    weights : str or Path, optional
        Local safetensors file or PyTorch state dict (an existing file always wins); or the
        library's own name of pretrained weights, read from that library's cache and never
        downloaded, with the normalisation they were trained with (:func:`weights_preprocessing`
        gives the resize and crop):

        - torchvision models: the enum name (``DEFAULT``, ``IMAGENET1K_V2``,
          ``ResNet50_Weights.IMAGENET1K_V2``), from ``$TORCH_HOME/hub/checkpoints``;
        - ``timm/<arch>``: the pretrained tag (``resnet50.a1_in1k``, ``timm/resnet50.a1_in1k``,
          ``a1_in1k``, or ``pretrained`` for timm's default tag), from the Hugging Face cache
          (:func:`hf_cache_dir`); the head takes the tag's ``num_classes``;
        - ``open_clip/<arch>``: the pretrained tag (``laion2b_s34b_b79k``), from the Hugging
          Face cache; the zero-shot head is still built from ``classnames``.

        :func:`resolve_pretrained` tells where the file is looked for.
    random_init : bool
        Kaiming-normal initialisation seeded by ``seed`` (random-model sanity check).
    num_classes : int
        Size of the classification head (ignored by open_clip, whose head is zero-shot).
    classnames : sequence of str, optional
        open_clip only: class names for the zero-shot head.
    **kwargs
        Passed to the model constructor (e.g. ``image_size`` for a torchvision ViT).

    Raises
    ------
    UnknownNameError
        ``name`` is not registered (the message lists close matches).
    InputError
        Neither or both of ``weights`` and ``random_init``; unusable weights; named weights
        not in the cache (the message names the path where the file must go).
    """
    if (weights is None) == (not random_init):
        raise InputError(
            f"model {name!r}: give exactly one of a local weights file or random_init=True "
            "(semshift never downloads weights)"
        )
    library = None if weights is None or Path(str(weights)).is_file() else (
        named_weights_library(name, str(weights))
    )  # fmt: skip
    if library == "torchvision":
        return _load_torchvision_weights(name, str(weights), num_classes, kwargs)
    if library == "timm":
        return _load_timm_pretrained(name, str(weights), kwargs)
    if library == "open_clip":
        return _load_open_clip_pretrained(name, str(weights), classnames, kwargs)
    state = None
    if weights is not None:  # a bad file is reported before a model is built (and warns)
        state = load_state_dict(weights)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if name.startswith("timm/"):
            adapter: ModelAdapter = _build_timm(name[5:], num_classes, **kwargs)
        elif name.startswith("open_clip/"):
            adapter = _build_open_clip(name[10:], **kwargs)
        elif name in MODELS or _load_entry_point(name):
            adapter = MODELS[name].build(num_classes=num_classes, **kwargs)
        else:
            pool = MODELS.names()
            close = close_matches(name, pool, n=5)
            raise UnknownNameError(
                f"unknown model {name!r}"
                + (f"; did you mean {', '.join(close)}?" if close else "")
                + f"; known: {', '.join(pool[:12])}, ... ({len(pool)} names), "
                + "or timm/<name>, open_clip/<name>"
            )
    if random_init:
        kaiming_init(adapter.module, seed)
        adapter.weights_desc = f"random-init (Kaiming normal, seed {seed})"
    else:
        assert weights is not None
        load_weights(adapter.module, weights, state=state)
        adapter.weights_desc = str(weights)
    adapter.module.eval()
    if isinstance(adapter, OpenClipAdapter) and classnames is not None:
        adapter.set_classes(classnames)
    return adapter
