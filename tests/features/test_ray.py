"""The Ray executor writes exactly the store of the local executor (local ray.init(num_cpus=2)).

Ray is an optional extra: where it is installed the executor runs for real; where it is not,
asking for it must fail with an error that says how to install it.
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile

import pytest

from semshift.errors import InputError
from semshift.features import open_store
from semshift.features.data import image_folder
from semshift.features.extract import extract, extract_many
from semshift.features.models import load_model

from .conftest import write_images

HAS_RAY = importlib.util.find_spec("ray") is not None


@pytest.fixture(autouse=True)
def ray_session_folder(monkeypatch: pytest.MonkeyPatch):
    """Ray's session files (logs, sockets) in a folder of their own, removed afterwards (Ray
    leaves them in /tmp/ray otherwise); short, for Ray's socket paths."""
    folder = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    monkeypatch.setenv("RAY_TMPDIR", folder)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_ray_executor_equals_local(tmp_path):
    write_images(tmp_path / "imgs", {f"c{i}": 20 for i in range(10)}, size=36, seed=5)
    (tmp_path / "imgs" / "c2" / "broken.jpg").write_bytes(b"\xff\xd8\xff junk")
    model = load_model("timm/test_resnet", random_init=True, seed=4, num_classes=10)
    src = image_folder(tmp_path / "imgs")
    kw = {"preset": "resize36-crop32", "batch_size": 8, "shard_size": 25, "device": "cpu",
          "scores": ("rankfeat",), "progress": False, "fsync": False}  # fmt: skip
    local = extract(model, src, tmp_path / "local", **kw)
    assert local.n_stored == 200 and local.n_skipped == 1
    if not HAS_RAY:
        with pytest.raises(InputError, match=r"--executor ray needs Ray: pip install 'ray=="):
            extract(model, src, tmp_path / "ray", executor="ray", **kw)
        return
    import ray

    # a second model: each actor computes a shard for both models at once (extract_many)
    other = load_model("timm/test_resnet", random_init=True, seed=5, num_classes=10)
    extract(other, src, tmp_path / "local2", **kw)
    # the first model's store is unfinished (shard 3 missing); the second is not started
    shutil.copytree(tmp_path / "local", tmp_path / "ray")
    (tmp_path / "ray" / "meta.json").unlink()
    (tmp_path / "ray" / "shards" / "00003.json").unlink()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        dist, dist2 = extract_many(
            [model, other], src, [tmp_path / "ray", tmp_path / "ray2"], executor="ray", **kw
        )
    finally:
        ray.shutdown()
    assert (dist.n_stored, dist.n_skipped, dist.n_shards, dist.n_resumed) == (200, 1, 9, 8)
    assert dist2.n_resumed == 0
    assert (dist2.n_stored, dist2.n_skipped, dist2.n_shards) == (200, 1, 9)
    for here, there in (("local", "ray"), ("local2", "ray2")):
        a, b = open_store(tmp_path / here), open_store(tmp_path / there)
        assert a.checksums() == b.checksums()  # bit-identical logits, features and scores
        for name in ("meta.json", "index.parquet", "head.npz", "skipped.csv"):
            assert (tmp_path / here / name).read_bytes() == (tmp_path / there / name).read_bytes()
    assert a.checksums() != open_store(tmp_path / "local").checksums()


def test_unknown_executor(tmp_path, images):
    model = load_model("timm/test_resnet", random_init=True, num_classes=3)
    with pytest.raises(InputError, match="executor 'dask': use 'local' or 'ray'"):
        extract(model, image_folder(images), tmp_path / "s", executor="dask", progress=False)
    assert not (tmp_path / "s").exists()


def test_cli_executor_ray(tmp_path, images, capsys):
    from semshift.cli import main

    args = ["extract", "--model", "timm/test_resnet", "--random-init", "--data", str(images),
            "--preset", "resize36-crop32", "--shard-size", "5", "--workers", "0",
            "--no-progress"]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main([*args, "--out", str(tmp_path / "local")])
    assert exc.value.code == 0
    with pytest.raises(SystemExit) as exc:
        main([*args, "--out", str(tmp_path / "ray"), "--executor", "ray"])
    if not HAS_RAY:
        assert exc.value.code == 2
        assert capsys.readouterr().err.startswith("error: --executor ray needs Ray: pip install")
        return
    import ray

    ray.shutdown()
    assert exc.value.code == 0
    assert open_store(tmp_path / "ray").checksums() == open_store(tmp_path / "local").checksums()
