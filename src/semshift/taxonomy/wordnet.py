"""WordNet 3.0 nouns, shipped as a compact table (see ``scripts/build_wordnet.py``).

The table lives in ``semshift/taxonomy/data`` with WordNet's license; loading needs neither nltk
nor apt. Two forms are shipped: the Parquet tables (the source, written by
``scripts/build_wordnet.py``) and ``wordnet30.bin``, the same taxonomy with its graph arrays
worked out (:func:`pack_wordnet`; written by ``python -m semshift.taxonomy.wordnet``), which
:func:`wordnet` loads in a few milliseconds, so that ``semshift taxonomy show`` starts in a
fraction of a second. A test keeps the two equal.

``wordnet30.bin``: the line ``semshift-arrays 1``, an 8-byte little-endian length, that many
bytes of JSON (``{name: [dtype, offset, count]}``), then the arrays, each at an offset that is
a multiple of 8 from the start of the file. Strings are ``\\n``-joined UTF-8 (``uint8``).
"""

from __future__ import annotations

import json
import mmap
from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache, partial
from importlib.resources import files
from typing import TYPE_CHECKING, Any

from semshift.taxonomy._lines import Lines
from semshift.taxonomy.core import Taxonomy

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["WORDNET_NAME", "wordnet"]

WORDNET_NAME = "wordnet-3.0"

#: the packed form in ``semshift/taxonomy/data`` (:func:`pack_wordnet`)
PACKED = "wordnet30.bin"
_MAGIC = b"semshift-arrays 1\n"


@lru_cache(maxsize=1)
def wordnet() -> Taxonomy:
    """The WordNet 3.0 noun taxonomy: 82,115 synsets, 84,427 hypernym + instance-hypernym edges.

    Node ids are ImageNet-style wnids (``"n02084071"``), aliases are nltk synset names
    (``"dog.n.01"``), names are the first lemma with spaces. Cached: every call returns the same
    object.

    Examples
    --------
    >>> wn = wordnet()
    >>> len(wn), wn.n_edges, wn.max_depth
    (82115, 84427, 19)
    >>> wn.label("n02084071"), wn.alias("n02084071")
    ('dog', 'dog.n.01')
    """
    resource = files("semshift.taxonomy") / "data" / PACKED
    try:  # mapped: only the pages a query reads are read (the glosses are a third)
        with open(str(resource), "rb") as fh:
            raw: Any = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError:  # pragma: no cover - a package not on a file system
        raw = resource.read_bytes()
    return _unpack(read_arrays(raw))


def read_arrays(raw: Any) -> dict[str, Any]:
    """The arrays of a ``wordnet30.bin`` file's bytes (``bytes`` or a ``mmap``): read-only
    views of them, no copy."""
    import numpy as np

    if raw[: len(_MAGIC)] != _MAGIC:
        raise ValueError(f"not a {PACKED} file")
    start = len(_MAGIC) + 8
    size = int.from_bytes(raw[len(_MAGIC) : start], "little")
    index = json.loads(raw[start : start + size])
    return {
        name: np.frombuffer(raw, dtype=np.dtype(dtype), count=count, offset=offset)
        for name, (dtype, offset, count) in index.items()
    }


