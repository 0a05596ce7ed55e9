"""The shipped ``wordnet30.bin`` (what :func:`semshift.taxonomy.wordnet` loads) against its
source, the Parquet tables: the same arrays, strings and answers."""

from __future__ import annotations

import numpy as np
import pytest

from semshift.errors import UnknownNameError
from semshift.taxonomy import wordnet
from semshift.taxonomy._lines import LineKeys, Lines
from semshift.taxonomy.wordnet import (
    PACKED,
    pack_wordnet,
    read_arrays,
    wordnet_from_parquet,
    write_arrays,
)


@pytest.fixture(scope="module")
def source():
    return wordnet_from_parquet()


def test_the_shipped_file_is_the_parquet_tables_packed(source):
    from importlib.resources import files

    shipped = read_arrays((files("semshift.taxonomy") / "data" / PACKED).read_bytes())
    fresh = pack_wordnet(source)
    assert list(shipped) == list(fresh)
    for key, value in fresh.items():
        assert shipped[key].dtype == value.dtype, key
        assert np.array_equal(shipped[key], value), key


def test_the_packed_taxonomy_equals_the_one_built_from_parquet(source):
    wn = wordnet()
    assert wn is not source and repr(wn) == repr(source)
    assert wn.ids.dtype == source.ids.dtype == object
    assert wn.ids.tolist() == source.ids.tolist()
    assert wn.names == source.names
    assert list(wn._aliases) == list(source._aliases)
    assert list(wn._lemmas) == list(source._lemmas)
    for column in ("glosses", "lexnames", "senses"):
        assert list(wn._column(column)) == list(source._column(column)), column
    for mine, theirs in zip(wn.edges, source.edges, strict=True):
        assert mine.dtype == theirs.dtype and np.array_equal(mine, theirs)
    packed, built = wn._graph_arrays(), source._graph_arrays()
    assert set(packed) == set(built)
    for key in built:
        assert packed[key].dtype == built[key].dtype == np.int64, key
        assert np.array_equal(packed[key], built[key]), key
        assert packed[key].flags.writeable, key
    assert (wn.max_depth, wn.roots, wn.n_edges) == (source.max_depth, source.roots, 84_427)


def test_the_packed_taxonomy_answers_as_the_built_one(source):
    wn = wordnet()
    rng = np.random.default_rng(0)
    rows = rng.choice(len(wn), 300, replace=False)
    a, b = wn.ids[rows[:150]].tolist(), wn.ids[rows[150:]].tolist()
    for measure in ("lch", "wup", "path"):
        assert np.array_equal(
            wn.similarity_matrix(a[:40], b[:30], measure),
            source.similarity_matrix(a[:40], b[:30], measure),
        )
    assert np.array_equal(wn.path_distance(a, b), source.path_distance(a, b))
    assert np.array_equal(wn.wup(a, b), source.wup(a, b))
    keys = ("dog.n.01", "n02084071", "Canis familiaris", "Domestic Dog", 17, np.str_("n02121620"))
    for key in keys:
        i = wn.index(key)
        assert i == source.index(key)
        assert (wn.id(i), wn.label(i), wn.alias(i), wn.lemmas(i), wn.gloss(i), wn.lexname(i)) == (
            source.id(i), source.label(i), source.alias(i), source.lemmas(i), source.gloss(i),
            source.lexname(i),
        )  # fmt: skip
        assert wn.parents(i) == source.parents(i) and wn.children(i) == source.children(i)
        assert wn.ancestors(i) == source.ancestors(i)
        assert wn.depth(i) == source.depth(i) and wn.depth(i, "max") == source.depth(i, "max")
    assert wn.lowest_common_ancestors("dog.n.01", "cat.n.01") == ["n02075296"]
    assert wn.find("bank") == source.find("bank")
    for key in ("dog.n.01", "n02084071", "dgo.n.01", "", "a\nb", ("x",), 3.5):
        assert (key in wn) == (key in source), key
    assert [] not in wn and [] not in source
    for bad in ("dgo.n.01", "bank"):
        with pytest.raises(UnknownNameError) as mine:
            wn.index(bad)
        with pytest.raises(UnknownNameError) as theirs:
            source.index(bad)
        assert str(mine.value) == str(theirs.value)
    tree, built = wn.induced_tree(a[:50]), source.induced_tree(a[:50])
    assert tree.ids.tolist() == built.ids.tolist() and tree.names == built.names
    assert np.array_equal(tree.edges[1], built.edges[1])


