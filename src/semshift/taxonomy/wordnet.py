"""WordNet 3.0 nouns, shipped as a compact table (see ``scripts/build_wordnet.py``).

The table lives in ``semshift/taxonomy/data`` with WordNet's license; loading needs neither nltk nor
apt and takes well under a second.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from importlib.resources import files

import pyarrow.parquet as pq

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
    data = files("semshift.taxonomy") / "data"
    table = str(data / "wordnet30_nouns.parquet")
    nodes = pq.read_table(table, columns=["wnid", "name", "lemmas"])
    edges = pq.read_table(str(data / "wordnet30_noun_edges.parquet"))
    lemmas = nodes.column("lemmas").to_pylist()

    def column(name: str) -> Callable[[], list[str]]:
        def load() -> list[str]:
            col = pq.read_table(table, columns=[name]).column(name)
            return col.cast("string").to_pylist()

        return load

    return Taxonomy(
        nodes.column("wnid").to_pylist(),
        edges.column("child").to_numpy(),
        edges.column("parent").to_numpy(),
        names=[s.split("|", 1)[0].replace("_", " ") for s in lemmas],
        aliases=nodes.column("name").to_pylist(),
        lemmas=lemmas,
        glosses=column("gloss"),
        lexnames=column("lexname"),
        senses=column("senses"),
        edge_kind=edges.column("kind").to_numpy(),
        edge_order=edges.column("order").to_numpy(),
        name=WORDNET_NAME,
    )
