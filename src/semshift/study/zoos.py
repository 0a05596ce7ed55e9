"""Model zoos: named lists of models (registry names and weight tags) a study runs at once.

Shipped zoos (``semshift list zoos``):

- ``imagenet-ood-13``: the 13 torchvision ImageNet-1K CNNs of ImageNet-OOD's evaluation. The
  paper (Yang et al., Sec. 5) names the five families (ResNet, DenseNet, Wide ResNet, RegNet,
  ResNeXt) and the count, not the members. We take every classic-depth member torchvision ships
  of the first three families (ResNet-18/34/50/101/152, DenseNet-121/161/169/201, Wide
  ResNet-50-2/101-2: 11 models) and one member of each of the two families torchvision ships in
  many sizes, at ResNet-50's scale so that no family is represented only by a giant: ResNeXt-50
  32x4d and RegNetY-3.2GF. Weights ``IMAGENET1K_V1`` throughout: the original torchvision
  recipes, which every one of the 13 has (the V2 recipes exist for only some, and would mix two
  training recipes in one mean).
- ``sood-8``: the eight classification backbones of SOOD-ImageNet's Table 1 (EfficientNet-B6,
  MaxxViT-V2 Large, MobileNetV3, ResNet-50, SwinV2 Base and Large, ViT Base and Large). The
  paper trains each from scratch on its IID classes, so the zoo names architectures only: give
  each member's trained checkpoint under ``weights:`` in the study (``{zoo: sood-8, weights:
  {resnet50: runs/r50/model.safetensors, ...}}``). MaxxViT-V2 L and SwinV2 L are not in
  torchvision: timm's ``maxxvitv2_rmlp_large_rw_224`` and ``swinv2_large_window12_192``.

A zoo of one's own is one module: ``register_zoo(Zoo(name, summary, members))`` (or the
``semshift.zoos`` entry-point group).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from semshift.errors import InputError
from semshift.registry import Registry
from semshift.study.entries import ModelEntry

__all__ = ["ZOOS", "Zoo", "get_zoo", "list_zoos", "missing_weights", "register_zoo"]


@dataclass(frozen=True)
class Zoo:
    """A named list of models.

    Attributes
    ----------
    name : str
    summary : str
        One line: what the models are and where the list comes from.
    members : tuple of ModelEntry
        Registry names with weights (and labels, unique within the zoo).
    """

    name: str
    summary: str
    members: tuple[ModelEntry, ...]


def _adopt(name: str, obj: Any) -> None:
    if not isinstance(obj, Zoo):
        raise InputError(f"zoo {name!r}: the entry point must name a Zoo, got {type(obj)}")
    register_zoo(obj)


#: every registered zoo, by name
ZOOS: Registry[Zoo] = Registry("zoo", entry_points="semshift.zoos", adopt=_adopt)


def register_zoo(zoo: Zoo, *, replace: bool = False) -> Zoo:
    """Register ``zoo`` after checking it: members with unique labels, each a registered model.

    Raises
    ------
    DuplicateNameError
        The name is taken (and ``replace`` is false).
    InputError
        No members, a repeated label or an unknown model.
    """
    from semshift.features.models import MODELS

    if not zoo.members:
        raise InputError(f"zoo {zoo.name!r} has no members")
    labels = [m.key for m in zoo.members]
    dup = sorted({x for x in labels if labels.count(x) > 1})
    if dup:
        raise InputError(f"zoo {zoo.name!r}: label {dup[0]!r} repeats")
    for m in zoo.members:
        if m.name not in MODELS and not m.name.startswith(("timm/", "open_clip/")):
            raise InputError(f"zoo {zoo.name!r}: {m.name!r} is not a registered model")
    ZOOS.add(zoo.name, zoo, replace=replace)
    return zoo


def get_zoo(name: str) -> Zoo:
    """The zoo called ``name`` (:class:`~semshift.errors.UnknownNameError` with close matches)."""
    return ZOOS[name]


def list_zoos() -> list[str]:
    """Names of the registered zoos."""
    return ZOOS.names()


def missing_weights(model: str, weights: str | None, base_dir: Path) -> str | None:
    """Why ``model``'s ``weights`` cannot be loaded without a download, or None if they can.

    Named torchvision weights must be in torch's cache, timm and open_clip tags in theirs; a
    file must exist (relative to ``base_dir``); no weights at all is fine (random init or a
    model that builds its own).
    """
    from semshift.errors import SemshiftError
    from semshift.features.models import (
        named_weights_library,
        resolve_pretrained,
        torchvision_weights,
        weights_cache_file,
    )

    if weights is None:
        return None
    path = Path(weights).expanduser()
    path = path if path.is_absolute() else base_dir / path
    if path.exists():
        return None
    try:
        lib = named_weights_library(model, weights)
        if lib is None:
            return f"weights file {path} does not exist"
        if lib == "torchvision":
            w = torchvision_weights(model, weights)
            cached = weights_cache_file(w)
            if cached.is_file():
                return None
            return (
                f"weights {w.name} are not in torch's cache and semshift never downloads: place "
                f"{cached.name} (from {w.url}) at {cached} (the folder follows TORCH_HOME)"
            )
        ref = resolve_pretrained(model, weights)
        return None if ref.cached_file() is not None else ref.missing_message()
    except SemshiftError as err:
        return str(err).splitlines()[0]


def _members(names: Sequence[str], weights: str | None) -> tuple[ModelEntry, ...]:
    """Members labelled by architecture (a timm name without its ``timm/``)."""
    return tuple(ModelEntry(name=n, weights=weights, label=n.split("/")[-1]) for n in names)


_IMAGENET_OOD_13 = (
    "resnet18", "resnet34", "resnet50", "resnet101", "resnet152",
    "densenet121", "densenet161", "densenet169", "densenet201",
    "wide_resnet50_2", "wide_resnet101_2", "resnext50_32x4d", "regnet_y_3_2gf",
)  # fmt: skip
_SOOD_8 = (
    "efficientnet_b6", "timm/maxxvitv2_rmlp_large_rw_224", "mobilenet_v3_large", "resnet50",
    "swin_v2_b", "timm/swinv2_large_window12_192", "vit_b_16", "vit_l_16",
)  # fmt: skip

register_zoo(
    Zoo(
        "imagenet-ood-13",
        "ImageNet-OOD's 13 torchvision ImageNet-1K CNNs (ResNet, DenseNet, Wide ResNet, RegNet, "
        "ResNeXt), weights IMAGENET1K_V1",
        _members(_IMAGENET_OOD_13, "IMAGENET1K_V1"),
    )
)
register_zoo(
    Zoo(
        "sood-8",
        "SOOD-ImageNet Table 1's eight backbones, trained from scratch: architectures only "
        "(give each checkpoint under weights:)",
        _members(_SOOD_8, None),
    )
)
