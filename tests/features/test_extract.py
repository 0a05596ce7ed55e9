"""Extraction into a store: values, skipped images, resume after SIGKILL, and the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from semshift.cli import main
from semshift.errors import InputError
from semshift.features import open_store
from semshift.features.data import ImageDataset, image_folder
from semshift.features.extract import extract
from semshift.features.models import load_model

from .conftest import write_images


def _bad_images(folder: Path) -> None:
    trunc = folder / "trunc.jpg"
    Image.fromarray(np.random.default_rng(1).integers(0, 255, (48, 48, 3), np.uint8)).save(trunc)
    trunc.write_bytes(trunc.read_bytes()[:200])
    (folder / "garbage.jpg").write_bytes(b"GIF89a but not really")


@pytest.fixture(scope="module")
def tiny():
    return load_model("timm/test_resnet", random_init=True, seed=0, num_classes=3)


def test_extract_values_skips_and_meta(tmp_path, images, tiny):
    _bad_images(images / "dog")
    src = image_folder(images)
    summary = extract(
        tiny, src, tmp_path / "st", preset="resize36-crop32", batch_size=3, shard_size=5,
        groups={"split": "id_test"}, progress=False, fsync=False,
    )  # fmt: skip
    assert (summary.n_images, summary.n_stored, summary.n_skipped) == (14, 12, 2)
    assert summary.n_shards == 3 and summary.n_resumed == 0
    assert summary.skip_reasons == {"not a recognised image format": 1, "unreadable image": 1}
    st = open_store(tmp_path / "st")
    # the stored values are the adapter's outputs on the same preprocessed images
    ds = ImageDataset(src, "resize36-crop32", tiny.mean, tiny.std)
    ok = [i for i in range(len(ds)) if not ds[i][2]]
    with torch.no_grad():
        want_logits, want_feats = tiny(torch.stack([ds[i][0] for i in ok]))
    logits, feats = st.arrays("logits", "features")
    np.testing.assert_allclose(logits, want_logits.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(feats, want_feats.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(logits, feats @ st.head[0].T + st.head[1], rtol=1e-4, atol=1e-4)
    assert st.index["sample_id"].tolist() == ok
    assert st.index["path"].tolist() == [src.names[i] for i in ok]
    np.testing.assert_array_equal(st.labels, src.labels[ok])
    assert set(st.index["split"]) == {"id_test"}
    skipped = st.skipped.set_index("path")
    assert skipped.loc["dog/garbage.jpg", "reason"] == "not a recognised image format"
    assert skipped.loc["dog/trunc.jpg", "reason"].startswith("unreadable image (")
    meta = st.meta
    assert meta["model"] == "timm/test_resnet" and meta["layer"].startswith("forward_head")
    assert meta["weights"].startswith("random-init (Kaiming normal, seed 0)")
    assert meta["preprocessing"]["resize"] == 36 and meta["preprocessing"]["crop"] == 32
    assert meta["classes"]["ids"] == ["cat", "dog", "owl"]
    assert meta["dataset"]["fingerprint"] == src.fingerprint()
    assert meta["semshift_version"] and meta["n_skipped"] == 2
    st.verify()


def test_extract_refuses_finished_and_changed_runs(tmp_path, images, tiny):
    src = image_folder(images)
    kw = {"preset": "resize36-crop32", "shard_size": 4, "progress": False, "fsync": False}
    extract(tiny, src, tmp_path / "a", **kw)
    with pytest.raises(InputError, match="already holds a finished store"):
        extract(tiny, src, tmp_path / "a", **kw)
    # an unfinished store of another model is not resumed with this one
    (tmp_path / "a" / "meta.json").unlink()
    other = load_model("timm/test_resnet", random_init=True, seed=1, num_classes=3)
    with pytest.raises(InputError, match=r"different settings.*head_sha256"):
        extract(other, src, tmp_path / "a", **kw)
    with pytest.raises(InputError, match="batch size and shard size must be >= 1"):
        extract(tiny, src, tmp_path / "b", batch_size=0)


def _cli(data, out, *extra):
    return [
        sys.executable, "-m", "semshift.cli", "extract", "--model", "resnet18", "--random-init",
        "--num-classes", "10", "--data", str(data), "--out", str(out), "--preset",
        "resize40-crop32", "--batch-size", "4", "--shard-size", "20", "--workers", "0",
        "--no-progress", *extra,
    ]  # fmt: skip


def test_killed_extraction_resumes_to_identical_store(tmp_path, capsys):
    data = tmp_path / "imgs"
    write_images(data, {f"c{i}": 20 for i in range(10)}, size=40, seed=3)
    _bad_images(data / "c4")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    # the uninterrupted reference run, in this process (same settings as the CLI below)
    with pytest.raises(SystemExit) as exc:
        main(_cli(data, tmp_path / "ref")[3:])
    assert exc.value.code == 0

    out = tmp_path / "killed"
    proc = subprocess.Popen(_cli(data, out), env=env, stdout=subprocess.DEVNULL)
    first = out / "shards" / "00000.json"
    deadline = time.monotonic() + 120
    while not first.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert first.exists() and not (out / "meta.json").exists(), "killed too late"
    n_done = len(list((out / "shards").glob("[0-9]*.json")))
    assert 1 <= n_done < 11
    assert "200 of 202 images stored in 11 shards (0 resumed), 2 skipped" in " ".join(
        capsys.readouterr().out.split()
    )
    with pytest.raises(InputError, match="unfinished extraction"):
        open_store(out)

    again = subprocess.run(_cli(data, out), env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert f"({n_done} resumed)" in " ".join(again.stdout.split())
    a, b = open_store(tmp_path / "ref"), open_store(out)
    assert a.checksums() == b.checksums()
    for name in ("meta.json", "index.parquet", "head.npz", "skipped.csv"):
        assert (tmp_path / "ref" / name).read_bytes() == (out / name).read_bytes(), name
    b.verify()
    assert json.loads((out / "meta.json").read_text())["n_rows"] == 200


def test_cli_errors_are_one_line(tmp_path, images, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["extract", "--model", "resnet18", "--data", str(images), "--out", str(tmp_path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: give --weights FILE or --random-init (semshift never downloads weights)"
    with pytest.raises(SystemExit) as exc:
        main(["extract", "--model", "resnet5O", "--random-init", "--data", str(images),
              "--out", str(tmp_path / "s")])  # fmt: skip
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: unknown model 'resnet5O'") and "\n" not in err
    with pytest.raises(SystemExit) as exc:
        main(["extract", "--model", "resnet18", "--random-init", "--data", str(images),
              "--out", str(tmp_path / "s"), "--classes", "imagenet1k"])  # fmt: skip
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: class folder ") and "cat is not in the class list" in err
    # torchvision weights by name: a name that does not exist lists close matches; one that
    # exists but is not in torch's cache says which file to place where
    with pytest.raises(SystemExit) as exc:
        main(["extract", "--model", "resnet18", "--weights", "IMAGENET1K_V2", "--data",
              str(images), "--out", str(tmp_path / "w")])  # fmt: skip
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: resnet18 has no weights 'IMAGENET1K_V2' (did you mean")
    assert "\n" not in err


def test_cli_extract_small(tmp_path, images, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["extract", "--model", "timm/test_resnet", "--random-init", "--data", str(images),
              "--out", str(tmp_path / "s"), "--preset", "resize36-crop32", "--shard-size", "5",
              "--workers", "2", "--group", "split=ood", "--no-progress"])  # fmt: skip
    assert exc.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "12 of 12 images stored in 3 shards (0 resumed), 0 skipped" in out
    st = open_store(tmp_path / "s")
    # without --classes the head keeps ImageNet's 1000 classes; labels index the folder names
    assert st.head[0].shape == (1000, st.array_specs["features"]["shape"][0])
    assert st.meta["classes"]["ids"] == ["cat", "dog", "owl"]
    assert set(st.index["split"]) == {"ood"}


def test_cli_file_list_with_labels(tmp_path, images, capsys):
    classes = tmp_path / "classes.txt"
    classes.write_text("owl\ncat\ndog\nfox\n")
    lst = tmp_path / "list.txt"
    lst.write_text(
        f"{images}/cat/0000.png cat\n{images}/owl/0001.png 0\n{images}/dog/0002.png\n"
        f"{images}/missing.png fox\n"
    )
    with pytest.raises(SystemExit) as exc:
        main(["extract", "--model", "timm/test_resnet", "--random-init", "--data", str(lst),
              "--classes", str(classes), "--out", str(tmp_path / "s"), "--preset",
              "resize36-crop32", "--workers", "0", "--no-progress"])  # fmt: skip
    assert exc.value.code == 0
    assert "3 of 4 images stored in 1 shards (0 resumed), 1 skipped" in " ".join(
        capsys.readouterr().out.split()
    )
    st = open_store(tmp_path / "s")
    assert st.labels.tolist() == [1, 0, -1]
    assert st.head[0].shape[0] == 4  # --num-classes defaults to the class list's length
    assert st.skipped["path"].tolist() == [f"{images}/missing.png"]
    assert st.skipped["reason"].str.startswith("unreadable image").all()


def test_mixed_precision_path_on_the_cpu(tmp_path, images, tiny):
    """amp=True runs the same autocast code as CUDA (float16 here on the CPU): float32 results."""
    src = image_folder(images)
    kw = {"preset": "resize36-crop32", "batch_size": 4, "shard_size": 5, "progress": False}
    full = extract(tiny, src, tmp_path / "f32", fsync=False, scores=("odin",), **kw)
    half = extract(tiny, src, tmp_path / "f16", amp=True, scores=("odin",), **kw)
    assert "float16 autocast" in half.device and "autocast" not in full.device
    a, b = open_store(tmp_path / "f32"), open_store(tmp_path / "f16")
    assert b.meta["extraction"]["amp"] is True and a.meta["extraction"]["amp"] is False
    for name in ("logits", "features"):
        x, y = a.arrays(name)[0], b.arrays(name)[0]
        assert y.dtype == np.float32 and np.isfinite(y).all()
        assert not np.array_equal(x, y), f"{name}: autocast had no effect"
        np.testing.assert_allclose(y, x, atol=2e-2 * np.abs(x).max(), err_msg=name)
    # ODIN turns autocast off: at T = 1000 its signal is in the 5th digit, below float16
    np.testing.assert_array_equal(b.arrays("odin")[0], a.arrays("odin")[0])
    b.verify()


def test_device_resolution(monkeypatch):
    from semshift.features.extract import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(InputError, match="CUDA is not available"):
        resolve_device("cuda:1")
    with pytest.raises(InputError, match="device 'gpu0'"):
        resolve_device("gpu0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")
    assert resolve_device("cuda:1") == torch.device("cuda:1")


def test_extract_many_writes_what_extract_writes_and_resumes_each_store(tmp_path, images, tiny):
    """One pass over the images for several models: each store is the one `extract` writes."""
    from semshift.features.extract import extract_many

    _bad_images(images / "owl")  # the skipped images are recorded in every store
    src = image_folder(images)
    other = load_model("timm/test_resnet", random_init=True, seed=1, num_classes=3)
    # a third model normalising differently: each model normalises the shared uint8 batch
    odd = load_model("timm/test_resnet", random_init=True, seed=1, num_classes=3)
    odd.mean, odd.std = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)
    models = [tiny, other, odd]
    kw = {"preset": "resize36-crop32", "batch_size": 3, "shard_size": 5, "progress": False}
    kw |= {"fsync": False, "scores": ("odin",), "groups": {"split": "id_test"}}
    for i, m in enumerate(models):
        extract(m, src, tmp_path / f"ref{i}", **kw)
    # store 0 is unfinished with shard 1 missing, store 1 is absent, store 2 is finished
    extract(tiny, src, tmp_path / "many0", **kw)
    (tmp_path / "many0" / "meta.json").unlink()
    (tmp_path / "many0" / "shards" / "00001.json").unlink()
    extract(odd, src, tmp_path / "many2", **kw)
    (tmp_path / "many2" / "meta.json").unlink()
    outs = [tmp_path / f"many{i}" for i in range(3)]
    summaries = extract_many(models, src, outs, **kw)
    assert [s.n_resumed for s in summaries] == [2, 0, 3]
    assert [(s.n_stored, s.n_skipped) for s in summaries] == [(12, 2)] * 3
    for i in range(3):
        ref, got = open_store(tmp_path / f"ref{i}"), open_store(outs[i])
        assert ref.checksums() == got.checksums(), i
        for name in ("index.parquet", "head.npz", "skipped.csv"):
            assert (tmp_path / f"ref{i}" / name).read_bytes() == (outs[i] / name).read_bytes()
        assert got.meta["preprocessing"] == ref.meta["preprocessing"]
        got.verify()
    # the normalisation mattered: the two stores of the same weights differ
    assert not np.array_equal(
        open_store(outs[1]).arrays("logits")[0], open_store(outs[2]).arrays("logits")[0]
    )


def test_extract_many_refuses_mismatched_outputs(tmp_path, images, tiny):
    from semshift.features.extract import extract_many

    src = image_folder(images)
    with pytest.raises(InputError, match="one output store per model: 2 model"):
        extract_many([tiny, tiny], src, [tmp_path / "a"], progress=False)
    with pytest.raises(InputError, match="one output store per model: 0 model"):
        extract_many([], src, [], progress=False)
    with pytest.raises(InputError, match="its own output store"):
        extract_many([tiny, tiny], src, [tmp_path / "a", tmp_path / "b" / ".." / "a"])
    assert not (tmp_path / "a").exists()


def test_extract_many_with_different_architectures(tmp_path, images, tiny):
    """Models of other widths and class counts share the pass; each store has its own schema."""
    from semshift.features.extract import extract_many

    src = image_folder(images)
    wide = load_model("resnet18", random_init=True, seed=2, num_classes=5)
    kw = {"preset": "resize36-crop32", "batch_size": 4, "shard_size": 7, "progress": False}
    kw |= {"fsync": False, "scores": ("rankfeat",)}
    extract_many([tiny, wide], src, [tmp_path / "m0", tmp_path / "m1"], **kw)
    for i, m in enumerate([tiny, wide]):
        extract(m, src, tmp_path / f"r{i}", **kw)
        got, ref = open_store(tmp_path / f"m{i}"), open_store(tmp_path / f"r{i}")
        assert got.checksums() == ref.checksums()
        assert got.arrays("logits")[0].shape == (12, m.num_classes)
        assert got.arrays("features")[0].shape == (12, m.feature_dim)
