"""WordNet 3.0 nouns, shipped as a compact table (see ``scripts/build_wordnet.py``).

The table lives in ``semshift/taxonomy/data`` with WordNet's license; loading needs neither nltk nor
apt and takes well under a second.
"""

from __future__ import annotations

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
    nodes = pq.read_table(str(data / "wordnet30_nouns.parquet"))
    edges = pq.read_table(str(data / "wordnet30_noun_edges.parquet"))
    lemmas = nodes.column("lemmas").to_pylist()
    return Taxonomy(
        nodes.column("wnid").to_pylist(),
        edges.column("child").to_numpy(),
        edges.column("parent").to_numpy(),
        names=[s.split("|", 1)[0].replace("_", " ") for s in lemmas],
        aliases=nodes.column("name").to_pylist(),
        lemmas=lemmas,
        glosses=nodes.column("gloss").to_pylist(),
        lexnames=nodes.column("lexname").cast("string").to_pylist(),
        edge_kind=edges.column("kind").to_numpy(),
        edge_order=edges.column("order").to_numpy(),
        name=WORDNET_NAME,
    )
