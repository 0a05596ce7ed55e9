"""``semshift train --init-backbone``: fine-grained training from a self-supervised (MoCo v2
layout) checkpoint with a fresh head. The known answer: the run equals, bit for bit, the run
started with ``--weights`` from the checkpoint's backbone and the seeded fresh head."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from torch import nn

from semshift.features.models import load_model
from semshift.training.loop import resolve_config
from semshift.training.recipe import TrainConfig

from .images import write_class_images
from .test_cli_train import cli

FAST = ["--epochs", "1", "--batch-size", "8", "--lr", "0.05", "--randaugment", "1", "9"]
FAST += ["--threads", "1", "--no-progress", "--seed", "4"]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_class_images(tmp_path_factory.mktemp("bb") / "imgs", {"a": 4, "b": 4, "c": 4})


def _backbone() -> dict[str, torch.Tensor]:
    """demo-glyphnet's backbone tensors with values no initialisation gives (statistics too)."""
    state = load_model("demo-glyphnet", random_init=True, seed=9, num_classes=3).module.state_dict()
    gen = torch.Generator().manual_seed(9)
    return {
        k: (torch.rand(v.shape, generator=gen) + 0.5) if v.is_floating_point() else v + 5
        for k, v in state.items()
        if not k.startswith("fc.")
    }


@pytest.fixture(scope="module")
def moco(tmp_path_factory) -> tuple[Path, dict[str, torch.Tensor]]:
    """A MoCo v2 checkpoint: ``module.encoder_q.`` with an MLP projection head, the key
    encoder, the queue."""
    backbone = _backbone()
    sd = {f"module.encoder_{e}.{k}": v.clone() for e in "qk" for k, v in backbone.items()}
    for e in "qk":
        sd[f"module.encoder_{e}.fc.0.weight"] = torch.randn(128, 128)
        sd[f"module.encoder_{e}.fc.0.bias"] = torch.randn(128)
        sd[f"module.encoder_{e}.fc.2.weight"] = torch.randn(16, 128)
        sd[f"module.encoder_{e}.fc.2.bias"] = torch.randn(16)
    sd["module.queue"] = torch.randn(16, 32)
    sd["module.queue_ptr"] = torch.zeros(1, dtype=torch.long)
    path = tmp_path_factory.mktemp("ckpt") / "moco_v2.pth.tar"
    torch.save({"epoch": 200, "arch": "glyphnet", "state_dict": sd}, path)
    return path, backbone


def test_train_from_a_moco_backbone_is_the_run_from_its_backbone_and_a_fresh_head(
    capsys, data, moco, tmp_path
):
    path, backbone = moco
    args = ["train", "--model", "demo-glyphnet", "--data", str(data), *FAST]
    code, stdout, err = cli(capsys, *args, "--out", str(tmp_path / "bb"), "--init-backbone",
                            str(path))  # fmt: skip
    assert code == 0, err
    line = next(ln for ln in stdout.splitlines() if ln.startswith("backbone from"))
    assert line == (
        f"backbone from {path}: 24 tensors loaded (under 'encoder_q.'), head re-initialised "
        "(seed 4): fc.weight, fc.bias; 34 checkpoint tensors ignored (module.encoder_k.* (28), "
        "module.encoder_q.fc.* (4), module.queue, module.queue_ptr)"
    )
    assert "1 epochs of ce on demo-glyphnet" in stdout
    meta = json.loads((tmp_path / "bb" / "train.json").read_text(encoding="utf-8"))
    assert meta["config"]["init_backbone"] == str(path) and meta["config"]["weights"] is None
    rec = meta["init_backbone"]
    assert (rec["prefix"], rec["loaded"], rec["head"]) == (
        "encoder_q.",
        24,
        ["fc.weight", "fc.bias"],
    )
    assert "module.queue" in rec["ignored"] and len(rec["ignored"]) == 34
    assert rec["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    # the expected start: the checkpoint's backbone and nn.Linear(128, 3) seeded with --seed
    torch.manual_seed(4)
    head = nn.Linear(128, 3)
    init = tmp_path / "init.pth"
    torch.save({**backbone, "fc.weight": head.weight.data, "fc.bias": head.bias.data}, init)
    code, _, err = cli(capsys, *args, "--out", str(tmp_path / "ref"), "--weights", str(init))
    assert code == 0, err
    ref = (tmp_path / "ref" / "model.safetensors").read_bytes()
    assert (tmp_path / "bb" / "model.safetensors").read_bytes() == ref
    # resuming the finished run keeps it
    code, stdout, err = cli(capsys, *args, "--out", str(tmp_path / "bb"), "--init-backbone",
                            str(path), "--resume")  # fmt: skip
    assert code == 0 and "0 epochs of ce" in stdout, err


def test_the_python_api_starts_from_the_backbone(data, moco):
    path, backbone = moco
    prep = resolve_config(TrainConfig("demo-glyphnet", str(data), init_backbone=str(path), seed=2))
    own = prep.adapter.module.state_dict()
    assert all(torch.equal(own[k], v) for k, v in backbone.items())
    torch.manual_seed(2)
    head = nn.Linear(128, 3)
    assert torch.equal(own["fc.weight"], head.weight) and torch.equal(own["fc.bias"], head.bias)
    assert prep.backbone is not None and prep.backbone.prefix == "encoder_q."
    assert prep.config.init_backbone == str(path.resolve())


def test_init_backbone_in_a_config_file_is_relative_to_it(capsys, data, moco, tmp_path):
    path, _ = moco
    folder = tmp_path / "cfg"
    folder.mkdir()
    (folder / "moco.pth").write_bytes(path.read_bytes())
    cfg = folder / "train.yaml"
    cfg.write_text(f"model: demo-glyphnet\ndata: {data}\ninit_backbone: moco.pth\nout: run\n")
    code, stdout, err = cli(capsys, "train", "--config", str(cfg), *FAST)
    assert code == 0, err
    assert f"backbone from {folder / 'moco.pth'}: 24 tensors loaded" in stdout


def test_bad_backbone_input_is_one_line_and_exit_2(capsys, data, moco, tmp_path):
    path, backbone = moco
    partial = tmp_path / "partial.pth"
    torch.save({k: v for k, v in backbone.items() if k != "trunk.9.running_var"}, partial)
    args = ["train", "--model", "demo-glyphnet", "--data", str(data), *FAST]
    out = tmp_path / "o"
    for extra, message in [
        (["--init-backbone", str(partial)],
         "of its 24 backbone tensors 1 missing (trunk.9.running_var)"),
        (["--init-backbone", str(path), "--weights", str(path)], "exclude each other"),
        (["--init-backbone", str(tmp_path / "none.pth")], "none.pth does not exist"),
    ]:  # fmt: skip
        code, _, err = cli(capsys, *args, "--out", str(out), *extra)
        assert code == 2 and message in err, err
        assert err.count("\n") == 1 and "Traceback" not in err
        assert not out.exists()
