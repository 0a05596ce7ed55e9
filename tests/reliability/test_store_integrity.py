"""Damaged, mismatched or torn stores are refused by every command that reads them (issue 27).

Each of these ran with exit 0 and wrong numbers, or a traceback, before:

- 4: ``ensemble -d knn`` with the ``--train`` stores in another order than the members;
- 6: a store changed in place with its size and modification time kept, re-run into the same
  ``--out`` (verification was remembered by size and mtime), and a damaged ``index.parquet``;
- 7: ``splits ambiguity`` on stores of two models or on a damaged store, ``ensemble`` and
  ``zsl run`` on a damaged store;
- 9: an ID store (known classes) as the search's validation OOD set;
- 11: a garbage ``skipped.csv``: reported intact by ``store verify``, a traceback in
  ``evaluate``.

Stores are tiny and generated; a CLI failure must be exit 2 with one ``error:`` line naming
the store or file.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from semshift.errors import InputError
from semshift.features import open_store, write_store
from semshift.features.store import file_checksum, read_skipped, verify_store
from semshift.protocols.search import check_val_ood_not_id
from semshift.run import run
from tests.features.test_ensemble import member_store
from tests.run.conftest import C, D, build_stores, make_store
from tests.run.search_stores import CHIHUAHUA, build_search_stores, search_config


def _error_line(res: subprocess.CompletedProcess[str], *names: object) -> str:
    """The one ``error:`` line of a failed command; it names every one of ``names``."""
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    for name in names:
        assert str(name) in lines[0], (name, lines[0])
    return lines[0]


def _tamper(path: Path, offset: int | None = None) -> None:
    """Flip one byte of ``path`` in place, keeping its size and modification time."""
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2 if offset is None else offset] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns


def _shard(store: Path, array: str, k: int = 0) -> Path:
    return store / "shards" / f"{k:05d}.{array}.npy"


@pytest.fixture
def stores(tmp_path: Path) -> dict:
    return build_stores(tmp_path / "stores")


def _evaluate(stores: dict, out: Path) -> list[object]:
    return [
        "evaluate", "--train", stores["train"], "--test", stores["test"],
        "--ood", f"easy={stores['ood']}", "-d", "energy", "--bootstrap", "0", "--no-report",
        "--quiet", "--out", out,
    ]  # fmt: skip


# --------------------------------------------------------------------------- item 4
def test_ensemble_training_stores_in_another_order_are_refused(tmp_path, cli) -> None:
    a, b = member_store(tmp_path, "r18", 0), member_store(tmp_path, "r50", 1)
    out = tmp_path / "scores.csv"
    members = ["--member", a, "--member", b, "-d", "knn:k=3"]
    swapped = cli(["ensemble", *members, "--train", b, "--train", a, "--out", out])
    line = _error_line(swapped, "--train 0", "--member 0", f"store {b}", f"store {a}")
    assert "comes from another model" in line and "model 'r50' vs 'r18'" in line
    assert not out.exists()
    right = cli(["ensemble", *members, "--train", a, "--train", b, "--out", out])
    assert right.returncode == 0, right.stderr
    assert len(pd.read_csv(out)) == 40
    # the library refuses the same (selections opened by the caller)
    from semshift.features.ensemble import ensemble_detector_scores

    sels = [open_store(s).all() for s in (a, b)]
    with pytest.raises(
        InputError,
        match=rf"member 0: training store {b} comes from another "
        rf"model than test store {a} \(model, head differ\)",
    ):
        ensemble_detector_scores(sels[::-1], sels, "knn", {"k": 3})


# --------------------------------------------------------------------------- item 6
def test_a_shard_changed_in_place_is_refused_on_a_rerun_into_the_same_out(
    stores, tmp_path, cli
) -> None:
    out = tmp_path / "ev"
    first = cli(_evaluate(stores, out))
    assert first.returncode == 0, first.stderr
    shard = _shard(stores["ood"], "logits")
    _tamper(shard)
    again = cli(_evaluate(stores, out))
    line = _error_line(again, f"feature store {stores['ood']} is damaged", f"shards/{shard.name}")
    assert line.startswith("error: --ood easy: ") and "checksum differs" in line


def test_a_changed_index_is_refused_on_a_rerun_into_the_same_out(stores, tmp_path, cli) -> None:
    """index.parquet rewritten with other labels (a readable file, its mtime kept)."""
    out = tmp_path / "ev"
    assert cli(_evaluate(stores, out)).returncode == 0
    f = stores["test"] / "index.parquet"
    st = f.stat()
    index = pd.read_parquet(f)
    index["label"] = index["label"].to_numpy()[::-1]
    index.to_parquet(f, index=False)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    line = _error_line(cli(_evaluate(stores, out)), f"feature store {stores['test']} is damaged")
    assert line.startswith("error: --test: ") and "(index.parquet: " in line


def test_the_index_of_an_older_store_is_compared_with_the_shards(tmp_path) -> None:
    """Stores written before index.parquet's checksum was recorded: the index must equal the
    shards' own indices (with shard and row columns)."""
    store = make_store(
        tmp_path / "old",
        np.random.default_rng(0),
        np.ones((C, D), np.float32),
        (np.ones((C, D), np.float32), np.zeros(C, np.float32)),
        12,
    )
    meta = json.loads((store / "meta.json").read_text())
    assert meta["index"]["checksum"] == file_checksum(store / "index.parquet")
    del meta["index"]
    (store / "meta.json").write_text(json.dumps(meta))
    assert verify_store(store) == []
    index = pd.read_parquet(store / "index.parquet")
    index.loc[3, "label"] = 2  # a torn index: another label than the shard holds
    index.to_parquet(store / "index.parquet", index=False)
    assert [str(d) for d in verify_store(store)] == [
        "(index.parquet: differs from the shards' own indices)"
    ]


