"""The stage cache: stable keys, store fingerprints from meta.json, atomic entries."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from semshift.features import open_store, write_store
from semshift.run import cache as cache_mod
from semshift.run.cache import StageCache, stable_hash, store_fingerprint


def test_stable_hash_ignores_key_order_and_sequence_type():
    a = stable_hash({"detector": "knn", "params": {"k": 50, "backend": "auto"}, "sets": [1, 2]})
    b = stable_hash({"sets": (1, 2), "params": {"backend": "auto", "k": 50}, "detector": "knn"})
    assert a == b and len(a) == cache_mod.KEY_LENGTH
    assert stable_hash({"k": 50}) != stable_hash({"k": 51})
    assert stable_hash(np.arange(3)) == stable_hash(np.arange(3))
    assert stable_hash(np.arange(3)) != stable_hash(np.arange(3.0))


def _store(path, values, labels=(0, 1, 0, 1)):
    index = pd.DataFrame({"path": [f"{i}.png" for i in range(4)], "label": list(labels)})
    w, b = np.eye(2, 3, dtype=np.float32), np.zeros(2, np.float32)
    write_store(path, index=index, arrays={"logits": np.asarray(values, np.float32)},
                head=(w, b), fsync=False)  # fmt: skip
    return path


def test_store_fingerprint_follows_content(tmp_path):
    x = np.arange(8).reshape(4, 2)
    a = store_fingerprint(_store(tmp_path / "a", x))
    same = store_fingerprint(_store(tmp_path / "same", x))
    other_values = store_fingerprint(_store(tmp_path / "b", x + 1))
    other_labels = store_fingerprint(_store(tmp_path / "c", x, labels=(1, 1, 0, 1)))
    assert a == same  # content, not location
    assert len({a, other_values, other_labels}) == 3
    # the hash of what FeatureStore.checksums() reports, plus the head and schema
    st = open_store(tmp_path / "a")
    expected = stable_hash(
        {
            "checksums": st.checksums(),
            "head": st.meta["head"]["checksum"],
            "arrays": st.meta["arrays"],
            "classes": None,
        }
    )
    assert a == expected


def test_store_fingerprint_reads_only_meta_json(tmp_path, monkeypatch):
    path = _store(tmp_path / "a", np.ones((4, 2)))
    before = store_fingerprint(path)
    (path / "index.parquet").unlink()  # not read: the key comes from meta.json alone
    for f in (path / "shards").glob("*.npy"):
        f.unlink()
    assert store_fingerprint(path) == before
    with pytest.raises(Exception, match=r"feature store .*nothing does not exist"):
        store_fingerprint(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(Exception, match=r"not a feature store \(no meta.json\)"):
        store_fingerprint(tmp_path / "empty")


def test_file_checksum_is_memoised_by_size_and_mtime(tmp_path, monkeypatch):
    f = tmp_path / "weights.bin"
    f.write_bytes(b"abc" * 1000)
    calls = []
    real = cache_mod.file_checksum
    monkeypatch.setattr(cache_mod, "file_checksum", lambda p: calls.append(p) or real(p))
    c = StageCache(tmp_path / ".cache")
    first = c.file_checksum(f)
    assert c.file_checksum(f) == first and len(calls) == 1
    # a new cache object reads the memo from files.json
    assert StageCache(tmp_path / ".cache").file_checksum(f) == first and len(calls) == 1
    f.write_bytes(b"abcd" * 1000)
    assert StageCache(tmp_path / ".cache").file_checksum(f) != first and len(calls) == 2


def test_entries_round_trip_without_pickle(tmp_path):
    c = StageCache(tmp_path / ".cache")
    path = c.dir("score", "k") / "s.npy"
    assert c.read_array(path) is None
    c.write_array(path, np.array([0.5, -1.0]))
    np.testing.assert_array_equal(c.read_array(path), [0.5, -1.0])
    assert not list(path.parent.glob(".*tmp*"))  # nothing half-written left behind
    c.write_arrays(tmp_path / "x.npz", {"labels": np.array([1, -1]), "lv": np.array(["1", ""])})
    back = c.read_arrays(tmp_path / "x.npz")
    assert back is not None and back["lv"].tolist() == ["1", ""]
    with pytest.raises(ValueError):  # object arrays would need pickle: refused on write
        c.write_array(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object))
    frame = pd.DataFrame({"a": [1, 2]})
    c.write_frame(tmp_path / "f.parquet", frame)
    pd.testing.assert_frame_equal(c.read_frame(tmp_path / "f.parquet"), frame)
    assert c.read_frame(tmp_path / "none.parquet") is None
