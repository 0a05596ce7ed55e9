"""The model registry (:data:`MODELS`, :func:`register_model`): torchvision's classifiers,
``semshift.models`` entry points imported when first built, and the ``timm/`` and
``open_clip/`` namespaces."""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semshift.errors import UnknownNameError, close_matches
from semshift.registry import Registry

from .adapters import OpenClipAdapter, TimmAdapter, TorchvisionAdapter

if TYPE_CHECKING:
    from .adapters import ModelAdapter


# --------------------------------------------------------------------------- registry
@dataclass(frozen=True)
class ModelSpec:
    """A registry entry: ``build(num_classes=..., **kwargs) -> ModelAdapter`` and a description."""

    name: str
    build: Callable[..., ModelAdapter]
    description: str


#: Model name -> :class:`ModelSpec` (a :class:`semshift.registry.Registry`); ``timm/<name>`` and
#: ``open_clip/<name>`` resolve dynamically, and a ``semshift.models`` entry point is imported
#: only when its name is first built (:data:`ENTRY_POINT_GROUP`), so listing models imports no
#: plugin.
MODELS: Registry[ModelSpec] = Registry("model")


#: torchvision classification models without a linear head (every other one is registered)
_TV_REFUSED = ("squeezenet",)


NAMESPACES = {
    "timm/": "any timm model, e.g. timm/resnet50 (pretrained=False; weights from --weights)",
    "open_clip/": "any open_clip architecture, e.g. open_clip/ViT-B-32 (zero-shot head)",
}


def register_model(
    name: str, description: str = ""
) -> Callable[[Callable[..., ModelAdapter]], Callable[..., ModelAdapter]]:
    """Decorator adding a builder ``f(num_classes=..., **kwargs) -> ModelAdapter`` to the registry.

    Examples
    --------
    >>> from torch import nn
    >>> @register_model("tiny-mlp", "a two-layer MLP on 8x8 images")
    ... def _tiny(num_classes=10):
    ...     layers = [nn.Flatten(), nn.Linear(192, 16), nn.ReLU(), nn.Linear(16, num_classes)]
    ...     return HookAdapter("tiny-mlp", nn.Sequential(*layers))
    >>> "tiny-mlp" in list_models()
    True
    """

    MODELS.check_new(name)  # DuplicateNameError (an InputError) for a name taken

    def deco(fn: Callable[..., ModelAdapter]) -> Callable[..., ModelAdapter]:
        MODELS.add(name, ModelSpec(name, fn, description or (fn.__doc__ or "").strip()))
        return fn

    return deco


def _register_torchvision() -> None:
    import torchvision

    for tv_name in torchvision.models.list_models(module=torchvision.models):
        if tv_name.startswith(_TV_REFUSED):
            continue

        def build(num_classes: int = 1000, _n: str = tv_name, **kwargs: Any) -> ModelAdapter:
            import torchvision

            if _n in ("googlenet", "inception_v3"):  # weights are loaded or re-initialised
                kwargs.setdefault("init_weights", False)
            net = torchvision.models.get_model(_n, weights=None, num_classes=num_classes, **kwargs)
            return TorchvisionAdapter(_n, net)

        MODELS.add(tv_name, ModelSpec(tv_name, build, f"torchvision {tv_name}"))


_register_torchvision()


#: Entry-point group of models defined outside this module (``pyproject.toml``).
ENTRY_POINT_GROUP = "semshift.models"


def _entry_points() -> dict[str, Any]:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def _load_entry_point(name: str) -> bool:
    """Import the module that registers model ``name`` (an entry point); True if it now is."""
    ep = _entry_points().get(name)
    if ep is None:
        return False
    ep.load()  # importing the module registers the model (register_model)
    return name in MODELS


def list_models() -> list[str]:
    """Registered model names (entry points included), then the ``timm/`` and ``open_clip/``
    namespaces."""
    names = set(MODELS.names()) | set(_entry_points())
    return sorted(names) + [f"{ns}<name>" for ns in NAMESPACES]


def is_model(name: str) -> bool:
    """Whether ``name`` is a registered model, an entry point or in a ``timm/``,
    ``open_clip/`` namespace (the architecture itself is checked when it is built)."""
    return name in MODELS or name in _entry_points() or name.startswith(("timm/", "open_clip/"))


def _check_timm_arch(arch: str) -> None:
    import timm

    if arch not in timm.list_models():
        close = close_matches(arch, timm.list_models(), n=5)
        raise UnknownNameError(
            f"unknown timm model {arch!r}" + (f"; close: {', '.join(close)}" if close else "")
        )


def _build_timm(arch: str, num_classes: int, **kwargs: Any) -> ModelAdapter:
    import timm

    _check_timm_arch(arch)
    net = timm.create_model(arch, pretrained=False, num_classes=num_classes, **kwargs)
    return TimmAdapter(f"timm/{arch}", net)


def register_open_clip_config(name: str, config: Mapping[str, Any]) -> None:
    """Register an open_clip architecture config (``embed_dim``, ``vision_cfg``, ``text_cfg``).

    Lets tests and offline users build small or custom CLIP models without a download.
    """
    import open_clip

    # open_clip reads the file when it is added and keeps the config in memory: the
    # temporary folder is removed at once (it used to be left in /tmp by every process)
    with tempfile.TemporaryDirectory(prefix="semshift-openclip-") as tmp:
        (Path(tmp) / f"{name}.json").write_text(json.dumps(dict(config)))
        open_clip.add_model_config(tmp)


def _check_open_clip_arch(arch: str) -> None:
    import open_clip

    known = open_clip.list_models()
    if arch not in known:
        close = close_matches(arch, known, n=5)
        raise UnknownNameError(
            f"unknown open_clip architecture {arch!r}"
            + (f"; close: {', '.join(close)}" if close else "")
        )


def _build_open_clip(arch: str, **kwargs: Any) -> OpenClipAdapter:
    import open_clip

    _check_open_clip_arch(arch)

    def not_random_init(record: logging.LogRecord) -> bool:
        # open_clip logs "No pretrained weights loaded ... initialized randomly" on the root
        # logger for pretrained=None; load_model loads (or seeds) the weights right after
        return not str(record.msg).startswith("No pretrained weights loaded")

    logging.root.addFilter(not_random_init)
    try:
        net = open_clip.create_model(arch, pretrained=None, **kwargs)
    finally:
        logging.root.removeFilter(not_random_init)
    return OpenClipAdapter(f"open_clip/{arch}", net, open_clip.get_tokenizer(arch))
