"""Damaged training checkpoints are refused, not resumed (issue 27, item 5).

One flipped exponent bit in ``checkpoint.safetensors`` was resumed without a check: a 1.5e37
weight, an infinite BatchNorm variance, exit 0. Checkpoints now carry the XXH3-128 of every
tensor and of their JSON, verified on every read; a damaged one is one line (exit 2) naming the
file and what to do: resume from the previous epoch's checkpoint, which is kept beside it, or
delete it and start over. Checkpoints of an older semshift (no checksums) are resumed with a
warning. ``model.safetensors`` carries the same checksums, verified when semshift loads it.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from semshift.errors import InputError
from semshift.features.models import load_model
from semshift.training.checkpoint import CHECKPOINT, PREVIOUS, read_checkpoint
from tests.training.images import write_class_images

EPOCHS = ["--epochs", "2", "--batch-size", "8", "--lr", "0.05", "--randaugment", "1", "9"]


def _train_args(data: Path, out: Path, *extra: str) -> list[str]:
    return ["train", "--model", "demo-glyphnet", "--data", str(data), "--out", str(out),
            *EPOCHS, "--threads", "1", "--device", "cpu", "--no-progress", *extra]  # fmt: skip


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ckpt") / "imgs"
    return write_class_images(root, {"a": 6, "b": 6, "c": 6})


@pytest.fixture(scope="module")
def trained(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished two-epoch run (train.json, both checkpoints, model.safetensors)."""
    from semshift.cli import main

    out = tmp_path_factory.mktemp("ckpt") / "run"
    with pytest.raises(SystemExit) as exc:
        main(_train_args(data, out))
    assert exc.value.code in (0, None)
    return out


@pytest.fixture
def run(trained: Path, tmp_path: Path) -> Path:
    """A copy of the finished run that a test may damage."""
    return Path(shutil.copytree(trained, tmp_path / "run"))


