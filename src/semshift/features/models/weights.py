"""Weights from local files: safetensors or a PyTorch state dict read with
``weights_only=True`` (never unpickled), checked against the model's keys and shapes; seeded
Kaiming initialisation for random-model checks."""

from __future__ import annotations

import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from semshift.errors import InputError

# --------------------------------------------------------------------------- weights
_PICKLE_HINT = (
    "re-save it as safetensors (safetensors.torch.save_file(model.state_dict(), 'x.safetensors')) "
    "or as a plain state_dict of tensors"
)


def _check_semshift_weights(path: Path, state: Mapping[str, Tensor]) -> None:
    """Verify the per-tensor checksums of a weights file semshift wrote (``semshift train``'s
    ``model.safetensors``); a file without them (anyone else's) is taken as it is."""
    from safetensors import safe_open

    from semshift.features.tensor_checksums import CHECKSUMS_KEY, check_tensors

    with safe_open(str(path), framework="pt") as fh:
        metadata = fh.metadata() or {}
    if CHECKSUMS_KEY in metadata and (problem := check_tensors(state, metadata)) is not None:
        raise InputError(
            f"weights file {path} is damaged ({problem}); write it again: the same semshift "
            "train command with --resume re-exports it from the run's last checkpoint"
        )


def _read_file(path: str | Path) -> Any:
    """The object a local weights file holds (safetensors, or ``torch.load(weights_only=True)``).

    Raises
    ------
    InputError
        The file is missing or unreadable, or needs unpickling arbitrary objects.
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
        return state
    with open(p, "rb") as fh:
        head = fh.read(4)
    # torch.save writes a zip archive ("PK"), older versions a pickle (protocol 2+: 0x80)
    if not (head.startswith(b"PK") or head[:1] == b"\x80"):
        raise InputError(
            f"weights file {p}: neither a PyTorch checkpoint nor a .safetensors file "
            f"(it starts with {head!r})"
        )
    try:
        return torch.load(p, map_location="cpu", weights_only=True)
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
    state = _read_file(p)
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


# --------------------------------------------------------------------------- backbone only
#: Wrappers around a state dict, unwrapped (repeatedly, outermost first) when the mapping holds
#: one of them as a mapping: ``{"state_dict": ...}`` (MoCo, Lightning), ``{"model": ...}``
#: (DeiT, MAE), ``{"network": ...}``, ``{"model_state_dict": ...}``.
BACKBONE_WRAPPERS = ("state_dict", "model", "network", "model_state_dict")

#: Key prefixes tried, in this order, once a leading ``module.`` (DataParallel) is dropped from
#: every key: none; MoCo v1/v2 query encoder; MoCo v3 base encoder; DINO / generic student,
#: teacher and backbone; SimCLR-style encoder. The prefix that finds the most of the model's
#: backbone tensors is used (the first on a tie); keys without it are ignored (MoCo's key
#: encoder ``encoder_k.*`` / ``momentum_encoder.*``, its ``queue``, DINO's projection head).
BACKBONE_PREFIXES = (
    "",
    "encoder_q.",
    "base_encoder.",
    "student.backbone.",
    "teacher.backbone.",
    "student.",
    "teacher.",
    "backbone.",
    "encoder.",
)


@dataclass(frozen=True)
class BackboneLoad:
    """What :func:`load_backbone` loaded, re-initialised and ignored.

    Attributes
    ----------
    source : str
        The checkpoint file (``"<state dict>"`` when a mapping was given).
    prefix : str
        The key prefix the backbone was read under (``module.`` dropped first), e.g.
        ``"encoder_q."`` for MoCo v2; ``""`` when the keys are the model's own.
    loaded : tuple of str
        The model's state-dict keys copied from the checkpoint (every key outside the head).
    head : tuple of str
        The model's head keys, re-initialised (seeded, the head modules' own
        ``reset_parameters``).
    ignored : tuple of str
        The checkpoint's tensor keys (as stored) that were not loaded: another encoder, a
        projection head, a queue, the checkpoint's own classifier.
    seed : int
        Seed of the head's initialisation.
    sha256 : str or None
        SHA-256 of the checkpoint file (None when a mapping was given).
    """

    source: str
    prefix: str
    loaded: tuple[str, ...]
    head: tuple[str, ...]
    ignored: tuple[str, ...]
    seed: int
    sha256: str | None = None

    def summary(self) -> str:
        """One line: tensors loaded, head keys re-initialised, checkpoint tensors ignored."""
        under = f" (under {self.prefix!r})" if self.prefix else ""
        ignored = f" ({_key_groups(self.ignored, self.prefix)})" if self.ignored else ""
        return (
            f"backbone from {self.source}: {len(self.loaded)} tensors loaded{under}, head "
            f"re-initialised (seed {self.seed}): {', '.join(self.head)}; "
            f"{len(self.ignored)} checkpoint tensors ignored{ignored}"
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values (what a training run's ``train.json`` records)."""
        return {
            "source": self.source,
            "prefix": self.prefix,
            "loaded": len(self.loaded),
            "head": list(self.head),
            "ignored": list(self.ignored),
            "seed": self.seed,
            "sha256": self.sha256,
        }


