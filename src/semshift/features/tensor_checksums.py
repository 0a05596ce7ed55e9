"""Per-tensor checksums that semshift records in the metadata of the safetensors files it writes.

A training checkpoint (:mod:`semshift.training.checkpoint`) and the exported
``model.safetensors`` carry, under the metadata key :data:`CHECKSUMS_KEY`, the JSON
``{"algorithm": "xxh3_128", "tensors": {key: hex}, "metadata": {key: hex}, "record": hex}``:
the XXH3-128 of each tensor's dtype, shape and bytes, of each other metadata value, and of the
record itself. Reading such a file back
recomputes them, so one flipped bit anywhere in the tensors or the metadata is caught before the
values are used. A flipped bit in the file's header makes safetensors refuse the file (its
offsets and lengths are checked), which the readers report as damage too.

>>> import torch
>>> state = {"w": torch.ones(2, 3)}
>>> meta = checksum_metadata(state, {"note": "x"})
>>> check_tensors(state, {"note": "x", CHECKSUMS_KEY: meta}) is None
True
>>> state["w"][0, 0] = 2.0
>>> check_tensors(state, {"note": "x", CHECKSUMS_KEY: meta})
"tensor 'w' does not match its checksum"
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import torch
import xxhash
from torch import Tensor

__all__ = ["ALGORITHM", "CHECKSUMS_KEY", "check_tensors", "checksum_metadata", "tensor_checksum"]

#: The metadata key holding the checksums.
CHECKSUMS_KEY = "semshift.checksums"
ALGORITHM = "xxh3_128"


def tensor_checksum(tensor: Tensor) -> str:
    """XXH3-128 (hex) of a tensor's dtype, shape and bytes as stored (C order)."""
    t = tensor.detach().cpu().contiguous()
    h = xxhash.xxh3_128()
    h.update(f"{t.dtype}:{tuple(t.shape)}".encode())
    if t.numel():
        h.update(t.reshape(-1).view(torch.uint8).numpy().data)
    return h.hexdigest()


def _text_checksum(text: str) -> str:
    return xxhash.xxh3_128(text.encode("utf-8")).hexdigest()


def checksum_metadata(tensors: Mapping[str, Tensor], metadata: Mapping[str, str]) -> str:
    """The value to store under :data:`CHECKSUMS_KEY` for ``tensors`` and the other
    ``metadata`` of the file."""
    record = {
        "algorithm": ALGORITHM,
        "tensors": {k: tensor_checksum(v) for k, v in tensors.items()},
        "metadata": {k: _text_checksum(v) for k, v in metadata.items() if k != CHECKSUMS_KEY},
    }
    record["record"] = _text_checksum(json.dumps(record, sort_keys=True))
    return json.dumps(record, sort_keys=True)


def check_tensors(tensors: Mapping[str, Tensor], metadata: Mapping[str, str] | None) -> str | None:
    """What does not match the file's recorded checksums, or None when everything does.

    Parameters
    ----------
    tensors : dict of str to Tensor
        Every tensor read from the file.
    metadata : dict of str to str
        The file's metadata, :data:`CHECKSUMS_KEY` included.

    Returns
    -------
    str or None
        One phrase naming the first mismatch (``"tensor 'k' does not match its checksum"``).

    Raises
    ------
    KeyError
        ``metadata`` holds no :data:`CHECKSUMS_KEY` (a file written without checksums).
    """
    meta = dict(metadata or {})
    text = meta.pop(CHECKSUMS_KEY)
    try:
        record = json.loads(text)
        own = record.pop("record")
        algorithm, want_t, want_m = record["algorithm"], record["tensors"], record["metadata"]
    except (ValueError, TypeError, KeyError, AttributeError):
        return "its checksum record is unreadable"
    if own != _text_checksum(json.dumps(record, sort_keys=True)):
        return "its checksum record does not match its own checksum"
    if algorithm != ALGORITHM or not isinstance(want_t, dict) or not isinstance(want_m, dict):
        return f"its checksum record names an unknown algorithm {algorithm!r}"
    for key in sorted(set(want_m) | set(meta)):
        if key not in meta or key not in want_m or _text_checksum(meta[key]) != want_m[key]:
            return f"metadata {key!r} does not match its checksum"
    missing = sorted(set(want_t) - set(tensors))
    if missing:
        return f"tensor {missing[0]!r} is missing"
    extra = sorted(set(tensors) - set(want_t))
    if extra:
        return f"tensor {extra[0]!r} has no checksum"
    for key in sorted(tensors):
        if tensor_checksum(tensors[key]) != want_t[key]:
            return f"tensor {key!r} does not match its checksum"
    return None
