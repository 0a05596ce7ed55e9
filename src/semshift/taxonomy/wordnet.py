"""WordNet 3.0 nouns, shipped as a compact table (see ``scripts/build_wordnet.py``).

The table lives in ``semshift/taxonomy/data`` with WordNet's license; loading needs neither nltk nor
apt and takes well under a second.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from importlib.resources import files

from semshift.taxonomy.core import Taxonomy

__all__ = ["WORDNET_NAME", "wordnet"]

WORDNET_NAME = "wordnet-3.0"


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
