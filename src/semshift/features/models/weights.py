"""Weights from local files: safetensors or a PyTorch state dict read with
``weights_only=True`` (never unpickled), checked against the model's keys and shapes; seeded
Kaiming initialisation for random-model checks."""

from __future__ import annotations

import pickle
from collections.abc import Mapping, Sequence
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
