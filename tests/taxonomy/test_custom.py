"""Custom hierarchies: loading, errors naming file and line, multi-root semantics, induced trees."""

from __future__ import annotations

import json

import numpy as np
import pytest

from semshift.errors import TaxonomyFormatError, UnknownNameError
from semshift.taxonomy import Taxonomy, load_taxonomy, read_custom_taxonomy


def test_csv_hierarchy_queries(aircraft_csv):
    tax = read_custom_taxonomy(aircraft_csv)
    assert tax.name == "aircraft" and len(tax) == 19
    assert sorted(tax.roots) == ["airbus", "boeing", "cessna"]
    assert tax.parents("737-300") == ["b737"]
    assert tax.children("b737") == ["737-300", "737-400", "737-500"]  # file order
    assert tax.sisters("737-300") == ["737-400", "737-500"]
    assert tax.ancestors("737-300") == ["b737", "boeing"]
    assert tax.descendants("boeing") == [
        "b737",
        "b747",
        "737-300",
        "737-400",
        "737-500",
        "747-100",
        "747-400",
    ]
    assert tax.label("a320fam") == "A320 family"
    assert tax.index("Boeing 737") == tax.index("b737")  # look-up by name
    assert tax.path_distance("737-300", "737-400") == 2
    assert tax.path_distance("737-300", "747-100") == 4
    # no common root: a simulated root one step above each side's farthest ancestor (nltk)
    assert tax.path_distance("737-300", "a319") == 6
    assert tax.max_depth == 3  # 2 levels + the simulated root
    assert tax.lch("737-300", "737-400") == pytest.approx(-np.log(3 / 6))
    assert tax.wup("737-300", "737-400") == pytest.approx(2 * 2 / (1 + 1 + 2 * 2))
    assert tax.wup("737-300", "a319") == pytest.approx(2 / (3 + 3 + 2))
    assert tax.lowest_common_ancestors("737-300", "747-100") == ["boeing"]
    assert tax.lowest_common_ancestors("737-300", "a319") == []
    m = tax.distance_matrix(["737-300", "a319"], ["737-400", "a320", "c172"])
    np.testing.assert_array_equal(m, [[2, 6, 6], [6, 2, 6]])


def test_json_hierarchy_equals_csv(aircraft_csv, tmp_path):
    csv_tax = read_custom_taxonomy(aircraft_csv)
    frame = csv_tax.to_frame()
    parents = dict(zip(frame.child, frame.parent, strict=True))
    nodes = [
        {"id": str(i), "parent": parents.get(str(i)), "name": csv_tax.label(str(i))}
        for i in csv_tax.ids
    ]
    path = tmp_path / "aircraft.json"
    path.write_text(json.dumps({"name": "aircraft", "nodes": nodes}, indent=2))
    js = read_custom_taxonomy(path)
    assert js.ids.tolist() == csv_tax.ids.tolist()
    ids = js.ids.tolist()
    np.testing.assert_array_equal(js.distance_matrix(ids, ids), csv_tax.distance_matrix(ids, ids))


