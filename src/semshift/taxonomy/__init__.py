"""Taxonomies: WordNet 3.0 (shipped offline) and custom hierarchies.

>>> from semshift.taxonomy import wordnet
>>> wn = wordnet()
>>> wn.path_distance("dog.n.01", "cat.n.01")
4
"""

from semshift.taxonomy.classlists import ClassList, list_classlists, load_classlist
from semshift.taxonomy.core import Taxonomy
from semshift.taxonomy.custom import load_taxonomy, read_custom_taxonomy
from semshift.taxonomy.wordnet import WORDNET_NAME, wordnet

__all__ = [
    "WORDNET_NAME",
    "ClassList",
    "Taxonomy",
    "list_classlists",
    "load_classlist",
    "load_taxonomy",
    "read_custom_taxonomy",
    "wordnet",
]
