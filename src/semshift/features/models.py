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
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import pickle
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor, nn

from semshift.errors import InputError, UnknownNameError
from semshift.registry import Registry

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "MODELS",
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

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
F32 = NDArray[np.float32]


# --------------------------------------------------------------------------- adapter interface
class ModelAdapter:
    """A classifier seen as backbone + linear head.

    Attributes
    ----------
    name : str
        Registry name of the model.
    module : nn.Module
        The wrapped network (in eval mode).
    layer : str
        Where the features are taken (for ``meta.json``).
    mean, std : tuple of float
        Input normalisation.
    input_size : int
        Side of the square input the model expects by default.
    """

    name: str
    module: nn.Module
    layer: str
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    input_size: int = 224
    #: Whether :meth:`feature_map` / :meth:`from_feature_map` are available.
    has_feature_map: bool = False
    #: Where the weights came from (file or random initialisation), for ``meta.json``.
    weights_desc: str = "as constructed"

    @property
    def _m(self) -> Any:  # the module, untyped (its submodules are dynamic attributes)
        return self.module

    def features(self, x: Tensor) -> Tensor:
        """Penultimate features h, (n, D), of images x (n, 3, H, W)."""
        raise NotImplementedError

    def head(self, h: Tensor) -> Tensor:
        """Logits z = h W^T + b, (n, C), of features h (n, D)."""
        w, b = self._head_module().weight, self._head_module().bias
        return nn.functional.linear(h, w, b)

    def _head_module(self) -> nn.Linear:
        raise NotImplementedError

    def head_module(self) -> nn.Linear:
        """The linear head module (``weight`` (C, D), ``bias`` (C,)), e.g. to write a new head."""
        return self._head_module()

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(logits (n, C), features (n, D))`` of images x."""
        h = self.features(x)
        return self.head(h), h

    __call__ = forward

    def head_weights(self) -> tuple[F32, F32]:
        """The head ``(W (C, D), b (C,))`` as float32 NumPy arrays."""
        lin = self._head_module()
        w = lin.weight.detach().float().cpu().numpy()
        b = (
            lin.bias.detach().float().cpu().numpy()
            if lin.bias is not None
            else np.zeros(w.shape[0], np.float32)
        )
        return np.ascontiguousarray(w, np.float32), np.ascontiguousarray(b, np.float32)

    @property
    def num_classes(self) -> int:
        return int(self._head_module().weight.shape[0])

    @property
    def feature_dim(self) -> int:
        return int(self._head_module().weight.shape[1])

    def block_names(self) -> tuple[str, ...]:
        """Dotted module names of the network's main blocks, shallow to deep (may be empty).

        Model-level detectors that read several layers (``model_requires`` containing
        ``"layers"``: Mahalanobis ensembles, Gram matrices, neuron coverage ...) read these
        blocks' outputs through :meth:`layer_outputs`. Each output is a feature map (n, C', H',
        W'), tokens (n, L, D') or a matrix (n, D'); an adapter that cannot name its blocks
        returns ``()`` and those detectors are left out for it.
        """
        return ()

    def layer_outputs(
        self, x: Tensor, names: Sequence[str] | None = None
    ) -> tuple[Tensor, Tensor, list[Tensor]]:
        """``(logits, features, outputs)`` of one forward pass, with the outputs of ``names``.

        ``names`` default to :meth:`block_names`. The outputs are taken by forward hooks and
        copied (a later in-place operation of the network cannot change them); they stay in
        the autograd graph, so a detector can differentiate through them.

        Raises
        ------
        InputError
            No block names, or a name that is not a module of the network.
        """
        wanted = self.block_names() if names is None else tuple(names)
        if not wanted:
            raise InputError(f"model {self.name!r} names no blocks to read layer outputs from")
        named = dict(self.module.named_modules())
        for key in wanted:
            if key not in named:
                close = difflib.get_close_matches(key, list(named), n=3)
                hint = f"; close: {', '.join(close)}" if close else ""
                raise UnknownNameError(f"{self.name}: no module named {key!r}{hint}")
        grabbed: dict[str, Tensor] = {}

        def grab(key: str) -> Callable[..., None]:
            def hook(_m: nn.Module, _args: Any, out: Any) -> None:
                if isinstance(out, Tensor):
                    grabbed[key] = out.clone()

            return hook

        handles = [named[key].register_forward_hook(grab(key)) for key in wanted]
        try:
            logits, h = self.forward(x)
        finally:
            for handle in handles:
                handle.remove()
        missing = [key for key in wanted if key not in grabbed]
        if missing:
            raise InputError(f"{self.name}: blocks {missing} gave no tensor in the forward pass")
        return logits, h, [grabbed[key] for key in wanted]

    def feature_map(self, x: Tensor) -> Tensor:
        """The last block's feature map (n, C', H', W')."""
        raise InputError(f"model {self.name!r} has no spatial feature map (not a CNN adapter)")

    def from_feature_map(self, fmap: Tensor) -> tuple[Tensor, Tensor]:
        """Finish the forward pass from a feature map: ``(logits, features)``."""
        raise InputError(f"model {self.name!r} has no spatial feature map (not a CNN adapter)")

    def to(self, device: torch.device | str) -> ModelAdapter:
        self.module.to(device)
        return self

    def describe(self) -> dict[str, Any]:
        """What ``meta.json`` records about the model."""
        return {
            "name": self.name,
            "class": type(self.module).__module__ + "." + type(self.module).__qualname__,
            "layer": self.layer,
            "num_classes": self.num_classes,
            "feature_dim": self.feature_dim,
            "mean": list(self.mean),
            "std": list(self.std),
        }


class TorchvisionAdapter(ModelAdapter):
    """Every torchvision classification model with a linear head, penultimate features per family.

    - ResNet / ResNeXt / Wide ResNet, RegNet: the globally average-pooled last feature map.
    - DenseNet: ``features`` + ReLU + average pool.
    - ConvNeXt, EfficientNet (v1, v2), MobileNet v2 / v3, VGG, AlexNet: ``features`` (the map),
      ``avgpool``, then every classifier layer but the last (so h is the input of the final
      ``nn.Linear``: ConvNeXt's LayerNorm output, MobileNet v3's and VGG's hidden layer).
    - MaxViT: ``stem`` + ``blocks`` (the map), then the classifier but its last layer.
    - VisionTransformer: the class token after the encoder's final LayerNorm (after
      ``pre_logits`` when the model has one). Swin (v1, v2): normed, average-pooled tokens.
    - GoogLeNet, Inception v3, MNASNet, ShuffleNet v2: the input of the final ``nn.Linear``,
      taken by a forward hook (no feature map).
    SqueezeNet has no linear head (a 1x1 convolution) and is refused.
    """

    _FEATURES_CLASSIFIER = ("ConvNeXt", "EfficientNet", "MobileNetV2", "MobileNetV3", "VGG",
                            "AlexNet")  # fmt: skip
    _HOOKED = ("GoogLeNet", "Inception3", "MNASNet", "ShuffleNetV2")

    def __init__(self, name: str, module: nn.Module) -> None:
        from torchvision.models import DenseNet, RegNet, ResNet, VisionTransformer

        self.name, self.module = name, module.eval()
        cls = type(module).__name__
        if isinstance(module, ResNet):
            self.kind, self.layer = "resnet", "avgpool"
        elif isinstance(module, DenseNet):
            self.kind, self.layer = "densenet", "features.norm5+relu+avgpool"
        elif isinstance(module, RegNet):
            self.kind, self.layer = "regnet", "avgpool"
        elif isinstance(module, VisionTransformer):
            self.kind, self.layer = "vit", "encoder.ln[class token]"
            self.input_size = int(module.image_size)
        elif cls in self._FEATURES_CLASSIFIER:
            self.kind, self.layer = "features_classifier", "avgpool+classifier[:-1]"
        elif cls == "MaxVit":
            self.kind, self.layer = "maxvit", "blocks+classifier[:-1]"
        elif cls == "SwinTransformer":
            self.kind, self.layer = "swin", "norm+avgpool"
        elif cls in self._HOOKED:
            self.kind, self.layer = "hooked", f"input of {self._hooked_head_name()}"
        else:
            raise InputError(
                f"{name}: {cls} has no linear classification head semshift can use (a "
                "SqueezeNet's head is a convolution); wrap it in HookAdapter with a linear head"
            )
        self.has_feature_map = self.kind in (
            "resnet", "densenet", "regnet", "features_classifier", "maxvit"
        )  # fmt: skip

    def block_names(self) -> tuple[str, ...]:
        """Stages of ResNet, DenseNet, RegNet, MaxViT and the ``features`` children of the
        ``features`` + ``classifier`` families (VGG / AlexNet: their pooling layers; the
        convolutions' outputs are changed in place by the ReLUs after them), and the encoder
        layers of a ViT. Swin (channels-last maps) and the hooked families name none."""
        m: Any = self.module
        if self.kind == "resnet":
            return ("layer1", "layer2", "layer3", "layer4")
        if self.kind == "densenet":
            return tuple(f"features.{n}" for n, _ in m.features.named_children()
                         if n.startswith("denseblock"))  # fmt: skip
        if self.kind == "regnet":
            return tuple(f"trunk_output.{n}" for n, _ in m.trunk_output.named_children())
        if self.kind == "features_classifier":
            plain = (nn.ReLU, nn.Conv2d, nn.BatchNorm2d, nn.Dropout)
            return tuple(f"features.{n}" for n, c in m.features.named_children()
                         if not isinstance(c, plain))  # fmt: skip
        if self.kind == "maxvit":
            return tuple(f"blocks.{n}" for n, _ in m.blocks.named_children())
        if self.kind == "vit":
            return tuple(f"encoder.layers.{n}" for n, _ in m.encoder.layers.named_children())
        return ()

    def _hooked_head_name(self) -> str:
        m: Any = self.module
        return "fc" if hasattr(m, "fc") else "classifier[-1]"

    def feature_map(self, x: Tensor) -> Tensor:
        m: Any = self.module
        if self.kind == "resnet":
            x = m.maxpool(m.relu(m.bn1(m.conv1(x))))
            return m.layer4(m.layer3(m.layer2(m.layer1(x))))
        if self.kind == "densenet":
            return nn.functional.relu(m.features(x))
        if self.kind == "regnet":
            return m.trunk_output(m.stem(x))
        if self.kind == "features_classifier":
            return m.features(x)
        if self.kind == "maxvit":
            x = m.stem(x)
            for block in m.blocks:
                x = block(x)
            return x
        return super().feature_map(x)

    def _pool(self, fmap: Tensor) -> Tensor:
        return torch.flatten(nn.functional.adaptive_avg_pool2d(fmap, 1), 1)

    def _tail(self, fmap: Tensor) -> Tensor:
        """Penultimate features from the feature map (the model's own layers after it)."""
        m: Any = self.module
        if self.kind == "features_classifier":
            pool = getattr(m, "avgpool", None)  # MobileNetV2 pools functionally
            pooled = pool(fmap) if pool is not None else nn.functional.adaptive_avg_pool2d(fmap, 1)
            if type(m).__name__ != "ConvNeXt":  # ConvNeXt's classifier starts with LayerNorm2d
                pooled = torch.flatten(pooled, 1)
            return torch.flatten(m.classifier[:-1](pooled), 1)
        if self.kind == "maxvit":
            return torch.flatten(m.classifier[:-1](fmap), 1)
        return self._pool(fmap)

    def from_feature_map(self, fmap: Tensor) -> tuple[Tensor, Tensor]:
        if not self.has_feature_map:
            return super().from_feature_map(fmap)
        h = self._tail(fmap)
        return self.head(h), h

    def features(self, x: Tensor) -> Tensor:
        m: Any = self.module
        if self.has_feature_map:
            return self._tail(self.feature_map(x))
        if self.kind == "swin":
            t = m.permute(m.norm(m.features(x)))
            return torch.flatten(m.avgpool(t), 1)
        if self.kind == "hooked":
            grabbed: list[Tensor] = []
            handle = self._head_module().register_forward_pre_hook(
                lambda _mod, args: grabbed.append(args[0])
            )
            try:
                m(x)
            finally:
                handle.remove()
            return torch.flatten(grabbed[-1], 1)
        t = m._process_input(x)
        cls = m.class_token.expand(t.shape[0], -1, -1)
        t = m.encoder(torch.cat([cls, t], dim=1))[:, 0]
        if hasattr(m.heads, "pre_logits"):
            t = m.heads.act(m.heads.pre_logits(t))
        return t

    def _head_module(self) -> nn.Linear:
        m: Any = self.module
        if self.kind == "densenet":
            return m.classifier
        if self.kind == "vit":
            return m.heads.head
        if self.kind in ("features_classifier", "maxvit"):
            return m.classifier[-1]
        if self.kind == "swin":
            return m.head
        if self.kind == "hooked" and not hasattr(m, "fc"):
            return m.classifier[-1]
        return m.fc


class TimmAdapter(ModelAdapter):
    """Any timm classifier: ``forward_features`` then ``forward_head(pre_logits=True)``.

    The head is ``get_classifier()`` (a ``nn.Linear``). CNNs, whose ``forward_features`` returns a
    (n, C', H', W') map, also give the feature map.
    """

    def __init__(self, name: str, module: nn.Module) -> None:
        self.name, self.module = name, module.eval()
        m: Any = module
        head = m.get_classifier()
        if not isinstance(head, nn.Linear):
            raise InputError(
                f"{name}: timm classifier is {type(head).__name__}, not a linear layer; "
                "semshift needs a linear head (W, b)"
            )
        cfg = getattr(m, "pretrained_cfg", {}) or {}
        self.mean = tuple(cfg.get("mean", IMAGENET_MEAN))
        self.std = tuple(cfg.get("std", IMAGENET_STD))
        self.input_size = int(cfg.get("input_size", (3, 224, 224))[-1])
        self.layer = "forward_head(pre_logits=True)"
        self.has_feature_map = self._probe_map()

    @torch.no_grad()
    def _probe_map(self) -> bool:
        """Whether ``forward_features`` returns an NCHW map (one forward of a single image)."""
        if getattr(self._m, "output_fmt", "NCHW") != "NCHW":
            return False
        p = next(self.module.parameters(), None)
        x = torch.zeros(
            1, 3, self.input_size, self.input_size, device=p.device if p is not None else None
        )
        try:
            return bool(self._m.forward_features(x).ndim == 4)
        except (RuntimeError, AssertionError, ValueError):
            return False

    def block_names(self) -> tuple[str, ...]:
        """The modules of timm's ``feature_info`` for CNNs (channels-first maps), else none."""
        info = getattr(self._m, "feature_info", None)
        if not self.has_feature_map or not info:
            return ()
        named = dict(self.module.named_modules())
        names = [i.get("module") for i in info if isinstance(i, dict)]
        return tuple(n for n in names if isinstance(n, str) and n in named)

    def feature_map(self, x: Tensor) -> Tensor:
        out = self._m.forward_features(x)
        if out.ndim != 4:
            raise InputError(
                f"{self.name}: forward_features gives shape {tuple(out.shape)}, no map"
            )
        return out

    def from_feature_map(self, fmap: Tensor) -> tuple[Tensor, Tensor]:
        h = self._m.forward_head(fmap, pre_logits=True)
        return self.head(h), h

    def features(self, x: Tensor) -> Tensor:
        m: Any = self.module
        return m.forward_head(m.forward_features(x), pre_logits=True)

    def _head_module(self) -> nn.Linear:
        return self._m.get_classifier()


class HookAdapter(ModelAdapter):
    """Any ``nn.Module`` whose logits come from a linear layer; features by a forward hook.

    Parameters
    ----------
    name : str
        Name for reports.
    module : nn.Module
        The classifier: ``module(x)`` returns logits (n, C).
    head : str, optional
        Dotted name of the final ``nn.Linear`` (default: the last ``nn.Linear`` registered).
    layer : str, optional
        Dotted name of the penultimate layer whose output (flattened) is h. Default: the input of
        ``head``. When given, ``head(h)`` must reproduce the logits; logits are still taken from
        the model's own output.
    blocks : sequence of str, optional
        Dotted names of the network's main blocks, shallow to deep, for the detectors that
        read several layers (:meth:`ModelAdapter.block_names`); default none.
    """

    def __init__(
        self,
        name: str,
        module: nn.Module,
        *,
        head: str | None = None,
        layer: str | None = None,
        blocks: Sequence[str] = (),
    ) -> None:
        self.name, self.module = name, module.eval()
        named = dict(module.named_modules())
        for block in blocks:
            if block not in named:
                close = difflib.get_close_matches(block, list(named), n=3)
                hint = f"; close: {', '.join(close)}" if close else ""
                raise UnknownNameError(f"{name}: no module named {block!r} for `blocks`{hint}")
        self._blocks = tuple(blocks)
        if head is None:
            linears = [n for n, m in named.items() if isinstance(m, nn.Linear)]
            if not linears:
                raise InputError(f"{name}: the model has no nn.Linear layer to use as the head")
            head = linears[-1]
        for what, key in (("head", head), ("layer", layer)):
            if key is not None and key not in named:
                close = difflib.get_close_matches(key, list(named), n=3)
                hint = f"; close: {', '.join(close)}" if close else ""
                raise UnknownNameError(f"{name}: no module named {key!r} for `{what}`{hint}")
        if not isinstance(named[head], nn.Linear):
            raise InputError(f"{name}: head {head!r} is {type(named[head]).__name__}, not Linear")
        self._head = named[head]
        self.layer = layer or f"input of {head}"
        self._captured: Tensor | None = None
        target = named[layer] if layer is not None else self._head
        if layer is None:
            target.register_forward_pre_hook(self._grab_input)
        else:
            target.register_forward_hook(self._grab_output)

    def block_names(self) -> tuple[str, ...]:
        return self._blocks

    def _grab_input(self, _m: nn.Module, args: tuple[Tensor, ...]) -> None:
        self._captured = args[0]

    def _grab_output(self, _m: nn.Module, _args: Any, out: Tensor) -> None:
        self._captured = out

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        self._captured = None
        logits = self.module(x)
        if self._captured is None:
            raise InputError(f"{self.name}: the hooked layer {self.layer!r} did not run")
        h = torch.flatten(self._captured, 1)
        self._captured = None
        return logits, h

    __call__ = forward

    def features(self, x: Tensor) -> Tensor:
        return self.forward(x)[1]

    def _head_module(self) -> nn.Linear:
        return self._head


class OpenClipAdapter(ModelAdapter):
    """open_clip: image and text embeddings, and a zero-shot head from class-name prompts.

    Features h are the L2-normalised image embeddings (n, E); the head is W = s T, b = 0, with T
    the (C, E) normalised mean text embedding of each class's prompts and s = exp(logit_scale), so
    the logits are CLIP's scaled cosine similarities.

    Also a :class:`~semshift.splits.superclass.TextEncoder` (:meth:`encode`) and an
    :class:`~semshift.splits.superclass.ImageTextScorer` (:meth:`score`).

    References
    ----------
    Radford, A. et al. (2021). Learning transferable visual models from natural language
    supervision. ICML.
    """

    def __init__(self, name: str, module: nn.Module, tokenizer: Callable[..., Tensor]) -> None:
        self.name, self.module, self.tokenizer = name, module.eval(), tokenizer
        self.layer = "encode_image (L2-normalised)"
        visual: Any = getattr(module, "visual", None)
        cfg = getattr(visual, "preprocess_cfg", {}) or {}
        self.mean = tuple(cfg.get("mean", (0.48145466, 0.4578275, 0.40821073)))
        self.std = tuple(cfg.get("std", (0.26862954, 0.26130258, 0.27577711)))
        size = getattr(visual, "image_size", 224)
        self.input_size = int(size[0] if isinstance(size, tuple | list) else size)
        self._zs = nn.Linear(1, 1)  # replaced by set_classes
        self.classnames: list[str] = []

    @torch.no_grad()
    def _text(self, texts: Sequence[str]) -> Tensor:
        dev = next(self.module.parameters()).device
        tokens = self.tokenizer(list(texts)).to(dev)
        emb = self._m.encode_text(tokens)
        return nn.functional.normalize(emb.float(), dim=-1)

    def encode_text(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """L2-normalised text embeddings, (len(texts), E) float32."""
        if len(texts) == 0:
            return np.zeros((0, self.embed_dim), np.float32)
        return self._text(texts).cpu().numpy().astype(np.float32)

    encode = encode_text  # the TextEncoder protocol

    @property
    def embed_dim(self) -> int:
        return int(self._m.text_projection.shape[1])

    def set_classes(
        self, classnames: Sequence[str], templates: Sequence[str] = ("a photo of a {}.",)
    ) -> OpenClipAdapter:
        """Build the zero-shot head from class names, one prompt per template (averaged)."""
        if not classnames:
            raise InputError(f"{self.name}: the zero-shot head needs at least one class name")
        rows = []
        for cname in classnames:
            emb = self._text([t.format(cname) for t in templates]).mean(0)
            rows.append(nn.functional.normalize(emb, dim=0))
        scale = float(self._m.logit_scale.detach().exp())
        w = torch.stack(rows) * scale
        lin = nn.Linear(w.shape[1], w.shape[0], bias=True).to(w.device)
        with torch.no_grad():
            lin.weight.copy_(w)
            lin.bias.zero_()
        self._zs, self.classnames = lin.eval(), list(classnames)
        return self

    def features(self, x: Tensor) -> Tensor:
        emb = self._m.encode_image(x)
        return nn.functional.normalize(emb.float(), dim=-1)

    def _head_module(self) -> nn.Linear:
        if not self.classnames:
            raise InputError(f"{self.name}: call set_classes(names) to build the zero-shot head")
        return self._zs

    def to(self, device: torch.device | str) -> OpenClipAdapter:
        self.module.to(device)
        self._zs.to(device)
        return self

    @torch.no_grad()
    def encode_images(self, images: Sequence[str | Path], batch_size: int = 64) -> F32:
        """L2-normalised image embeddings of image files, (n, E) float32."""
        from semshift.features.data import load_image, make_transform

        tf = make_transform(f"resize{self.input_size}-crop{self.input_size}", self.mean, self.std)
        dev = next(self.module.parameters()).device
        out = []
        for i in range(0, len(images), batch_size):
            batch = torch.stack([tf(load_image(p)) for p in images[i : i + batch_size]])
            out.append(self.features(batch.to(dev)).cpu())
        if not out:
            return np.zeros((0, self.embed_dim), np.float32)
        return torch.cat(out).numpy().astype(np.float32)

    def score(self, images: Sequence[str], text: str) -> NDArray[np.float64]:
        """Cosine similarity of each image to ``text``, (len(images),) float64."""
        emb = self.encode_images(images)
        t = self.encode_text([text])[0]
        return (emb @ t).astype(np.float64)


# --------------------------------------------------------------------------- weights
_PICKLE_HINT = (
    "re-save it as safetensors (safetensors.torch.save_file(model.state_dict(), 'x.safetensors')) "
    "or as a plain state_dict of tensors"
)


def _check_semshift_weights(path: Path, state: Mapping[str, Tensor]) -> None:
    """Verify the per-tensor checksums of a weights file semshift wrote (``semshift train``'s
    ``model.safetensors``); a file without them (anyone else's) is taken as it is."""
    from safetensors import safe_open

    from semshift.features._tensor_checksums import CHECKSUMS_KEY, check_tensors

    with safe_open(str(path), framework="pt") as fh:
        metadata = fh.metadata() or {}
    if CHECKSUMS_KEY in metadata and (problem := check_tensors(state, metadata)) is not None:
        raise InputError(
            f"weights file {path} is damaged ({problem}); write it again: the same semshift "
            "train command with --resume re-exports it from the run's last checkpoint"
        )


def load_state_dict(path: str | Path) -> dict[str, Tensor]:
    """Read a state dict from a local file without executing code.

    ``.safetensors`` files are read with safetensors; anything else with
    ``torch.load(weights_only=True)``. Nested ``{"state_dict": ...}`` / ``{"model": ...}`` and a
    ``module.`` prefix (DataParallel) are unwrapped.

    Raises
    ------
    InputError
        The file is missing or unreadable, needs unpickling arbitrary objects, or holds no tensors.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(
            f"weights file {p} does not exist (weights are read from local files only)"
        )
    if p.suffix == ".safetensors":
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            state: Any = load_file(str(p))
        except (SafetensorError, OSError, ValueError) as err:
            raise InputError(f"weights file {p}: not a readable safetensors file ({err})") from None
        _check_semshift_weights(p, state)
    else:
        with open(p, "rb") as fh:
            head = fh.read(4)
        # torch.save writes a zip archive ("PK"), older versions a pickle (protocol 2+: 0x80)
        if not (head.startswith(b"PK") or head[:1] == b"\x80"):
            raise InputError(
                f"weights file {p}: neither a PyTorch checkpoint nor a .safetensors file "
                f"(it starts with {head!r})"
            )
        try:
            state = torch.load(p, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as err:
            first = str(err).strip().splitlines()
            detail = next((ln for ln in first if "GLOBAL" in ln or "Unsupported" in ln), first[0])
            raise InputError(
                f"weights file {p}: refused, it needs unpickling arbitrary Python objects "
                f"({detail.strip()[:160]}); {_PICKLE_HINT}"
            ) from None
        except (RuntimeError, OSError, EOFError, ValueError, KeyError, IndexError) as err:
            raise InputError(
                f"weights file {p}: not a readable PyTorch checkpoint "
                f"({type(err).__name__}: {str(err)[:160]})"
            ) from None
    for key in ("state_dict", "model", "model_state_dict"):
        if isinstance(state, Mapping) and key in state and isinstance(state[key], Mapping):
            state = state[key]
    if not isinstance(state, Mapping) or not any(isinstance(v, Tensor) for v in state.values()):
        raise InputError(f"weights file {p}: holds no tensors (expected a state dict)")
    out = {str(k): v for k, v in state.items() if isinstance(v, Tensor)}
    if out and all(k.startswith("module.") for k in out):
        out = {k[len("module.") :]: v for k, v in out.items()}
    return out


def _list_keys(keys: Sequence[str], n: int = 6) -> str:
    shown = ", ".join(keys[:n])
    return f"{shown}, ... ({len(keys)} in all)" if len(keys) > n else shown


def load_weights(
    module: nn.Module, path: str | Path, *, state: Mapping[str, Tensor] | None = None
) -> nn.Module:
    """Load a local weights file into ``module``, strictly.

    ``state``, when given, is the file's contents already read by :func:`load_state_dict`.

    Raises
    ------
    InputError
        Missing or unexpected keys (named), or tensors of the wrong shape (named), or any error of
        :func:`load_state_dict`.
    """
    state = load_state_dict(path) if state is None else state
    own = module.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing keys: {_list_keys(missing)}")
        if unexpected:
            parts.append(f"unexpected keys: {_list_keys(unexpected)}")
        raise InputError(
            f"weights file {path} does not fit {type(module).__name__}: {'; '.join(parts)}"
        )
    bad = [
        f"{k} {tuple(state[k].shape)} vs model {tuple(v.shape)}"
        for k, v in own.items()
        if tuple(state[k].shape) != tuple(v.shape)
    ]
    if bad:
        raise InputError(
            f"weights file {path}: tensor shapes do not fit {type(module).__name__}: "
            f"{_list_keys(bad, 3)} (wrong num_classes?)"
        )
    module.load_state_dict(state, strict=True)
    return module


@torch.no_grad()
def kaiming_init(module: nn.Module, seed: int = 0) -> nn.Module:
    """Re-initialise every parameter from a generator seeded with ``seed`` (deterministic).

    Convolutions and linear layers: Kaiming normal (fan_in, ReLU gain), bias 0. Normalisation
    layers: weight 1, bias 0, running statistics reset. Every other parameter (class tokens,
    position embeddings, scales): normal with std 0.02. ``logit_scale`` is set to log(1/0.07).
    """
    gen = torch.Generator().manual_seed(int(seed))
    done: set[int] = set()
    norm_types = (nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm)
    for m in module.modules():
        if isinstance(m, nn.Conv1d | nn.Conv2d | nn.Conv3d | nn.Linear):
            w = torch.empty(m.weight.shape)
            nn.init.kaiming_normal_(w, nonlinearity="relu", generator=gen)
            m.weight.copy_(w)
            done.add(id(m.weight))
            if m.bias is not None:
                m.bias.zero_()
                done.add(id(m.bias))
        elif isinstance(m, norm_types):
            if getattr(m, "weight", None) is not None:
                m.weight.fill_(1.0)
                done.add(id(m.weight))
            if getattr(m, "bias", None) is not None:
                m.bias.zero_()
                done.add(id(m.bias))
            if isinstance(m, nn.modules.batchnorm._NormBase) and m.track_running_stats:
                m.reset_running_stats()
    for name, p in module.named_parameters():
        if id(p) in done:
            continue
        if name.endswith("logit_scale"):
            p.fill_(float(np.log(1 / 0.07)))
        else:
            p.copy_(torch.empty(p.shape).normal_(0.0, 0.02, generator=gen))
    return module


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
        close = difflib.get_close_matches(arch, timm.list_models(), n=5)
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
        close = difflib.get_close_matches(arch, known, n=5)
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


#: A weights *name* (a torchvision enum member such as ``DEFAULT``, ``IMAGENET1K_V2`` or
#: ``ResNet50_Weights.IMAGENET1K_V2``), as opposed to a local file.
_WEIGHTS_NAME = re.compile(r"^(?:[A-Za-z0-9]+_Weights\.)?[A-Z][A-Z0-9_]*$")


def is_weights_name(spec: str | Path | None, model: str | None = None) -> bool:
    """Whether ``spec`` names pretrained weights rather than a file, by spelling.

    Without ``model``: a torchvision enum name (``IMAGENET1K_V2``). With ``model``: a name in
    that model's namespace (:func:`named_weights_library`: timm or open_clip tags for ``timm/``
    and ``open_clip/`` models).
    """
    if model is not None:
        return named_weights_library(model, spec) is not None
    return isinstance(spec, str) and bool(_WEIGHTS_NAME.match(spec))


def torchvision_weights(model: str, spec: str) -> Any:
    """The torchvision weights enum member ``spec`` of ``model`` (``DEFAULT`` resolved).

    Raises
    ------
    UnknownNameError
        ``model`` is not a torchvision model, or it has no weights named ``spec`` (the message
        lists close matches and every name it has).
    """
    import torchvision
    from torchvision.models import get_model_weights

    if model not in torchvision.models.list_models(module=torchvision.models):
        raise UnknownNameError(
            f"weights {spec!r}: named weights are torchvision's, and {model!r} is not a "
            "torchvision model; give a local weights file"
        )
    enum = get_model_weights(model)
    key = spec.split(".")[-1]
    if spec.count(".") and spec.split(".")[0] != enum.__name__:
        raise UnknownNameError(f"weights {spec!r} are not {model}'s ({enum.__name__})")
    members = list(enum.__members__)
    if key not in members:
        close = difflib.get_close_matches(key, members, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise UnknownNameError(
            f"{model} has no weights {spec!r}{hint}; known: {', '.join(members)}"
        )
    return enum[key]


def weights_cache_file(weights: Any) -> Path:
    """Where torch's cache keeps a torchvision weights file (``$TORCH_HOME/hub/checkpoints``)."""
    from urllib.parse import urlparse

    return Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(urlparse(weights.url).path)


def weights_preprocessing(model: str, weights: str | Path | None) -> dict[str, Any] | None:
    """Resize, crop, mean and std that named weights were trained with (None for a file or no
    weights): ``{"preset": "resize<R>-crop<C>", "mean": ..., "std": ...}``.

    torchvision enum names: their ``transforms()``; timm tags: the pretrained config's
    ``input_size``, ``crop_pct`` (resize = floor(crop / crop_pct)), ``mean``, ``std``; open_clip
    tags: the architecture's image size (resize = crop) and the tag's ``mean``, ``std``. semshift
    resizes bilinearly; timm and open_clip weights are mostly trained with bicubic resizing, and
    open_clip's ``squash`` resize mode is approximated by resize + center crop.
    """
    if weights is None or Path(str(weights)).is_file():
        return None
    lib = named_weights_library(model, str(weights))
    if lib in ("timm", "open_clip"):
        ref = resolve_pretrained(model, str(weights))
        return {"preset": ref.preset, "mean": ref.mean, "std": ref.std}
    if lib != "torchvision":
        return None
    t = torchvision_weights(model, str(weights)).transforms()
    resize = (
        int(t.resize_size[0]) if isinstance(t.resize_size, list | tuple) else int(t.resize_size)
    )
    crop = int(t.crop_size[0]) if isinstance(t.crop_size, list | tuple) else int(t.crop_size)
    return {"preset": f"resize{resize}-crop{crop}", "mean": tuple(t.mean), "std": tuple(t.std)}


def _load_torchvision_weights(
    name: str, spec: str, num_classes: int, kwargs: dict[str, Any]
) -> ModelAdapter:
    """Build ``name`` and load its named torchvision weights from torch's cache, safely."""
    import torchvision

    w = torchvision_weights(name, spec)
    path = weights_cache_file(w)
    if not path.is_file():
        raise InputError(
            f"{name} weights {w.name} are not in torch's cache and semshift never downloads: "
            f"place {path.name} (from {w.url}) at {path} (the folder follows TORCH_HOME)"
        )
    n_cls = len(w.meta.get("categories") or []) or num_classes
    kw = dict(kwargs)
    if name in ("googlenet", "inception_v3"):  # as torchvision's own builders load them
        kw.setdefault("transform_input", True)
        kw.update(aux_logits=True, init_weights=False)
    net = torchvision.models.get_model(name, weights=None, num_classes=n_cls, **kw)
    load_weights(net, path)
    if name in ("googlenet", "inception_v3"):
        n: Any = net
        n.aux_logits = False
        for aux in ("aux1", "aux2", "AuxLogits"):
            if hasattr(n, aux):
                setattr(n, aux, None)
    adapter = TorchvisionAdapter(name, net)
    pre = weights_preprocessing(name, spec)
    assert pre is not None
    adapter.mean, adapter.std = pre["mean"], pre["std"]
    adapter.weights_desc = f"torchvision {type(w).__name__}.{w.name} ({path.name})"
    adapter.module.eval()
    return adapter


# --------------------------------------------------------------------------- pretrained tags
#: Suffixes that make a weights spec a file path even when no such file exists.
_FILE_SUFFIXES = (".safetensors", ".pt", ".pth", ".bin", ".ckpt", ".pkl", ".npz", ".tar")
#: ``a1_in1k``, ``resnet50.a1_in1k``, ``timm/resnet50.a1_in1k`` or ``pretrained``.
_TIMM_TAG = re.compile(r"^(?:timm/)?[A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)?$")
#: ``laion2b_s34b_b79k``, ``openai``.
_OPEN_CLIP_TAG = re.compile(r"^[A-Za-z0-9_\-]+$")


def named_weights_library(model: str, spec: str | Path | None) -> str | None:
    """Which library names the weights ``spec`` of ``model``: ``"timm"``, ``"open_clip"`` or
    ``"torchvision"``; None when ``spec`` is a file path.

    The dispatch is per namespace and by spelling only (whether a file of that name exists is the
    caller's first question: an existing local file always wins): ``timm/`` models take timm
    pretrained tags, ``open_clip/`` models open_clip tags, every other model torchvision enum
    names. A spec ending in a weights-file suffix (``.safetensors``, ``.pt``, ...) is a path.

    Examples
    --------
    >>> named_weights_library("timm/resnet50", "a1_in1k")
    'timm'
    >>> named_weights_library("open_clip/ViT-B-32", "laion2b_s34b_b79k")
    'open_clip'
    >>> named_weights_library("resnet50", "IMAGENET1K_V2")
    'torchvision'
    >>> named_weights_library("timm/resnet50", "weights/resnet50.safetensors") is None
    True
    """
    if spec is None or not isinstance(spec, str) or spec.lower().endswith(_FILE_SUFFIXES):
        return None
    if model.startswith("timm/"):
        return "timm" if _TIMM_TAG.match(spec) else None
    if model.startswith("open_clip/"):
        return "open_clip" if _OPEN_CLIP_TAG.match(spec) else None
    return "torchvision" if _WEIGHTS_NAME.match(spec) else None


def hf_cache_dir() -> Path:
    """The Hugging Face hub cache, read from the environment now (``HF_HUB_CACHE``, else
    ``$HF_HOME/hub``, else huggingface_hub's default ``~/.cache/huggingface/hub``)."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.path.expandvars(os.environ[var])).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.path.expandvars(os.environ["HF_HOME"])).expanduser() / "hub"
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE).expanduser()


@dataclass(frozen=True)
class PretrainedWeights:
    """A timm or open_clip pretrained tag, resolved with the library's own configs (no loading).

    Attributes
    ----------
    library : str
        ``"timm"`` or ``"open_clip"``.
    model : str
        The semshift model name (``timm/resnet50``).
    tag : str
        timm: the full pretrained name (``resnet50.a1_in1k``); open_clip: the tag.
    repo_id, revision : str or None
        The Hugging Face repository the library fetches the file from (and its revision).
    filenames : tuple of str
        Files of that repository the library loads, in its order of preference.
    url : str or None
        Where the library downloads from when there is no ``repo_id``.
    mean, std : tuple of float
        Input normalisation of the pretrained config.
    resize, crop : int
        Resize of the shorter side and center crop (timm: ``floor(crop / crop_pct)``).
    num_classes : int or None
        timm: the head size of the pretrained weights.
    options : dict
        Constructor arguments the weights need (open_clip: ``force_quick_gelu``).
    """

    library: str
    model: str
    tag: str
    repo_id: str | None
    revision: str | None
    filenames: tuple[str, ...]
    url: str | None
    mean: tuple[float, ...]
    std: tuple[float, ...]
    resize: int
    crop: int
    num_classes: int | None = None
    options: Mapping[str, Any] | None = None

    @property
    def preset(self) -> str:
        return f"resize{self.resize}-crop{self.crop}"

    @property
    def label(self) -> str:
        """``timm/resnet50.a1_in1k`` or ``open_clip ViT-B-32 laion2b_s34b_b79k``."""
        if self.library == "timm":
            return f"timm/{self.tag}"
        return f"open_clip {self.model.removeprefix('open_clip/')} {self.tag}"

    def _url_cache_file(self) -> Path | None:
        if not self.url:
            return None
        from urllib.parse import urlparse

        name = os.path.basename(urlparse(self.url).path)
        if self.library == "timm":  # timm's download_cached_file: torch's hub cache
            return Path(torch.hub.get_dir()) / "checkpoints" / name
        return Path("~/.cache/clip").expanduser() / name  # open_clip's default cache_dir

    def cached_file(self) -> Path | None:
        """The weights file in the library's cache (the HF cache for hub repositories), else
        None. Never downloads."""
        if self.repo_id is None:
            path = self._url_cache_file()
            return path if path is not None and path.is_file() else None
        from huggingface_hub import try_to_load_from_cache

        for filename in self.filenames:
            found = try_to_load_from_cache(
                self.repo_id, filename, cache_dir=str(hf_cache_dir()), revision=self.revision
            )
            if isinstance(found, str) and Path(found).is_file():
                return Path(found)
        return None

    def missing_message(self) -> str:
        """One line: where the file must go, and how to get it on a connected machine."""
        if self.repo_id is None:
            path = self._url_cache_file()
            return (
                f"{self.label} weights are not cached and semshift never downloads: place "
                f"{path.name if path else '?'} (from {self.url}) at {path}"
            )
        repo = hf_cache_dir() / ("models--" + self.repo_id.replace("/", "--"))
        first = self.filenames[0]
        alt = f" (or {', '.join(self.filenames[1:])})" if len(self.filenames) > 1 else ""
        rev = self.revision or "main"
        return (
            f"{self.label} weights are not in the Hugging Face cache and semshift never "
            f"downloads: place {first}{alt} of {self.repo_id} at "
            f"{repo}/snapshots/<commit>/{first} with <commit> written in {repo}/refs/{rev} "
            f"(the layout `huggingface-cli download {self.repo_id} {first}` leaves on a "
            "connected machine; the cache follows HF_HUB_CACHE / HF_HOME)"
        )


def _hf_files(filename: str | None, default: str, safe: str) -> tuple[str, ...]:
    """Files the libraries try, safetensors first (timm's / open_clip's _get_safe_alternatives)."""
    name = filename or default
    if name == default:
        return (safe, name)
    if name.endswith((".bin", ".pth")):
        return (name[:-4] + ".safetensors", name)
    return (name,)


def _resolve_timm(arch: str, spec: str) -> PretrainedWeights:
    import math

    import timm
    from timm.models import get_pretrained_cfg

    _check_timm_arch(arch)
    s = spec.removeprefix("timm/")
    if s == "pretrained":
        default = get_pretrained_cfg(arch)
        if default is None or not default.tag:
            raise UnknownNameError(f"timm model {arch!r} has no pretrained weights in timm")
        full = f"{arch}.{default.tag}"
    else:
        full = s if "." in s else f"{arch}.{s}"
    known = timm.list_pretrained(arch + ".*")
    if full not in known:
        pool = known or timm.list_pretrained(arch + "*")
        close = difflib.get_close_matches(full, pool, n=5, cutoff=0.5)
        hint = f"; close: {', '.join(close)}" if close else ""
        more = f", ... ({len(known)} in all)" if len(known) > 12 else ""
        listing = f"; known: {', '.join(known[:12])}{more}" if known else ""
        arch_of = full.split(".")[0]
        what = f"weights {spec!r} are for {arch_of}, not {arch}" if arch_of != arch else (
            f"timm has no pretrained tag {spec!r} for {arch}"
        )  # fmt: skip
        raise UnknownNameError(
            f"{what}{hint}{listing} (or 'pretrained' for timm's default tag, or a local file)"
        )
    cfg = get_pretrained_cfg(full)
    assert cfg is not None
    if cfg.custom_load:
        raise InputError(
            f"timm/{full}: these weights need timm's custom loader, not a state dict; on a "
            f"connected machine save timm.create_model({full!r}, pretrained=True).state_dict() "
            "with safetensors.torch.save_file and give that file"
        )
    repo_id, revision = None, None
    if cfg.hf_hub_id:
        repo_id, _, rev = cfg.hf_hub_id.partition("@")
        revision = rev or None
    url = cfg.url[0] if isinstance(cfg.url, tuple) else cfg.url  # (url, file name) in timm
    crop = int(cfg.input_size[-1])
    crop_pct = float(cfg.crop_pct or 0.875)
    return PretrainedWeights(
        library="timm", model=f"timm/{arch}", tag=full, repo_id=repo_id, revision=revision,
        filenames=_hf_files(cfg.hf_hub_filename, "pytorch_model.bin", "model.safetensors"),
        url=url or None, mean=tuple(cfg.mean), std=tuple(cfg.std),
        resize=math.floor(crop / crop_pct), crop=crop,
        num_classes=int(cfg.num_classes) if cfg.num_classes is not None else None,
    )  # fmt: skip


def _resolve_open_clip(arch: str, spec: str) -> PretrainedWeights:
    import open_clip

    _check_open_clip_arch(arch)
    cfg = open_clip.get_pretrained_cfg(arch, spec)
    if not cfg:
        tags = open_clip.list_pretrained_tags_by_model(arch)
        if not tags:
            raise UnknownNameError(
                f"open_clip architecture {arch!r} has no pretrained tags; give a local weights file"
            )
        close = difflib.get_close_matches(spec, tags, n=5, cutoff=0.5)
        hint = f"; close: {', '.join(close)}" if close else ""
        raise UnknownNameError(
            f"open_clip has no pretrained tag {spec!r} for {arch}{hint}; known: {', '.join(tags)}"
        )
    hub = cfg.get("hf_hub") or ""
    repo_id, filename = os.path.split(hub) if hub else (None, None)
    model_cfg = open_clip.get_model_config(arch) or {}
    size = model_cfg.get("vision_cfg", {}).get("image_size", 224)
    size = int(size[0] if isinstance(size, list | tuple) else size)
    return PretrainedWeights(
        library="open_clip", model=f"open_clip/{arch}", tag=spec, repo_id=repo_id or None,
        revision=None,
        filenames=_hf_files(filename or None, "open_clip_pytorch_model.bin",
                            "open_clip_model.safetensors"),
        url=cfg.get("url") or None,
        mean=tuple(cfg.get("mean", (0.48145466, 0.4578275, 0.40821073))),
        std=tuple(cfg.get("std", (0.26862954, 0.26130258, 0.27577711))),
        resize=size, crop=size,
        options={"force_quick_gelu": True} if cfg.get("quick_gelu") else {},
    )  # fmt: skip


def resolve_pretrained(model: str, spec: str) -> PretrainedWeights:
    """Resolve a timm or open_clip pretrained tag of ``model`` with the library's own API
    (``timm.models.get_pretrained_cfg``, ``open_clip.get_pretrained_cfg``); nothing is loaded.

    Parameters
    ----------
    model : str
        ``timm/<arch>`` or ``open_clip/<arch>``.
    spec : str
        timm: ``resnet50.a1_in1k``, ``timm/resnet50.a1_in1k``, the tag alone (``a1_in1k``) or
        ``pretrained`` (timm's default tag); open_clip: the tag (``laion2b_s34b_b79k``).

    Raises
    ------
    UnknownNameError
        Unknown architecture or tag (the message lists close matches and the known tags).
    InputError
        A timm tag whose weights need timm's custom (non state dict) loader.

    Examples
    --------
    >>> w = resolve_pretrained("timm/resnet50", "a1_in1k")
    >>> w.repo_id, w.filenames, w.preset
    ('timm/resnet50.a1_in1k', ('model.safetensors', 'pytorch_model.bin'), 'resize235-crop224')
    """
    if model.startswith("timm/"):
        return _resolve_timm(model[5:], spec)
    if model.startswith("open_clip/"):
        return _resolve_open_clip(model[10:], spec)
    raise UnknownNameError(
        f"weights {spec!r}: pretrained tags are timm's and open_clip's, and {model!r} is "
        "neither timm/<name> nor open_clip/<name>"
    )


def check_weights_name(model: str, spec: str) -> None:
    """Resolve named weights of ``model`` without loading anything (config validation).

    Raises
    ------
    UnknownNameError, InputError
        As :func:`torchvision_weights` or :func:`resolve_pretrained`.
    """
    lib = named_weights_library(model, spec)
    if lib == "torchvision":
        torchvision_weights(model, spec)
    elif lib is not None:
        resolve_pretrained(model, spec)


def _cached_or_fail(ref: PretrainedWeights) -> Path:
    path = ref.cached_file()
    if path is None:
        raise InputError(ref.missing_message())
    return path


def _load_timm_pretrained(name: str, spec: str, kwargs: dict[str, Any]) -> ModelAdapter:
    """Build ``timm/<arch>`` under its pretrained tag and load the cached file, safely."""
    import timm

    ref = resolve_pretrained(name, spec)
    path = _cached_or_fail(ref)
    kw = dict(kwargs)
    if ref.num_classes:
        kw["num_classes"] = ref.num_classes
    # created by its tagged name, the model carries the tag's pretrained_cfg (mean, std, size)
    net = timm.create_model(ref.tag, pretrained=False, **kw)
    load_weights(net, path)
    adapter = TimmAdapter(name, net)
    adapter.mean, adapter.std = _rgb(ref.mean), _rgb(ref.std)
    adapter.input_size = ref.crop
    adapter.weights_desc = f"{ref.label} ({path})"
    adapter.module.eval()
    return adapter


def _load_open_clip_pretrained(
    name: str, spec: str, classnames: Sequence[str] | None, kwargs: dict[str, Any]
) -> ModelAdapter:
    """Build ``open_clip/<arch>`` as its tag needs and load the cached file, safely."""
    ref = resolve_pretrained(name, spec)
    path = _cached_or_fail(ref)
    kw = {**(ref.options or {}), **kwargs}
    adapter = _build_open_clip(name[10:], **kw)
    load_weights(adapter.module, path)
    adapter.mean, adapter.std = _rgb(ref.mean), _rgb(ref.std)
    adapter.weights_desc = f"{ref.label} ({path})"
    adapter.module.eval()
    if classnames is not None:
        adapter.set_classes(classnames)
    return adapter


def _rgb(values: Sequence[float]) -> tuple[float, float, float]:
    v = tuple(float(x) for x in values)
    return (v[0], v[0], v[0]) if len(v) == 1 else (v[0], v[1], v[2])


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
            close = difflib.get_close_matches(name, pool, n=5)
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
