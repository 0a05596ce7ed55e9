"""build_demo_data: determinism, the cache, bad input and the runner configuration."""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path

import pytest
import yaml

from semshift.demo import BINS, Augment, DemoParams, build_demo_data
from semshift.demo.build import DEMO_LISTED_LAST, DEMO_MODEL_LEVEL
from semshift.detectors import list_detectors
from semshift.errors import InputError

from .conftest import TINY, file_digests


def test_same_seed_gives_byte_identical_files(tiny_demo, tmp_path):
    again = build_demo_data(tmp_path, seed=0, params=TINY, progress=False)
    assert not again.cached and again.fingerprint == tiny_demo.fingerprint
    a, b = file_digests(tiny_demo.root), file_digests(again.root)
    a.pop("demo.json"), b.pop("demo.json")  # holds the timings
    assert sorted(a) == sorted(b)
    assert sum(k.endswith(".png") for k in a) == sum(s.n_images for s in tiny_demo.sets.values())
    different = [k for k in a if a[k] != b[k]]
    assert different == []  # PNGs, CSVs, taxonomy, split and the weights
    assert again.test_accuracy == tiny_demo.test_accuracy


def test_another_seed_gives_other_images(tiny_demo, tmp_path):
    other = build_demo_data(
        tmp_path, seed=1, params=dataclasses.replace(TINY, epochs=1), progress=False
    )
    a = file_digests(tiny_demo.root / "images" / "id_train")
    b = file_digests(other.root / "images" / "id_train")
    assert a.keys() != b.keys() or any(a[k] != b[k] for k in a)


def test_second_call_reuses_the_cache(tiny_demo):
    t0 = time.perf_counter()
    again = build_demo_data(tiny_demo.root.parent, seed=0, params=TINY, progress=False)
    seconds = time.perf_counter() - t0
    assert again.cached and seconds < 2.0
    assert again.id_classes == tiny_demo.id_classes
    assert again.test_accuracy == tiny_demo.test_accuracy
    assert again.homoglyphs.equals(tiny_demo.homoglyphs)
    assert again.sets == tiny_demo.sets


def test_changed_parameters_rebuild_in_place(tmp_path):
    p1 = dataclasses.replace(TINY, epochs=1)
    first = build_demo_data(tmp_path, params=p1, progress=False)
    second = build_demo_data(tmp_path, params=dataclasses.replace(p1, n_font=1), progress=False)
    assert not second.cached and second.fingerprint != first.fingerprint
    assert second.sets["font_stix"].n_images == second.num_classes
    meta = json.loads((tmp_path / "data" / "demo.json").read_text())
    assert meta["fingerprint"] == second.fingerprint
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # no temporary folders left
    assert build_demo_data(
        tmp_path, params=dataclasses.replace(p1, n_font=1), progress=False
    ).cached


def test_refuses_a_foreign_data_folder(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mine.txt").write_text("x")
    with pytest.raises(InputError, match="is not demo data"):
        build_demo_data(tmp_path, params=TINY, progress=False)
    assert (tmp_path / "data" / "mine.txt").read_text() == "x"


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"n_train": 0}, r"DemoParams.n_train must be a positive integer"),
        ({"font_families": ("comic",)}, r"unknown font family 'comic'"),
        ({"font_families": ("dejavu-sans",)}, r"dejavu-sans is the ID font"),
        ({"homoglyph_threshold": 1.5}, r"homoglyph_threshold must be in \(0, 1\)"),
        ({"id_groups": (("latin-capital", 27),)}, r"'latin-capital' has 26 characters"),
        ({"id_groups": (("latin-capitals", 2),)}, r"unknown group 'latin-capitals'; known: latin-"),
        ({"id_groups": (("arrows", 2), ("arrows", 1))}, r"names a group twice"),
        ({"augment": Augment(scale=(1.2, 1.0))}, r"DemoParams.augment: need 0 <= shift <= 8"),
        ({"font_size": 3}, r"font_size must be >= 8"),
    ],
)
def test_bad_parameters_name_the_field(tmp_path, change, match):
    with pytest.raises(InputError, match=match):
        build_demo_data(tmp_path, params=dataclasses.replace(TINY, **change), progress=False)


