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
from typing import TYPE_CHECKING, Any

from semshift.errors import InputError
from semshift.textio import read_text

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SplitManifest", "compare_manifests", "overlap_rows"]


def _semshift_version() -> str:
    """This semshift's version, for a new manifest (read when one is made: importing
    :mod:`importlib.metadata` costs 40 ms that reading a manifest does not need)."""
    from semshift import __version__

    return __version__


_REQUIRED = ("method", "params", "taxonomy", "semshift_version", "known", "bins")


@dataclass
class SplitManifest:
    """A class split: known classes and named bins of other classes."""

    method: str
    params: dict[str, Any]
    taxonomy: str
    known: list[str]
    bins: dict[str, list[str]]
    semshift_version: str = field(default_factory=_semshift_version)
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
        text = read_text(path, "split manifest")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise InputError(
                f"{path}, line {err.lineno}, column {err.colno}: invalid JSON ({err.msg})"
            ) from None
        return cls.from_dict(data, where=str(path))


def compare_manifests(a: SplitManifest, b: SplitManifest) -> pd.DataFrame:
    """Class overlap of two splits, set by set: ``known``, then every bin (``a``'s order, then
    the bins only ``b`` has).

    Returns one row per set with columns ``bin, n_a, n_b, n_common, jaccard``: distinct class
    ids in each, ids in both, and ``n_common / |union|`` (NaN when both are empty). A bin that
    only one manifest has counts as empty in the other. Ids are compared as strings, so the two
    splits must use the same class ids (wnids, or the same class indices).

    >>> a = SplitManifest("x", {}, "none", ["1", "2"], {"easy": ["3", "4"], "hard": ["5"]})
    >>> b = SplitManifest("y", {}, "none", ["1", "2"], {"easy": ["4", "6"]})
    >>> compare_manifests(a, b).to_dict("list")  # doctest: +NORMALIZE_WHITESPACE
    {'bin': ['known', 'easy', 'hard'], 'n_a': [2, 2, 1], 'n_b': [2, 2, 0],
     'n_common': [2, 1, 0], 'jaccard': [1.0, 0.3333333333333333, 0.0]}
    """
    import pandas as pd

    return pd.DataFrame(overlap_rows(a, b), columns=["bin", "n_a", "n_b", "n_common", "jaccard"])


def overlap_rows(a: SplitManifest, b: SplitManifest) -> list[tuple[str, int, int, int, float]]:
    """The rows of :func:`compare_manifests` as tuples ``(bin, n_a, n_b, n_common, jaccard)``,
    without pandas (``semshift splits compare`` prints them; importing pandas costs 0.4 s).

    >>> a = SplitManifest("x", {}, "none", ["1", "2"], {"easy": ["3", "4"]})
    >>> overlap_rows(a, a)
    [('known', 2, 2, 2, 1.0), ('easy', 2, 2, 2, 1.0)]
    """
    if "known" in a.bins or "known" in b.bins:
        raise InputError("compare: a bin is named 'known', which clashes with the known classes")
    names = ["known", *a.bins, *(k for k in b.bins if k not in a.bins)]
    rows = []
    for name in names:
        sa = set(a.known if name == "known" else a.bins.get(name, []))
        sb = set(b.known if name == "known" else b.bins.get(name, []))
        common, union = len(sa & sb), len(sa | sb)
        rows.append((name, len(sa), len(sb), common, common / union if union else float("nan")))
    return rows
