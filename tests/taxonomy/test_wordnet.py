"""The shipped WordNet 3.0 table: counts, check values, nltk agreement.

Check values: docs/methods.md#wordnet-taxonomy.
"""

from __future__ import annotations

import time
from collections import deque

import numpy as np
import pandas as pd
import pytest

from semshift.errors import UnknownNameError
from semshift.taxonomy import load_classlist, wordnet
from semshift.taxonomy.wordnet import wordnet as cached_wordnet

from ..conftest import DATA


def test_counts_and_reference_check_values(wn):
    assert len(wn) == 82_115
    assert wn.n_edges == 84_427
    assert wn.roots == ["n00001740"]
    assert wn.alias("n00001740") == "entity.n.01"
    assert wn.max_depth == 19
    assert wn.id("dog.n.01") == "n02084071"
    assert wn.path_distance("dog.n.01", "cat.n.01") == 4
    assert wn.lch("dog.n.01", "cat.n.01") == pytest.approx(2.0281482472922856, abs=1e-15)
    assert wn.lch("dog.n.01", "cat.n.01") == pytest.approx(-np.log(5 / 38), abs=1e-15)
    kinds = np.bincount(wn.edges[2])
    assert kinds.sum() == 84_427 and kinds[1] > 7_000  # instance-hypernym edges are included


def test_load_under_one_second():
    cached_wordnet.cache_clear()
    t0 = time.perf_counter()
    tax = cached_wordnet()
    elapsed = time.perf_counter() - t0
    assert len(tax) == 82_115
    assert elapsed < 1.0, f"loading took {elapsed:.2f} s"


def test_every_shipped_wnid_resolves(wn):
    sizes = {"imagenet1k": 1000, "imagenet21k-p": 11_221, "imagenet21k-p-winter21": 10_450}
    for name, size in sizes.items():
        cl = load_classlist(name)
        assert len(cl) == size
        rows = wn.indices(cl.ids)
        assert (rows >= 0).all()
        assert len(set(rows.tolist())) == size
    in1k = load_classlist("imagenet1k")
    assert list(in1k.ids) == sorted(in1k.ids)  # index order = sorted wnids
    assert in1k.names[:3] == ("tench", "goldfish", "great white shark")


