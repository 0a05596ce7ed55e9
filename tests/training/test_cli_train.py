"""``semshift train``: a run whose weights ``semshift extract`` takes; one-line errors, exit 2;
the configuration from a YAML file (``--config``), the options overriding it."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from semshift.cli import main
from semshift.features import open_store
from semshift.features.data import open_source
from semshift.features.models import load_model
from semshift.training.images import TrainImages
from semshift.training.recipe import check_config_file

from .images import write_class_images

FAST = ["--epochs", "2", "--batch-size", "8", "--lr", "0.05", "--randaugment", "1", "9"]
FAST += ["--threads", "1", "--no-progress"]


def cli(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    got = capsys.readouterr()
    return int(exc.value.code or 0), got.out, got.err


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_class_images(tmp_path_factory.mktemp("cli") / "imgs", {"a": 6, "b": 6, "c": 6})


def test_train_then_extract_stores_the_trained_models_logits(capsys, data, tmp_path):
    out = tmp_path / "run"
    code, stdout, err = cli(capsys, "train", "--model", "demo-glyphnet", "--data", str(data),
                            "--out", str(out), "--param", "label_smoothing=0.1", *FAST)  # fmt: skip
    assert code == 0, err
    assert "2 epochs of ce on demo-glyphnet" in stdout and "model.safetensors" in stdout
    assert (out / "metrics.csv").read_text().count("\n") == 3
    store = tmp_path / "store"
    code, _, err = cli(capsys, "extract", "--model", "demo-glyphnet", "--data", str(data),
                       "--out", str(store), "--weights", str(out / "model.safetensors"),
                       "--num-classes", "3", "--preset", "resize32-crop32", "--workers", "0",
                       "--device", "cpu", "--no-progress")  # fmt: skip
    assert code == 0, err
    (logits,) = open_store(store).select().arrays("logits")
    adapter = load_model("demo-glyphnet", weights=out / "model.safetensors", num_classes=3)
    ds = TrainImages(open_source(data), "resize32-crop32", adapter.mean, adapter.std, augment=False)
    with torch.no_grad():
        ref = adapter(torch.stack([ds[i][0] for i in range(len(ds))]))[0].numpy()
    np.testing.assert_allclose(logits, ref, rtol=1e-4, atol=1e-4)
    # resuming the finished run trains nothing and keeps the weights
    before = (out / "model.safetensors").read_bytes()
    code, stdout, _ = cli(capsys, "train", "--model", "demo-glyphnet", "--data", str(data),
                          "--out", str(out), "--param", "label_smoothing=0.1", "--resume",
                          *FAST)  # fmt: skip
    assert code == 0 and "0 epochs of ce" in stdout and "resumed after epoch 2" in stdout
    assert (out / "model.safetensors").read_bytes() == before


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--method", "logitnrm"], "unknown training method 'logitnrm'. Did you mean 'logitnorm'"),
        (["--num-classes", "2"], "class 2 (c) does not fit a head of 2 classes"),
        (["--param", "smoothing=0.1"], "Did you mean 'label_smoothing'"),
        (["--param", "label_smoothing"], "expected KEY=VALUE"),
        (["--model", "demo-glyphnt"], "unknown model 'demo-glyphnt'"),
        (["--method", "oe"], "needs auxiliary outlier images"),
        (["--lr", "0"], "recipe: lr must be a number > 0, got 0.0"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, data, tmp_path, extra, message):
    args = ["train", "--model", "demo-glyphnet", "--data", str(data), "--out", str(tmp_path / "o")]
    code, _, err = cli(capsys, *args, *FAST, *extra)
    assert code == 2 and message in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_another_config_in_a_trained_folder_is_exit_2_and_keeps_it(capsys, data, tmp_path):
    out = tmp_path / "run"
    args = ["train", "--model", "demo-glyphnet", "--data", str(data), "--out", str(out), *FAST]
    assert cli(capsys, *args)[0] == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    code, _, err = cli(capsys, *args, "--seed", "9", "--resume")
    assert code == 2 and "another configuration (differs in seed)" in err
    code, _, err = cli(capsys, *args)
    assert code == 2 and "pass --resume" in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "configs" / "train" / "ce.yaml"
RUN = ["--threads", "1", "--no-progress"]


def _config(folder: Path, data: Path, text: str = "") -> Path:
    """``folder/train.yaml``: demo-glyphnet on ``data`` (given relative to ``folder``), 1 epoch."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "train.yaml"
    rel = os.path.relpath(data, folder)
    path.write_text(
        f"model: demo-glyphnet\ndata: {rel}\nmethod: ce\nmethod_params: {{label_smoothing: 0.1}}\n"
        "recipe:\n  epochs: 1\n  batch_size: 8\n  lr: 5e-2\n  randaugment_n: 1\n"
        f"  randaugment_m: 9\nseed: 3\nout: run\n{text}",
        encoding="utf-8",
    )
    return path


