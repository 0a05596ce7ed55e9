"""Feature store: round trip, lazy memory maps, selection, blocks, concatenation, atomicity."""

from __future__ import annotations

import errno
import io
import json
import os
import pathlib
from concurrent.futures import Future

import numpy as np
import pandas as pd
import pytest
import xxhash

from semshift.errors import InputError
from semshift.features import StoreWriter, concat_stores, open_store, write_store
from semshift.features import store as store_mod


def _data(n=23, c=5, d=7, seed=0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, c)).astype(np.float32)
    feats = rng.normal(size=(n, d)).astype(np.float32)
    index = pd.DataFrame(
        {
            "path": [f"img/{i:03d}.png" for i in range(n)],
            "label": rng.integers(-1, c, n),
            "split": np.where(np.arange(n) % 3 == 0, "id_test", "id_val"),
            "severity": np.arange(n) % 5 + 1,
        }
    )
    head = (rng.normal(size=(c, d)).astype(np.float32), rng.normal(size=c).astype(np.float32))
    return index, logits, feats, head


@pytest.fixture
def stored(tmp_path):
    index, logits, feats, head = _data()
    st = write_store(
        tmp_path / "s",
        index=index,
        arrays={"logits": logits, "features": feats},
        head=head,
        meta={"model": "toy", "classes": {"ids": list("abcde")}},
        shard_size=5,
        fsync=False,
    )
    return st, index, logits, feats, head


