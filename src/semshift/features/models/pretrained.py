"""Named pretrained weights, read from each library's own cache and never downloaded:
torchvision's enums and timm / open_clip tags (:func:`resolve_pretrained`), with the
preprocessing they were trained with."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from semshift.errors import InputError, UnknownNameError, close_matches

from .adapters import TimmAdapter, TorchvisionAdapter
from .registry import _build_open_clip, _check_open_clip_arch, _check_timm_arch
from .weights import load_weights

if TYPE_CHECKING:
    from .adapters import ModelAdapter


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
        close = close_matches(key, members, n=3)
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
        close = close_matches(full, pool, n=5, cutoff=0.5)
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
        close = close_matches(spec, tags, n=5, cutoff=0.5)
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