def _key_groups(keys: Sequence[str], prefix: str, n: int = 6) -> str:
    """Keys grouped by their first name after ``module.`` and ``prefix``: ``"module.encoder_k.*
    (120), module.encoder_q.fc.* (4), module.queue"``."""
    groups: dict[str, int] = {}
    for key in keys:
        lead = "module." if key.startswith("module.") else ""
        rest = key[len(lead) :]
        if prefix and rest.startswith(prefix):
            lead, rest = lead + prefix, rest[len(prefix) :]
        first, dot, _ = rest.partition(".")
        group = f"{lead}{first}.*" if dot else key
        groups[group] = groups.get(group, 0) + 1
    shown = [f"{g} ({c})" if g.endswith(".*") else g for g, c in groups.items()]
    return ", ".join(shown[:n]) + (f", ... ({len(shown)} groups)" if len(shown) > n else "")


def _unwrap(state: Any, source: str) -> dict[str, Tensor]:
    """The tensors of a checkpoint, its wrappers unwrapped, keys as stored but ``module.``."""
    while isinstance(state, Mapping):
        inner = next(
            (state[k] for k in BACKBONE_WRAPPERS if isinstance(state.get(k), Mapping)), None
        )
        if inner is None:
            break
        state = inner
    if not isinstance(state, Mapping) or not any(isinstance(v, Tensor) for v in state.values()):
        raise InputError(f"weights file {source}: holds no tensors (expected a state dict)")
    return {str(k): v for k, v in state.items() if isinstance(v, Tensor)}


def _head_name(module: nn.Module, head: str | nn.Module | None) -> str:
    """The head's submodule name: given, found by identity, or the last ``nn.Linear``."""
    named = dict(module.named_modules())
    if isinstance(head, str):
        if not head or head not in named:
            raise InputError(
                f"{type(module).__name__} has no submodule {head!r} to take as the head; give "
                f"one of its module names (e.g. {_list_keys([n for n in named if n][-3:], 3)})"
            )
        return head
    if head is not None:
        found = [n for n, m in named.items() if m is head and n]
        if not found:
            raise InputError(f"the head given is not a submodule of {type(module).__name__}")
        return found[0]
    linears = [n for n, m in named.items() if isinstance(m, nn.Linear)]
    if not linears:
        raise InputError(f"{type(module).__name__} has no nn.Linear layer to take as the head")
    return linears[-1]


def _strip_module(key: str) -> str:
    return key[len("module.") :] if key.startswith("module.") else key


def _best_prefix(state: Mapping[str, Tensor], backbone: Sequence[str]) -> str:
    """The prefix of :data:`BACKBONE_PREFIXES` under which most backbone keys are found."""
    keys = {_strip_module(k) for k in state}
    wanted = set(backbone)
    scores = [
        len(wanted & {k[len(p) :] for k in keys if k.startswith(p)}) for p in BACKBONE_PREFIXES
    ]
    return BACKBONE_PREFIXES[int(np.argmax(scores))]