def test_config_follows_the_design_contract(tiny_demo, tmp_path):
    cfg = tiny_demo.config(tmp_path / "run", severities=(1, 3))
    assert list(cfg) == [
        "name", "output", "seed", "taxonomy", "classes", "splits", "model", "data",
        "detectors", "protocols", "metrics", "bootstrap", "report",
    ]  # fmt: skip
    assert cfg["model"]["name"] == "demo-glyphnet" and cfg["model"]["num_classes"] == 8
    assert cfg["model"]["preset"] == "resize32-crop32"
    assert set(cfg["protocols"]) == {"osr", "newclass_failure", "graded", "sanity",
                                     "generalisation", "operating_point",
                                     "distance_regression"}  # fmt: skip
    assert cfg["protocols"]["sanity"]["n_models"] == 3
    # every detector; NNGuide's bank (1 % of 128 training images) would be smaller than k = 100
    names = [d if isinstance(d, str) else d["name"] for d in cfg["detectors"]]
    # every post-hoc detector; the cheap model-level ones (the rest: --all-detectors)
    model_level = [n for n in list_detectors(level="model") if n in DEMO_MODEL_LEVEL]
    # lts, model-level until issue 28, keeps its place after the other post-hoc detectors
    post_hoc = list_detectors(level="post_hoc")
    post_hoc = [*(n for n in post_hoc if n not in DEMO_LISTED_LAST), *DEMO_LISTED_LAST]
    assert set(DEMO_LISTED_LAST) <= set(list_detectors(level="post_hoc"))
    assert names == [*post_hoc, *model_level]
    assert set(DEMO_MODEL_LEVEL) <= set(list_detectors(level="model"))
    every = tiny_demo.config(tmp_path, detectors="all")["detectors"]
    every_names = [d if isinstance(d, str) else d["name"] for d in every]
    assert every_names == [*post_hoc, *list_detectors(level="model")]
    assert {"name": "nnguide", "params": {"alpha": 1.0}} in cfg["detectors"]
    assert tiny_demo.config(tmp_path, detectors=["msp"])["detectors"] == ["msp"]
    sets = cfg["data"]["sets"]
    ood = {k: v for k, v in sets.items() if v["role"] == "ood"}
    # 3 semantic levels x (clean + 2 severities) grid cells, only the clean ones carry a split
    assert len(ood) == 9
    cells = {(v["semantic_level"], v["covariate_level"]) for v in ood.values()}
    assert cells == {(lv, c) for lv in BINS.values() for c in (0, 1, 3)}
    assert {v.get("split") for v in ood.values()} == {"easy", "medium", "hard", None}
    assert sets["hard_pixelate3"]["corruption"] == {"name": "pixelate", "severity": 3}
    cov = {k for k, v in sets.items() if v["role"] == "covariate"}
    assert cov == {"font_dejavu-serif", "font_dejavu-sans-mono", "font_stix",
                   "pixelate1", "pixelate3"}  # fmt: skip
    for name in ("id_train", "id_val", "id_test"):
        assert cfg["data"][name]["images"] == str(tiny_demo.sets[name].path.resolve())
    with pytest.raises(InputError, match="unknown corruption 'fog'"):
        tiny_demo.config(tmp_path, corruption="fog")
    with pytest.raises(InputError, match=r"severities must be in 1..5"):
        tiny_demo.config(tmp_path, severities=(0,))


def test_config_validates_with_the_runner_models(tiny_demo, tmp_path):
    from semshift.run.config import load_config

    cfg = load_config(tiny_demo.config(tmp_path / "run"), check_files=True)
    assert cfg.model is not None and cfg.model.weights == str(tiny_demo.weights_path.resolve())
    assert cfg.protocols.sanity is not None and cfg.protocols.sanity.n_models == 3
    assert cfg.data.sets["easy"].semantic_level == 3
    # the YAML file, with paths relative to its folder, validates the same way
    path = tiny_demo.write_config(tmp_path / "cfg" / "demo.yaml", tmp_path / "run")
    text = path.read_text(encoding="utf-8")
    assert "/tmp" not in yaml.safe_load(text)["data"]["id_test"]["images"]
    from_yaml = load_config(path, check_files=True)
    assert from_yaml.data.id_test.images == tiny_demo.sets["id_test"].path.resolve()
    assert from_yaml.output == (tmp_path / "run").resolve()


def test_default_parameters_are_the_documented_sizes():
    p = DemoParams()
    assert sum(k for _, k in p.id_groups) == 48
    sizes = (p.n_train, p.n_val, p.n_test, p.ood_classes, p.n_ood, p.n_font, p.epochs)
    assert sizes == (60, 10, 20, 24, 10, 10, 4)
    assert DemoParams.from_json(p.to_json()) == p


def test_shipped_example_config_is_what_write_config_writes(tiny_demo, tmp_path):
    """examples/configs/demo.yaml = write_config for the default demo folder (48 classes)."""
    example = Path(__file__).resolve().parents[2] / "examples" / "configs" / "demo.yaml"
    shipped = yaml.safe_load(example.read_text(encoding="utf-8"))
    # the tiny data moved to <tmp>/semshift-demo/data is found again by its fingerprint
    shutil.copytree(tiny_demo.root, tmp_path / "semshift-demo" / "data")
    moved = build_demo_data(tmp_path / "semshift-demo", params=TINY, progress=False)
    assert moved.cached
    (tmp_path / "examples" / "configs").mkdir(parents=True)
    path = moved.write_config(
        tmp_path / "examples" / "configs" / "demo.yaml", tmp_path / "semshift-demo" / "run"
    )
    expected = yaml.safe_load(path.read_text(encoding="utf-8"))
    expected["model"]["num_classes"] = sum(k for _, k in DemoParams().id_groups)
    assert shipped == expected
    from semshift.run.config import load_config

    cfg = load_config(example, check_files=False)
    assert cfg.output == (example.parent / "../../semshift-demo/run").resolve()


def test_summary_reads_the_built_data(tiny_demo):
    text = tiny_demo.summary()
    homo_lines = [ln for ln in text.splitlines() if " ~ " in ln]
    assert len(homo_lines) == len(tiny_demo.homoglyphs)
    first = tiny_demo.homoglyphs.iloc[0]
    assert f"- {first['char']} {first['name']} ~ {first['nearest_id_char']}" in text
    for cid in tiny_demo.id_classes:
        assert chr(int(cid[2:], 16)) in text
    assert "- latin-capital: " in text and "- arrows: " in text
    assert f"closed-set accuracy {100 * tiny_demo.test_accuracy:.1f} %" in text
