"""Training checkpoints: one safetensors file of every tensor, its JSON beside it.

``checkpoint.safetensors`` holds the model (``model.<key>``), the method's own parameters
(``method.<key>``), the optimiser's state tensors (``optim.<param>.<name>``, and
``xoptim.<optimiser>.<param>.<name>`` for the method's own optimisers, e.g. ARPL+CS's), the
RNG states (``rng.cpu``, ``rng.cuda``) and, in the file's metadata under ``semshift``, the JSON
of everything else: the full training configuration, the seed, the last finished epoch, the
per-epoch metrics, the optimiser's hyperparameters and non-tensor state, the schedule's and
the gradient scaler's state, and the library versions. ``checkpoint.json`` is a readable copy of
that JSON; the safetensors file is the one resuming reads (one atomic replace writes it, so a
killed run leaves either the previous checkpoint or the new one, never half of one).

Integrity: the metadata also holds the XXH3-128 checksum of every tensor and of the JSON
(:mod:`semshift.features.tensor_checksums`), and :func:`read_checkpoint` recomputes them, so a
damaged checkpoint (one flipped bit in a weight, a truncated file) is refused with
:class:`CheckpointDamagedError` instead of being resumed. Each new checkpoint keeps the one it
replaces as ``checkpoint.prev.safetensors`` (a hard link, so no copy is written), which the
error offers to resume from. A checkpoint of an older semshift (no checksums) is read without
a check; :attr:`Checkpoint.verified` is then False and the loop warns once.

``model.safetensors`` (written at the end) is the model's plain state dict, with the same
per-tensor checksums in its metadata: it loads with :func:`semshift.features.models.load_model`
(``--weights`` of ``semshift extract``), which verifies them.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import Tensor

from semshift.errors import InputError
from semshift.features.tensor_checksums import CHECKSUMS_KEY, check_tensors, checksum_metadata

__all__ = [
    "CHECKPOINT",
    "MODEL_FILE",
    "PREVIOUS",
    "Checkpoint",
    "CheckpointDamagedError",
    "read_checkpoint",
    "save_model",
    "versions",
    "write_checkpoint",
    "write_json",
]

CHECKPOINT = "checkpoint.safetensors"
#: The checkpoint that the last one replaced (one epoch older), kept to resume from.
PREVIOUS = "checkpoint.prev.safetensors"
MODEL_FILE = "model.safetensors"
_META_KEY = "semshift"


def versions() -> dict[str, str]:
    """Versions of Python and of the libraries that determine the weights."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("semshift", "torch", "torchvision", "numpy", "safetensors", "timm"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            continue
    return out


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (a temporary file in the same folder, then one rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:  # a full disk or a kill signal: leave no partial file behind
        tmp.unlink(missing_ok=True)
        raise


def _save_tensors(
    path: Path, tensors: Mapping[str, Tensor], meta: dict[str, str], keep: Path | None = None
) -> None:
    """Write ``tensors`` with ``meta`` and their checksums into a temporary file, then rename it
    to ``path``; with ``keep``, the file it replaces is first linked (or copied) to ``keep``, so
    at every moment ``path`` is a complete file."""
    from safetensors.torch import save_file

    tmp = path.with_name(f".{path.name}.tmp")
    plain = {k: v.detach().cpu().contiguous().clone() for k, v in tensors.items()}
    try:
        save_file(plain, str(tmp), metadata={**meta, CHECKSUMS_KEY: checksum_metadata(plain, meta)})
        _sort_metadata(tmp)
    except BaseException:  # a full disk: leave no partial file behind (the old one is intact)
        tmp.unlink(missing_ok=True)
        raise
    if keep is not None and path.is_file():
        kept = keep.with_name(f".{keep.name}.tmp")
        kept.unlink(missing_ok=True)
        try:
            os.link(path, kept)
        except OSError:  # no hard links on this file system
            shutil.copyfile(path, kept)
        os.replace(kept, keep)
    os.replace(tmp, path)


def _sort_metadata(path: Path) -> None:
    """Rewrite a safetensors header with its metadata keys sorted, in place.

    safetensors writes the metadata in hash-map order, a new order each time; sorted, the same
    tensors and metadata give the same bytes (a re-exported ``model.safetensors`` is the same
    file). The JSON is the same but reordered, so it has the same length.
    """
    with open(path, "r+b") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(n))
        ordered = {"__metadata__": dict(sorted(header.pop("__metadata__", {}).items())), **header}
        text = json.dumps(ordered, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        if len(text) <= n:
            fh.seek(8)
            fh.write(text.ljust(n))


def save_model(path: Path, state: Mapping[str, Tensor]) -> None:
    """Write a model state dict as safetensors (with per-tensor checksums), atomically."""
    _save_tensors(path, state, {"format": "pt"})


def _split_optimizer(state: Mapping[str, Any]) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """An optimiser ``state_dict`` -> (tensors by flat key, the JSON-able rest)."""
    tensors: dict[str, Tensor] = {}
    rest: dict[str, Any] = {"param_groups": state["param_groups"], "state": {}}
    for pid, values in state["state"].items():
        plain: dict[str, Any] = {}
        for name, value in values.items():
            if isinstance(value, Tensor):
                tensors[f"optim.{pid}.{name}"] = value
            else:
                plain[name] = value
        rest["state"][str(pid)] = plain
    return tensors, rest


def _join_optimizer(tensors: Mapping[str, Tensor], rest: Mapping[str, Any]) -> dict[str, Any]:
    state: dict[int, dict[str, Any]] = {int(pid): dict(v) for pid, v in rest["state"].items()}
    for key, value in tensors.items():
        pid, name = key.rsplit(".", 2)[-2:]  # state names (exp_avg, step, ...) hold no dot
        state.setdefault(int(pid), {})[name] = value
    return {"state": state, "param_groups": rest["param_groups"]}


@dataclass
class Checkpoint:
    """A checkpoint as read back.

    Attributes
    ----------
    model, method : dict of str to Tensor
        State dicts of the model and of the method's own parameters.
    optimizer : dict
        The optimiser's ``state_dict``.
    rng : dict of str to Tensor
        ``cpu`` (and ``cuda``) generator states.
    meta : dict
        ``config``, ``epoch``, ``history``, ``scheduler``, ``scaler``, ``versions``, ...
    extra_optimizers : dict of str to dict
        ``state_dict`` of each optimiser the method steps itself, by name.
    verified : bool
        True when the file carried checksums and every one matched; False for a checkpoint of
        an older semshift, written without them (read as it is).
    """

    model: dict[str, Tensor]
    method: dict[str, Tensor]
    optimizer: dict[str, Any]
    rng: dict[str, Tensor]
    meta: dict[str, Any]
    extra_optimizers: dict[str, dict[str, Any]] = field(default_factory=dict)
    verified: bool = True


class CheckpointDamagedError(InputError):
    """A checkpoint whose bytes do not match its checksums (or that safetensors cannot parse).

    The message names the file, what is damaged and what to do: resume from the previous
    epoch's checkpoint when it is kept and intact, else delete the damaged one and start over.
    """

    def __init__(self, path: Path, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"checkpoint {path} is damaged ({problem}); {_what_to_do(self.path)}")


def _what_to_do(path: Path) -> str:
    prev = path.with_name(PREVIOUS)
    if path.name != PREVIOUS and prev.is_file():
        try:
            ok = read_checkpoint(prev).verified
        except InputError:
            ok = False
        if ok:
            return (
                f"resume from the previous epoch's checkpoint: mv {prev} {path}, then run the "
                "same command with --resume again"
            )
    return (
        f"no intact earlier checkpoint is kept: delete it (rm {path}) and run the same command "
        "again to train from the first epoch"
    )


def write_checkpoint(
    folder: Path,
    *,
    model: Mapping[str, Tensor],
    method: Mapping[str, Tensor],
    optimizer: Mapping[str, Any],
    rng: Mapping[str, Tensor],
    meta: Mapping[str, Any],
    extra_optimizers: Mapping[str, Mapping[str, Any]] | None = None,
) -> Path:
    """Write ``checkpoint.safetensors`` then its ``checkpoint.json`` copy; the former's path."""
    optim_tensors, optim_rest = _split_optimizer(optimizer)
    tensors = {f"model.{k}": v for k, v in model.items()}
    tensors |= {f"method.{k}": v for k, v in method.items()}
    tensors |= optim_tensors
    tensors |= {f"rng.{k}": v for k, v in rng.items()}
    full = {**meta, "optimizer": optim_rest}
    if extra_optimizers:
        full["extra_optimizers"] = {}
        for name, state in extra_optimizers.items():
            if "." in name:
                raise ValueError(f"optimiser name {name!r} must not contain '.'")
            xt, xrest = _split_optimizer(state)
            tensors |= {f"xoptim.{name}.{k[len('optim.') :]}": v for k, v in xt.items()}
            full["extra_optimizers"][name] = xrest
    path = folder / CHECKPOINT
    meta_text = json.dumps(full, sort_keys=True)
    _save_tensors(path, tensors, {_META_KEY: meta_text}, keep=folder / PREVIOUS)
    write_json(folder / "checkpoint.json", full)
    return path


def read_checkpoint(path: Path) -> Checkpoint:
    """Read a checkpoint written by :func:`write_checkpoint`, verifying its checksums.

    Raises
    ------
    CheckpointDamagedError
        A tensor or the JSON does not match its checksum, or safetensors cannot parse the file
        (a damaged header, a truncated file).
    InputError
        The file cannot be read, or is not a semshift training checkpoint.
    """
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    try:
        with safe_open(str(path), framework="pt") as fh:
            metadata: dict[str, str] = dict(fh.metadata() or {})
            tensors = {k: fh.get_tensor(k) for k in fh.keys()}
    except SafetensorError as err:
        raise CheckpointDamagedError(path, f"unreadable: {err}") from None
    except OSError as err:
        raise InputError(f"checkpoint {path}: cannot be read ({err})") from None
    verified = CHECKSUMS_KEY in metadata
    unknown = sorted(set(metadata) - {_META_KEY, CHECKSUMS_KEY})
    if verified:
        problem = check_tensors(tensors, metadata)
        if problem is not None:
            raise CheckpointDamagedError(path, problem)
    elif unknown and _META_KEY in metadata:  # a damaged key name, not an older checkpoint
        raise CheckpointDamagedError(path, f"unexpected metadata {unknown[0]!r}")
    meta_text = metadata.get(_META_KEY)
    if meta_text is None:
        raise InputError(f"checkpoint {path}: not a semshift training checkpoint (no metadata)")
    try:
        meta = json.loads(meta_text)
    except ValueError as err:
        raise CheckpointDamagedError(path, f"its JSON is unreadable: {err}") from None
    parts: dict[str, dict[str, Tensor]] = {"model": {}, "method": {}, "optim": {}, "rng": {}}
    extra_rest: dict[str, Any] = meta.pop("extra_optimizers", {})
    extra_tensors: dict[str, dict[str, Tensor]] = {name: {} for name in extra_rest}
    for key, value in tensors.items():
        kind, _, rest = key.partition(".")
        if kind == "xoptim" and rest.split(".", 1)[0] in extra_tensors:
            extra_tensors[rest.split(".", 1)[0]][key] = value
            continue
        if kind not in parts:
            raise InputError(f"checkpoint {path}: unexpected tensor {key!r}")
        parts[kind][key if kind == "optim" else rest] = value
    optimizer = _join_optimizer(parts["optim"], meta.pop("optimizer"))
    extra = {n: _join_optimizer(extra_tensors[n], r) for n, r in extra_rest.items()}
    return Checkpoint(
        parts["model"], parts["method"], optimizer, parts["rng"], meta, extra, verified
    )
