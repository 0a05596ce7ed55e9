"""Stores are verified in full every time a run reads them; a damaged store stops the run."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from tests.run.conftest import base_config, build_stores

from semshift.errors import InputError
from semshift.features import open_store
from semshift.run import run
from semshift.run.cache import StageCache
from semshift.run.verify import VerifiedStores


@pytest.fixture
def stores(tmp_path):
    return build_stores(tmp_path / "stores")


def _flip_byte(path, offset=-5):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    st = os.stat(path)
    path.write_bytes(bytes(data))
    return st


def test_a_flipped_byte_in_a_shard_fails_evaluate_with_one_line(stores, tmp_path, semshift):
    shard = sorted((stores["ood"] / "shards").glob("*.features.npy"))[0]
    _flip_byte(shard)
    out = tmp_path / "ev"
    done = semshift(
        "evaluate", "--train", str(stores["train"]), "--test", str(stores["test"]),
        "--ood", f"easy={stores['ood']}", "-d", "msp", "--out", str(out), "--quiet",
    )  # fmt: skip
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ")
    assert f"shards/{shard.name}" in lines[0] and "damaged" in lines[0]
    assert str(stores["ood"]) in lines[0]
    assert not (out / "results.parquet").exists()


def test_every_run_verifies_every_store(stores, tmp_path):
    out = tmp_path / "out"
    first = run(base_config(stores, out, detectors=["msp"]), progress=False)
    hashed = first.stages["extract"].keys["verified"]
    assert set(hashed) == {str(stores[k]) for k in ("train", "test", "cov", "ood")}
    # a re-run into the same output hashes every store again: nothing is remembered
    again = run(base_config(stores, out, detectors=["msp"]), progress=False)
    assert again.stages["extract"].keys["verified"] == hashed
    # a shard changed in place with its size and modification time kept: the run stops
    shard = sorted((stores["test"] / "shards").glob("*.logits.npy"))[0]
    st = _flip_byte(shard)
    os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(
        InputError,
        match=rf"data\.id_test: feature store .* damaged: shard \d+ \(shards/{shard.name}: "
        r"checksum differs from meta\.json\); run `semshift store repair ",
    ):
        run(base_config(stores, out, detectors=["msp"]), progress=False)
    # put the byte back: accepted, and the results are those of the first run
    _flip_byte(shard)
    back = run(base_config(stores, out, detectors=["msp"]), progress=False)
    assert back.results.equals(first.results)


def test_verified_stores_open_names_a_missing_file(stores, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(stores["train"], copy)
    meta = json.loads((copy / "meta.json").read_text())
    victim = next(iter(meta["shards"][0]["files"].values()))["file"]
    (copy / "shards" / victim).unlink()
    v = VerifiedStores(StageCache(tmp_path / "cache"))
    with pytest.raises(
        InputError, match=rf"data\.id_train: feature store .* shard 0 \(shards/{victim}: missing\)"
    ):
        v.open(copy, "data.id_train")
    # a store written by the run itself is remembered without hashing
    v.remember(open_store(stores["train"]))
    assert v.open(stores["train"], "data.id_train") is not None and v.hashed == []