def test_round_trip(stored):
    st, index, logits, feats, head = stored
    st = open_store(st.path)
    assert len(st) == 23 and st.n_shards == 5
    got_l, got_f = st.arrays("logits", "features")
    np.testing.assert_array_equal(got_l, logits)
    np.testing.assert_array_equal(got_f, feats)
    np.testing.assert_array_equal(st.labels, index["label"].to_numpy())
    np.testing.assert_array_equal(st.head[0], head[0])
    np.testing.assert_array_equal(st.head[1], head[1])
    assert st.groups == ["split", "severity"]
    assert list(st.index["sample_id"]) == list(range(23))
    assert list(st.index["shard"]) == [i // 5 for i in range(23)]
    assert list(st.index["row"]) == [i % 5 for i in range(23)]
    assert st.meta["model"] == "toy" and st.meta["n_rows"] == 23
    assert st.meta["arrays"] == {
        "logits": {"shape": [5], "dtype": "float32"},
        "features": {"shape": [7], "dtype": "float32"},
    }
    # per-shard checksums are the XXH3-128 of the files on disk (xxhash's reference digest)
    for name, digest in st.checksums().items():
        data = (st.path / "shards" / name).read_bytes()
        assert digest == "xxh3_128:" + xxhash.xxh3_128(data).hexdigest()
        assert store_mod.file_checksum(st.path / "shards" / name) == digest
    st.verify()
    # shards are plain .npy files, byte for byte what np.save writes
    buf = io.BytesIO()
    np.save(buf, feats[10:15])
    assert (st.path / "shards" / "00002.features.npy").read_bytes() == buf.getvalue()


def test_lazy_memmap_and_gather(stored):
    st, _, logits, feats, _ = stored
    assert st._mmaps == {}  # nothing read on open
    sel = st.select(np.arange(23) < 4)  # rows 0..3: one run inside shard 0
    (view,) = sel.arrays("features")
    assert isinstance(view, np.memmap) and not view.flags.writeable
    np.testing.assert_array_equal(view, feats[:4])
    assert set(st._mmaps) == {(0, "features")}  # only that shard was mapped
    pos = np.array([1, 4, 5, 6, 12, 22])
    np.testing.assert_array_equal(st.gather(pos, "logits"), logits[pos])
    assert st.gather(np.array([], np.int64), "logits").shape == (0, 5)


def test_select_groups(stored):
    st, index, logits, _, _ = stored
    sel = st.select(split="id_test", severity=[1, 2])
    want = index.index[(index["split"] == "id_test") & index["severity"].isin([1, 2])]
    np.testing.assert_array_equal(sel.positions, want.to_numpy())
    np.testing.assert_array_equal(sel.arrays("logits")[0], logits[want])
    np.testing.assert_array_equal(sel.labels, index["label"].to_numpy()[want])
    sub = st.select(split="id_val").select(severity=3)
    want2 = index.index[(index["split"] == "id_val") & (index["severity"] == 3)]
    np.testing.assert_array_equal(sub.positions, want2.to_numpy())
    assert len(st.select(split="nope")) == 0
    with pytest.raises(InputError, match=r"no column 'splt'.*did you mean split"):
        st.select(splt="id_test")
    with pytest.raises(InputError, match=r"no array 'logit'.*did you mean logits"):
        st.all().arrays("logit")


def test_inputs_for_detectors(stored):
    st, index, logits, feats, head = stored
    kw = st.select(split="id_val").inputs("logits", "features", "head", "labels")
    rows = (index["split"] == "id_val").to_numpy()
    np.testing.assert_array_equal(kw["logits"], logits[rows])
    np.testing.assert_array_equal(kw["features"], feats[rows])
    np.testing.assert_array_equal(kw["head"][0], head[0])
    np.testing.assert_array_equal(kw["labels"], index["label"].to_numpy()[rows])
    assert set(st.all().inputs()) == {"logits", "features", "head"}


def test_blocks_cover_selection_in_order(stored):
    st, _, logits, feats, _ = stored
    sel = st.select(severity=[1, 3, 4])
    blocks = list(sel.blocks("features", "logits", rows=3))
    assert [len(b["positions"]) for b in blocks][:-1] == [3] * (len(blocks) - 1)
    np.testing.assert_array_equal(np.concatenate([b["positions"] for b in blocks]), sel.positions)
    np.testing.assert_array_equal(
        np.concatenate([b["features"] for b in blocks]), feats[sel.positions]
    )
    np.testing.assert_array_equal(
        np.concatenate([b["logits"] for b in blocks]), logits[sel.positions]
    )


def test_blocks_prefetch_the_next_dense_shard(stored, monkeypatch):
    st, _, _, feats, _ = stored
    asked = []

    class Recorder:
        def submit(self, fn, files):
            asked.append(sorted(f.name for f in files))
            done = Future()
            done.set_result(
                fn([*files, files[0].with_name("missing.npy")])
            )  # a missing file: skipped
            return done

    monkeypatch.setattr(store_mod.reader, "_PREFETCH", Recorder())  # read by the reader
    got = np.concatenate([b["features"] for b in st.all().blocks("features", rows=4)])
    np.testing.assert_array_equal(got, feats)
    # 5 shards of 5 rows (the last has 3): each asked for once, in order, a block ahead
    assert asked == [[f"{s:05d}.features.npy"] for s in range(5)]
    asked.clear()
    list(st.all().blocks("features", "logits", rows=100))
    assert len(asked) == 5 and all(len(a) == 2 for a in asked)
    asked.clear()
    # one row of each full 5-row shard: too sparse to read whole shards ahead
    rows = np.arange(len(st))
    sparse = st.select((rows % 5 == 0) & (rows < 20))
    np.testing.assert_array_equal(
        np.concatenate([b["features"] for b in sparse.blocks("features", rows=2)]),
        feats[0:20:5],
    )
    assert asked == []


def test_concat_same_schema(tmp_path, stored):
    st, _, logits, _, head = stored
    index, l2, f2, _ = _data(n=8, seed=1)
    index = index.drop(columns=["severity"]).assign(corruption="blur")
    write_store(
        tmp_path / "s2",
        index=index,
        arrays={"logits": l2, "features": f2},
        head=head,
        meta={"model": "toy", "classes": {"ids": list("abcde")}},
        shard_size=3,
        fsync=False,
    )
    both = concat_stores([st, tmp_path / "s2"])
    assert len(both) == 31 and both.n_shards == 8
    np.testing.assert_array_equal(both.arrays("logits")[0], np.concatenate([logits, l2]))
    np.testing.assert_array_equal(
        both.select(source=str(tmp_path / "s2")).arrays("features")[0], f2
    )
    # group columns are united; missing ones are NA for the other store's rows
    assert set(both.groups) == {"split", "severity", "corruption", "source"}
    assert both.index["corruption"].isna().sum() == 23
    np.testing.assert_array_equal(both.select(corruption="blur").arrays("features")[0], f2)
    np.testing.assert_array_equal(both.head[0], head[0])


def test_concat_different_schema_names_the_field(tmp_path, stored):
    st = stored[0]
    index, l2, _, _ = _data(n=4, c=6)
    other = write_store(
        tmp_path / "o", index=index, arrays={"logits": l2}, meta={"model": "toy"}, fsync=False
    )
    with pytest.raises(InputError, match=r"different schema \(arrays: .*head: "):
        concat_stores([st, other])
    with pytest.raises(InputError, match="at least one store"):
        concat_stores([])


def test_open_refuses_unfinished_and_foreign(tmp_path):
    with pytest.raises(InputError, match="not a feature store"):
        open_store(tmp_path)
    w = StoreWriter(tmp_path / "u", arrays={"logits": (3,)}, run={"model": "m"}, fsync=False)
    w.write_shard(
        0,
        {"logits": np.zeros((2, 3))},
        pd.DataFrame({"sample_id": [0, 1], "path": ["a", "b"], "label": [0, 1]}),
    )
    with pytest.raises(InputError, match="unfinished extraction"):
        open_store(tmp_path / "u")
    with pytest.raises(InputError, match=r"different settings \(model: 'm' vs now 'n'"):
        StoreWriter(tmp_path / "u", arrays={"logits": (3,)}, run={"model": "n"})
    # the same settings resume: the shard written before is known and trusted
    assert StoreWriter(tmp_path / "u", arrays={"logits": (3,)}, run={"model": "m"}).done == {0}


def _shard_index(rows):
    return pd.DataFrame(
        {"sample_id": rows, "path": [f"p{r}" for r in rows], "label": [0] * len(rows)}
    )


def test_full_disk_mid_shard_leaves_nothing_trusted(tmp_path, monkeypatch):
    path = tmp_path / "s"
    w = StoreWriter(path, arrays={"logits": (4,)}, fsync=False)
    w.write_shard(0, {"logits": np.ones((3, 4))}, _shard_index([0, 1, 2]))

    real_write = store_mod._HashingWriter.write
    calls = {"n": 0}

    def failing(self, data):
        calls["n"] += 1
        if calls["n"] > 1:  # the header goes through, the data hits a full disk
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(self, data)

    monkeypatch.setattr(store_mod._HashingWriter, "write", failing)
    with pytest.raises(OSError, match="No space"):
        w.write_shard(1, {"logits": np.ones((3, 4))}, _shard_index([3, 4, 5]))
    monkeypatch.setattr(store_mod._HashingWriter, "write", real_write)
    names = sorted(p.name for p in (path / "shards").iterdir())
    assert names == ["00000.index.parquet", "00000.json", "00000.logits.npy"]
    again = StoreWriter(path, arrays={"logits": (4,)}, fsync=False)
    assert again.done == {0}


def test_partial_or_damaged_shard_is_not_trusted(tmp_path):
    path = tmp_path / "s"
    w = StoreWriter(path, arrays={"logits": (4,)}, fsync=False)
    for k in range(3):
        w.write_shard(k, {"logits": np.full((2, 4), k)}, _shard_index([2 * k, 2 * k + 1]))
    # a kill between renames: arrays of shard 2 exist but its record does not
    (path / "shards" / "00002.json").unlink()
    # a leftover temporary file from a killed write
    (path / "shards" / ".00003.logits.npy.tmp-999").write_bytes(b"\x93NUMPY partial")
    # same size, different bytes in shard 1 (bit rot, or a file swapped by hand)
    f = path / "shards" / "00001.logits.npy"
    data = bytearray(f.read_bytes())
    data[-1] ^= 0xFF
    f.write_bytes(bytes(data))
    again = StoreWriter(path, arrays={"logits": (4,)}, fsync=False)
    assert again.done == {0}
    assert not list((path / "shards").glob(".*tmp*"))
    with pytest.raises(InputError, match=r"shard\(s\) \[1, 2\] not written"):
        again.finalize(n_shards=3)


def test_verify_and_no_pickle(stored):
    st = stored[0]
    f = st.path / "shards" / "00002.features.npy"
    data = bytearray(f.read_bytes())
    data[-3] ^= 0x01
    f.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"00002\.features\.npy: checksum differs"):
        open_store(st.path).verify()
    # an object array (needs unpickling) in place of a shard is refused, never loaded
    np.save(f, np.array([{"x": 1}] * 5, dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="cannot read shard array"):
        open_store(st.path).arrays("features")
    # a shard with the wrong shape is reported, naming the file
    np.save(f, np.zeros((4, 7), np.float32))
    with pytest.raises(InputError, match=r"00002\.features\.npy: shard array has shape \(4, 7\)"):
        open_store(st.path).arrays("features")


def test_writer_input_errors(tmp_path):
    with pytest.raises(InputError, match="at least one array"):
        StoreWriter(tmp_path / "a", arrays={})
    w = StoreWriter(tmp_path / "b", arrays={"logits": (3,)}, fsync=False)
    with pytest.raises(InputError, match=r"array 'logits' has shape \(2, 4\), expected \(2, 3\)"):
        w.write_shard(0, {"logits": np.zeros((2, 4))}, _shard_index([0, 1]))
    with pytest.raises(InputError, match="do not match the schema"):
        w.write_shard(0, {"features": np.zeros((2, 3))}, _shard_index([0, 1]))
    with pytest.raises(InputError, match="lacks column"):
        w.write_shard(0, {"logits": np.zeros((2, 3))}, pd.DataFrame({"path": ["a", "b"]}))
    st = w.finalize()  # an empty store is valid
    assert len(st) == 0 and st.arrays("logits")[0].shape == (0, 3)
    with pytest.raises(InputError, match="already holds a finished store"):
        StoreWriter(tmp_path / "b", arrays={"logits": (3,)})
    meta = json.loads((tmp_path / "b" / "meta.json").read_text())
    assert meta["n_rows"] == 0 and meta["format"] == store_mod.FORMAT_VERSION


def test_sha256_store_of_older_versions_still_verifies(tmp_path: pathlib.Path) -> None:
    """Stores written before XXH3 recorded ``sha256``; they open, verify and detect damage."""
    idx = pd.DataFrame({"path": [f"im{i}.png" for i in range(6)], "label": [0, 1, 2, 0, 1, 2]})
    arr = np.arange(18, dtype=np.float32).reshape(6, 3)
    write_store(tmp_path / "s", index=idx, arrays={"logits": arr}, shard_size=4)
    meta_path = tmp_path / "s" / "meta.json"
    meta = json.loads(meta_path.read_text())
    for shard in meta["shards"]:
        for info in shard["files"].values():
            del info["checksum"]
            info["sha256"] = store_mod.sha256_file(tmp_path / "s" / "shards" / info["file"])
    meta_path.write_text(json.dumps(meta))
    st = open_store(tmp_path / "s")
    st.verify()
    assert all(v.startswith("sha256:") for v in st.checksums().values())
    shard = tmp_path / "s" / "shards" / "00000.logits.npy"
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(InputError, match="checksum differs"):
        open_store(tmp_path / "s").verify()


def test_written_store_equals_reopened_store(tmp_path: pathlib.Path) -> None:
    """write_store hands back the index it wrote; it equals what open_store reads from disk."""
    n = 11
    idx = pd.DataFrame(
        {
            "path": [f"im{i}.png" for i in range(n)],
            "label": np.arange(n) % 3,
            "split": ["a", "b"] * 5 + ["a"],
            "severity": np.arange(n, dtype=np.int16),
        }
    )
    arr = np.random.default_rng(0).standard_normal((n, 4)).astype(np.float32)
    written = write_store(tmp_path / "s", index=idx, arrays={"features": arr}, shard_size=4)
    reopened = open_store(tmp_path / "s")
    pd.testing.assert_frame_equal(written.index, reopened.index)
    np.testing.assert_array_equal(written.arrays("features")[0], arr)
    assert written.groups == reopened.groups == ["split", "severity"]


def _fsync_log(monkeypatch):
    """Record every fsync by the name of the file (or folder) it flushed."""
    log: list[str] = []
    real = os.fsync

    def fsync(fd):
        log.append(pathlib.Path(f"/proc/self/fd/{fd}").resolve().name)
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return log


def test_shard_files_are_flushed_before_their_record(tmp_path, monkeypatch):
    log = _fsync_log(monkeypatch)
    w = StoreWriter(tmp_path / "s", arrays={"logits": (4,), "features": (2,)})
    log.clear()  # run.json
    for k in range(3):
        w.write_shard(
            k, {"logits": np.full((2, 4), k), "features": np.ones((2, 2))}, _shard_index([k, k])
        )
        assert len(w._pending) <= StoreWriter.MAX_PENDING
    assert w.done == {0, 1, 2}  # waits for the background commits
    assert not w._pending and w._committer is None
    for k in range(3):
        name = f"{k:05d}"
        files = [f"{name}.logits.npy", f"{name}.features.npy", f"{name}.index.parquet"]
        record_tmp = f".{name}.json.tmp-{os.getpid()}"
        assert set(files) <= set(log) and record_tmp in log
        assert max(log.index(f) for f in files) < log.index(record_tmp)
        # the record's folder is flushed after the record's rename
        assert log[log.index(record_tmp) + 1] == "shards"
    st = w.finalize(n_shards=3)
    np.testing.assert_array_equal(st.arrays("logits")[0][:, 0], [0, 0, 1, 1, 2, 2])
    st.verify()


def test_background_flush_error_surfaces_and_keeps_earlier_shards(tmp_path, monkeypatch):
    path = tmp_path / "s"
    real = os.fsync

    def fsync(fd):
        if pathlib.Path(f"/proc/self/fd/{fd}").resolve().name == "00001.logits.npy":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd)

    w = StoreWriter(path, arrays={"logits": (4,)})
    monkeypatch.setattr(os, "fsync", fsync)
    w.write_shard(0, {"logits": np.zeros((3, 4))}, _shard_index([0, 1, 2]))
    w.write_shard(1, {"logits": np.ones((3, 4))}, _shard_index([3, 4, 5]))
    with pytest.raises(OSError, match="No space"):
        w.flush()
    assert w.done == {0}
    assert not (path / "shards" / "00001.json").exists()
    # a full disk met by a later shard also fails that shard's write_shard or finalize
    w.write_shard(1, {"logits": np.ones((3, 4))}, _shard_index([3, 4, 5]))
    with pytest.raises(OSError, match="No space"):
        w.finalize(n_shards=2)
    assert not (path / "meta.json").exists()
    monkeypatch.setattr(os, "fsync", real)
    again = StoreWriter(path, arrays={"logits": (4,)})
    assert again.done == {0}
    again.write_shard(1, {"logits": np.ones((3, 4))}, _shard_index([3, 4, 5]))
    st = again.finalize(n_shards=2)
    np.testing.assert_array_equal(st.arrays("logits")[0][:, 0], [0, 0, 0, 1, 1, 1])


