"""End to end from images: extraction through a tiny registered CNN, the random-model sanity
check, and the extraction cache."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from tests.tiny_model import register_tiny_cnn

from semshift.errors import InputError
from semshift.features.models import MODELS
from semshift.run import run

torch.set_num_threads(1)
MODEL = register_tiny_cnn()


def _write_images(root, classes, seed):
    from PIL import Image

    rng = np.random.default_rng(seed)
    for folder, (count, colour) in classes.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        for k in range(count):
            arr = rng.integers(0, 60, (32, 32, 3)).astype(np.int64)
            arr[..., colour] += 180  # class = dominant colour channel
            Image.fromarray(arr.clip(0, 255).astype(np.uint8)).save(root / folder / f"{k}.png")


@pytest.fixture(scope="module")
def image_config(tmp_path_factory):
    root = tmp_path_factory.mktemp("images")
    _write_images(root / "train", {"r": (6, 0), "g": (6, 1), "b": (6, 2)}, 0)
    _write_images(root / "test", {"r": (4, 0), "g": (4, 1), "b": (4, 2)}, 1)
    _write_images(root / "ood", {"grey": (8, 0)}, 2)
    (root / "classes.txt").write_text("r\ng\nb\n")
    torch.manual_seed(0)
    weights = root / "tiny.pt"
    torch.save(MODELS[MODEL].build(num_classes=3).module.state_dict(), weights)
    return root, {
        "output": str(root / "out"),
        "classes": str(root / "classes.txt"),
        "model": {"name": MODEL, "weights": str(weights), "num_classes": 3,
                  "preset": "resize32-crop32", "batch_size": 8, "shard_size": 16},
        "data": {
            "id_train": {"images": str(root / "train")},
            "id_test": {"images": str(root / "test")},
            "sets": {
                "ood": {"role": "ood", "split": "ood", "images": str(root / "ood")},
                "noise": {"role": "covariate", "covariate_level": 3, "images": str(root / "test"),
                          "corruption": {"name": "gaussian_noise", "severity": 3}},
            },
        },
        "detectors": ["msp", "energy", {"name": "knn", "params": {"k": 3}}, "odin"],
        "protocols": {"osr": {}, "sanity": {"n_models": 2, "delta": 0.05}},
        "bootstrap": {"n_resamples": 20},
    }  # fmt: skip


def test_images_are_extracted_scored_and_sanity_checked(image_config):
    from semshift.features import open_store

    root, cfg = image_config
    out = root / "out"
    result = run(cfg, progress=False)
    ext = result.stages["extract"]
    # 4 sources with the weights + the same 4 through each of 2 random-init copies
    assert len(ext.computed) == 4 + 4 * 2 and not ext.reused
    assert any(k.endswith("(random seed 1)") for k in ext.keys)
    prov = json.loads((out / "results.json").read_text())
    store = open_store(prov["sets"]["noise"]["store"])
    assert len(store) == 12 and set(store.index["corruption"]) == {"gaussian_noise"}
    assert "odin" in store.array_names  # model-level detector computed during extraction
    assert store.meta["classes"]["ids"] == ["r", "g", "b"]
    ood = open_store(prov["sets"]["ood"]["store"])
    assert (ood.labels == -1).all()  # 'grey' is not in the class list: unknown
    # odin scores are read back from the store's score column
    import pandas as pd

    frame = pd.read_parquet(out / "scores" / "ood.parquet")
    np.testing.assert_allclose(frame["score:odin"], ood.arrays("odin")[0].astype(np.float64))
    # sanity: per seed, set and detector an AUROC row; the per-seed score files exist
    table = result.results
    san = table[table["protocol"] == "sanity"]
    assert set(san["split"].dropna()) >= {"seed0", "seed1"}
    assert (out / "sanity" / "seed1" / "ood.parquet").is_file()
    assert prov["seeds"]["sanity_models"] == [0, 1]
    # the covariate set is the ID test images with noise: same labels, other scores
    noise = pd.read_parquet(out / "scores" / "noise.parquet")
    test = pd.read_parquet(out / "scores" / "id_test.parquet")
    np.testing.assert_array_equal(noise["label"], test["label"])
    assert not np.allclose(noise["score:msp"], test["score:msp"])

    again = run(cfg, progress=False)
    assert again.stages["extract"].computed == [] and len(again.stages["extract"].reused) == 12
    assert all(rec.cached for rec in again.stages.values())
    pd.testing.assert_frame_equal(again.results, result.results)


def test_random_copies_share_the_pass_and_each_store_is_cached_alone(image_config, monkeypatch):
    """The configured model and its random copies are extracted in one pass over each source;
    the stores are those of one model per pass, and a lost entry is recomputed alone."""
    import shutil

    import pandas as pd

    from semshift.features import open_store
    from semshift.features.data import open_source
    from semshift.features.extract import extract
    from semshift.features.models import load_model
    from semshift.run import extract as runner

    root, base = image_config
    together = run({**base, "output": str(root / "together")}, progress=False)
    monkeypatch.setattr(runner, "MODELS_PER_PASS_BYTES", 1)  # one model per pass
    alone = run({**base, "output": str(root / "alone")}, progress=False)
    keys = together.stages["extract"].keys
    assert keys == alone.stages["extract"].keys and len(keys) == 12

    def store(out, label):
        return open_store(root / out / ".cache" / "extract" / keys[label])

    for label in keys:
        assert store("together", label).checksums() == store("alone", label).checksums(), label
    pd.testing.assert_frame_equal(together.results, alone.results)
    # the random copy's store is what extracting that model alone writes
    direct = root / "direct"
    extract(
        load_model(MODEL, random_init=True, seed=1, num_classes=3),
        open_source(root / "ood", root / "classes.txt", unknown="ood"),
        direct, preset="resize32-crop32", batch_size=8, shard_size=16, scores=["odin"],
        progress=False, fsync=False,
    )  # fmt: skip
    assert open_store(direct).checksums() == store("together", "ood (random seed 1)").checksums()
    # one lost entry: only it is extracted again, to the same bytes
    before = store("together", "ood (random seed 1)").checksums()
    shutil.rmtree(root / "together" / ".cache" / "extract" / keys["ood (random seed 1)"])
    again = run({**base, "output": str(root / "together")}, progress=False)
    assert again.stages["extract"].computed == ["ood (random seed 1)"]
    assert store("together", "ood (random seed 1)").checksums() == before
    pd.testing.assert_frame_equal(again.results, together.results)


def test_open_clip_model_in_a_config_gets_its_class_names(image_config, tmp_path):
    """A zero-shot run from a config: the open_clip head is built from the class list's names
    (the runner passes them; before, only the CLI did and a config run failed)."""
    import pandas as pd
    from tests.features.conftest import TINY_CLIP

    from semshift.features.models import load_model, register_open_clip_config

    root, base = image_config
    register_open_clip_config("semshift-run-clip", TINY_CLIP)
    clip = load_model("open_clip/semshift-run-clip", random_init=True, seed=0,
                      classnames=["red", "green", "blue"])  # fmt: skip
    weights = tmp_path / "clip.pt"
    torch.save(clip.module.state_dict(), weights)
    (tmp_path / "classes.txt").write_text("r red\ng green\nb blue\n")
    cfg = {
        **base,
        "output": str(tmp_path / "out"),
        "classes": str(tmp_path / "classes.txt"),
        "model": {"name": "open_clip/semshift-run-clip", "weights": str(weights),
                  "preset": "resize32-crop32", "batch_size": 8},
        "detectors": ["msp", "mls"],
        "protocols": {"osr": {}},
    }  # fmt: skip
    result = run(cfg, progress=False)
    assert not result.errors
    frame = pd.read_parquet(tmp_path / "out" / "scores" / "id_test.parquet")
    # the zero-shot head of the run equals the one built from the same names directly
    from semshift.features.data import open_source
    from semshift.features.extract import extract

    extract(clip, open_source(root / "test", tmp_path / "classes.txt"), tmp_path / "direct",
            preset="resize32-crop32", batch_size=8, progress=False)  # fmt: skip
    from semshift.features import open_store

    logits = open_store(tmp_path / "direct").arrays("logits")[0]
    np.testing.assert_array_equal(frame["pred"].to_numpy(), logits.argmax(1))
    assert set(frame["pred_name"]) <= {"red", "green", "blue"}


def test_operating_point_from_a_config_thresholds_on_id_val_and_shows_a_gallery(
    image_config, tmp_path
):
    """protocols.operating_point: the threshold comes from the scored id_val set, the rates
    per set match a hand count on the score files, and the report embeds thumbnails with
    their predicted class, nearest known class and score."""
    import re

    import pandas as pd

    root, base = image_config
    tax = tmp_path / "colours.csv"
    tax.write_text("id,parent,name\ncolour,,colour\nwarm,colour,warm\ncool,colour,cool\n"
                   "r,warm,red\ng,cool,green\nb,cool,blue\ngrey,warm,grey\n")  # fmt: skip
    cfg = {
        **base,
        "output": str(tmp_path / "out"),
        "taxonomy": str(tax),
        "data": {**base["data"], "id_val": {"images": str(root / "test")}},
        "detectors": ["msp", "energy"],
        "protocols": {"operating_point": {"recall": 0.9, "gallery": 2}},
        "report": {"formats": ["html", "md"]},
    }
    result = run(cfg, progress=False)
    assert not result.errors, result.errors
    table = result.results
    op = table[table["protocol"] == "operating_point"]
    out = tmp_path / "out"
    val = pd.read_parquet(out / "scores" / "id_val.parquet")
    ood = pd.read_parquet(out / "scores" / "ood.parquet")
    for det in ("msp", "energy"):
        thr = op.query("detector == @det and metric == 'threshold'")
        assert thr["split"].item() == "id_val"
        t = thr["value"].item()
        s_val = np.sort(val[f"score:{det}"].to_numpy())
        # the largest t keeping at least 90 % of the validation scores
        k = int(np.ceil(0.9 * len(s_val) - 1e-9))
        assert t == pytest.approx(s_val[len(s_val) - k])
        rej = op.query("detector == @det and set == 'ood' and metric == 'rejection_rate'")
        assert rej["value"].item() == pytest.approx(np.mean(ood[f"score:{det}"] < t))
    assert {"path", "class_id", "pred_name", "nearest_known"} <= set(ood.columns)
    assert set(ood["class_id"]) == {"grey"}
    assert set(ood["class_name"]) == {"grey"}  # the true class's name in the taxonomy
    assert set(ood["pred_name"]) <= {"red", "green", "blue"}  # names from the taxonomy
    assert all(Path(p).is_absolute() and Path(p).is_file() for p in ood["path"])
    # grey sits under 'warm' beside r: its nearest known class in the taxonomy is r (red)
    assert set(ood["nearest_known"]) == {"r"} and set(ood["nearest_known_name"]) == {"red"}
    test_rows = pd.read_parquet(out / "scores" / "id_test.parquet")
    assert test_rows["nearest_known"].isna().all()  # known classes have none
    html = (out / "report.html").read_text()
    assert len(re.findall(r"data:image/(?:png|jpeg);base64,", html)) >= 2
    assert "Operating point" in html and "unreadable image" not in html
    assert "set ood, class grey (grey)" in html  # a gallery caption names the true class
    assert (out / "report.html").stat().st_size < 10_000_000


def test_a_set_read_by_a_release_layout(image_config, tmp_path):
    """data.<set>.layout: a public release's own layout (here Stanford Cars' folder release,
    label = position of the class in names.csv, the devkit order) is extracted like an image
    folder."""
    import pandas as pd

    root, base = image_config
    cars = tmp_path / "cars" / "car_data" / "car_data"
    _write_images(cars / "train", {"r": (6, 0), "g": (6, 1), "b": (6, 2)}, 0)
    _write_images(cars / "test", {"r": (4, 0), "g": (4, 1), "b": (4, 2)}, 1)
    (tmp_path / "cars" / "names.csv").write_text("r\nb\ng\n")
    lay = {"name": "stanford_cars", "root": str(tmp_path / "cars")}
    cfg = {
        **{k: v for k, v in base.items() if k != "classes"},
        "output": str(tmp_path / "out"),
        "data": {
            "id_train": {"layout": {**lay, "params": {"split": "train"}}},
            "id_test": {"layout": {**lay, "params": {"split": "test"}}},
            "sets": {"ood": {"role": "ood", "split": "ood", "images": str(root / "ood")}},
        },
        "detectors": ["msp"],
        "protocols": {"osr": {}},
    }
    result = run(cfg, progress=False)
    assert not result.errors
    test = pd.read_parquet(tmp_path / "out" / "scores" / "id_test.parquet")
    # names.csv lists r, b, g -> labels 0, 1, 2 (not the sorted folder order)
    expected = {"r": 0, "b": 1, "g": 2}
    assert (test["label"] == test["class_id"].map(expected)).all()
    assert len(test) == 12
    bad = {**cfg, "data": {**cfg["data"], "id_test": {"layout": {**lay, "name": "stanford_car"}}}}
    with pytest.raises(InputError, match=r"data\.id_test\.layout\.name: unknown layout"):
        run(bad, progress=False)
    bad = {**cfg, "data": {**cfg["data"],
                           "id_test": {"layout": {**lay, "params": {"splt": "test"}}}}}  # fmt: skip
    with pytest.raises(InputError, match=r"takes no parameter splt; accepted: split"):
        run(bad, progress=False)
