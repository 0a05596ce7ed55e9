"""Vectorised graph kernels over a parent-pointer DAG stored in CSR form.

Nothing here loops over nodes or pairs in Python: traversals advance a whole frontier per level
(at most the DAG's depth, 20 for WordNet) and pairwise queries are min/max reductions over each
node's ancestor list (about 10-20 entries per WordNet noun), computed in blocks.

Conventions: node ids are ``int`` row numbers ``0..n-1``; ``ptr``/``idx`` are a CSR adjacency
(``idx[ptr[i]:ptr[i+1]]`` are the neighbours of ``i``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

IntArray = NDArray[np.int64]

#: distance used for "no common ancestor" inside kernels (fits int16 sums)
NO_PATH = 16_000


def csr_from_pairs(src: IntArray, dst: IntArray, n: int, order: IntArray | None = None):
    """CSR adjacency ``src -> dst`` with neighbours sorted by ``order`` (then by input position)."""
    keys = (src, order) if order is not None else (src,)
    perm = (
        np.lexsort(tuple(reversed(keys))) if order is not None else np.argsort(src, kind="stable")
    )
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
    return ptr, np.asarray(dst, dtype=np.int64)[perm], perm


def ranges(starts: IntArray, counts: IntArray) -> tuple[IntArray, IntArray]:
    """Flatten the index ranges ``[starts[k], starts[k] + counts[k])``.

    Returns ``(owner, pos)``: for every position, the range ``k`` it belongs to and the position.
    """
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    owner = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    if total == 0:
        return owner, np.zeros(0, dtype=np.int64)
    offsets = np.cumsum(counts) - counts
    pos = np.arange(total, dtype=np.int64) + np.repeat(
        np.asarray(starts, np.int64) - offsets, counts
    )
    return owner, pos


def gather(ptr: IntArray, nodes: IntArray) -> tuple[IntArray, IntArray]:
    """Flatten the CSR rows of ``nodes``: ``(row position in nodes, position in idx)`` per entry."""
    nodes = np.asarray(nodes, dtype=np.int64)
    return ranges(ptr[nodes], ptr[nodes + 1] - ptr[nodes])


def topological_levels(
    n: int, parent_ptr: IntArray, parent_idx: IntArray, child_ptr: IntArray, child_idx: IntArray
) -> tuple[IntArray, IntArray]:
    """Kahn's algorithm by levels.

    Returns ``(level, order)``: ``level[i]`` is the number of edges on the *longest* path from a
    root
    to ``i`` (nltk's ``max_depth``) or -1 for nodes on or below a cycle; ``order`` lists the nodes
    level by level.
    """
    indeg = np.diff(parent_ptr).astype(np.int64)
    level = np.full(n, -1, dtype=np.int64)
    frontier = np.flatnonzero(indeg == 0)
    chunks = []
    depth = 0
    while frontier.size:
        level[frontier] = depth
        chunks.append(frontier)
        _, pos = gather(child_ptr, frontier)
        kids = child_idx[pos]
        np.subtract.at(indeg, kids, 1)
        cand = np.unique(kids)
        frontier = cand[indeg[cand] == 0]
        depth += 1
    order = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64)
    return level, order


def bfs_levels(
    child_ptr: IntArray, child_idx: IntArray, sources: IntArray, n: int
) -> tuple[IntArray, IntArray]:
    """Breadth-first search down from ``sources`` in queue (FIFO) order.

    Returns ``(dist, parent)``: the number of edges from the nearest source (-1 if unreached) and
    the
    node each one was *first reached from* (-1 for sources): the spanning tree a FIFO queue builds
    when children are enqueued in CSR order.
    """
    dist = np.full(n, -1, dtype=np.int64)
    parent = np.full(n, -1, dtype=np.int64)
    frontier = np.asarray(sources, dtype=np.int64)
    dist[frontier] = 0
    d = 0
    while frontier.size:
        owner, pos = gather(child_ptr, frontier)
        kids = child_idx[pos]
        fresh = dist[kids] < 0
        kids, via = kids[fresh], frontier[owner[fresh]]
        # the first occurrence in queue order wins; the next frontier keeps that order
        _, first = np.unique(kids, return_index=True)
        first.sort()
        frontier = kids[first]
        d += 1
        dist[frontier] = d
        parent[frontier] = via[first]
    return dist, parent


@dataclass(frozen=True)
class AncestorTable:
    """Every node's ancestors (itself included) with the shortest upward distance to each.

    Rows are CSR over nodes (``ptr``), entries sorted by ancestor id within a row, so
    ``key = node * n + anc`` is globally sorted and pair look-ups are a ``searchsorted``.
    """

    n: int
    ptr: IntArray
    anc: IntArray
    dist: IntArray

    @cached_property
    def keys(self) -> IntArray:
        owner = np.repeat(np.arange(self.n, dtype=np.int64), np.diff(self.ptr))
        return owner * self.n + self.anc

    def eccentricity(self) -> IntArray:
        """Largest shortest-upward distance from each node to any of its ancestors."""
        out = np.zeros(self.n, dtype=np.int64)
        owner = np.repeat(np.arange(self.n, dtype=np.int64), np.diff(self.ptr))
        np.maximum.at(out, owner, self.dist)
        return out


def build_ancestor_table(
    n: int, parent_ptr: IntArray, parent_idx: IntArray, level: IntArray, order: IntArray
) -> AncestorTable:
    """Ancestor lists by dynamic programming over topological levels.

    anc(x) = {x: 0} united with {a: d + 1 for (a, d) in anc(p)} over parents p, keeping the minimum
    distance per ancestor. Each level is one vectorised gather, lexsort and de-duplication.
    """
    start = np.zeros(n, dtype=np.int64)
    count = np.zeros(n, dtype=np.int64)
    flat_anc = [np.zeros(0, dtype=np.int64)]
    flat_dist = [np.zeros(0, dtype=np.int64)]
    all_anc, all_dist = flat_anc[0], flat_dist[0]
    filled = 0
    lv = level[order]
    bounds = np.flatnonzero(np.diff(lv)) + 1
    for nodes in np.split(order, bounds):
        powner, ppos = gather(parent_ptr, nodes)
        parents = parent_idx[ppos]
        eowner, src = ranges(start[parents], count[parents])
        owner = np.concatenate([np.arange(len(nodes), dtype=np.int64), powner[eowner]])
        anc = np.concatenate([nodes, all_anc[src]])
        dist = np.concatenate([np.zeros(len(nodes), dtype=np.int64), all_dist[src] + 1])
        perm = np.lexsort((dist, anc, owner))
        owner, anc, dist = owner[perm], anc[perm], dist[perm]
        keep = np.ones(len(owner), dtype=bool)
        keep[1:] = (owner[1:] != owner[:-1]) | (anc[1:] != anc[:-1])
        owner, anc, dist = owner[keep], anc[keep], dist[keep]
        cnt = np.bincount(owner, minlength=len(nodes))
        start[nodes] = filled + np.cumsum(cnt) - cnt
        count[nodes] = cnt
        filled += len(anc)
        flat_anc.append(anc)
        flat_dist.append(dist)
        all_anc = np.concatenate([all_anc, anc])
        all_dist = np.concatenate([all_dist, dist])
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(count, out=ptr[1:])
    _, src = ranges(start, count)
    return AncestorTable(n=n, ptr=ptr, anc=all_anc[src], dist=all_dist[src])


def pairwise_updist(table: AncestorTable, rows: IntArray, cols: IntArray) -> NDArray[np.int32]:
    """min over common ancestors a of d(row, a) + d(col, a), for every (row, col) pair.

    This is nltk's ``shortest_path_distance`` (paths go up to a common ancestor and down). Pairs
    without a common ancestor get :data:`NO_PATH`. Work is ``sum_r |anc(r)| * len(cols)`` int16
    additions, in blocks of rows.
    """
    return _pairwise_reduce(table, rows, cols, mode="min").astype(np.int32, copy=False)


def pairwise_argmax(
    table: AncestorTable,
    rows: IntArray,
    cols: IntArray,
    key: IntArray,
    row_value: IntArray,
    col_value: IntArray,
) -> NDArray[np.int64]:
    """max over common ancestors a of key[a] + row_value[e(row, a)] + col_value[e(col, a)].

    -1 for pairs without a common ancestor; ``row_value``/``col_value`` are per table entry.
    """
    out = _pairwise_reduce(table, rows, cols, "argmax", row_value, col_value, key)
    return out.astype(np.int64, copy=False)


def _column_matrix(table: AncestorTable, cols: IntArray, values: IntArray | None = None):
    """Dense (K, len(cols)) matrix of the columns' ancestor distances over their K ancestors."""
    cowner, cpos = gather(table.ptr, cols)
    canc = table.anc[cpos]
    kset, kidx = np.unique(canc, return_inverse=True)
    fill = NO_PATH if values is None else -1
    dtype = np.int16 if values is None else np.int64
    u = np.full((len(kset), len(cols)), fill, dtype=dtype)
    u[kidx, cowner] = table.dist[cpos] if values is None else values[cpos]
    return kset, u


def _pairwise_reduce(
    table: AncestorTable,
    rows: IntArray,
    cols: IntArray,
    mode: str,
    row_value: IntArray | None = None,
    col_value: IntArray | None = None,
    key: IntArray | None = None,
) -> NDArray[np.int64] | NDArray[np.int32]:
    """Reduce over common ancestors for all (row, col) pairs.

    ``mode="min"``: min of d(row, a) + d(col, a) (int32 result, NO_PATH if none).
    ``mode="argmax"``: max of key[a] + row_value[entry(row, a)] + col_value[entry(col, a)]
    (int64 result, -1 if none).

    Rows are bucketed by their number of ancestor entries ``c``; each bucket is reduced with
    ``c`` vectorised element-wise min/max passes over (rows, cols) blocks: a loop over the entry
    position (at most the DAG depth), never over rows or pairs.
    """
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    is_min = mode == "min"
    out = np.full(
        (len(rows), len(cols)), NO_PATH if is_min else -1, dtype=np.int32 if is_min else np.int64
    )
    if len(rows) == 0 or len(cols) == 0:
        return out
    kset, u = _column_matrix(table, cols)
    if not is_min:
        assert key is not None and row_value is not None and col_value is not None
        _, ucol = _column_matrix(table, cols, values=col_value)
        # one matrix holding key[a] + col_value, -1 where a is not an ancestor of the column
        ucol = np.where(u < NO_PATH, ucol + key[kset][:, None], -(1 << 40))
    rowner, rpos = gather(table.ptr, rows)
    ranc = table.anc[rpos]
    k = np.searchsorted(kset, ranc)
    k[k == len(kset)] = 0
    hit = kset[k] == ranc
    rowner, rpos, k = rowner[hit], rpos[hit], k[hit]
    counts = np.bincount(rowner, minlength=len(rows))
    first = np.cumsum(counts) - counts
    rdist = table.dist[rpos].astype(np.int16)
    rval = None if is_min else row_value[rpos]  # type: ignore[index]
    chunk = max(1, (1 << 22) // len(cols))
    for c in np.unique(counts[counts > 0]).tolist():
        sel = np.flatnonzero(counts == c)
        for lo in range(0, len(sel), chunk):
            part = sel[lo : lo + chunk]
            ent = first[part][:, None] + np.arange(c)[None, :]
            kk = k[ent]
            if is_min:
                dd = rdist[ent]
                acc = u[kk[:, 0]]
                acc += dd[:, 0, None]
                for j in range(1, c):
                    tmp = u[kk[:, j]]
                    tmp += dd[:, j, None]
                    np.minimum(acc, tmp, out=acc)
                out[part] = acc
            else:
                vv = rval[ent]  # type: ignore[index]
                acc64 = ucol[kk[:, 0]] + vv[:, 0, None]
                for j in range(1, c):
                    np.maximum(acc64, ucol[kk[:, j]] + vv[:, j, None], out=acc64)
                out[part] = np.maximum(acc64, -1)
    return out


def entry_spd(table: AncestorTable, nodes: IntArray) -> IntArray:
    """nltk's shortest_path_distance(x, a) for every ancestor entry (x, a) of ``nodes``.

    Usually equal to the upward distance d(x, a), but in a DAG a path may go up past ``a`` to a
    common ancestor c and come down to ``a`` in fewer steps. Returns a full-length per-entry array
    (entries of other nodes are left at their upward distance).
    """
    spd = table.dist.copy()
    nodes = np.unique(np.asarray(nodes, dtype=np.int64))
    eowner, epos = gather(table.ptr, nodes)
    x = nodes[eowner]
    a = table.anc[epos]
    # ancestors c of a, with d(a, c); look up d(x, c) (c is an ancestor of x too)
    cowner, cpos = gather(table.ptr, a)
    c = table.anc[cpos]
    keys = table.keys
    look = np.searchsorted(keys, x[cowner] * table.n + c)
    total = table.dist[look] + table.dist[cpos]
    best = np.full(len(epos), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(best, cowner, total)
    spd[epos] = best
    return spd


def _pair_common(
    table: AncestorTable, a: IntArray, b: IntArray
) -> tuple[IntArray, IntArray, IntArray, NDArray[np.bool_]]:
    """For pairs ``(a[i], b[i])``: every ancestor entry of ``a[i]`` (owner i, position ``pos``),
    the position ``look`` of the same ancestor in ``b[i]``'s row and whether it is there."""
    owner, pos = gather(table.ptr, np.asarray(a, dtype=np.int64))
    look_keys = np.asarray(b, dtype=np.int64)[owner] * table.n + table.anc[pos]
    keys = table.keys
    look = np.searchsorted(keys, look_keys)
    look[look == len(keys)] = 0
    return owner, pos, look, keys[look] == look_keys


def pair_updist(table: AncestorTable, a: IntArray, b: IntArray) -> NDArray[np.int64]:
    """Element-wise :func:`pairwise_updist` for pairs ``(a[i], b[i])`` (NO_PATH where none)."""
    owner, pos, look, hit = _pair_common(table, a, b)
    total = np.where(hit, table.dist[pos] + table.dist[look], NO_PATH)
    out = np.full(len(a), NO_PATH, dtype=np.int64)
    np.minimum.at(out, owner, total)
    return out


def pair_argmax(
    table: AncestorTable,
    a: IntArray,
    b: IntArray,
    key: IntArray,
    a_value: IntArray,
    b_value: IntArray,
) -> NDArray[np.int64]:
    """Element-wise max over common ancestors c of key[c] + a_value[e(a, c)] + b_value[e(b, c)].

    -1 where a pair has no common ancestor.
    """
    owner, pos, look, hit = _pair_common(table, a, b)
    val = np.where(hit, key[table.anc[pos]] + a_value[pos] + b_value[look], -1)
    out = np.full(len(a), -1, dtype=np.int64)
    np.maximum.at(out, owner, val)
    return out