def test_fsync_on_and_off_write_identical_stores(tmp_path):
    index, logits, feats, head = _data()
    kw = {"index": index, "arrays": {"logits": logits, "features": feats}, "head": head}
    a = write_store(tmp_path / "a", shard_size=4, fsync=True, **kw)
    b = write_store(tmp_path / "b", shard_size=4, fsync=False, **kw)
    assert a.checksums() == b.checksums()
    for name in ("meta.json", "index.parquet", "head.npz", "skipped.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_index_is_read_on_demand_one_column_at_a_time(stored):
    st0, index, logits, *_ = stored
    st = open_store(st0.path)
    assert st._index is None and len(st) == len(index) and st.groups == ["split", "severity"]
    np.testing.assert_array_equal(st.labels, index["label"])
    with pytest.raises(ValueError):
        st.labels[0] = 3  # shared, so read-only
    sel = st.select(split="id_test", severity=[1, 2])
    want = (index["split"] == "id_test") & index["severity"].isin([1, 2])
    np.testing.assert_array_equal(sel.positions, np.flatnonzero(want))
    np.testing.assert_array_equal(sel.arrays("logits")[0], logits[want.to_numpy()])
    assert st._index is None and set(st._column_cache) == {"label", "split", "severity"}
    assert list(sel.index["path"]) == list(index["path"][want])  # now the whole index
    assert st._index is not None and not st._column_cache
    pd.testing.assert_frame_equal(st.index, st0.index)


def test_damaged_index_file_is_refused_at_open(stored):
    st0 = stored[0]
    f = st0.path / "index.parquet"
    good = f.read_bytes()
    f.write_bytes(good[: len(good) // 2])
    with pytest.raises(InputError, match=r"index\.parquet: unreadable"):
        open_store(st0.path)
    short = st0.index.iloc[:-1]
    short.to_parquet(f, index=False)
    with pytest.raises(InputError, match=r"index\.parquet has 22 rows but the shards hold 23"):
        open_store(st0.path)


@pytest.mark.skipif(not hasattr(os, "RWF_NOWAIT"), reason="needs preadv2's RWF_NOWAIT (Linux)")
def test_read_ahead_reads_uncached_chunks_once(tmp_path, monkeypatch):
    f = tmp_path / "big.npy"
    f.write_bytes(np.random.default_rng(0).bytes(20 << 20))  # three 8 MiB chunks
    fd = os.open(f, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    real, reads = os.preadv, []

    def preadv(fd, bufs, off, *flags):
        if not flags:
            reads.append(off)
        return real(fd, bufs, off, *flags)

    monkeypatch.setattr(os, "preadv", preadv)
    store_mod._read_ahead([f, tmp_path / "missing.npy"])  # a missing file is skipped
    for off in (0, 9 << 20, (20 << 20) - 4096):  # now in the page cache
        assert real(fd, [bytearray(4096)], off, os.RWF_NOWAIT) == 4096
    reads.clear()
    store_mod._read_ahead([f])
    assert reads == []  # every chunk found cached: nothing copied again
    os.close(fd)


def test_blocks_read_ahead_every_dense_shard_once_for_any_selection(stored, monkeypatch):
    st, _, _, feats, _ = stored
    asked: list[int] = []
    real = st._prefetch

    def prefetch(shard, names):
        asked.append(shard)
        return real(shard, names)

    monkeypatch.setattr(st, "_prefetch", prefetch)
    rng = np.random.default_rng(0)
    shard_of = np.arange(len(st)) // 5
    for trial in range(30):
        keep = rng.random(len(st)) < rng.choice([0.2, 0.6, 1.0])
        keep[shard_of == trial % 5] = False  # an empty shard somewhere
        sel = st.select(keep)
        rows = int(rng.choice([1, 3, 7, 100]))
        asked.clear()
        got = [b["features"] for b in sel.blocks("features", rows=rows)]
        want = feats[keep]
        np.testing.assert_array_equal(np.concatenate(got) if got else want, want)
        counts = np.bincount(shard_of[keep], minlength=5)
        spans = np.bincount(shard_of, minlength=5)
        dense = [s for s in range(5) if counts[s] and 4 * counts[s] >= spans[s]]
        assert asked == dense, (trial, rows)