def write_arrays(path: str, arrays: dict[str, Any]) -> None:
    """Write ``arrays`` (1-D NumPy arrays) as :func:`read_arrays` reads them."""
    index: dict[str, list[Any]] = {}
    offset = 0
    for name, a in arrays.items():
        index[name] = [a.dtype.str, offset, len(a)]
        offset += -(-a.nbytes // 8) * 8
    # the offsets count from the end of the header; the header is padded to a multiple of 8
    head = json.dumps(index).encode()
    base = -(-(len(_MAGIC) + 8 + len(head)) // 8) * 8
    head += b" " * (base - len(_MAGIC) - 8 - len(head))
    for entry in index.values():
        entry[1] += base
    head = json.dumps(index).encode()
    head += b" " * (base - len(_MAGIC) - 8 - len(head))
    if len(_MAGIC) + 8 + len(head) != base:
        raise AssertionError("the header grew with its offsets")
    with open(path, "wb") as fh:
        fh.write(_MAGIC + len(head).to_bytes(8, "little") + head)
        for a in arrays.values():
            data = a.tobytes()
            fh.write(data + b"\0" * (-len(data) % 8))


def _unpack(arrays: dict[str, Any]) -> Taxonomy:
    """The taxonomy of :func:`pack_wordnet`'s arrays (picklable once its columns are read,
    as one built from the Parquet tables is)."""
    import numpy as np

    return Taxonomy._from_graph(
        _text(arrays, "ids"),
        _int64(arrays, "edge_child"),
        _int64(arrays, "edge_parent"),
        names=_text(arrays, "names"),
        aliases=_text(arrays, "aliases"),
        lemmas=_text(arrays, "lemmas"),
        glosses=partial(_text, arrays, "glosses"),
        lexnames=partial(_lexnames, arrays),
        senses=partial(_text, arrays, "senses"),
        edge_kind=np.array(arrays["edge_kind"], dtype=np.int8),
        graph=_Graph(arrays),
        name=WORDNET_NAME,
    )


def _text(arrays: Mapping[str, Any], key: str) -> Lines:
    return Lines(arrays[key], arrays.get(f"{key}_starts"))


def _int64(arrays: Mapping[str, Any], key: str) -> NDArray[np.int64]:
    import numpy as np

    return np.array(arrays[key], dtype=np.int64)  # a copy: the file's are read-only


def _lexnames(arrays: Mapping[str, Any]) -> list[str]:
    import numpy as np

    table = np.asarray(_text(arrays, "lexname_table").tolist(), dtype=object)
    names: list[str] = table[arrays["lexname_codes"]].tolist()
    return names


class _Graph(Mapping[str, Any]):
    """The graph arrays of the packed file, read as int64 when first asked for (the ancestor
    table, 825,356 entries, only by distances)."""

    def __init__(self, arrays: Mapping[str, Any]) -> None:
        self._arrays = arrays

    def __getitem__(self, key: str) -> NDArray[np.int64]:
        return _int64(self._arrays, f"graph_{key}")

    def __iter__(self) -> Iterator[str]:
        return (k[6:] for k in self._arrays if k.startswith("graph_"))

    def __len__(self) -> int:
        return sum(1 for _ in self)


def pack_wordnet(tax: Taxonomy) -> dict[str, Any]:
    """The arrays of ``wordnet30.bin``: a taxonomy's strings as ``\\n``-joined UTF-8, its
    lexicographer files as codes, and its graph arrays (:meth:`Taxonomy._graph_arrays`) in
    the smallest integer type that holds them."""
    import numpy as np

    def text(values: Any) -> NDArray[np.uint8]:
        values = [str(v) for v in values]
        if any("\n" in v for v in values):
            raise ValueError("a WordNet string holds a line break")
        return np.frombuffer("\n".join(values).encode("utf-8"), dtype=np.uint8)

    def starts(blob: NDArray[np.uint8]) -> NDArray[Any]:
        return np.ascontiguousarray(Lines.starts(blob.tobytes()), dtype="<i4")

    def small(a: NDArray[Any]) -> NDArray[Any]:
        for dtype in (np.int8, np.int16, np.int32):
            info = np.iinfo(dtype)
            if len(a) == 0 or (a.min() >= info.min and a.max() <= info.max):
                return np.ascontiguousarray(a, dtype=np.dtype(dtype).newbyteorder("<"))
        return np.ascontiguousarray(a, dtype="<i8")

    lexnames = list(tax._column("lexnames") or [])
    table = sorted(set(lexnames))
    code = {name: k for k, name in enumerate(table)}
    child, parent, kind = tax.edges
    out: dict[str, Any] = {
        "ids": text(tax.ids),
        "names": text(tax.names),
        "aliases": text(tax._aliases or []),
        "lemmas": text(tax._lemmas or []),
        "senses": text(tax._column("senses") or []),
        "glosses": text(tax._column("glosses") or []),
        "lexname_table": text(table),
        "lexname_codes": small(np.asarray([code[n] for n in lexnames], dtype=np.int64)),
        "edge_child": small(child),
        "edge_parent": small(parent),
        "edge_kind": np.asarray(kind, dtype=np.int8),
    }
    for key in ("ids", "names", "aliases", "lemmas", "glosses"):  # the columns read by item
        out[f"{key}_starts"] = starts(out[key])
    for key, value in tax._graph_arrays().items():
        out[f"graph_{key}"] = small(value)
    return out


def wordnet_from_parquet() -> Taxonomy:
    """The taxonomy built from the Parquet tables (the source of ``wordnet30.bin``), every
    graph array worked out anew (0.5 to 1 s, and pyarrow)."""
    # ParquetFile.read and to_pylist: pq.read_table and to_numpy import pandas (0.5 s)
    import numpy as np
    import pyarrow.parquet as pq

    data = files("semshift.taxonomy") / "data"
    table = str(data / "wordnet30_nouns.parquet")
    nodes = pq.ParquetFile(table).read(columns=["wnid", "name", "lemmas"])
    edges = pq.ParquetFile(str(data / "wordnet30_noun_edges.parquet")).read()
    lemmas = nodes.column("lemmas").to_pylist()
    ints = {c: np.asarray(edges.column(c).to_pylist(), dtype=np.int64) for c in edges.column_names}

    def column(name: str) -> Callable[[], list[str]]:
        def load() -> list[str]:
            # to_pylist gives str of a dictionary column too (a cast imports pyarrow.compute)
            col = pq.ParquetFile(table).read(columns=[name]).column(name)
            values: list[str] = col.to_pylist()
            return values

        return load

    return Taxonomy(
        nodes.column("wnid").to_pylist(),
        ints["child"],
        ints["parent"],
        names=[s.split("|", 1)[0].replace("_", " ") for s in lemmas],
        aliases=nodes.column("name").to_pylist(),
        lemmas=lemmas,
        glosses=column("gloss"),
        lexnames=column("lexname"),
        senses=column("senses"),
        edge_kind=ints["kind"],
        edge_order=ints["order"],
        name=WORDNET_NAME,
    )


def main() -> None:  # pragma: no cover - python -m semshift.taxonomy.wordnet [PATH]
    """Write ``wordnet30.bin`` from the Parquet tables (into the package, or to PATH)."""
    import sys

    path = sys.argv[1] if len(sys.argv) > 1 else str(files("semshift.taxonomy") / "data" / PACKED)
    write_arrays(path, pack_wordnet(wordnet_from_parquet()))


if __name__ == "__main__":  # pragma: no cover
    main()
