"""``semshift train``: a run whose weights ``semshift extract`` takes; one-line errors, exit 2."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from semshift.cli import main
from semshift.features import open_store
from semshift.features.data import open_source
from semshift.features.models import load_model
from semshift.training.images import TrainImages

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