def test_multiple_parents_in_csv(tmp_path):
    path = tmp_path / "dag.csv"
    path.write_text("id,parent\nroot,\na,root\nb,root\nc,a;b\nd,c\n")
    tax = read_custom_taxonomy(path)
    assert sorted(tax.parents("c")) == ["a", "b"]
    assert tax.depth("d") == 3 and tax.depth("d", "max") == 3
    assert tax.ancestor_distances("d") == {"root": 3, "a": 2, "b": 2, "c": 1, "d": 0}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "id,parent\nroot,\na,root\na,root\n",
            r"line 4: duplicate id 'a' \(first defined on line 3\)",
        ),
        ("id,parent\nroot,\na,rooot\n", r"line 3: parent 'rooot' of 'a' is not defined"),
        ("id,parent\nroot,\na,root,extra\n", r"line 3: expected 2 fields, got 3"),
        ("id,parent\nroot,\n,root\n", r"line 3: empty id"),
        ("name,up\nroot,\n", r"line 1: header must name columns 'id' and 'parent'"),
        ("id,parent\nroot,\na,c\nb,a\nc,b\n", r"line \d: taxonomy 'bad' has a cycle: .*->"),
        ("id,parent\nroot,\na,a\n", r"line 3: .*'a' is its own parent"),
    ],
)
def test_malformed_csv_names_file_and_line(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(TaxonomyFormatError, match=message) as err:
        read_custom_taxonomy(path)
    assert str(path) in str(err.value)


def test_cycle_message_lists_the_cycle(tmp_path):
    path = tmp_path / "cyc.csv"
    path.write_text("id,parent\nroot,\na,c\nb,a\nc,b\n")
    with pytest.raises(TaxonomyFormatError) as err:
        read_custom_taxonomy(path)
    msg = str(err.value)
    assert "line 3" in msg  # the first node of the cycle, 'a', is defined on line 3
    for node in ("a", "b", "c"):
        assert f"'{node}' ->" in msg or f"-> '{node}'" in msg


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[{"id": "r", "parent": null},\n {"id": "a", "parent": "r"},\n'
            ' {"id": "b", "parent": 3}]',
            r"line 3: 'parent' of 'b' must be a string",
        ),
        ('[{"id": "r"},\n {"parent": "r"}]', r"line 2: node 2 must be an object with a non-empty"),
        (
            '[{"id": "r"},\n {"id": "a", "parent": "r"}\n {"id": "b"}]',
            r"line 3, column 2: invalid JSON",
        ),
        ('{"id": "r"}', r"line 1: expected a list of nodes"),
        ('[{"id": "r"},\n {"id": "r", "parent": null}]', r"line 2: duplicate id 'r'"),
    ],
)
def test_malformed_json_names_file_and_line(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(TaxonomyFormatError, match=message):
        read_custom_taxonomy(path)


def test_load_taxonomy_resolution(tmp_path, aircraft_csv):
    assert load_taxonomy("wordnet").name == "wordnet-3.0"
    assert load_taxonomy(aircraft_csv).name == "aircraft"
    with pytest.raises(UnknownNameError, match=r"use 'wordnet' or a \.csv/\.json"):
        load_taxonomy(tmp_path / "missing.csv")
    bad = tmp_path / "x.yaml"
    bad.write_text("a: b")
    with pytest.raises(TaxonomyFormatError, match="unknown taxonomy format"):
        load_taxonomy(bad)


def test_induced_tree_follows_bfs_first_parent():
    # root -> a, b ; a -> c ; b -> c (c first reached from a) ; c -> d ; b -> e
    ids = ["root", "a", "b", "c", "d", "e"]
    child = [1, 2, 3, 3, 4, 5]
    parent = [0, 0, 1, 2, 3, 2]
    tax = Taxonomy(ids, child, parent, name="toy")
    assert tax.spanning_tree().tolist() == [-1, 0, 0, 1, 3, 2]
    tree = tax.induced_tree(["b", "c", "d", "e"])
    # c's spanning-tree parent is a (not kept), then root (not kept): c becomes a root
    assert sorted(tree.roots) == ["b", "c"]
    assert tree.parents("d") == ["c"] and tree.parents("e") == ["b"]
    tree2 = tax.induced_tree(["root", "b", "d"])
    assert tree2.parents("d") == ["root"] and tree2.parents("b") == ["root"]


def test_duplicate_ids_and_bad_edges_rejected():
    with pytest.raises(TaxonomyFormatError, match="duplicate node id 'a'"):
        Taxonomy(["a", "a"], [], [])
    with pytest.raises(TaxonomyFormatError, match="points outside"):
        Taxonomy(["a", "b"], [1], [5])


def test_graph_arrays_are_public_read_only_views():
    # root -> a, b ; a -> c ; b -> c ; c -> d ; b -> e
    ids = ["root", "a", "b", "c", "d", "e"]
    tax = Taxonomy(ids, [1, 2, 3, 3, 4, 5], [0, 0, 1, 2, 3, 2], names=list("RABCDE"), name="toy")
    ptr, idx = tax.parent_csr
    assert [sorted(idx[ptr[i] : ptr[i + 1]].tolist()) for i in range(6)] == [
        [],
        [0],
        [0],
        [1, 2],
        [3],
        [2],
    ]
    cptr, cidx = tax.child_csr
    assert sorted(cidx[cptr[2] : cptr[3]].tolist()) == [3, 5]
    assert tax.min_depths.tolist() == [0, 1, 1, 2, 3, 2]
    assert tax.leaf_rows.tolist() == [4, 5]
    assert tax.names == list("RABCDE")
    assert tax.id_rows(["c", "zz", "root"]).tolist() == [3, -1, 0]
    assert tax.below([1]).tolist() == [-1, 0, -1, 1, 2, -1]
    table = tax.ancestor_table
    lo, hi = table.ptr[4], table.ptr[5]
    assert dict(zip(table.anc[lo:hi].tolist(), table.dist[lo:hi].tolist(), strict=True)) == {
        0: 3,
        1: 2,
        2: 2,
        3: 1,
        4: 0,
    }
    with pytest.raises(ValueError, match="read-only"):
        ptr[0] = 5
    with pytest.raises(ValueError, match="read-only"):
        tax.min_depths[0] = 1
    assert tax.unknown_message("zz") == "unknown toy node 'zz'"