@torch.no_grad()
def load_backbone(
    module: nn.Module,
    path_or_state: str | Path | Mapping[str, Any],
    *,
    head: str | nn.Module | None = None,
    seed: int = 0,
) -> BackboneLoad:
    """Initialise ``module``'s backbone from a checkpoint and its head afresh.

    The departure from :func:`load_weights` (strict): the head (``head``'s parameters and
    buffers) is never read from the checkpoint but re-initialised, so a self-supervised
    checkpoint (MoCo, DINO, SimCLR) or a classifier of another number of classes can start a
    new task. Everything else is as strict: every other tensor of ``module.state_dict()``
    (buffers such as BatchNorm statistics included) must be in the checkpoint with the same
    shape, and is copied. Checkpoint tensors the model has no place for are ignored and listed.

    Keys are mapped as follows: the wrappers of :data:`BACKBONE_WRAPPERS` are unwrapped, a
    leading ``module.`` is dropped from every key, and of :data:`BACKBONE_PREFIXES` the prefix
    under which most backbone keys are found is stripped (``encoder_q.`` for MoCo v1/v2,
    ``base_encoder.`` for MoCo v3, ``student.`` / ``teacher.`` / ``backbone.`` for DINO-style
    checkpoints, ``encoder.`` for SimCLR-style ones, none for a plain state dict).

    Parameters
    ----------
    module : nn.Module
        The model, built with its new head (e.g. ``num_classes`` of the new task).
    path_or_state : str, Path or mapping
        A local file, read as :func:`load_state_dict` reads it (safetensors, or
        ``torch.load(weights_only=True)``: never unpickled), or the checkpoint's mapping.
    head : str or nn.Module, optional
        The head: a submodule name (``"fc"``) or the submodule itself; default the last
        ``nn.Linear`` of ``module``.
    seed : int
        Seeds the head's re-initialisation: each of its submodules' own ``reset_parameters``
        (for ``nn.Linear``: ``torch.manual_seed(seed); nn.Linear(D, C)``'s values).

    Returns
    -------
    BackboneLoad
        The keys loaded, re-initialised and ignored (:meth:`BackboneLoad.summary`: one line).

    Raises
    ------
    InputError
        The file is unreadable or needs unpickling; no prefix finds a backbone tensor; a
        backbone tensor is missing or of another shape (one line naming the first ones and how
        many); the head is not a submodule.
    """
    source = "<state dict>" if isinstance(path_or_state, Mapping) else str(path_or_state)
    raw = path_or_state if isinstance(path_or_state, Mapping) else _read_file(path_or_state)
    state = _unwrap(raw, source)
    name = _head_name(module, head)
    own = module.state_dict()
    head_keys = [k for k in own if k.startswith(f"{name}.")]
    backbone = [k for k in own if not k.startswith(f"{name}.")]
    what = type(module).__name__
    prefix = _best_prefix(state, backbone)
    mapped: dict[str, str] = {}  # model key -> checkpoint key
    for key in state:
        short = _strip_module(key)
        if short.startswith(prefix) and short[len(prefix) :] in own:
            mapped.setdefault(short[len(prefix) :], key)
    if not any(k in mapped for k in backbone):
        raise InputError(
            f"weights file {source} holds none of {what}'s {len(backbone)} backbone tensors "
            f"under any known prefix ({', '.join(p for p in BACKBONE_PREFIXES if p)}); its keys: "
            f"{_list_keys(list(state), 4)}; the model's: {_list_keys(backbone, 3)}"
        )
    missing = [k for k in backbone if k not in mapped]
    bad = [
        f"{k} {tuple(state[mapped[k]].shape)} vs model {tuple(own[k].shape)}"
        for k in backbone
        if k in mapped and tuple(state[mapped[k]].shape) != tuple(own[k].shape)
    ]
    if missing or bad:
        parts = [f"{len(missing)} missing ({_list_keys(missing, 3)})"] if missing else []
        parts += [f"{len(bad)} of another shape ({_list_keys(bad, 2)})"] if bad else []
        under = f" under {prefix!r}" if prefix else ""
        raise InputError(
            f"weights file {source} does not hold {what}'s backbone{under}: of its "
            f"{len(backbone)} backbone tensors {', '.join(parts)}; the head {name!r} alone may "
            "differ"
        )
    module.load_state_dict({k: state[mapped[k]] for k in backbone}, strict=False)
    head_module = module.get_submodule(name)
    cuda = sorted({t.device.index or 0 for t in head_module.state_dict().values() if t.is_cuda})
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(int(seed))
        for sub in head_module.modules():
            reset = getattr(sub, "reset_parameters", None)
            if callable(reset):
                reset()
    used = {mapped[k] for k in backbone}
    return BackboneLoad(
        source=source,
        prefix=prefix,
        loaded=tuple(backbone),
        head=tuple(head_keys),
        ignored=tuple(k for k in state if k not in used),
        seed=int(seed),
        sha256=None if isinstance(path_or_state, Mapping) else _sha256(Path(path_or_state)),
    )


def _sha256(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
