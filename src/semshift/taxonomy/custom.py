"""Custom hierarchies from CSV or JSON edge lists.

CSV (header required; ``name`` optional; several parents separated by ``;``; roots leave
``parent`` empty)::

    id,parent,name
    boeing,,Boeing
    b737,boeing,Boeing 737
    b737-300,b737,737-300

JSON: a list of objects, or ``{"name": ..., "nodes": [...]}``; ``parent`` may be a string, a list
or null::

    [{"id": "boeing", "parent": null}, {"id": "b737", "parent": "boeing", "name": "Boeing 737"}]

Every node needs its own entry. Errors name the file and line: a malformed line, an empty or
duplicate id, a parent that is never declared, or a cycle.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from semshift.errors import TaxonomyFormatError, UnknownNameError
from semshift.taxonomy.core import Taxonomy
from semshift.taxonomy.wordnet import WORDNET_NAME, wordnet
from semshift.textio import read_text

__all__ = ["load_taxonomy", "read_custom_taxonomy"]


def _build(path: Path, entries: list[tuple[int, str, list[str], str]], name: str) -> Taxonomy:
    """entries: (line, id, parents, display name)."""
    row: dict[str, int] = {}
    for line, node, _, _ in entries:
        if node in row:
            first = entries[row[node]][0]
            raise TaxonomyFormatError(
                f"{path}, line {line}: duplicate id {node!r} (first defined on line {first})"
            )
        row[node] = len(row)
    child: list[int] = []
    parent: list[int] = []
    for line, node, parents, _ in entries:
        for p in parents:
            if p not in row:
                raise TaxonomyFormatError(
                    f"{path}, line {line}: parent {p!r} of {node!r} is not defined in the file"
                )
            child.append(row[node])
            parent.append(row[p])
    try:
        return Taxonomy(
            [e[1] for e in entries],
            child,
            parent,
            names=[e[3] or e[1] for e in entries],
            name=name,
        )
    except TaxonomyFormatError as err:
        msg = str(err)
        # point at the line of the first node named in the message
        for line, node, _, _ in entries:
            if repr(node) in msg:
                raise TaxonomyFormatError(f"{path}, line {line}: {msg}") from None
        raise TaxonomyFormatError(f"{path}: {msg}") from None


def _read_csv(path: Path, text: str) -> list[tuple[int, str, list[str], str]]:
    reader = csv.reader(text.splitlines())
    try:
        header = [h.strip().lower() for h in next(reader)]
    except StopIteration:
        raise TaxonomyFormatError(f"{path}: empty file") from None
    if "id" not in header or "parent" not in header:
        raise TaxonomyFormatError(
            f"{path}, line 1: header must name columns 'id' and 'parent' (and optionally "
            f"'name'), got {','.join(header)!r}"
        )
    ci, cp = header.index("id"), header.index("parent")
    cn = header.index("name") if "name" in header else None
    entries = []
    for fields in reader:
        line = reader.line_num
        if not fields or all(not f.strip() for f in fields):
            continue
        if len(fields) != len(header):
            raise TaxonomyFormatError(
                f"{path}, line {line}: expected {len(header)} fields, got {len(fields)}"
            )
        node = fields[ci].strip()
        if not node:
            raise TaxonomyFormatError(f"{path}, line {line}: empty id")
        parents = [p.strip() for p in fields[cp].split(";") if p.strip()]
        entries.append((line, node, parents, fields[cn].strip() if cn is not None else ""))
    return entries


def _read_json(path: Path, text: str) -> list[tuple[int, str, list[str], str]]:
    try:
        top: Any = json.loads(text)
    except json.JSONDecodeError as err:
        raise TaxonomyFormatError(
            f"{path}, line {err.lineno}, column {err.colno}: invalid JSON ({err.msg})"
        ) from None
    if isinstance(top, dict) and isinstance(top.get("nodes"), list):
        start = text.index("[", text.index('"nodes"'))
        items = top["nodes"]
    elif isinstance(top, list):
        start = text.index("[")
        items = top
    else:
        raise TaxonomyFormatError(
            f"{path}, line 1: expected a list of nodes or an object with a 'nodes' list"
        )
    decoder = json.JSONDecoder()
    pos = start + 1
    entries = []
    for k, item in enumerate(items):
        while text[pos] in " \t\r\n,":
            pos += 1
        line = text.count("\n", 0, pos) + 1
        _, pos = decoder.raw_decode(text, pos)
        if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not item["id"]:
            raise TaxonomyFormatError(
                f"{path}, line {line}: node {k + 1} must be an object with a non-empty string 'id'"
            )
        raw = item.get("parent", item.get("parents"))
        if raw is None:
            parents = []
        elif isinstance(raw, str):
            parents = [raw] if raw else []
        elif isinstance(raw, list) and all(isinstance(p, str) for p in raw):
            parents = list(raw)
        else:
            raise TaxonomyFormatError(
                f"{path}, line {line}: 'parent' of {item['id']!r} must be a string, a list of "
                "strings or null"
            )
        name = item.get("name", "")
        entries.append((line, item["id"], parents, name if isinstance(name, str) else str(name)))
    return entries


def read_custom_taxonomy(path: str | Path, *, name: str | None = None) -> Taxonomy:
    """Read a hierarchy from a ``.csv`` or ``.json`` edge list (format in the module docstring)."""
    path = Path(path)
    text = read_text(path, "taxonomy", error=TaxonomyFormatError)
    if path.suffix.lower() == ".json":
        entries = _read_json(path, text)
    elif path.suffix.lower() in (".csv", ".tsv", ".txt"):
        entries = _read_csv(path, text)
    else:
        raise TaxonomyFormatError(f"{path}: unknown taxonomy format; use a .csv or .json file")
    if not entries:
        raise TaxonomyFormatError(f"{path}: no nodes")
    return _build(path, entries, name or path.stem)


def load_taxonomy(spec: str | Path = WORDNET_NAME) -> Taxonomy:
    """``"wordnet"`` (or ``"wordnet-3.0"``) for the shipped WordNet, else a custom file."""
    if str(spec) in ("wordnet", WORDNET_NAME):
        return wordnet()
    path = Path(spec)
    if not path.exists():
        raise UnknownNameError(f"taxonomy {str(spec)!r}: use 'wordnet' or a .csv/.json file path")
    return read_custom_taxonomy(path)
