"""Shipped class lists (ImageNet-1K, ImageNet-21K-P fall11 and winter21) and wnid files.

>>> from semshift.taxonomy import load_classlist
>>> in1k = load_classlist("imagenet1k")
>>> len(in1k), in1k.ids[0], in1k.names[0]
(1000, 'n01440764', 'tench')
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from semshift.errors import InputError, UnknownNameError
from semshift.textio import read_text

__all__ = ["SHIPPED", "ClassList", "list_classlists", "load_classlist"]

#: name -> (file in semshift/data/classlists, description)
SHIPPED: dict[str, tuple[str, str]] = {
    "imagenet1k": ("imagenet1k_classes.tsv", "ImageNet-1K, 1,000 classes in index order"),
    "imagenet21k-p": (
        "imagenet21k_p_fall11_wnids.txt",
        "ImageNet-21K-P (fall11 release), 11,221 classes",
    ),
    "imagenet21k-p-winter21": (
        "imagenet21k_p_winter21_wnids.txt",
        "ImageNet-21K-P (winter21 release), 10,450 classes",
    ),
}


@dataclass(frozen=True)
class ClassList:
    """An ordered list of class ids, with display names when the source has them.

    ``lines`` gives the 1-based line of each id in its source file, for error messages.
    """

    name: str
    ids: tuple[str, ...]
    names: tuple[str, ...] | None
    source: str
    lines: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.ids)

    def where(self, k: int) -> str:
        """'file, line N' for the k-th id."""
        return f"{self.source}, line {self.lines[k]}"


def list_classlists() -> list[str]:
    """Names of the shipped class lists."""
    return sorted(SHIPPED)


def _read_shipped(name: str) -> ClassList:
    fname, _ = SHIPPED[name]
    text = (files("semshift.data") / "classlists" / fname).read_text(encoding="utf-8")
    rows = text.splitlines()
    if fname.endswith(".tsv"):  # index, wnid, lemmas (with a header)
        parts = [r.split("\t") for r in rows[1:] if r.strip()]
        ids = tuple(p[1] for p in parts)
        names = tuple(p[2].split(",")[0].strip() for p in parts)
        return ClassList(name, ids, names, f"shipped list {name!r}", tuple(range(2, len(ids) + 2)))
    ids = tuple(r.strip() for r in rows if r.strip())
    return ClassList(name, ids, None, f"shipped list {name!r}", tuple(range(1, len(ids) + 1)))


def read_wnid_file(path: Path) -> ClassList:
    """Read a file of class ids: one per line, first whitespace-separated field; ``#`` comments."""
    text = read_text(path, "class list")
    ids: list[str] = []
    lines: list[int] = []
    names: list[str] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split(None, 1)
        ids.append(fields[0])
        names.append(fields[1].strip() if len(fields) > 1 else "")
        lines.append(lineno)
    if not ids:
        raise InputError(f"class list {path} has no class ids")
    dup = {i for i in ids if ids.count(i) > 1} if len(set(ids)) != len(ids) else set()
    if dup:
        first = next(i for i in ids if i in dup)
        k = [i for i, x in enumerate(ids) if x == first][1]
        raise InputError(f"class list {path}, line {lines[k]}: duplicate class id {first!r}")
    return ClassList(
        path.name, tuple(ids), tuple(names) if any(names) else None, str(path), tuple(lines)
    )


def load_classlist(spec: str | Path) -> ClassList:
    """A shipped list by name (see :func:`list_classlists`) or a file of ids.

    Raises
    ------
    UnknownNameError
        ``spec`` is neither a shipped name nor an existing file.
    """
    if isinstance(spec, str) and spec in SHIPPED:
        return _read_shipped(spec)
    path = Path(spec)
    if path.is_file():
        return read_wnid_file(path)
    raise UnknownNameError(
        f"{str(spec)!r} is neither a shipped class list ({', '.join(list_classlists())}) "
        "nor an existing file"
    )
