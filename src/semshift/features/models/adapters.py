"""Model adapters: one interface (:class:`ModelAdapter`: logits, pooled features, the linear
head, optional feature maps and block outputs) over torchvision, timm, open_clip and any
``nn.Module`` (:class:`HookAdapter`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor, nn

from semshift.errors import InputError, UnknownNameError, close_matches

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
                close = close_matches(key, list(named), n=3)
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
                close = close_matches(block, list(named), n=3)
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
                close = close_matches(key, list(named), n=3)
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

    def encode_text(self, texts: Sequence[str], batch_size: int = 256) -> NDArray[np.float32]:
        """L2-normalised text embeddings, (len(texts), E) float32: ``batch_size`` texts at a
        time, without autograd (memory: one batch's activations, not every text's graph)."""
        if len(texts) == 0:
            return np.zeros((0, self.embed_dim), np.float32)
        out = np.empty((len(texts), self.embed_dim), dtype=np.float32)
        with torch.inference_mode():
            for lo in range(0, len(texts), batch_size):
                part = self._text(texts[lo : lo + batch_size])
                out[lo : lo + len(part)] = part.cpu().numpy()
        return out

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