def _tensor_span(path: Path, key: str) -> tuple[int, str]:
    """(file offset of the first byte of tensor ``key``, its dtype), from the header."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    info = json.loads(raw[8 : 8 + n])[key]
    return 8 + n + info["data_offsets"][0], info["dtype"]


def _flip_bit(path: Path, offset: int, bit: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset + bit // 8] ^= 1 << (bit % 8)
    path.write_bytes(bytes(raw))


def _first_key(path: Path, prefix: str, suffix: str) -> str:
    with safe_open(str(path), framework="pt") as fh:
        return next(k for k in sorted(fh.keys()) if k.startswith(prefix) and k.endswith(suffix))


def _one_error_line(res) -> str:
    assert res.returncode == 2, (res.returncode, res.stdout[-400:], res.stderr)
    assert "Traceback" not in res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_a_flipped_exponent_bit_is_refused_and_the_previous_checkpoint_resumes_bit_for_bit(
    run, data, cli
) -> None:
    ckpt = run / CHECKPOINT
    assert read_checkpoint(ckpt).meta["epoch"] == 2
    assert read_checkpoint(run / PREVIOUS).meta["epoch"] == 1  # the one it replaced, kept
    final = load_file(str(run / "model.safetensors"))
    key = _first_key(ckpt, "model.", ".weight")
    offset, dtype = _tensor_span(ckpt, key)
    assert dtype == "F32"
    before = read_checkpoint(ckpt).model[key[len("model.") :]].reshape(-1)[0].item()
    _flip_bit(ckpt, offset, 30)  # the top exponent bit of the first element (little-endian)
    with safe_open(str(ckpt), framework="pt") as fh:  # what resuming used to load
        damaged = fh.get_tensor(key).reshape(-1)[0].item()
    assert abs(damaged) > 1e30 * abs(before)

    res = cli(_train_args(data, run, "--resume"))
    line = _one_error_line(res)
    assert f"checkpoint {ckpt} is damaged (tensor {key!r} does not match its checksum)" in line
    assert f"mv {run / PREVIOUS} {ckpt}" in line and "--resume" in line
    assert torch.equal(load_file(str(run / "model.safetensors"))[key[6:]], final[key[6:]])

    # doing what it says: epoch 2 again from epoch 1's checkpoint, the same bits
    (run / PREVIOUS).replace(ckpt)
    res = cli(_train_args(data, run, "--resume"))
    assert res.returncode == 0, res.stderr
    assert "resumed after epoch 1" in res.stdout and "warning" not in res.stderr
    again = load_file(str(run / "model.safetensors"))
    assert again.keys() == final.keys() and all(torch.equal(again[k], final[k]) for k in final)
    assert read_checkpoint(ckpt).verified and read_checkpoint(ckpt).meta["epoch"] == 2


def test_without_an_intact_previous_checkpoint_it_says_delete_and_restart(run, data, cli) -> None:
    ckpt = run / CHECKPOINT
    key = _first_key(ckpt, "model.", "running_var")  # BatchNorm variance: 1.0 -> inf
    offset, _ = _tensor_span(ckpt, key)
    _flip_bit(ckpt, offset, 30)
    _flip_bit(run / PREVIOUS, _tensor_span(run / PREVIOUS, key)[0], 30)  # damaged as well
    line = _one_error_line(cli(_train_args(data, run, "--resume")))
    assert f"checkpoint {ckpt} is damaged (tensor {key!r} does not match" in line
    assert f"no intact earlier checkpoint is kept: delete it (rm {ckpt})" in line
    ckpt.unlink()
    res = cli(_train_args(data, run, "--resume"))
    assert res.returncode == 0, res.stderr
    assert "2 epochs of ce" in res.stdout  # trained from the first epoch again


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        ("truncated", "is damaged (unreadable: "),
        ("json", "is damaged (metadata 'semshift' does not match its checksum)"),
        ("checksums", "is damaged (its checksum record does not match its own checksum)"),
    ],
)
def test_damage_outside_the_tensors_is_refused_too(run, data, cli, damage, words) -> None:
    ckpt = run / CHECKPOINT
    raw = ckpt.read_bytes()
    if damage == "truncated":
        ckpt.write_bytes(raw[: len(raw) - 100])
    else:
        # one character of the header's metadata, the JSON still valid: "epoch":2 -> "epoch":3
        # in the checkpoint's JSON, a hex digit of one checksum in the record of checksums
        (n,) = struct.unpack("<Q", raw[:8])
        header = raw[8 : 8 + n].decode()
        if damage == "json":
            at = header.index('\\"epoch\\": 2') + len('\\"epoch\\": ')
            new = "3"
        else:
            at = header.index('\\"tensors\\": {') + len('\\"tensors\\": {') + 1
            at = header.index('\\": \\"', at) + len('\\": \\"')
            new = "0" if header[at] != "0" else "1"
        header = header[:at] + new + header[at + 1 :]
        ckpt.write_bytes(raw[:8] + header.encode() + raw[8 + n :])
    line = _one_error_line(cli(_train_args(data, run, "--resume")))
    assert f"error: checkpoint {ckpt} {words}" in line
    assert f"mv {run / PREVIOUS} {ckpt}" in line


def test_a_checkpoint_of_an_older_semshift_is_resumed_with_a_warning(run, data, cli) -> None:
    """Written without checksums (as before): resumed unverified, said once on stderr."""
    ckpt = run / CHECKPOINT
    with safe_open(str(ckpt), framework="pt") as fh:
        meta = {"semshift": (fh.metadata() or {})["semshift"]}
        tensors = {k: fh.get_tensor(k) for k in fh.keys()}
    save_file(tensors, str(ckpt), metadata=meta)
    (run / PREVIOUS).unlink()
    old = read_checkpoint(ckpt)
    assert not old.verified and old.meta["epoch"] == 2
    res = cli(_train_args(data, run, "--resume"))
    assert res.returncode == 0, res.stderr
    warned = [ln for ln in res.stderr.splitlines() if ln.startswith("warning: ")]
    assert warned == [
        f"warning: checkpoint {ckpt} carries no checksums (written by an older semshift): "
        "resumed without verifying it; the checkpoints written from now on carry them"
    ]
    assert "0 epochs of ce" in res.stdout  # finished: only re-exported


def test_a_damaged_model_file_is_refused_when_loaded_for_extraction(run) -> None:
    weights = run / "model.safetensors"
    model = load_model("demo-glyphnet", weights=weights, num_classes=3)  # intact: loads
    assert model.module is not None
    key = _first_key(weights, "", ".weight")
    _flip_bit(weights, _tensor_span(weights, key)[0], 30)
    with pytest.raises(InputError) as err:
        load_model("demo-glyphnet", weights=weights, num_classes=3)
    assert str(err.value).startswith(
        f"weights file {weights} is damaged (tensor {key!r} does not match its checksum); "
    )
    assert "--resume re-exports it" in str(err.value)
