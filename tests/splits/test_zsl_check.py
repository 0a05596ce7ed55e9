"""Zero-shot splits (proposed split v2) and the leak checker, with every kind of leak planted."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from semshift.errors import InputError
from semshift.splits import SplitManifest, build_ssb_split
from semshift.splits.check import check_split
from semshift.splits.zsl import build_zsl_split
from semshift.taxonomy import load_classlist

EXE = str(Path(sys.executable).parent / "semshift")


@pytest.fixture
def dataset(tmp_path):
    """60 WordNet classes x 5 tiny distinct 'image' files, listed as 'path label'."""
    classes = list(load_classlist("imagenet21k-p").ids[2000:2060])
    lines = []
    for c in classes:
        for j in range(5):
            p = tmp_path / "img" / c / f"{j}.jpg"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(f"{c}-{j}".encode())
            lines.append(f"img/{c}/{j}.jpg {c}")
    lst = tmp_path / "images.txt"
    lst.write_text("\n".join(lines) + "\n")
    return classes, lst


def test_zsl_split_structure(dataset):
    classes, lst = dataset
    r = build_zsl_split(classes, lst, seed=3)
    m = r.manifest
    unseen, seen = set(m.bins["unseen"]), set(m.known)
    assert len(unseen) == 12 and len(seen) == 48 and not unseen & seen
    assert set(m.bins["train"]) | set(m.bins["val"]) == seen
    assert not set(m.bins["train"]) & set(m.bins["val"]) and len(m.bins["val"]) == 10
    img = r.images
    per = img.groupby("set")
    assert set(img.loc[img.set == "test_unseen", "class"]) == unseen
    assert set(img.loc[img.set == "test_seen", "class"]) == seen
    assert (per.size()[["test_seen", "trainval"]] == [48, 192]).all()  # 1 of 5 per class
    tv = set(img.loc[img.set == "trainval", "path"])
    assert set(img.loc[img.set.isin(["train", "val"]), "path"]) == tv
    assert not tv & set(img.loc[img.set == "test_seen", "path"])  # the v1 bug is absent
    # deterministic for a seed, different for another
    again = build_zsl_split(classes, lst, seed=3)
    assert again.manifest.to_dict() == m.to_dict() and again.images.equals(img)
    assert build_zsl_split(classes, lst, seed=4).manifest.bins != m.bins
    assert check_split(m, img, root=lst.parent).ok


def test_zsl_not_unseen_and_hops(dataset, wn):
    classes, lst = dataset
    fixed = classes[:30]
    r = build_zsl_split(classes, lst, not_unseen=fixed, max_hops=4, unseen_fraction=0.1)
    unseen = r.manifest.bins["unseen"]
    assert not set(unseen) & set(fixed)
    assert (wn.distance_matrix(fixed, unseen).min(axis=0) <= 4).all()
    with pytest.raises(InputError, match="max_hops needs not_unseen"):
        build_zsl_split(classes, lst, max_hops=2)
    with pytest.raises(InputError, match="cannot draw 12 unseen classes from 0 eligible"):
        build_zsl_split(classes, lst, not_unseen=classes)


def test_zsl_bad_image_list(tmp_path, dataset):
    classes, _ = dataset
    bad = tmp_path / "bad.txt"
    bad.write_text(f"a.jpg {classes[0]}\nb.jpg n02084071\n")
    with pytest.raises(InputError, match=r"bad.txt, line 2: class 'n02084071' is not one of"):
        build_zsl_split(classes, bad)
    bad.write_text("lonely_path_without_label\n")
    with pytest.raises(InputError, match=r"line 1: expected 'path label'"):
        build_zsl_split(classes, bad)


def test_checker_finds_every_planted_leak(tmp_path, dataset):
    classes, lst = dataset
    r = build_zsl_split(classes, lst, seed=0)
    out = r.write(tmp_path / "zsl")
    assert check_split(out).ok  # image_root recorded in the manifest
    img = r.images.copy()
    test_seen = img[img.set == "test_seen"].iloc[0]
    test_unseen = img[img.set == "test_unseen"].iloc[0]
    # 1. v1 bug: a test_seen image also in the train set
    leak1 = pd.DataFrame([{"path": test_seen.path, "class": test_seen["class"], "set": "train"}])
    # 2. a copied file: a test_unseen image's bytes under another name in trainval
    copy = tmp_path / "img" / "copy.jpg"
    shutil.copy(tmp_path / test_unseen.path, copy)
    leak2 = pd.DataFrame(
        [{"path": "img/copy.jpg", "class": r.manifest.known[0], "set": "trainval"}]
    )
    # 3. an image of an unseen class in trainval
    leak3 = pd.DataFrame([{"path": "img/x.jpg", "class": test_unseen["class"], "set": "trainval"}])
    (tmp_path / "img" / "x.jpg").write_bytes(b"unique bytes")
    # 4. a missing file
    leak4 = pd.DataFrame(
        [{"path": "img/missing.jpg", "class": r.manifest.known[0], "set": "test_seen"}]
    )
    bad_images = pd.concat([img, leak1, leak2, leak3, leak4], ignore_index=True)
    bad_images.to_csv(out / "images.csv", index=False)
    # 5. a class both seen and unseen
    data = json.loads((out / "split.json").read_text())
    data["bins"]["unseen"].append(data["known"][0])
    (out / "split.json").write_text(json.dumps(data))
    rep = check_split(out)
    v = rep.violations
    kinds = set(v.kind)
    assert kinds == {
        "image_path_overlap",
        "image_content_overlap",
        "image_class_mismatch",
        "unreadable_image",
        "class_overlap",
    }
    row = v[v.kind == "image_path_overlap"].iloc[0]
    assert {row.set_a, row.set_b} == {"test_seen", "train"} and row["item"].endswith(test_seen.path)
    content = v[v.kind == "image_content_overlap"].iloc[0]
    assert {content.set_a, content.set_b} == {"test_unseen", "trainval"}
    assert "copy.jpg" in content["item"] and test_unseen.path in content["item"]
    mism = v[v.kind == "image_class_mismatch"]
    assert "img/x.jpg" in mism["item"].tolist()
    assert v[v.kind == "unreadable_image"]["item"].iloc[0].endswith("img/missing.jpg")
    cls = v[v.kind == "class_overlap"].iloc[0]
    assert (cls.set_a, cls.set_b, cls["item"]) == ("known", "unseen", data["known"][0])
    # the command exits 1 and names the violations
    res = subprocess.run(
        [EXE, "splits", "check", str(out), "--report", str(tmp_path / "v.csv")],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 1
    assert "image_path_overlap" in res.stdout and "class_overlap" in res.stdout
    assert len(pd.read_csv(tmp_path / "v.csv")) == len(v)


def test_checker_on_other_manifests(tmp_path):
    r = build_ssb_split(preset="nearest", bin_size=200)
    assert check_split(r.manifest).ok
    m = SplitManifest.from_dict(r.manifest.to_dict())
    m.bins["hard"].append(m.known[5])
    m.bins["easy"].append(m.bins["medium"][0])
    v = check_split(m).violations
    pairs = {(a, b) for a, b in zip(v.set_a, v.set_b, strict=True)}
    assert pairs == {("known", "hard"), ("easy", "medium")}
    assert np.array_equal(np.sort(v["item"]), np.sort([m.known[5], m.bins["medium"][0]]))
    res = subprocess.run(
        [EXE, "splits", "check", str(tmp_path / "nope")], capture_output=True, text=True
    )
    assert res.returncode == 2 and "cannot read split manifest" in res.stderr
