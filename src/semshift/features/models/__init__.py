"""Model adapters: one interface over torchvision, timm, open_clip and any ``nn.Module``.

An adapter splits a classifier into a backbone (image -> penultimate feature h, (n, D)) and a
linear head (h -> logits z = h W^T + b, (n, C)), exposes the head weights ``W`` (C, D) and ``b``
(C,), and, for convolutional networks, the last feature map (n, C', H, W) with the function that
finishes the forward pass from it (what RankFeat needs).

Names live in one registry (:data:`MODELS`, :func:`list_models`): the torchvision families resnet,
resnext, wide_resnet, densenet, regnet and vit by their torchvision names (``resnet50``), any timm
model as ``timm/<name>``, any open_clip architecture as ``open_clip/<name>``, and whatever is added
with :func:`register_model`. Unknown names raise an error listing close matches.

Weights come from a local file only (nothing is downloaded): safetensors, or a PyTorch checkpoint
read with ``torch.load(weights_only=True)``; a checkpoint that needs unpickling arbitrary objects
is refused. Named pretrained weights (torchvision enum names, timm and open_clip pretrained tags)
are read the same way from the file each library's own cache holds (torch's hub cache, the
Hugging Face cache). Or ``random_init=True``: Kaiming-normal weights from a seeded generator, for
the random-model sanity check (ImageNet-OOD paper, section 4.2).

The package's modules: :mod:`.adapters`, :mod:`.weights` (local files), :mod:`.registry`,
:mod:`.pretrained` (named weights from the libraries' caches) and :mod:`.loading`
(:func:`load_model`). Every name is importable from ``semshift.features.models``.
"""

from __future__ import annotations

from .adapters import (  # noqa: F401
    F32,
    IMAGENET_MEAN,
    IMAGENET_STD,
    HookAdapter,
    ModelAdapter,
    OpenClipAdapter,
    TimmAdapter,
    TorchvisionAdapter,
)
from .loading import (
    load_model,
)
from .pretrained import (  # noqa: F401
    _FILE_SUFFIXES,
    _OPEN_CLIP_TAG,
    _TIMM_TAG,
    _WEIGHTS_NAME,
    PretrainedWeights,
    _cached_or_fail,
    _hf_files,
    _load_open_clip_pretrained,
    _load_timm_pretrained,
    _load_torchvision_weights,
    _resolve_open_clip,
    _resolve_timm,
    _rgb,
    check_weights_name,
    hf_cache_dir,
    is_weights_name,
    named_weights_library,
    resolve_pretrained,
    torchvision_weights,
    weights_cache_file,
    weights_preprocessing,
)
from .registry import (  # noqa: F401
    _TV_REFUSED,
    ENTRY_POINT_GROUP,
    MODELS,
    NAMESPACES,
    ModelSpec,
    _build_open_clip,
    _build_timm,
    _check_open_clip_arch,
    _check_timm_arch,
    _entry_points,
    _load_entry_point,
    _register_torchvision,
    is_model,
    list_models,
    register_model,
    register_open_clip_config,
)
from .weights import (  # noqa: F401
    _PICKLE_HINT,
    BACKBONE_PREFIXES,
    BACKBONE_WRAPPERS,
    BackboneLoad,
    _check_semshift_weights,
    _list_keys,
    kaiming_init,
    load_backbone,
    load_state_dict,
    load_weights,
)

__all__ = [
    "BACKBONE_PREFIXES",
    "BACKBONE_WRAPPERS",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "MODELS",
    "BackboneLoad",
    "HookAdapter",
    "ModelAdapter",
    "OpenClipAdapter",
    "PretrainedWeights",
    "TimmAdapter",
    "TorchvisionAdapter",
    "check_weights_name",
    "hf_cache_dir",
    "is_model",
    "is_weights_name",
    "kaiming_init",
    "list_models",
    "load_backbone",
    "load_model",
    "load_state_dict",
    "load_weights",
    "named_weights_library",
    "register_model",
    "register_open_clip_config",
    "resolve_pretrained",
    "torchvision_weights",
    "weights_cache_file",
    "weights_preprocessing",
]
