"""LogitNorm and Outlier Exposure runs; the outlier set checked against the test splits."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
from safetensors.torch import load_file

from semshift.cli import main
from semshift.errors import InputError
from semshift.splits.manifest import SplitManifest
from semshift.training.loop import train
from semshift.training.recipe import Recipe, TrainConfig

from .images import write_class_images

RECIPE = Recipe(epochs=2, batch_size=6, lr=0.05, randaugment_n=0)


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("oe")
    data = write_class_images(base / "id", {"n001": 6, "n002": 6})
    outliers = write_class_images(base / "aux", {"n101": 4, "n102": 4}, seed=1)
    clean = SplitManifest("ssb", {}, "wordnet", ["n001", "n002"], {"easy": ["n201"]})
    leaky = SplitManifest("ssb", {}, "wordnet", ["n001", "n002"], {"hard": ["n300", "n102"]})
    return {
        "data": data,
        "outliers": outliers,
        "clean": clean.write(base / "clean"),
        "leaky": leaky.write(base / "leaky"),
    }


def _oe(folders, *splits: str, **kw) -> TrainConfig:
    base = {
        "model": "demo-glyphnet", "data": str(folders["data"]), "method": "oe", "recipe": RECIPE,
        "outliers": str(folders["outliers"]), "test_splits": [str(folders[s]) for s in splits],
    }  # fmt: skip
    return TrainConfig(**(base | kw))


def test_outlier_exposure_trains_and_is_deterministic(folders, tmp_path):
    a = train(_oe(folders, "clean"), tmp_path / "a", threads=1)
    b = train(_oe(folders, "clean"), tmp_path / "b", threads=1)
    ce = train(
        TrainConfig(model="demo-glyphnet", data=str(folders["data"]), recipe=RECIPE,
                    method_params={"label_smoothing": 0.0}),
        tmp_path / "ce", threads=1,
    )  # fmt: skip
    wa, wb = (load_file(str(r.model_file)) for r in (a, b))
    assert all((wa[k] == wb[k]).all() for k in wa)
    assert a.history == [
        h | {"images_per_s": a.history[i]["images_per_s"], "seconds": a.history[i]["seconds"]}
        for i, h in enumerate(b.history)
    ]
    # the outlier term changes the loss: the first epoch starts from the same weights and batches
    assert a.history[0]["loss"] > ce.history[0]["loss"]
    assert a.config.test_splits == [str(folders["clean"].resolve())]


def test_outliers_that_leak_into_a_test_split_are_refused(folders, tmp_path):
    with pytest.raises(InputError, match=r"1 outlier classes leak .*n102 is in .*leaky.*:hard"):
        train(_oe(folders, "clean", "leaky"), tmp_path / "x")
    with pytest.raises(InputError, match="give the test splits"):
        train(_oe(folders), tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_outliers_need_oe_and_unlabelled_outliers_are_refused(folders, tmp_path):
    loose = tmp_path / "loose"
    loose.mkdir()
    shutil.copy(folders["outliers"] / "n101" / "000.png", loose / "a.png")
    with pytest.raises(InputError, match="1 images have no class"):
        train(_oe(folders, "clean", outliers=str(loose)), tmp_path / "x")
    with pytest.raises(InputError, match="takes no outlier images"):
        train(_oe(folders, "clean", method="ce"), tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_cli_oe_leak_is_exit_2(folders, tmp_path, capsys):
    args = ["train", "--model", "demo-glyphnet", "--data", str(folders["data"]), "--method", "oe",
            "--outliers", str(folders["outliers"]), "--test-split", str(folders["leaky"]),
            "--out", str(tmp_path / "o"), "--epochs", "1", "--no-progress"]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main(args)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "leak into a test split" in err and err.count("\n") == 1


def test_logitnorm_trains_with_a_loss_bounded_by_its_temperature(folders, tmp_path):
    tau = 0.5
    res = train(
        TrainConfig(model="demo-glyphnet", data=str(folders["data"]), method="logitnorm",
                    method_params={"temperature": tau}, recipe=RECIPE),
        tmp_path / "ln", threads=1,
    )  # fmt: skip
    # normalised logits lie on a sphere of radius 1/tau: with 2 classes the loss is at least
    # log(1 + exp(-sqrt(2)/tau)) and at most log(1 + exp(sqrt(2)/tau))
    lo, hi = math.log1p(math.exp(-math.sqrt(2) / tau)), math.log1p(math.exp(math.sqrt(2) / tau))
    assert all(lo <= h["loss"] <= hi for h in res.history)
    assert res.config.method_params == {"temperature": tau}