def test_lines_read_items_without_decoding_all():
    words = ["n1", "dög", "", "cat.n.01", "n1x", "last"]
    blob = "\n".join(words).encode()
    for lines in (Lines(blob), Lines(np.frombuffer(blob, np.uint8), Lines.starts(blob))):
        assert len(lines) == 6 and lines._list is None
        assert [lines[i] for i in range(6)] == words and lines[-1] == "last"
        assert lines._list is None  # items one by one: nothing listed
        with pytest.raises(IndexError):
            lines[6]
        assert [lines.find(w) for w in words] == [0, 1, 2, 3, 4, 5]
        assert [lines.find(w) for w in ("n", "1", "x", "las", "a\nb", "dög\n")] == [-1] * 6
        assert lines[1:3] == words[1:3] and list(lines) == words and lines.tolist() == words
        assert len(lines) == 6 and lines[-2] == "n1x"
    assert Lines(b"").tolist() == [""] and len(Lines(b"")) == 1 and Lines(b"").find("") == 0
    keys = LineKeys(Lines(blob))
    assert keys.get("cat.n.01", -1) == 3 and keys.get("nope", -1) == -1 and keys.get(5, -1) == -1
    assert "last" in keys and "las" not in keys and ("x",) not in keys and keys["n1x"] == 4
    with pytest.raises(KeyError):
        keys["nope"]
    with pytest.raises(TypeError):
        keys.get(["unhashable"], -1)
    # a key asked again is not searched again; after LineKeys.SEARCHES keys a dict answers,
    # with the same answers
    searched = LineKeys(Lines(blob))
    asked = [*words, "nope", "las", "a\nb", 5, ("x",)] * 3
    first = [searched.get(k, -1) for k in asked]
    assert searched._dict is None and len(searched._found) == 9
    assert first[: len(words)] == list(range(6)) and first[6:11] == [-1] * 5
    more = [f"w{i}" for i in range(LineKeys.SEARCHES)]
    assert [searched.get(k, -1) for k in more] == [-1] * len(more)
    assert searched._dict is not None and [searched.get(k, -1) for k in asked] == first
    with pytest.raises(KeyError):
        searched["nope"]
    with pytest.raises(TypeError):
        searched.get(["unhashable"], -1)


def test_many_misses_in_the_shipped_wordnet_are_dict_look_ups():
    """A run asks ``class_id in wordnet()`` for thousands of ids, most not WordNet's: past
    the first few, no look-up searches the packed text."""
    from semshift.taxonomy import wordnet

    wn = wordnet()
    ids = [f"x{i:05d}" for i in range(200)] + ["n02084071", "dog.n.01"]
    assert [k in wn for k in ids] == [False] * 200 + [True, True]
    assert wn._row._dict is not None and wn._alias_index._dict is not None


def test_arrays_file_round_trip(tmp_path):
    arrays = {
        "a": np.arange(5, dtype="<i4"),
        "text": np.frombuffer(b"odd length", np.uint8),
        "b": np.array([-1, 2, 3], dtype=np.int8),
        "c": np.arange(3, dtype="<i8") * 2**40,
    }
    path = tmp_path / "x.bin"
    write_arrays(str(path), arrays)
    raw = path.read_bytes()
    back = read_arrays(raw)
    assert list(back) == list(arrays)
    for key, value in arrays.items():
        assert back[key].dtype == value.dtype and np.array_equal(back[key], value)
        offset = back[key].__array_interface__["data"][0] - np.frombuffer(raw, np.uint8).ctypes.data
        assert offset % 8 == 0, key
    with pytest.raises(ValueError, match="not a"):
        read_arrays(b"something else")


def test_the_packed_taxonomy_pickles():
    """As one built from the Parquet tables does once its columns are read (worker processes
    receive taxonomies)."""
    import pickle

    wn = wordnet()
    back = pickle.loads(pickle.dumps(wn))
    assert back.gloss("dog.n.01") == wn.gloss("dog.n.01") and back.lexname(7) == wn.lexname(7)
    assert back.wup("dog.n.01", "cat.n.01") == wn.wup("dog.n.01", "cat.n.01")
    assert back.ids.tolist() == wn.ids.tolist() and back.names == wn.names
