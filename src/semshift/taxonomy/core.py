"""The :class:`Taxonomy`: one class for WordNet and custom hierarchies.

A taxonomy is a DAG of nodes with string ids (WordNet: ``n02084071``) and parent edges
(WordNet: hypernym and instance-hypernym pointers). Every query is vectorised over node sets; the
per-pair functions (``path_distance``, ``lch``, ``wup``) accept scalars or equal-length arrays and
the ``*_matrix`` functions compute all pairs between two sets without a Python loop over pairs.

Conventions follow nltk's WordNet interface so numbers can be compared with published work:

* ``path_distance(a, b)``: nltk's ``shortest_path_distance``, the fewest edges on a path that goes
  up from ``a`` to a common ancestor and down to ``b`` (dog.n.01 - cat.n.01 = 4).
* ``lch(a, b)``: Leacock-Chodorow, ``-ln((path + 1) / (2 * D))`` with ``D`` the taxonomy's maximum
  depth (19 for WordNet 3.0 nouns, as nltk computes it).
* ``wup(a, b)``: Wu-Palmer as nltk computes it: the subsumer is the common ancestor of greatest
  minimum depth (ties: ``a`` itself, then the smallest name), ``depth = max_depth(subsumer) + 1``,
  ``wup = 2 depth / (spd(a, subsumer) + spd(b, subsumer) + 2 depth)``.
* A taxonomy with several roots behaves like nltk's ``simulate_root``: pairs without a common
  ancestor meet at a virtual root one step above each node's farthest ancestor.

References
----------
Leacock, C. and Chodorow, M. (1998). Combining local context and WordNet similarity for word sense
identification. Wu, Z. and Palmer, M. (1994). Verb semantics and lexical selection. Bird, S. et al.
NLTK, ``nltk.corpus.reader.wordnet``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from semshift.errors import TaxonomyFormatError, UnknownNameError, close_matches
from semshift.taxonomy import graph as g
from semshift.taxonomy._lines import LineKeys, Lines

if TYPE_CHECKING:
    import pandas as pd

Key = str | int | np.integer
Measure = Literal["path", "lch", "wup"]

__all__ = ["Taxonomy"]


def _norm(text: str) -> str:
    return text.strip().lower().replace(" ", "_")


class Taxonomy:
    """A DAG of named nodes with vectorised ancestry, distance and similarity queries.

    Parameters
    ----------
    ids : sequence of str, length N
        Unique node ids (WordNet: wnids such as ``"n02084071"``).
    edge_child, edge_parent : array-like of int, length E
        Parent edges as row numbers into ``ids``: ``edge_parent[e]`` is a parent of
        ``edge_child[e]``.
    names : sequence of str, optional
        A display name per node (default: the id).
    aliases : sequence of str, optional
        A second unique key per node (WordNet: synset names such as ``"dog.n.01"``).
    lemmas : sequence of str, optional
        ``"|"``-joined synonyms per node, used for look-up by name.
    senses : sequence of str, optional
        ``"|"``-joined sense number of each lemma (WordNet: 1 = most frequent sense); orders
        :meth:`find`.
    glosses, lexnames : sequence of str, optional
        Definitions and lexicographer file names (WordNet).
    edge_kind : array-like of int, optional
        0 = hypernym, 1 = instance hypernym (WordNet); informational.
    edge_order : array-like of int, optional
        Position of the child among its parent's children; sets the child order used by
        breadth-first traversals (default: edge order).
    name : str
        A short name of the taxonomy recorded in split manifests (``"wordnet-3.0"``).

    Raises
    ------
    TaxonomyFormatError
        Duplicate ids, edges pointing outside the node set, self-loops or cycles.
    """

    def __init__(
        self,
        ids: Sequence[str],
        edge_child: ArrayLike,
        edge_parent: ArrayLike,
        *,
        names: Sequence[str] | None = None,
        aliases: Sequence[str] | None = None,
        lemmas: Sequence[str] | None = None,
        glosses: Sequence[str] | Callable[[], Sequence[str]] | None = None,
        lexnames: Sequence[str] | Callable[[], Sequence[str]] | None = None,
        senses: Sequence[str] | Callable[[], Sequence[str]] | None = None,
        edge_kind: ArrayLike | None = None,
        edge_order: ArrayLike | None = None,
        name: str = "custom",
    ) -> None:
        self.name = name
        self._ids = np.asarray(list(ids), dtype=object)
        n = len(self._ids)
        # id -> row for one key; many keys go through :attr:`_index` (pandas, imported then)
        self._row: dict[Any, int] | LineKeys = dict(zip(self._ids.tolist(), range(n), strict=True))
        if len(self._row) != n:
            _, first = np.unique(self._ids, return_index=True)
            again = np.ones(n, dtype=bool)
            again[first] = False
            dup = self._ids[np.flatnonzero(again)[0]]
            raise TaxonomyFormatError(f"duplicate node id {dup!r} in taxonomy {name!r}")
        child = np.asarray(edge_child, dtype=np.int64)
        parent = np.asarray(edge_parent, dtype=np.int64)
        if child.shape != parent.shape:
            raise TaxonomyFormatError("edge_child and edge_parent differ in length")
        if len(child) and (
            min(child.min(), parent.min()) < 0 or max(child.max(), parent.max()) >= n
        ):
            raise TaxonomyFormatError(f"an edge of taxonomy {name!r} points outside its {n} nodes")
        loops = np.flatnonzero(child == parent)
        if len(loops):
            raise TaxonomyFormatError(f"node {self._ids[child[loops[0]]]!r} is its own parent")
        self._names: Sequence[str] = (
            list(names) if names is not None else [str(i) for i in self._ids]
        )
        self._aliases: Sequence[str] | None = list(aliases) if aliases is not None else None
        self._lemmas: Sequence[str] | None = list(lemmas) if lemmas is not None else None
        # glosses, lexnames and senses may be given as zero-argument loaders (read on first use)
        self._lazy: dict[str, Any] = {"glosses": glosses, "lexnames": lexnames, "senses": senses}
        self._edge_kind = (
            np.asarray(edge_kind, dtype=np.int8)
            if edge_kind is not None
            else np.zeros(len(child), np.int8)
        )
        order = (
            np.asarray(edge_order, dtype=np.int64)
            if edge_order is not None
            else np.arange(len(child))
        )
        self._edge_child, self._edge_parent = child, parent
        self._parent_ptr, self._parent_idx, _ = g.csr_from_pairs(child, parent, n)
        self._child_ptr, self._child_idx, _ = g.csr_from_pairs(parent, child, n, order=order)
        self._max_depth_arr, self._topo = g.topological_levels(
            n, self._parent_ptr, self._parent_idx, self._child_ptr, self._child_idx
        )
        if (self._max_depth_arr < 0).any():
            raise TaxonomyFormatError(self._describe_cycle())

    #: the arrays :meth:`_graph_arrays` gives and :meth:`_from_graph` takes: the attribute (or
    #: cached property) each one is
    _GRAPH: ClassVar[dict[str, str]] = {
        "parent_ptr": "_parent_ptr",
        "parent_idx": "_parent_idx",
        "child_ptr": "_child_ptr",
        "child_idx": "_child_idx",
        "max_depth": "_max_depth_arr",
        "topo": "_topo",
        "min_depth": "_min_depth_arr",
        "name_rank": "_name_rank",
        "ecc": "_ecc",
    }

    #: the arrays :meth:`_from_graph` was given (the ancestor table is read from them)
    _given_graph: Mapping[str, NDArray[np.int64]] | None = None

    def _graph_arrays(self) -> dict[str, NDArray[np.int64]]:
        """Everything the constructor and the first queries work out from the edges (the
        CSR adjacency, depths, topological order, the ancestor table and the name order),
        for :meth:`_from_graph` (the shipped WordNet keeps them: ``wordnet30.bin``)."""
        out = {key: getattr(self, attr) for key, attr in self._GRAPH.items()}
        anc = self._anc
        return {**out, "anc_ptr": anc.ptr, "anc_anc": anc.anc, "anc_dist": anc.dist}

    @classmethod
    def _from_graph(
        cls,
        ids: Lines,
        edge_child: NDArray[np.int64],
        edge_parent: NDArray[np.int64],
        *,
        graph: Mapping[str, NDArray[np.int64]],
        names: Lines,
        aliases: Lines | None = None,
        lemmas: Lines | None = None,
        glosses: Sequence[str] | Callable[[], Sequence[str]] | None = None,
        lexnames: Sequence[str] | Callable[[], Sequence[str]] | None = None,
        senses: Sequence[str] | Callable[[], Sequence[str]] | None = None,
        edge_kind: NDArray[np.int8] | None = None,
        name: str = "custom",
    ) -> Taxonomy:
        """A taxonomy from the arrays :meth:`_graph_arrays` gave (int64), without checking
        or working them out again: only for arrays that came from a taxonomy built by the
        constructor (a test keeps the shipped WordNet's equal to its source's). The strings
        stay :class:`~semshift.taxonomy._lines.Lines`, decoded when asked for; ids and
        aliases must be unique (they are found by a search of the text)."""
        self = cls.__new__(cls)
        self.name = name
        self._ids = np.asarray(ids.tolist(), dtype=object)
        self._row = LineKeys(ids)
        self._names, self._aliases, self._lemmas = names, aliases, lemmas
        if aliases is not None:
            self.__dict__["_alias_index"] = LineKeys(aliases)
        self._lazy = {"glosses": glosses, "lexnames": lexnames, "senses": senses}
        self._edge_child, self._edge_parent = edge_child, edge_parent
        self._edge_kind = edge_kind if edge_kind is not None else np.zeros(len(edge_child), np.int8)
        for key, attr in cls._GRAPH.items():
            self.__dict__[attr] = graph[key]
        self._given_graph = graph  # the ancestor table, read on first use (:attr:`_anc`)
        return self

    # ------------------------------------------------------------------ construction helpers
    def _describe_cycle(self) -> str:
        stuck = set(np.flatnonzero(self._max_depth_arr < 0).tolist())
        # walk parents inside the stuck set until a node repeats (error path only)
        node = min(stuck)
        seen: list[int] = []
        while node not in seen:
            seen.append(node)
            ps = [p for p in self._parent_list(node) if p in stuck]
            node = ps[0]
        cycle = [*seen[seen.index(node) :], node]
        path = " -> ".join(repr(str(self._ids[i])) for i in cycle)
        return f"taxonomy {self.name!r} has a cycle: {path} (child -> parent)"

    @cached_property
    def _index(self) -> pd.Index:
        """The ids as a pandas index, for vectorised look-ups of many keys."""
        import pandas as pd

        return pd.Index(self._ids)

    def _id_row(self, key: object) -> int:
        """The row of the node whose id is ``key``, or -1."""
        try:
            return self._row.get(key, -1)
        except TypeError:  # unhashable: no id
            return -1

    def _parent_list(self, i: int) -> list[int]:
        return self._parent_idx[self._parent_ptr[i] : self._parent_ptr[i + 1]].tolist()

    # ------------------------------------------------------------------ basic properties
    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, key: object) -> bool:
        # a plain look-up: a miss must not build index()'s error message (its close-match
        # search scans every id, alias and lemma)
        if isinstance(key, (int, np.integer)):
            return 0 <= int(key) < len(self)
        if self._id_row(key) >= 0:
            return True
        key = str(key)
        return key in self._alias_index or len(self._lemma_index.get(_norm(key), [])) == 1

    def __repr__(self) -> str:
        return f"Taxonomy({self.name!r}, {len(self)} nodes, {len(self._edge_child)} edges)"

    @property
    def ids(self) -> NDArray[np.object_]:
        """Node ids in row order, shape (N,)."""
        return self._ids

    @property
    def n_edges(self) -> int:
        return len(self._edge_child)

    @property
    def edges(self) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int8]]:
        """``(child, parent, kind)`` row numbers of every edge."""
        return self._edge_child, self._edge_parent, self._edge_kind

    @property
    def roots(self) -> list[str]:
        """Ids of nodes without parents."""
        return self._ids[np.flatnonzero(np.diff(self._parent_ptr) == 0)].tolist()

    @cached_property
    def max_depth(self) -> int:
        """Edges on the longest root-to-node path (WordNet nouns: 19), +1 with several roots.

        The ``+1`` mirrors nltk's simulated root; it is the ``D`` of Leacock-Chodorow.
        """
        return int(self._max_depth_arr.max()) + (1 if len(self.roots) > 1 else 0)

    @cached_property
    def _min_depth_arr(self) -> NDArray[np.int64]:
        roots = np.flatnonzero(np.diff(self._parent_ptr) == 0)
        dist, _ = g.bfs_levels(self._child_ptr, self._child_idx, roots, len(self))
        return dist

    @cached_property
    def _anc(self) -> g.AncestorTable:
        given = self._given_graph
        if given is not None:
            ptr, anc, dist = given["anc_ptr"], given["anc_anc"], given["anc_dist"]
            return g.AncestorTable(n=len(self), ptr=ptr, anc=anc, dist=dist)
        return g.build_ancestor_table(
            len(self), self._parent_ptr, self._parent_idx, self._max_depth_arr, self._topo
        )

    @cached_property
    def _ecc(self) -> NDArray[np.int64]:
        return self._anc.eccentricity()

    # ------------------------------------------------------------------ graph arrays
    # Read-only views for vectorised builders (splits/): rows are node row numbers, CSR as in
    # :mod:`semshift.taxonomy.graph`.

    @property
    def parent_csr(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """``(ptr, idx)``: the parents of row ``i`` are ``idx[ptr[i]:ptr[i + 1]]``."""
        return _readonly(self._parent_ptr), _readonly(self._parent_idx)

    @property
    def child_csr(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """``(ptr, idx)``: the children of row ``i`` are ``idx[ptr[i]:ptr[i + 1]]``."""
        return _readonly(self._child_ptr), _readonly(self._child_idx)

    @property
    def ancestor_table(self) -> g.AncestorTable:
        """Every node's ancestors (itself included) with the shortest upward distance to each."""
        return self._anc

    @property
    def min_depths(self) -> NDArray[np.int64]:
        """Edges on the shortest root-to-node path, per row."""
        return _readonly(self._min_depth_arr)

    @property
    def leaf_rows(self) -> NDArray[np.int64]:
        """Rows of the nodes without children, ascending."""
        return np.flatnonzero(np.diff(self._child_ptr) == 0)

    @property
    def names(self) -> list[str]:
        """Display names by row (a copy)."""
        return list(self._names)

    def id_rows(self, ids: Sequence[str]) -> NDArray[np.int64]:
        """Row of each node id, ``-1`` for ids this taxonomy lacks (ids only: no aliases/lemmas)."""
        import pandas as pd

        return self._index.get_indexer(pd.Index(list(ids), dtype=object)).astype(np.int64)

    def below(self, rows: ArrayLike) -> NDArray[np.int64]:
        """Edges from the nearest of ``rows`` down to every node, ``-1`` where not below any."""
        start = np.asarray(rows, dtype=np.int64)
        dist, _ = g.bfs_levels(self._child_ptr, self._child_idx, start, len(self))
        return dist

    def _column(self, name: str) -> Sequence[str] | None:
        value = self._lazy[name]
        if callable(value):
            value = value()
        if value is not None and not isinstance(value, list | Lines):
            value = list(value)
        self._lazy[name] = value
        return value

    # ------------------------------------------------------------------ look-up
    @cached_property
    def _alias_index(self) -> dict[str, int] | LineKeys:
        return {} if self._aliases is None else {a: i for i, a in enumerate(self._aliases)}

    @cached_property
    def _lemma_index(self) -> dict[str, list[int]]:
        hits: dict[str, list[tuple[int, int]]] = {}
        senses = self._column("senses")
        source = self._lemmas if self._lemmas is not None else self._names
        for i, text in enumerate(source):
            ranks = [int(x) for x in senses[i].split("|")] if senses is not None else None
            for k, lemma in enumerate(str(text).split("|")):
                hits.setdefault(_norm(lemma), []).append((ranks[k] if ranks else 0, i))
        return {key: [i for _, i in sorted(v)] for key, v in hits.items()}

    def index(self, key: Key) -> int:
        """Row number of a node given its id, alias (``dog.n.01``), unique name/lemma or row number.

        Raises
        ------
        UnknownNameError
            The key names no node (close matches are listed) or a lemma names several nodes.
        """
        if isinstance(key, (int, np.integer)):
            if 0 <= int(key) < len(self):
                return int(key)
            raise UnknownNameError(f"node index {key} out of range for {len(self)} nodes")
        pos = self._id_row(key)
        if pos >= 0:
            return pos
        key = str(key)
        if key in self._alias_index:
            return self._alias_index[key]
        hits = self._lemma_index.get(_norm(key), [])
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            options = ", ".join(f"{self.label(i)} ({self._ids[i]})" for i in hits[:8])
            raise UnknownNameError(
                f"{key!r} names {len(hits)} nodes of {self.name}: {options}; use an id or alias"
            )
        raise UnknownNameError(self.unknown_message(key))

    def unknown_message(self, key: str, where: str = "") -> str:
        """The error text for a key naming no node: lemma or alias hints, else did-you-mean."""
        hits = self._lemma_index.get(_norm(key), [])
        if key not in self._alias_index and hits:  # a word where an id was wanted
            options = ", ".join(f"{self._ids[i]} ({self.label(i)})" for i in hits[:8])
            more = f" and {len(hits) - 8} more" if len(hits) > 8 else ""
            return (
                f"{key!r}{where} is a lemma (a word), not a {self.name} node id; it names "
                f"{len(hits)} node(s): {options}{more}; write the id of the one you mean"
            )
        if key in self._alias_index:
            i = self._alias_index[key]
            return (
                f"{key!r}{where} is an alias, not a {self.name} node id; write its id "
                f"{self._ids[i]} ({self.label(i)})"
            )
        close = self.suggest(key)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        return f"unknown {self.name} node {key!r}{where}{hint}"

    def suggest(self, key: str, n: int = 3) -> list[str]:
        """Close matches of ``key`` among ids, aliases and lemmas (for error messages)."""
        key_n = _norm(key)
        pool: list[str] = [str(i) for i in self._ids]
        if self._aliases is not None:
            pool += self._aliases
        pool += list(self._lemma_index)
        prefix = [p for p in pool if p[:1].lower() == key_n[:1]] or pool
        return close_matches(key_n if not key.startswith("n0") else key, prefix, n=n)

    def indices(self, keys: Iterable[Key], *, where: str = "") -> NDArray[np.int64]:
        """Row numbers of many keys (ids resolved in one vectorised look-up)."""
        import pandas as pd

        keys = list(keys)
        pos = self._index.get_indexer(pd.Index(keys, dtype=object)).astype(np.int64)
        for k in np.flatnonzero(pos < 0):
            pos[k] = self.index(keys[k]) if not where else self._index_at(keys[k], where, int(k))
        return pos

    def _index_at(self, key: Key, where: str, k: int) -> int:
        try:
            return self.index(key)
        except UnknownNameError as err:
            raise UnknownNameError(f"{err} (in {where}, item {k + 1})") from None

    def id(self, key: Key) -> str:
        """The id of a node."""
        return str(self._ids[self.index(key)])

    def label(self, key: Key) -> str:
        """The display name of a node (WordNet: its first lemma, underscores as spaces)."""
        return self._names[self.index(key)]

    def labels(self, keys: Iterable[Key]) -> list[str]:
        return [self._names[i] for i in self.indices(keys)]

    def alias(self, key: Key) -> str | None:
        """The node's alias (WordNet: synset name such as ``dog.n.01``)."""
        return None if self._aliases is None else self._aliases[self.index(key)]

    def lemmas(self, key: Key) -> list[str]:
        """The node's synonyms (WordNet lemmas)."""
        i = self.index(key)
        return (self._lemmas[i] if self._lemmas is not None else self._names[i]).split("|")

    def gloss(self, key: Key) -> str:
        glosses = self._column("glosses")
        return "" if glosses is None else glosses[self.index(key)]

    def lexname(self, key: Key) -> str:
        lexnames = self._column("lexnames")
        return "" if lexnames is None else lexnames[self.index(key)]

    def find(self, lemma: str) -> list[str]:
        """Ids of every node with ``lemma`` among its names, most frequent sense first (nltk's
        ``synsets``)."""
        return [str(self._ids[i]) for i in self._lemma_index.get(_norm(lemma), [])]

    # ------------------------------------------------------------------ structure
    def _ids_of(self, rows: ArrayLike) -> list[str]:
        return [str(x) for x in self._ids[np.asarray(rows, dtype=np.int64)]]

    def parents(self, key: Key) -> list[str]:
        return self._ids_of(self._parent_list(self.index(key)))

    def children(self, key: Key) -> list[str]:
        i = self.index(key)
        return self._ids_of(self._child_idx[self._child_ptr[i] : self._child_ptr[i + 1]])

    def ancestors(self, key: Key, *, include_self: bool = False) -> list[str]:
        """All ancestors, nearest first (by shortest upward distance, then id)."""
        i = self.index(key)
        lo, hi = self._anc.ptr[i], self._anc.ptr[i + 1]
        anc, dist = self._anc.anc[lo:hi], self._anc.dist[lo:hi]
        order = np.lexsort((self._ids[anc].astype(str), dist))
        out = self._ids_of(anc[order])
        return out if include_self else out[1:]

    def ancestor_distances(self, key: Key) -> dict[str, int]:
        """Shortest upward distance from the node to each ancestor (itself at 0)."""
        i = self.index(key)
        lo, hi = self._anc.ptr[i], self._anc.ptr[i + 1]
        return dict(
            zip(self._ids_of(self._anc.anc[lo:hi]), self._anc.dist[lo:hi].tolist(), strict=True)
        )

    def descendants(self, key: Key, *, include_self: bool = False) -> list[str]:
        """All descendants in breadth-first order."""
        dist, _ = g.bfs_levels(
            self._child_ptr, self._child_idx, np.array([self.index(key)]), len(self)
        )
        rows = np.flatnonzero(dist >= (0 if include_self else 1))
        return self._ids_of(rows[np.argsort(dist[rows], kind="stable")])

    def descendant_mask(self, keys: Iterable[Key]) -> NDArray[np.bool_]:
        """Boolean mask (N,) of every node at or below any of ``keys``."""
        dist, _ = g.bfs_levels(self._child_ptr, self._child_idx, self.indices(keys), len(self))
        return dist >= 0

    def sisters(self, key: Key) -> list[str]:
        """Nodes sharing a parent with the node (itself excluded), in parent then child order."""
        i = self.index(key)
        parents = np.asarray(self._parent_list(i), dtype=np.int64)
        _, pos = g.gather(self._child_ptr, parents)
        kids = self._child_idx[pos]
        _, first = np.unique(kids, return_index=True)
        kids = kids[np.sort(first)]
        return self._ids_of(kids[kids != i])

    def depth(self, key: Key | Sequence[Key], kind: Literal["min", "max"] = "min") -> Any:
        """Edges from a root: shortest (``"min"``, nltk ``min_depth``) or longest (``"max"``).

        An int for one key, an int64 array for a sequence of keys.
        """
        arr = self._min_depth_arr if kind == "min" else self._max_depth_arr
        if isinstance(key, (str, int, np.integer)):
            return int(arr[self.index(key)])
        return arr[self.indices(key)]

    def is_ancestor(self, ancestor: Key, node: Key) -> bool:
        a, x = self.index(ancestor), self.index(node)
        lo, hi = self._anc.ptr[x], self._anc.ptr[x + 1]
        return bool(np.isin(a, self._anc.anc[lo:hi]))

    def lowest_common_ancestors(self, a: Key, b: Key) -> list[str]:
        """Common ancestors of greatest maximum depth, sorted by alias (else id) like nltk's
        ``lowest_common_hypernyms``; with several roots and none shared, an empty list."""
        i, j = self.index(a), self.index(b)
        ai = self._anc.anc[self._anc.ptr[i] : self._anc.ptr[i + 1]]
        aj = self._anc.anc[self._anc.ptr[j] : self._anc.ptr[j + 1]]
        common = np.intersect1d(ai, aj)
        if len(common) == 0:
            return []
        depth = self._max_depth_arr[common]
        best = common[depth == depth.max()]
        names = self._aliases if self._aliases is not None else self._ids
        return self._ids_of(sorted(best.tolist(), key=lambda i: str(names[i])))

    # ------------------------------------------------------------------ distances
    def _rows(self, keys: Key | Sequence[Key] | ArrayLike) -> tuple[NDArray[np.int64], bool]:
        if isinstance(keys, (str, int, np.integer)):
            return np.array([self.index(keys)], dtype=np.int64), True
        return self.indices(list(np.asarray(keys, dtype=object).ravel())), False

    def _fill_no_path(
        self, rows: NDArray[np.int64], cols: NDArray[np.int64], d: np.ndarray, pairwise: bool
    ) -> np.ndarray:
        """Pairs without a common ancestor meet at a simulated root (nltk ``simulate_root``)."""
        missing = d >= g.NO_PATH
        if missing.any():
            d = d.astype(np.int64)
            er, ec = self._ecc[rows] + 1, self._ecc[cols] + 1
            fill = er + ec if pairwise else er[:, None] + ec[None, :]
            d[missing] = fill[missing]
        return d

    def path_distance(
        self, a: Key | Sequence[Key], b: Key | Sequence[Key]
    ) -> int | NDArray[np.int64]:
        """Shortest path length (edges) via a common ancestor, element-wise over equal lengths.

        Examples
        --------
        >>> from semshift.taxonomy import wordnet
        >>> wordnet().path_distance("dog.n.01", "cat.n.01")
        4
        """
        ra, scalar = self._rows(a)
        rb, _ = self._rows(b)
        if len(ra) != len(rb):
            raise ValueError(
                f"a and b differ in length ({len(ra)} vs {len(rb)}); use distance_matrix"
            )
        d = self._fill_no_path(ra, rb, g.pair_updist(self._anc, ra, rb), pairwise=True).astype(
            np.int64
        )
        return int(d[0]) if scalar else d

    def distance_matrix(self, a: Sequence[Key], b: Sequence[Key]) -> NDArray[np.int64]:
        """All-pairs shortest path length, shape (len(a), len(b)), vectorised over pairs."""
        ra, _ = self._rows(a)
        rb, _ = self._rows(b)
        if len(ra) >= len(rb):
            d = g.pairwise_updist(self._anc, ra, rb)
        else:
            d = g.pairwise_updist(self._anc, rb, ra).T
        return self._fill_no_path(ra, rb, d, pairwise=False).astype(np.int64)

    def _lch_from_path(self, d: ArrayLike) -> NDArray[np.float64]:
        return -np.log((np.asarray(d, dtype=np.float64) + 1.0) / (2.0 * self.max_depth))

    def lch(self, a: Key | Sequence[Key], b: Key | Sequence[Key]) -> float | NDArray[np.float64]:
        """Leacock-Chodorow similarity ``-ln((path + 1) / (2 D))``, element-wise.

        Examples
        --------
        >>> from semshift.taxonomy import wordnet
        >>> round(wordnet().lch("dog.n.01", "cat.n.01"), 6)
        2.028148
        """
        d = self.path_distance(a, b)
        out = self._lch_from_path(d)
        return float(out) if np.ndim(out) == 0 else out

    # Wu-Palmer ---------------------------------------------------------------------------
    @cached_property
    def _name_rank(self) -> NDArray[np.int64]:
        """Each node's place in the order of the aliases (else ids), ties in row order."""
        n = len(self)
        name_rank = np.empty(n, dtype=np.int64)
        sort_names = self._aliases if self._aliases is not None else [str(i) for i in self._ids]
        name_rank[np.argsort(np.asarray(sort_names, dtype=object), kind="stable")] = np.arange(n)
        return name_rank

    @cached_property
    def _subsumer_key(self) -> tuple[NDArray[np.int64], NDArray[np.int64], int]:
        """Per node: a sortable key (min depth, then smallest id... encoded) and its decoder."""
        n = len(self)
        name_rank = self._name_rank
        r = n
        # key: min_depth dominates, then "is the first argument itself" (bonus r), then name order
        base = (self._min_depth_arr * (2 * r) + (r - 1 - name_rank)) * 256
        return base, name_rank, r

    def _wup_parts(self, rows: NDArray[np.int64]) -> NDArray[np.int64]:
        spd = g.entry_spd(self._anc, rows)
        return spd

    def _wup_decode(
        self, best: NDArray[np.int64], ea: NDArray[np.int64], eb: NDArray[np.int64]
    ) -> NDArray[np.float64]:
        _, name_rank, r = self._subsumer_key
        out = np.empty(best.shape, dtype=np.float64)
        none = best < 0
        spd_sum = best % 256
        q = best // 256
        rank_code = q % r
        node_of_rank = np.argsort(name_rank)
        sub = node_of_rank[r - 1 - rank_code]
        depth = self._max_depth_arr[sub] + 1
        out[...] = 2.0 * depth / (spd_sum + 2.0 * depth)
        if none.any():  # simulated root: depth 1, each side ecc + 1 away
            out[none] = 2.0 / (ea[none] + eb[none] + 4.0)
        return out

    def wup(self, a: Key | Sequence[Key], b: Key | Sequence[Key]) -> float | NDArray[np.float64]:
        """Wu-Palmer similarity as nltk computes it, element-wise over equal-length inputs.

        Examples
        --------
        >>> from semshift.taxonomy import wordnet
        >>> round(wordnet().wup("dog.n.01", "cat.n.01"), 6)
        0.857143
        """
        ra, scalar = self._rows(a)
        rb, _ = self._rows(b)
        if len(ra) != len(rb):
            raise ValueError(
                f"a and b differ in length ({len(ra)} vs {len(rb)}); use similarity_matrix"
            )
        base, _, r = self._subsumer_key
        spd = g.entry_spd(self._anc, np.concatenate([ra, rb]))
        a_val = spd + np.where(self._anc.dist == 0, r * 256, 0)
        best = g.pair_argmax(self._anc, ra, rb, base, a_val, spd)
        out = self._wup_decode(best, self._ecc[ra], self._ecc[rb])
        return float(out[0]) if scalar else out

    def similarity_matrix(
        self, a: Sequence[Key], b: Sequence[Key], measure: Measure = "lch"
    ) -> NDArray[np.float64]:
        """All-pairs similarity, shape (len(a), len(b)): ``"lch"``, ``"wup"`` or ``"path"``
        (nltk's ``path_similarity`` = 1 / (path + 1))."""
        if measure in ("lch", "path"):
            d = self.distance_matrix(a, b)
            if measure == "lch":
                return self._lch_from_path(d)
            return np.asarray(1.0 / (d + 1.0), dtype=np.float64)
        if measure != "wup":
            raise ValueError(f"unknown measure {measure!r}; choose lch, wup or path")
        ra, _ = self._rows(a)
        rb, _ = self._rows(b)
        base, _, r = self._subsumer_key
        spd = g.entry_spd(self._anc, np.concatenate([ra, rb]))
        self_bonus = spd + np.where(self._anc.dist == 0, r * 256, 0)
        if len(ra) >= len(rb):
            best = g.pairwise_argmax(self._anc, ra, rb, base, self_bonus, spd)
        else:
            best = g.pairwise_argmax(self._anc, rb, ra, base, spd, self_bonus).T
        return self._wup_decode(
            best, self._ecc[ra][:, None] + 0 * best, self._ecc[rb][None, :] + 0 * best
        )

    # ------------------------------------------------------------------ derived taxonomies
    def spanning_tree(self, roots: Sequence[Key] | None = None) -> NDArray[np.int64]:
        """Parent row of each node in the breadth-first spanning tree from ``roots``.

        Children are enqueued in the taxonomy's child order (WordNet: hyponym and
        instance-hyponym pointers as listed in ``data.noun``); each node's parent is the node it
        was first reached from; -1 for roots and unreached nodes.
        """
        src = (
            self.indices(roots)
            if roots is not None
            else np.flatnonzero(np.diff(self._parent_ptr) == 0)
        )
        _, parent = g.bfs_levels(self._child_ptr, self._child_idx, src, len(self))
        return parent

    def induced_tree(self, nodes: Sequence[Key], *, name: str | None = None) -> Taxonomy:
        """The forest induced on ``nodes`` by the breadth-first spanning tree.

        Method reference: docs/methods.md#ssb-splits and docs/methods.md#wordnet-taxonomy.

        Each node's parent is its nearest proper ancestor on its spanning-tree path to the root that
        is itself in ``nodes``; nodes with none become roots. This is the "chain" of the SSB
        ImageNet lists: a class's path to the root keeping only the listed classes.
        """
        rows = np.unique(self.indices(nodes))
        inside = np.zeros(len(self), dtype=bool)
        inside[rows] = True
        tree = self.spanning_tree()
        cur = tree[rows]
        active = cur >= 0
        active[active] &= ~inside[cur[active]]
        while active.any():
            cur[active] = tree[cur[active]]
            active &= cur >= 0
            active[active] &= ~inside[cur[active]]
        local = np.full(len(self), -1, dtype=np.int64)
        local[rows] = np.arange(len(rows))
        has = cur >= 0
        return Taxonomy(
            self._ids[rows].tolist(),
            np.flatnonzero(has),
            local[cur[has]],
            names=[self._names[i] for i in rows],
            aliases=None if self._aliases is None else [self._aliases[i] for i in rows],
            lemmas=None if self._lemmas is None else [self._lemmas[i] for i in rows],
            name=name or f"{self.name}:induced",
        )

    def to_frame(self) -> pd.DataFrame:
        """One row per edge: child id, parent id, kind."""
        import pandas as pd

        return pd.DataFrame(
            {
                "child": self._ids[self._edge_child],
                "parent": self._ids[self._edge_parent],
                "kind": self._edge_kind,
            }
        )


def _readonly(a: NDArray[np.int64]) -> NDArray[np.int64]:
    view = a.view()
    view.flags.writeable = False
    return view
