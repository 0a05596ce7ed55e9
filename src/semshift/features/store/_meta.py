"""What a store's ``meta.json`` says, read without pandas (``semshift store verify`` needs no
more): the file itself, the model it names, the shard file names."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from semshift.errors import InputError


def _shard_name(k: int) -> str:
    return f"{k:05d}"


def model_identity(meta: Mapping[str, Any]) -> dict[str, Any]:
    """What identifies the classifier a store was extracted with, from its ``meta.json``:
    the model's name, its weights (their checksum, else their name), the head's checksum and
    the feature layer (None where the store does not record one)."""
    head = meta.get("head") or {}
    return {
        "model": meta.get("model"),
        "weights": meta.get("weights_sha256") or meta.get("weights"),
        "head": head.get("checksum") if isinstance(head, Mapping) else None,
        "layer": meta.get("layer"),
    }


def read_meta(path: str | Path) -> dict[str, Any]:
    """The ``meta.json`` of a finished store, or a one-line error saying what ``path`` is.

    Raises
    ------
    InputError
        An unfinished extraction (``run.json`` without ``meta.json``: run it again to finish
        it), not a store at all, or an unreadable ``meta.json``.
    """
    root = Path(path)
    meta_file = root / "meta.json"
    if not meta_file.is_file():
        if (root / "run.json").is_file():
            raise InputError(
                f"{root} is an unfinished extraction (no meta.json); run the extraction again "
                "to finish it"
            )
        if not root.exists():
            raise InputError(f"feature store {root} does not exist")
        if root.is_file():
            raise InputError(f"{root} is a file; a feature store is a folder (with meta.json)")
        raise InputError(f"{root} is not a feature store (no meta.json)")
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(
            f"{meta_file}: unreadable ({err}); `semshift store repair {root}` rebuilds it from "
            "the shards"
        ) from None
    if not isinstance(meta, dict):
        raise InputError(
            f"{meta_file}: not a store's meta.json (expected a JSON object); `semshift store "
            f"repair {root}` rebuilds it from the shards"
        )
    return meta