# --------------------------------------------------------------------------- item 7
def _ambiguity(id_store: Path, cand: Path, out: Path) -> list[object]:
    return ["splits", "ambiguity", "--id-store", id_store, "--candidates", cand,
            "--threshold", "1.0", "--out", out]  # fmt: skip


def test_splits_ambiguity_refuses_two_models_and_a_damaged_store(stores, tmp_path, cli) -> None:
    rng = np.random.default_rng(3)
    means = stores["means"]
    other = make_store(
        tmp_path / "other",
        rng,
        means,
        (means[::-1].copy(), np.zeros(C, np.float32)),
        40,
        labels=np.full(40, -1),
    )
    out = tmp_path / "amb"
    ok = cli(_ambiguity(stores["train"], stores["ood"], out))
    assert ok.returncode == 0, ok.stderr
    line = _error_line(
        cli(_ambiguity(stores["train"], other, out)), f"store {other}", f"store {stores['train']}"
    )
    assert line.startswith("error: --candidates: ") and "another model than --id-store" in line
    assert "head " in line
    _tamper(_shard(stores["ood"], "features"))
    line = _error_line(
        cli(_ambiguity(stores["train"], stores["ood"], tmp_path / "amb2")),
        f"feature store {stores['ood']} is damaged",
        "shards/00000.features.npy",
    )
    assert not (tmp_path / "amb2").exists()


def test_ensemble_refuses_a_damaged_member(tmp_path, cli) -> None:
    a, b = member_store(tmp_path, "r18", 0), member_store(tmp_path, "r50", 1)
    _tamper(_shard(b, "logits"))
    out = tmp_path / "scores.csv"
    line = _error_line(
        cli(["ensemble", "--member", a, "--member", b, "--out", out]),
        f"feature store {b} is damaged",
        "shards/00000.logits.npy",
    )
    assert line.startswith("error: --member 1: ") and not out.exists()
    # a damaged training store too
    b2 = member_store(tmp_path / "again", "r50", 1)
    t = member_store(tmp_path / "train", "r18", 0)
    _tamper(t / "head.npz")
    args = ["ensemble", "--member", a, "--member", b2, "-d", "knn", "--train", t,
            "--train", b2, "--out", out]  # fmt: skip
    line = _error_line(cli(args), f"feature store {t} is damaged", "head.npz")
    assert line.startswith("error: --train 0: ")