def test_matches_nltk_on_reference_pairs(wn):
    """2,500 pairs whose values nltk computed on the same WordNet 3.0 files."""
    ref = pd.read_csv(DATA / "nltk_wordnet_pairs.csv", dtype={"lowest_common": str})
    assert len(ref) >= 2000
    np.testing.assert_array_equal(wn.path_distance(ref.a, ref.b), ref.path)
    np.testing.assert_allclose(wn.lch(ref.a, ref.b), ref.lch, rtol=0, atol=1e-12)
    np.testing.assert_allclose(wn.wup(ref.a, ref.b), ref.wup, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(wn.depth(ref.a), ref.min_depth_a)
    np.testing.assert_array_equal(wn.depth(ref.a, "max"), ref.max_depth_a)
    assert [wn.alias(a) for a in ref.a] == ref.name_a.tolist()
    lcs = ["|".join(wn.lowest_common_ancestors(a, b)) for a, b in zip(ref.a, ref.b, strict=True)]
    assert lcs == ref.lowest_common.fillna("").tolist()


_PARENTS: dict[str, list[str]] = {}


def _bfs_up(wn, node: str) -> dict[str, int]:
    """nltk-style per-node breadth-first search up the hypernym DAG (the slow reference)."""
    if not _PARENTS:
        frame = wn.to_frame()
        for child, parent in zip(frame.child, frame.parent, strict=True):
            _PARENTS.setdefault(child, []).append(parent)
    dist: dict[str, int] = {}
    queue = deque([(node, 0)])
    while queue:
        cur, d = queue.popleft()
        if cur in dist:
            continue
        dist[cur] = d
        queue.extend((p, d + 1) for p in _PARENTS.get(cur, []))
    return dist


def _bfs_path(wn, a: str, b: str) -> int:
    da, db = _bfs_up(wn, a), _bfs_up(wn, b)
    return min(da[c] + db[c] for c in set(da) & set(db))


def test_distances_equal_per_pair_bfs_on_random_pairs(wn):
    rng = np.random.default_rng(7)
    a = wn.ids[rng.integers(0, len(wn), 1000)].tolist()
    b = wn.ids[rng.integers(0, len(wn), 1000)].tolist()
    expected = np.array([_bfs_path(wn, x, y) for x, y in zip(a, b, strict=True)])
    np.testing.assert_array_equal(wn.path_distance(a, b), expected)
    np.testing.assert_allclose(wn.lch(a, b), -np.log((expected + 1) / 38.0), atol=1e-12)


def test_matrices_equal_pairwise_values(wn):
    rng = np.random.default_rng(3)
    a = wn.ids[rng.integers(0, len(wn), 40)].tolist()
    b = wn.ids[rng.integers(0, len(wn), 70)].tolist()
    aa, bb = np.repeat(a, len(b)), np.tile(b, len(a))
    d = wn.distance_matrix(a, b)
    np.testing.assert_array_equal(d.ravel(), wn.path_distance(aa, bb))
    np.testing.assert_array_equal(wn.distance_matrix(b, a), d.T)
    np.testing.assert_allclose(wn.similarity_matrix(a, b, "lch").ravel(), wn.lch(aa, bb))
    # Wu-Palmer is asymmetric only in nltk's tie rule; both orientations of the kernel agree
    np.testing.assert_allclose(wn.similarity_matrix(a, b, "wup").ravel(), wn.wup(aa, bb))
    np.testing.assert_allclose(wn.similarity_matrix(b, a, "wup").T.ravel(), wn.wup(bb, aa))
    np.testing.assert_allclose(wn.similarity_matrix(a, b, "path"), 1.0 / (d + 1.0))


def test_structure_queries(wn):
    dog = "n02084071"  # dog.n.01
    assert set(wn.parents(dog)) == {wn.id("canine.n.02"), wn.id("domestic_animal.n.01")}
    assert wn.id("puppy.n.01") in wn.children(dog)
    anc = wn.ancestors(dog)
    assert anc[0] in wn.parents(dog) and anc[-1] == "n00001740"
    assert wn.ancestor_distances(dog)["n00001740"] == 8
    assert wn.is_ancestor("carnivore.n.01", dog) and not wn.is_ancestor(dog, "carnivore.n.01")
    desc = wn.descendants(dog)
    assert wn.id("puppy.n.01") in desc and dog not in desc
    assert all(dog in _bfs_up(wn, d) for d in desc[:50])
    sis = wn.sisters(dog)
    assert dog not in sis and wn.id("wolf.n.01") in sis
    assert wn.lowest_common_ancestors(dog, "cat.n.01") == [wn.id("carnivore.n.01")]
    assert len(wn.find("dog")) == 7 and wn.find("Domestic dog") == ["n02084071"]
    assert wn.depth([dog, "entity.n.01"]).tolist() == [8, 0]
    assert wn.lexname(dog) == "noun.animal" and "Canis" in wn.gloss(dog)


def test_lookup_errors_name_the_key_and_close_matches(wn):
    with pytest.raises(UnknownNameError, match=r"'dgo'.*did you mean.*"):
        wn.index("dgo")
    with pytest.raises(UnknownNameError, match=r"'dog' names 7 nodes"):
        wn.index("dog")
    with pytest.raises(UnknownNameError, match="n0208407"):
        wn.index("n0208407")
    assert wn.index("tench") == wn.index("n01440764")  # a unique lemma resolves


def test_spanning_tree_matches_a_queue_bfs(wn):
    """The vectorised BFS equals a plain FIFO BFS over hyponym pointers in data.noun order."""
    parent = wn.spanning_tree()
    root = wn.index("entity.n.01")
    ref = np.full(len(wn), -1)
    seen = np.zeros(len(wn), bool)
    seen[root] = True
    queue = deque([root])
    ptr, idx = wn._child_ptr, wn._child_idx
    while queue:
        u = queue.popleft()
        for c in idx[ptr[u] : ptr[u + 1]].tolist():
            if not seen[c]:
                seen[c] = True
                ref[c] = u
                queue.append(c)
    assert seen.all()
    np.testing.assert_array_equal(parent, ref)


def test_wordnet_is_cached():
    assert wordnet() is wordnet()
