"""ImageNet-OOD cleaning rules 1-4 and the visual-ambiguity filter (rule 5)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from semshift.errors import InputError, UnknownNameError
from semshift.splits.cleaning import build_cleaning_split, visual_ambiguity
from semshift.taxonomy import load_classlist, read_custom_taxonomy

TOY = """id,parent
entity,
life,entity
dog,life
wolf,life
artifact,entity
device,artifact
clock,device
alarm_clock,clock
watch,device
vehicle,artifact
car,vehicle
truck,vehicle
bus,vehicle
bike,vehicle
wheeled,vehicle
cart,wheeled
food,entity
bread,food
toast,food
furniture,entity
chair,furniture
"""


@pytest.fixture
def toy(tmp_path):
    path = tmp_path / "toy.csv"
    path.write_text(TOY)
    return read_custom_taxonomy(path)


def test_rules_on_a_hand_built_hierarchy(toy):
    ids = ["dog", "clock", "car", "truck", "bread"]
    pool = [
        "dog",
        "life",
        "wolf",
        "alarm_clock",
        "watch",
        "device",
        "bus",
        "bike",
        "cart",
        "chair",
        "toast",
    ]
    r = build_cleaning_split(ids, pool, taxonomy=toy, exclude_subtrees=["life"])
    rules = dict(zip(r.audit.wnid, r.audit.rule, strict=True))
    assert rules == {
        "dog": "id_related",  # an ID class
        "life": "id_related",  # hypernym of dog
        "wolf": "excluded_subtree",
        "alarm_clock": "id_related",  # hyponym of clock
        "watch": "covariate_shift",  # device holds only the ID class clock
        "device": "id_related",
        "bus": "",
        "bike": "",
        "cart": "not_sister",
        "chair": "not_sister",
        "toast": "covariate_shift",  # food holds only bread
    }
    assert r.manifest.bins == {
        "kept": ["bus", "bike"],
        "dropped": [p for p in pool if p not in ("bus", "bike")],
    }
    assert r.counts == {
        "id_related": 4,
        "excluded_subtree": 1,
        "covariate_shift": 2,
        "not_sister": 2,
        "candidates": 11,
        "kept": 2,
        "after_rules_1_2": 6,
        "sisters_after_rules_1_2": 4,
    }
    reasons = dict(zip(r.audit.wnid, r.audit.reason, strict=True))
    assert reasons["alarm_clock"] == "hyponym of ID class clock (clock)"
    assert reasons["watch"] == "under device (device), which holds only ID class clock (clock)"
    assert reasons["wolf"] == "under excluded subtree life (life)"
    # without rule 4, the non-sisters stay
    r2 = build_cleaning_split(ids, pool, taxonomy=toy, exclude_subtrees=[], sisters_only=False)
    kept2 = set(r2.manifest.bins["kept"])
    assert kept2 == {"bus", "bike", "cart", "chair"}
    assert dict(zip(r2.audit.wnid, r2.audit.rule, strict=True))["wolf"] == "covariate_shift"


def test_imagenet_rules_agree_with_plain_set_logic(wn):
    r = build_cleaning_split()
    c = r.counts
    assert c["candidates"] == 11_221
    assert (
        sum(c[k] for k in ("id_related", "excluded_subtree", "covariate_shift", "not_sister"))
        + c["kept"]
        == 11_221
    )
    assert 0 < c["kept"] < c["sisters_after_rules_1_2"] < c["after_rules_1_2"] < 11_221
    id_set = set(load_classlist("imagenet1k").ids)
    anc = {k: set(wn.ancestors(k)) for k in id_set}
    id_below: dict[str, int] = {}
    for k in id_set:
        for a in anc[k] | {k}:
            id_below[a] = id_below.get(a, 0) + 1
    organism = wn.id("organism.n.01")
    id_parents = {p for k in id_set for p in wn.parents(k)}
    rng = np.random.default_rng(1)
    audit = r.audit.set_index("wnid")
    for u in rng.choice(audit.index.to_numpy(), 250, replace=False):
        ua = set(wn.ancestors(u))
        if u in id_set or id_below.get(u, 0) > 0 or ua & id_set:
            expected = "id_related"
        elif organism in ua or u == organism:
            expected = "excluded_subtree"
        elif any(id_below.get(a, 0) == 1 for a in ua):
            expected = "covariate_shift"
        elif not set(wn.parents(u)) & id_parents:
            expected = "not_sister"
        else:
            expected = ""
        assert audit.loc[u, "rule"] == expected, u


def test_cleaning_writes_manifest_and_audit(tmp_path, toy):
    r = build_cleaning_split(
        ["clock", "car", "truck"], ["bus", "watch"], taxonomy=toy, exclude_subtrees=[]
    )
    out = r.write(tmp_path / "clean")
    import json

    import pandas as pd

    data = json.loads((out / "split.json").read_text())
    assert data["method"] == "cleaning" and list(data["bins"]) == ["kept", "dropped"]
    assert data["bins"] == {"kept": ["bus"], "dropped": ["watch"]}
    audit = pd.read_csv(out / "audit.csv", keep_default_na=False)
    assert list(audit.columns) == ["wnid", "name", "kept", "rule", "reason"]


def test_unknown_excluded_subtree_is_named(toy):
    with pytest.raises(UnknownNameError, match=r"'lyfe'.*--exclude-subtree"):
        build_cleaning_split(["clock"], ["bus"], taxonomy=toy, exclude_subtrees=["lyfe"])


def test_visual_ambiguity_matches_brute_force():
    rng = np.random.default_rng(0)
    id_feats = rng.normal(size=(300, 16)).astype(np.float32)
    near = id_feats[:6] + 0.01 * rng.normal(size=(6, 16)).astype(np.float32)
    far = rng.normal(size=(14, 16)).astype(np.float32) + 8.0
    cand = np.concatenate([near, far])
    classes = np.array(["a"] * 4 + ["b"] * 2 + ["b"] * 6 + ["c"] * 8)
    images, per_class = visual_ambiguity(id_feats, cand, classes, threshold=1.0, block=5)
    d = cdist(cand.astype(np.float64), id_feats.astype(np.float64))
    np.testing.assert_array_equal(images["nearest_id"], d.argmin(axis=1))
    np.testing.assert_allclose(images["distance"], d.min(axis=1), rtol=1e-4, atol=1e-4)
    assert images["dropped"].tolist() == [True] * 6 + [False] * 14
    pc = per_class.set_index("class")
    assert pc.loc["a", "dropped"] and not pc.loc["b", "dropped"] and not pc.loc["c", "dropped"]
    assert pc.loc["b", "fraction"] == pytest.approx(2 / 8)
    img_cos, _ = visual_ambiguity(id_feats, cand, classes, threshold=0.01, metric="cosine")
    x = id_feats / np.linalg.norm(id_feats, axis=1, keepdims=True)
    y = cand / np.linalg.norm(cand, axis=1, keepdims=True)
    np.testing.assert_allclose(img_cos["distance"], (1 - y @ x.T).min(axis=1), atol=1e-5)


def test_visual_ambiguity_bad_input():
    x = np.zeros((3, 4))
    with pytest.raises(InputError, match="feature dimensions differ: ID 4 vs candidates 5"):
        visual_ambiguity(x, np.zeros((2, 5)), ["a", "b"], threshold=1)
    y = np.zeros((2, 4))
    y[1, 2] = np.nan
    with pytest.raises(InputError, match=r"candidate_features has 1 rows with NaN.*row 1"):
        visual_ambiguity(x, y, ["a", "b"], threshold=1)
    with pytest.raises(InputError, match="candidate_class has 1 entries for 2 images"):
        visual_ambiguity(x, np.zeros((2, 4)), ["a"], threshold=1)