def test_zsl_run_refuses_a_damaged_store(tmp_path, cli) -> None:
    from semshift.splits.manifest import SplitManifest
    from tests.training.planted import planted

    small = planted(n_seen=6, n_unseen=2, dim=8, att=4, per_class=6, seed=1)
    n = small.labels.size
    paths = [f"img/{k:04d}.png" for k in range(n)]
    classes = [f"c{c:02d}" for c in range(small.n_classes)]
    rows = [(paths[i], classes[small.labels[i]], s) for s in small.sets for i in small.sets[s]]
    (tmp_path / "split").mkdir()
    pd.DataFrame(rows, columns=["path", "class", "set"]).to_csv(
        tmp_path / "split" / "images.csv", index=False
    )
    SplitManifest(
        method="zsl",
        params={},
        taxonomy="custom",
        known=sorted({classes[c] for c in small.seen_classes}),
        bins={"unseen": sorted({classes[c] for c in small.unseen_classes})},
        extra={"images": "images.csv", "image_root": None},
    ).write(tmp_path / "split" / "split.json")
    write_store(
        tmp_path / "store",
        index=pd.DataFrame({"path": paths, "label": small.labels}),
        arrays={"features": small.features.astype(np.float32)},
        fsync=False,
    )
    emb = pd.DataFrame(small.embeddings, columns=[f"e{k}" for k in range(4)])
    emb.insert(0, "class", classes)
    emb.to_csv(tmp_path / "emb.csv", index=False)
    (tmp_path / "zsl.json").write_text(
        json.dumps({"split": "split", "store": "store", "embeddings": "emb.csv"})
    )
    _tamper(_shard(tmp_path / "store", "features"))
    line = _error_line(
        cli(["zsl", "run", "--data", tmp_path, "--method", "eszsl"]),
        "is damaged",
        "shards/00000.features.npy",
    )
    assert line.startswith("error: zero-shot features: feature store ")


