"""Data-parallel training: 2 gloo processes give the 1-process loss curve and weights (CE and
ARPL+CS, whose GAN and global-batch confusion term take the distributed path of their own)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from semshift.cli import main
from semshift.errors import InputError
from semshift.training.checkpoint import read_checkpoint
from semshift.training.distributed import GlobalBatchNorm, free_port, shard
from semshift.training.loop import train
from semshift.training.recipe import Recipe, TrainConfig

from .images import write_class_images

# 14 images, batches of 6: 6, 6, 2 (the last splits 1 + 1); BatchNorm in every block
RECIPE = Recipe(epochs=3, batch_size=6, lr=0.05, randaugment_n=1, randaugment_m=9)


def _config(
    data: Path, method: str = "ce", recipe: Recipe = RECIPE, **params: float
) -> TrainConfig:
    return TrainConfig(
        model="demo-glyphnet", data=str(data), method=method, method_params=params,
        recipe=recipe, seed=2, model_kwargs={"widths": [4, 8, 8, 16]},
    )  # fmt: skip


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_class_images(tmp_path_factory.mktemp("ddp") / "imgs", {"a": 5, "b": 5, "c": 4})


def test_shard_is_a_contiguous_even_split_in_order():
    batch = list(range(10, 17))
    parts = [shard(batch, r, 3) for r in range(3)]
    assert parts == [[10, 11, 12], [13, 14], [15, 16]]
    assert shard([5], 0, 1) == [5] and [shard([1, 2], r, 2) for r in range(2)] == [[1], [2]]


def test_global_batchnorm_in_a_one_process_group_is_batchnorm(monkeypatch):
    monkeypatch.setitem(os.environ, "MASTER_ADDR", "127.0.0.1")
    monkeypatch.setitem(os.environ, "MASTER_PORT", str(free_port()))
    torch.distributed.init_process_group("gloo", rank=0, world_size=1)
    try:
        gen = torch.Generator().manual_seed(0)
        ref = torch.nn.BatchNorm2d(3, momentum=0.3)
        with torch.no_grad():
            ref.weight.copy_(torch.rand(3, generator=gen) + 0.5)
            ref.bias.copy_(torch.randn(3, generator=gen))
        twin = torch.nn.BatchNorm2d(3, momentum=0.3)
        twin.load_state_dict(ref.state_dict())
        mine = GlobalBatchNorm(ref)  # takes over ref's parameters and buffers
        assert list(mine.state_dict()) == list(twin.state_dict())
        x = (3 * torch.randn(4, 3, 5, 5, generator=gen) + 1).requires_grad_()
        x2 = x.detach().clone().requires_grad_()
        w = torch.randn(4, 3, 5, 5, generator=gen)
        (mine(x) * w).sum().backward()
        (twin(x2) * w).sum().backward()
        torch.testing.assert_close(x.grad, x2.grad, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(mine.weight.grad, twin.weight.grad, rtol=1e-5, atol=1e-5)
        for key, value in twin.state_dict().items():
            torch.testing.assert_close(mine.state_dict()[key], value, rtol=1e-6, atol=1e-6)
        mine.eval()
        twin.eval()
        torch.testing.assert_close(mine(x), twin(x2), rtol=1e-5, atol=1e-5)
    finally:
        torch.distributed.destroy_process_group()


def test_two_gloo_processes_give_the_one_process_loss_curve(data, tmp_path):
    one = train(_config(data), tmp_path / "one", threads=1)
    two = train(_config(data), tmp_path / "two", threads=1, nproc=2)
    assert two.device == "2 x cpu" and [h["epoch"] for h in two.history] == [1, 2, 3]
    # same per-epoch losses within float32 tolerance (global-batch BatchNorm statistics)
    assert [h["loss"] for h in two.history] == pytest.approx(
        [h["loss"] for h in one.history], rel=2e-6
    )
    assert [h["accuracy"] for h in two.history] == [h["accuracy"] for h in one.history]
    a, b = load_file(str(one.model_file)), load_file(str(two.model_file))
    assert a.keys() == b.keys() and any("running_var" in k for k in a)
    for k in a:
        torch.testing.assert_close(b[k], a[k], rtol=1e-4, atol=1e-5)
    # rank 0 alone wrote the folder: the same files as one process, one row per epoch
    assert sorted(p.name for p in two.out.iterdir()) == sorted(p.name for p in one.out.iterdir())
    rows = list(csv.DictReader(open(two.out / "metrics.csv", encoding="utf-8")))
    assert [float(r["loss"]) for r in rows] == [h["loss"] for h in two.history]


def test_arpl_cs_on_two_gloo_processes_gives_the_one_process_run(data, tmp_path):
    # G and D have BatchNorm, the confusion term is an exponential of a batch mean, and
    # batches of 5, 5, 4 split 3 + 2 and 2 + 2: every part of the distributed path is needed.
    # Drawing each process's noise on its own, or taking the means inside the confusion over
    # each slice, moves the curve by about 1e-5 and G's and D's weights by far more.
    recipe = replace(RECIPE, batch_size=5)
    cfg = _config(data, "arpl_cs", recipe, nz=8, ngf=4, ndf=4, beta=5.0, gan_lr=0.002)
    one = train(cfg, tmp_path / "one", threads=1)
    two = train(cfg, tmp_path / "two", threads=1, nproc=2)
    assert [h["loss"] for h in two.history] == pytest.approx(
        [h["loss"] for h in one.history], rel=1e-6
    )
    assert [h["accuracy"] for h in two.history] == [h["accuracy"] for h in one.history]
    # the same checkpoint: keys, model, points, G and D (BatchNorm buffers included), Adam
    # states, and the random state (the noise of the whole global batch drawn in each process)
    a, b = (read_checkpoint(r.out / "checkpoint.safetensors") for r in (one, two))
    assert a.model.keys() == b.model.keys() and a.method.keys() == b.method.keys()
    assert any(k.startswith("generator.") and "running_var" in k for k in b.method)
    for got, want in ((b.model, a.model), (b.method, a.method)):
        for k in want:
            torch.testing.assert_close(got[k], want[k], rtol=1e-4, atol=1e-5)
    assert torch.equal(b.rng["cpu"], a.rng["cpu"])
    assert sorted(b.extra_optimizers) == sorted(a.extra_optimizers)
    assert sorted(a.extra_optimizers) == ["discriminator", "generator"]
    for name, opt in a.extra_optimizers.items():
        other = b.extra_optimizers[name]["state"]
        for i, st in opt["state"].items():
            assert int(other[i]["step"]) == int(st["step"]) == 3 * 3  # 3 epochs of 3 steps
            torch.testing.assert_close(other[i]["exp_avg"], st["exp_avg"], rtol=1e-3, atol=1e-6)
    assert sorted(p.name for p in two.out.iterdir()) == sorted(p.name for p in one.out.iterdir())


def _curve(run: Path) -> list[float]:
    return [float(r["loss"]) for r in csv.DictReader(open(run / "metrics.csv", encoding="utf-8"))]


def test_torchrun_with_two_gloo_processes_gives_the_one_process_run(data, tmp_path, capsys):
    args = ["train", "--model", "demo-glyphnet", "--data", str(data), "--epochs", "2",
            "--batch-size", "6", "--lr", "0.05", "--randaugment", "1", "9", "--seed", "2",
            "--threads", "1", "--device", "cpu", "--no-progress"]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main([*args, "--out", str(tmp_path / "one")])
    assert not exc.value.code
    capsys.readouterr()
    # torchrun's own launcher (the c10d rendezvous on a free local port: offline), its log
    # folder under tmp_path; the environment of this process's own runs left out
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    (tmp_path / "tmp").mkdir()
    env.update(TMPDIR=str(tmp_path / "tmp"), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "semshift.cli", *args, "--out", str(tmp_path / "two")]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # rank 0 alone reports (rank 1 returned on the non-main path) and wrote the folder: the
    # files of the one-process run, the same configuration, the same loss curve
    assert proc.stdout.count("2 epochs of ce on demo-glyphnet") == 1, proc.stdout
    one, two = tmp_path / "one", tmp_path / "two"
    assert sorted(p.name for p in two.iterdir()) == sorted(p.name for p in one.iterdir())
    cfg = [json.loads((d / "train.json").read_text(encoding="utf-8"))["config"] for d in (one, two)]
    assert cfg[0] == cfg[1]
    assert len(_curve(two)) == 2
    assert _curve(two) == pytest.approx(_curve(one), rel=2e-6)
    a, b = load_file(str(one / "model.safetensors")), load_file(str(two / "model.safetensors"))
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(b[k], a[k], rtol=1e-4, atol=1e-5)


def test_batches_too_small_for_the_processes_are_refused_before_writing(data, tmp_path):
    cfg = _config(data)
    with pytest.raises(InputError, match=r"3 processes need at least 3 images in every batch"):
        train(cfg, tmp_path / "x", nproc=3)  # 14 = 6 + 6 + 2
    with pytest.raises(InputError, match="nproc must be >= 1"):
        train(cfg, tmp_path / "x", nproc=0)
    assert not (tmp_path / "x").exists()