def test_config_file_is_the_same_run_as_its_options_and_options_override_it(capsys, data, tmp_path):
    cfg = _config(tmp_path / "cfg", data)
    code, stdout, err = cli(capsys, "train", "--config", str(cfg), *RUN, "--epochs", "2",
                            "--param", "label_smoothing=0.2")  # fmt: skip
    assert code == 0, err
    run = tmp_path / "cfg" / "run"  # out: relative to the file
    assert f"{run}: 2 epochs of ce on demo-glyphnet" in stdout
    stored = json.loads((run / "train.json").read_text(encoding="utf-8"))["config"]
    assert stored["data"] == str(data.resolve()) and stored["seed"] == 3
    assert stored["method_params"] == {"label_smoothing": 0.2}  # --param over the file's 0.1
    recipe = stored["recipe"]
    assert (recipe["epochs"], recipe["batch_size"], recipe["lr"]) == (2, 8, 0.05)  # 5e-2: text
    # the same run given by options alone: the same configuration and the same weights
    flags = tmp_path / "flags"
    code, _, err = cli(capsys, "train", "--model", "demo-glyphnet", "--data", str(data),
                       "--out", str(flags), "--param", "label_smoothing=0.2", "--epochs", "2",
                       "--batch-size", "8", "--lr", "0.05", "--randaugment", "1", "9",
                       "--seed", "3", *RUN)  # fmt: skip
    assert code == 0, err
    assert json.loads((flags / "train.json").read_text(encoding="utf-8"))["config"] == stored
    assert (flags / "model.safetensors").read_bytes() == (run / "model.safetensors").read_bytes()


@pytest.mark.parametrize(
    ("text", "extra", "message"),
    [
        ("seeds: 1\n", [], "train.yaml: unknown training config key 'seeds'. Did you mean 'seed'"),
        ("lr: 0.1\n", [], "unknown training config key 'lr'"),
        ("preset: 32\n", [], "train.yaml: preset must be a non-empty string or null, got 32"),
        ("test_splits: a.json\n", [], "test_splits must be a list of strings, got 'a.json'"),
        ("num_classes: 0\n", [], "num_classes must be an integer >= 1 or null, got 0"),
        ("seed: 4\n", [], "yaml, line 13, column 1: invalid YAML (key 'seed' is given twice)"),
        ("", ["--lr", "0"], "recipe: lr must be a number > 0, got 0.0"),
        ("", ["--method", "logitnrm"], "unknown training method 'logitnrm'"),
    ],
)
def test_bad_config_is_one_line_naming_the_key_and_exit_2(
    capsys, data, tmp_path, text, extra, message
):
    cfg = _config(tmp_path / "cfg", data, text)
    code, _, err = cli(capsys, "train", "--config", str(cfg), *RUN, *extra)
    assert code == 2 and message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "cfg" / "run").exists()


def test_bad_recipe_in_the_file_and_missing_keys_are_one_line(capsys, data, tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("model: demo-glyphnet\nrecipe: {epoch: 2}\n", encoding="utf-8")
    code, _, err = cli(capsys, "train", "--config", str(cfg), "--data", str(data), *RUN)
    assert code == 2 and "bad.yaml: unknown recipe option 'epoch'. Did you mean 'epochs'" in err
    cfg.write_text("model: demo-glyphnet\nrecipe: {momentum: 1.5}\n", encoding="utf-8")
    code, _, err = cli(capsys, "train", "--config", str(cfg), "--data", str(data), *RUN)
    assert code == 2 and "bad.yaml: recipe: momentum must be a number in [0, 1), got 1.5" in err
    cfg.write_text("model: demo-glyphnet\n", encoding="utf-8")
    code, _, err = cli(capsys, "train", "--config", str(cfg), "--data", str(data), *RUN)
    assert code == 2 and "give --out (or out: in a --config file)" in err
    code, _, err = cli(capsys, "train", "--config", str(tmp_path / "none.yaml"), *RUN)
    assert code == 2 and "cannot read training config file" in err
    assert err.count("\n") == 1


def test_the_example_config_trains_on_the_demo_layout(capsys, tmp_path):
    # the demo's layout (semshift-demo/data: class folders by character id, classes.txt of
    # "id name" lines) with generated images, and the example copied to where it is shipped
    images = tmp_path / "semshift-demo" / "data" / "images" / "id_train"
    write_class_images(images, {"U+0041": 4, "U+0042": 4})
    (images.parent.parent / "classes.txt").write_text(
        "U+0041 LATIN CAPITAL LETTER A\nU+0042 LATIN CAPITAL LETTER B\n", encoding="utf-8"
    )
    example = tmp_path / "examples" / "configs" / "train" / "ce.yaml"
    example.parent.mkdir(parents=True)
    shutil.copy(EXAMPLE, example)
    values = check_config_file(yaml.safe_load(example.read_text("utf-8")), example)
    assert values["data"] == str(images)
    assert values["classes"] == str(images.parent.parent / "classes.txt")
    code, stdout, err = cli(capsys, "train", "--config", str(example), "--epochs", "1", *RUN)
    assert code == 0, err
    assert "1 epochs of ce on demo-glyphnet" in stdout
    stored = json.loads((tmp_path / "semshift-demo" / "train-ce" / "train.json").read_text())
    assert stored["config"]["recipe"]["flip"] is False and stored["config"]["num_classes"] == 2


def test_recipe_docstring_examples():
    import doctest

    import semshift.training.recipe as recipe

    result = doctest.testmod(recipe)
    assert result.attempted > 0 and result.failed == 0