# --------------------------------------------------------------------------- item 9
@pytest.fixture(scope="module")
def search_stores(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("integrity_search")
    out = build_search_stores(root)
    means = np.abs(np.random.default_rng(5).normal(0, 3, (C, D))).astype(np.float32)
    # a second ID store (known labels of a class list), an ID store without a class list and
    # an id_train whose class list holds the Chihuahua
    out["id_other"] = make_store(
        root / "id_other",
        np.random.default_rng(6),
        means,
        out["head"],
        60,
        classes=[f"n0000001{k}" for k in range(C)],
    )
    out["id_bare"] = make_store(root / "id_bare", np.random.default_rng(8), means, out["head"], 20)
    out["train_chihuahua"] = make_store(
        root / "train_chihuahua",
        np.random.default_rng(7),
        means,
        out["head"],
        240,
        classes=[CHIHUAHUA, "n00000001", "n00000002", "n00000003"],
    )
    return out


def test_an_id_store_as_val_ood_is_refused_by_evaluate_search(search_stores, tmp_path, cli):
    s = search_stores
    args = [
        "evaluate", "--train", s["train"], "--val", s["val"], "--test", s["test"],
        "--ood", f"far={s['far']}", "-d", "msp", "-d", "knn", "--bootstrap", "0",
        "--out", tmp_path / "ev", "--quiet", "--no-report", "--search-space", "knn:k=1,10",
        "--val-ood", s["id_other"],
    ]  # fmt: skip
    line = _error_line(cli(args), "validation OOD set 'val_ood' holds ID classes")
    assert line == (
        "error: --val-ood: validation OOD set 'val_ood' holds ID classes: 60 of its 60 rows are "
        "of a class the model knows (n00000010, n00000011, n00000012, n00000013); the "
        "validation OOD set must hold classes outside the ID classes (an OOD store, not an ID "
        "one)"
    )
    assert not (tmp_path / "ev" / "search.csv").exists()


def test_val_ood_classes_of_the_id_class_list_are_refused_by_the_run(
    search_stores, tmp_path
) -> None:
    s = search_stores
    cfg = search_config(s, tmp_path / "a")
    cfg["data"]["sets"]["valood"]["store"] = str(s["id_other"])
    with pytest.raises(
        InputError,
        match=r"search\.val_ood: validation OOD set 'valood' holds "
        r"ID classes: 60 of its 60 rows .*\(n00000010, n00000011",
    ):
        run(cfg, progress=False)
    # an ID store without class ids: its known labels say it
    cfg = search_config(s, tmp_path / "a2")
    cfg["data"]["sets"]["valood"]["store"] = str(s["id_bare"])
    with pytest.raises(
        InputError,
        match=r"'valood' holds ID classes: 20 of its 20 rows are of "
        r"a class the model knows \(label 0, label 1, label 2, label 3\)",
    ):
        run(cfg, progress=False)
    # unlabelled rows whose class id is one of id_train's classes
    cfg = search_config(s, tmp_path / "b")
    cfg["data"]["id_train"]["store"] = str(s["train_chihuahua"])
    with pytest.raises(
        InputError,
        match=rf"validation OOD set 'valood' holds ID classes: 80 of "
        rf"its 80 rows are of a class the model knows \({CHIHUAHUA}\)",
    ):
        run(cfg, progress=False)
    # the same search with an OOD validation set runs
    done = run(search_config(s, tmp_path / "c"), progress=False)
    assert done.results is not None and (tmp_path / "c" / "search.csv").is_file()


def test_check_val_ood_not_id_names_the_offending_classes() -> None:
    check_val_ood_not_id("v", np.full(3, -1), ["x", "y", None], {"a", "b"})  # OOD: accepted
    with pytest.raises(
        InputError,
        match=r"'v' holds ID classes: 3 of its 4 rows are of a class "
        r"the model knows \(a, b, label 5\)",
    ):
        check_val_ood_not_id("v", [-1, -1, 5, -1], ["a", "b", None, "z"], {"a", "b"})


# --------------------------------------------------------------------------- item 11
GARBAGE = {
    "not UTF-8": (
        b"sample_id,path,reason\n1,\xff\xfe.png,broken\n",
        "not UTF-8 text (byte 0xff at offset 24)",
    ),
    "other columns": (b"id,file\n1,a.png\n", "columns id, file, expected sample_id, path, reason"),
    "non-integer id": (
        b"sample_id,path,reason\nx,a.png,broken\n",
        "line 2: sample_id 'x' is not an integer",
    ),
}


@pytest.mark.parametrize("recorded", [True, False], ids=["checksum", "older store"])
@pytest.mark.parametrize("case", list(GARBAGE))
def test_store_verify_checks_skipped_csv(stores, cli, case, recorded) -> None:
    store = stores["cov"]
    data, problem = GARBAGE[case]
    if not recorded:  # a store written before skipped.csv's checksum was recorded
        meta = json.loads((store / "meta.json").read_text())
        del meta["skipped"]
        (store / "meta.json").write_text(json.dumps(meta))
    size = (store / "skipped.csv").stat().st_size  # the header line
    (store / "skipped.csv").write_bytes(data)
    line = _error_line(
        cli(["store", "verify", store]), f"store {store} is damaged", "(skipped.csv: "
    )
    want = f"{len(data)} bytes, meta.json records {size}" if recorded else problem
    assert f"(skipped.csv: {want})" in line, line
    assert [d.file for d in verify_store(store)] == ["skipped.csv"]


@pytest.mark.parametrize("case", list(GARBAGE))
def test_a_garbage_skipped_csv_is_one_line_in_evaluate(stores, tmp_path, cli, case) -> None:
    (stores["ood"] / "skipped.csv").write_bytes(GARBAGE[case][0])
    line = _error_line(
        cli(_evaluate(stores, tmp_path / "ev")), f"feature store {stores['ood']}", "skipped.csv"
    )
    assert line.startswith("error: --ood easy: ")
    # read directly (e.g. by open_store), the same problem is one line naming the file
    with pytest.raises(InputError, match=rf"^{stores['ood'] / 'skipped.csv'}: .*damaged"):
        open_store(stores["ood"])


def test_skipped_csv_is_checksummed_and_read_with_integer_ids(tmp_path) -> None:
    from semshift.features.store import StoreWriter

    w = StoreWriter(tmp_path / "s", arrays={"logits": (2,)}, run={}, fsync=False)
    w.write_shard(
        0,
        {"logits": np.zeros((1, 2))},
        pd.DataFrame({"sample_id": [0], "path": ["a.png"], "label": [0]}),
        skipped=[{"sample_id": 1, "path": "b, c.png", "reason": "unreadable"}],
    )
    store = w.finalize(extra_skipped=[{"sample_id": -1, "path": "x.txt", "reason": "not an image"}])
    assert store.meta["skipped"]["checksum"] == file_checksum(tmp_path / "s" / "skipped.csv")
    assert store.meta["n_skipped"] == 2 and verify_store(tmp_path / "s") == []
    table = read_skipped(tmp_path / "s" / "skipped.csv")
    assert table["sample_id"].dtype == np.int64 and table["sample_id"].tolist() == [-1, 1]
    assert table["path"].tolist() == ["x.txt", "b, c.png"]
    # a skipped.csv with fewer rows than meta.json records (a torn rewrite) is damage too
    meta = json.loads((tmp_path / "s" / "meta.json").read_text())
    del meta["skipped"]
    (tmp_path / "s" / "meta.json").write_text(json.dumps(meta))
    (tmp_path / "s" / "skipped.csv").write_text("sample_id,path,reason\n1,b.png,unreadable\n")
    assert [str(d) for d in verify_store(tmp_path / "s")] == [
        "(skipped.csv: 1 rows, meta.json records 2)"
    ]


def test_a_damaged_skipped_csv_is_repaired_by_finishing_the_store_again(tmp_path, cli) -> None:
    """``store repair`` of a store whose only damage is skipped.csv keeps every shard; the
    extraction finishing it again writes a good skipped.csv from the shards' records."""
    from semshift.features.store import StoreWriter

    def writer() -> StoreWriter:
        return StoreWriter(tmp_path / "s", arrays={"logits": (2,)}, run={"t": 1}, fsync=False)

    w = writer()
    for k in range(2):
        w.write_shard(
            k,
            {"logits": np.zeros((1, 2))},
            pd.DataFrame({"sample_id": [k], "path": [f"{k}.png"], "label": [0]}),
            skipped=[{"sample_id": 10 + k, "path": f"bad{k}.png", "reason": "x"}],
        )
    w.finalize()
    (tmp_path / "s" / "skipped.csv").write_bytes(b"\x00garbage")
    _error_line(cli(["store", "verify", tmp_path / "s"]), "(skipped.csv: 8 bytes, meta.json")
    res = cli(["store", "repair", tmp_path / "s"])
    assert res.returncode == 0 and "2 intact shard(s) kept" in " ".join(res.stdout.split())
    w = writer()
    assert w.done == {0, 1}
    w.finalize()
    assert verify_store(tmp_path / "s") == []
    assert read_skipped(tmp_path / "s" / "skipped.csv")["sample_id"].tolist() == [10, 11]
