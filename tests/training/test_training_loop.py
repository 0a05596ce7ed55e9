"""The training loop: determinism, checkpoints, resuming after a SIGKILL, bad input."""

from __future__ import annotations

import csv
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from semshift.errors import InputError, UnknownNameError
from semshift.features.models import load_model
from semshift.training.checkpoint import read_checkpoint
from semshift.training.loop import train
from semshift.training.recipe import Recipe, TrainConfig

from .images import write_class_images

RECIPE = Recipe(epochs=3, batch_size=8, lr=0.05, randaugment_n=1, randaugment_m=9)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_class_images(tmp_path_factory.mktemp("train") / "imgs", {"a": 8, "b": 8, "c": 8})


def _config(data: Path, **kw) -> TrainConfig:
    base = {"model": "demo-glyphnet", "data": str(data), "recipe": RECIPE, "seed": 0}
    return TrainConfig(**(base | kw))


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return load_file(str(path))


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def run_a(data, tmp_path_factory):
    return train(_config(data), tmp_path_factory.mktemp("a") / "out", threads=1)


def test_same_seed_gives_identical_weights_another_seed_does_not(data, run_a, tmp_path):
    again = train(_config(data), tmp_path / "again", threads=1)
    other = train(_config(data, seed=1), tmp_path / "other", threads=1)
    assert _same(_weights(run_a.model_file), _weights(again.model_file))
    assert [h["loss"] for h in run_a.history] == [h["loss"] for h in again.history]
    assert not _same(_weights(run_a.model_file), _weights(other.model_file))


def test_seed_guarantee_bitwise_for_a_thread_count_whatever_the_workers(data, run_a, tmp_path):
    """What `semshift train --seed` promises on the CPU: the same seed and thread count give
    the same bits, with images decoded in this process or by DataLoader workers."""
    two = [train(_config(data), tmp_path / f"t2_{i}", threads=2) for i in range(2)]
    assert _same(_weights(two[0].model_file), _weights(two[1].model_file))
    workers = train(_config(data), tmp_path / "w2", threads=1, workers=2)
    assert _same(_weights(run_a.model_file), _weights(workers.model_file))


def test_metrics_table_and_cosine_schedule(run_a):
    rows = list(csv.DictReader(open(run_a.out / "metrics.csv", encoding="utf-8")))
    assert [int(r["epoch"]) for r in rows] == [1, 2, 3]
    # epochs 3, two restarts: T_0 = 1, so every epoch starts a new cycle at the full lr
    assert [float(r["lr"]) for r in rows] == [0.05, 0.05, 0.05]
    for row, hist in zip(rows, run_a.history, strict=True):
        assert float(row["loss"]) == pytest.approx(hist["loss"], rel=1e-12)
        assert 0.0 <= float(row["accuracy"]) <= 1.0 and float(row["images_per_s"]) > 0


def test_cosine_schedule_within_a_cycle(data, tmp_path):
    recipe = Recipe(epochs=4, batch_size=12, lr=0.1, num_restarts=0, randaugment_n=0)
    res = train(_config(data, recipe=recipe), tmp_path / "cos", threads=1)
    eta_min = 0.1 * 1e-3
    expected = [eta_min + (0.1 - eta_min) * (1 + math.cos(math.pi * t / 4)) / 2 for t in range(4)]
    assert [h["lr"] for h in res.history] == pytest.approx(expected, rel=1e-12)


def test_output_folder_files_and_weights_load_as_a_model(run_a):
    out = run_a.out
    meta = json.loads((out / "checkpoint.json").read_text())
    assert meta["epoch"] == 3 and meta["seed"] == 0
    assert meta["config"]["method_params"] == {"label_smoothing": 0.3}
    assert meta["config"]["preset"] == "resize32-crop32" and meta["config"]["num_classes"] == 3
    assert {"torch", "python", "safetensors"} <= set(meta["versions"])
    ckpt = read_checkpoint(out / "checkpoint.safetensors")
    assert ckpt.meta["scheduler"]["last_epoch"] == 3
    assert any(k.endswith("momentum_buffer") for k in ckpt.optimizer["state"][0])
    final = _weights(run_a.model_file)
    assert _same(final, ckpt.model)
    adapter = load_model("demo-glyphnet", weights=run_a.model_file, num_classes=3)
    got = adapter.module.state_dict()
    assert all(torch.equal(got[k], final[k]) for k in final)


