"""Split manifests: the ``split.json`` every split builder writes and every consumer reads.

Format (keys in this order)::

    {"method": "ssb", "params": {...}, "taxonomy": "wordnet-3.0", "semshift_version": "0.1.0",
     "known": [wnids], "bins": {"easy": [...], "medium": [...], "hard": [...]}, ...extra}

``bins`` keeps the builder's order (for open-set splits: as ranked, Easy first). Builders may add
fields after ``bins`` (counts, dropped classes); they round-trip untouched.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from semshift import __version__
from semshift.errors import InputError

__all__ = ["SplitManifest"]

_REQUIRED = ("method", "params", "taxonomy", "semshift_version", "known", "bins")


@dataclass
class SplitManifest:
    """A class split: known classes and named bins of other classes."""

    method: str
    params: dict[str, Any]
    taxonomy: str
    known: list[str]
    bins: dict[str, list[str]]
    semshift_version: str = __version__
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "method": self.method,
            "params": self.params,
            "taxonomy": self.taxonomy,
            "semshift_version": self.semshift_version,
            "known": list(self.known),
            "bins": {k: list(v) for k, v in self.bins.items()},
        }
        for k, v in self.extra.items():
            out[k] = v
        return out

    def write(self, path: str | Path) -> Path:
        """Write atomically (temporary file, then rename); returns the path."""
        path = Path(path)
        if path.is_dir() or path.suffix != ".json":
            path = path / "split.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")
        tmp.replace(path)
        return path

    @classmethod
    def from_dict(cls, data: Any, *, where: str = "manifest") -> SplitManifest:
        """Validate and build; errors name the offending key."""
        if not isinstance(data, dict):
            raise InputError(f"{where}: expected a JSON object at the top level")
        missing = [k for k in _REQUIRED if k not in data]
        if missing:
            raise InputError(f"{where}: missing key(s) {', '.join(missing)}")
        for key in ("method", "taxonomy", "semshift_version"):
            if not isinstance(data[key], str):
                raise InputError(f"{where}: '{key}' must be a string")
        if not isinstance(data["params"], dict):
            raise InputError(f"{where}: 'params' must be an object")
        known = data["known"]
        if not isinstance(known, list) or not all(isinstance(k, str) for k in known):
            raise InputError(f"{where}: 'known' must be a list of class ids")
        bins = data["bins"]
        if not isinstance(bins, dict):
            raise InputError(f"{where}: 'bins' must be an object of named class lists")
        for name, ids in bins.items():
            if not isinstance(ids, list) or not all(isinstance(k, str) for k in ids):
                raise InputError(f"{where}: 'bins.{name}' must be a list of class ids")
        extra = {k: v for k, v in data.items() if k not in _REQUIRED}
        return cls(
            method=data["method"],
            params=data["params"],
            taxonomy=data["taxonomy"],
            known=list(known),
            bins={k: list(v) for k, v in bins.items()},
            semshift_version=data["semshift_version"],
            extra=extra,
        )

    @classmethod
    def read(cls, path: str | Path) -> SplitManifest:
        """Read ``split.json`` (or a directory holding one)."""
        path = Path(path)
        if path.is_dir():
            path = path / "split.json"
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as err:
            raise InputError(f"cannot read split manifest {path}: {err.strerror or err}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise InputError(
                f"{path}, line {err.lineno}, column {err.colno}: invalid JSON ({err.msg})"
            ) from None
        return cls.from_dict(data, where=str(path))