_SCRIPT = """
import sys
from semshift.training.loop import train
from semshift.training.recipe import Recipe, TrainConfig
recipe = Recipe(epochs=6, batch_size=8, lr=0.05, randaugment_n=1, randaugment_m=9)
cfg = TrainConfig(model="demo-glyphnet", data=sys.argv[1], recipe=recipe, seed=3)
train(cfg, sys.argv[2], resume=True, threads=1)
"""


def test_resume_after_sigkill_gives_the_uninterrupted_weights(data, tmp_path):
    recipe = Recipe(epochs=6, batch_size=8, lr=0.05, randaugment_n=1, randaugment_m=9)
    whole = train(_config(data, recipe=recipe, seed=3), tmp_path / "whole", threads=1)
    out = tmp_path / "killed"
    cmd = [sys.executable, "-c", _SCRIPT, str(data), str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 50
        while not (out / "checkpoint.json").exists():
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "no checkpoint within 50 s"
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    done_at_kill = read_checkpoint(out / "checkpoint.safetensors").meta["epoch"]
    assert 1 <= done_at_kill < 6 and not (out / "model.safetensors").exists()
    resumed = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert _same(_weights(out / "model.safetensors"), _weights(whole.model_file))
    history = read_checkpoint(out / "checkpoint.safetensors").meta["history"]
    assert [h["loss"] for h in history] == [h["loss"] for h in whole.history]


def test_finished_run_resumed_trains_no_more(run_a):
    before = _weights(run_a.model_file)
    again = train(run_a.config, run_a.out, resume=True, threads=1)
    assert again.start_epoch == 3 and len(again.history) == 3
    assert _same(before, _weights(again.model_file))


def test_existing_run_needs_resume_and_another_config_is_refused(data, run_a):
    files = {p.name: p.read_bytes() for p in run_a.out.iterdir()}
    with pytest.raises(InputError, match="pass --resume"):
        train(_config(data), run_a.out, threads=1)
    with pytest.raises(InputError, match=r"another configuration .*seed"):
        train(_config(data, seed=5), run_a.out, resume=True, threads=1)
    assert {p.name: p.read_bytes() for p in run_a.out.iterdir()} == files


def test_class_outside_the_head_is_refused_before_writing(data, tmp_path):
    with pytest.raises(InputError, match=r"class 2 \(c\) does not fit a head of 2 classes"):
        train(_config(data, num_classes=2), tmp_path / "x", threads=1)
    assert not (tmp_path / "x").exists()


def test_unlabelled_images_and_unknown_names_are_refused(data, tmp_path):
    root = write_class_images(tmp_path / "d", {"a": 2})
    (root / "a" / "000.png").rename(root / "loose.png")
    with pytest.raises(InputError, match="1 images have no class"):
        train(_config(root), tmp_path / "x")
    with pytest.raises(UnknownNameError, match="Did you mean 'logitnorm'"):
        train(_config(data, method="logitnrm"), tmp_path / "x")
    with pytest.raises(UnknownNameError, match="demo-glyphnt"):
        train(_config(data, model="demo-glyphnt"), tmp_path / "x")
    with pytest.raises(InputError, match="label_smoothing must be a number in"):
        train(_config(data, method_params={"label_smoothing": 1.0}), tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_non_training_folder_is_refused(data, tmp_path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("keep me")
    with pytest.raises(InputError, match="is not a training run"):
        train(_config(data), tmp_path / "busy")
    assert (tmp_path / "busy" / "notes.txt").read_text() == "keep me"
