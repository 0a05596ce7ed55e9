"""Zero-shot data: the res101.mat / att_splits.mat pair, semshift's split + store + embeddings,
split versions, leak checks, and the ``semshift zsl run`` command on them."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from scipy.io import loadmat, savemat

from semshift.cli import main
from semshift.errors import InputError
from semshift.features import write_store
from semshift.metrics import gzsl
from semshift.splits.manifest import SplitManifest
from semshift.training.zsl import (
    ZSLData,
    evaluate_zsl,
    list_zsl_methods,
    read_semshift_zsl,
    read_xlsa,
    read_zsl_data,
    write_xlsa,
)

from .planted import planted


@pytest.fixture(scope="module")
def small():
    return planted(n_seen=12, n_unseen=4, dim=16, att=8, per_class=15, seed=2)


@pytest.fixture
def mat_dir(tmp_path, small):
    return write_xlsa(small, tmp_path / "DATA")


def _run(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_the_mat_pair_round_trips(mat_dir, small):
    back = read_xlsa(mat_dir)
    np.testing.assert_array_equal(back.features, small.features)
    np.testing.assert_array_equal(back.labels, small.labels)
    np.testing.assert_array_equal(back.embeddings, small.embeddings)
    assert back.class_names == small.class_names and back.name == "DATA"
    for s in small.sets:
        np.testing.assert_array_equal(back.sets[s], small.sets[s])
    raw = loadmat(str(mat_dir / "att_splits.mat"))
    assert raw["att"].shape == (8, 16)  # a x C, as the xlsa17 files
    assert raw["test_unseen_loc"].min() == small.sets["test_unseen"].min() + 1  # 1-based


def test_every_method_runs_from_the_mat_pair(mat_dir):
    data = read_zsl_data(mat_dir)
    for name in list_zsl_methods():
        out = evaluate_zsl(data, name, grid={})
        r = gzsl(out.scores, out.labels, out.seen, out.unseen)
        assert out.scores.shape == (
            data.sets["test_seen"].size + data.sets["test_unseen"].size,
            data.n_classes,
        )
        assert r.zsl_top1 > 0.5, (name, r)  # 4 unseen classes: chance is 0.25


def _rewrite(mat_dir, name, **changes):
    path = mat_dir / name
    mat = {k: v for k, v in loadmat(str(path)).items() if not k.startswith("__")}
    mat.update(changes)
    savemat(str(path), mat)


def test_mismatched_class_counts_are_one_line_exit_2(mat_dir, capsys):
    att = loadmat(str(mat_dir / "att_splits.mat"))["att"]
    _rewrite(mat_dir, "att_splits.mat", att=att[:, :-2])
    code, _, err = _run(["zsl", "run", "--data", str(mat_dir), "--method", "eszsl"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("error: mismatched class counts: att_splits.mat 'att' has 14 classes")


def test_embeddings_with_nan_are_one_line_exit_2(mat_dir, capsys):
    att = loadmat(str(mat_dir / "att_splits.mat"))["att"]
    att[3, 5] = np.nan
    _rewrite(mat_dir, "att_splits.mat", att=att)
    code, _, err = _run(["zsl", "run", "--data", str(mat_dir)], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "class embeddings contain NaN or inf (1 class(es), first class 5 'c5')" in err


def test_test_classes_in_trainval_are_one_line_exit_2(mat_dir, small, capsys):
    unseen_img = small.sets["test_unseen"][:3]
    trainval = np.concatenate((small.sets["trainval"], unseen_img))
    test_unseen = np.setdiff1d(small.sets["test_unseen"], unseen_img)
    _rewrite(
        mat_dir,
        "att_splits.mat",
        trainval_loc=(trainval + 1).reshape(-1, 1).astype(float),
        test_unseen_loc=(test_unseen + 1).reshape(-1, 1).astype(float),
    )
    code, _, err = _run(["zsl", "run", "--data", str(mat_dir)], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "test classes appear in trainval: 1 test_unseen class(es)" in err


def test_the_v1_bug_is_refused_for_v2_and_evaluated_as_v1(mat_dir, small, capsys):
    train = np.concatenate((small.sets["train"], small.sets["test_seen"][:2]))
    _rewrite(mat_dir, "att_splits.mat", train_loc=(train + 1).reshape(-1, 1).astype(float))
    code, _, err = _run(["zsl", "run", "--data", str(mat_dir), "--method", "sae"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "the train set holds 2 test_seen image(s)" in err and "--split v1" in err
    code, out, _ = _run(
        ["zsl", "run", "--data", str(mat_dir), "--method", "sae", "--split", "v1"], capsys
    )
    assert code == 0 and "sae" in out


def test_v1_adds_the_test_seen_images_of_the_train_and_val_classes(small):
    v1, v2 = small.split("v1"), small.split("v2")
    y = small.labels
    for a, b in ((v1.train, v2.train), (v1.val, v2.val)):
        extra = np.setdiff1d(a, b)
        assert np.isin(extra, small.sets["test_seen"]).all()
        assert set(y[extra]) == set(y[b])  # every class of the set, and only those
    np.testing.assert_array_equal(v1.trainval, v2.trainval)
    np.testing.assert_array_equal(v1.test_seen, v2.test_seen)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"val": "train"}, "train and val share"),
        ({"test_seen": "trainval"}, r"test_seen image\(s\) are also in trainval"),
    ],
)
def test_other_leaks_name_the_sets(small, change, message):
    sets = dict(small.sets)
    for target, source in change.items():
        sets[target] = np.concatenate((sets[target], sets[source][:1]))
    with pytest.raises(InputError, match=message):
        dataclasses.replace(small, sets=sets)


def test_a_missing_variable_names_the_file_and_what_it_has(mat_dir):
    mat = {k: v for k, v in loadmat(str(mat_dir / "att_splits.mat")).items() if k != "val_loc"}
    savemat(str(mat_dir / "att_splits.mat"), {k: v for k, v in mat.items() if k[:2] != "__"})
    with pytest.raises(InputError, match=r"att_splits.mat: no variable 'val_loc' \(it has"):
        read_xlsa(mat_dir)


def test_the_cli_writes_results_and_the_val_grid(mat_dir, tmp_path, capsys):
    out_dir = tmp_path / "out"
    code, out, _ = _run(
        ["zsl", "run", "--data", str(mat_dir), "--method", "eszsl", "--method", "SAE",
         "--split", "both", "--out", str(out_dir)],
        capsys,
    )  # fmt: skip
    assert code == 0
    assert "Table 1 of the proposed splits (V1 vs V2)" in out
    assert "Generalised zero-shot learning: Table 2" in out
    res = pd.read_csv(out_dir / "results.csv")
    assert set(res["detector"]) == {"eszsl", "sae"} and set(res["split"]) == {"v1", "v2"}
    assert set(res["metric"]) == {"ts", "tr", "h", "zsl_top1"} and len(res) == 16
    grid = pd.read_csv(out_dir / "grid.csv")
    assert len(grid) == 2 * (49 + 16)  # both splits: ESZSL 7 x 7, SAE 8 x 2
    assert "| eszsl |" in (out_dir / "tables.md").read_text()


def test_the_cli_runs_several_datasets_side_by_side(mat_dir, tmp_path, capsys):
    """Two datasets in one run: each dataset's rows equal a run of it alone; a dataset named
    like a published one gets the paper's row beside ours."""
    awa2 = write_xlsa(read_xlsa(mat_dir), tmp_path / "AWA2")
    out_dir = tmp_path / "out"
    code, out, _ = _run(
        ["zsl", "run", "--data", str(mat_dir), "--data", str(awa2), "--method", "eszsl",
         "--split", "both", "--out", str(out_dir)],
        capsys,
    )  # fmt: skip
    assert code == 0, out
    res = pd.read_csv(out_dir / "results.csv")
    assert set(res["set"]) == {mat_dir.name, "AWA2"} and len(res) == 2 * 2 * 4
    alone = tmp_path / "alone"
    code, _, _ = _run(
        ["zsl", "run", "--data", str(awa2), "--method", "eszsl", "--split", "both",
         "--out", str(alone)],
        capsys,
    )  # fmt: skip
    mine = res[res["set"] == "AWA2"].reset_index(drop=True)
    pd.testing.assert_frame_equal(mine, pd.read_csv(alone / "results.csv"))
    md = (out_dir / "tables.md").read_text()
    assert "| ESZSL (published) |" in md and "58.6" in md  # AWA2 V1 and V2 in the paper
    code, _, err = _run(
        ["zsl", "run", "--data", str(awa2), "--data", str(awa2), "--method", "eszsl"], capsys
    )
    assert code == 2 and "a second dataset named 'AWA2'" in err and err.count("\n") == 1


def test_an_unknown_method_is_one_line_exit_2(mat_dir, capsys):
    code, _, err = _run(["zsl", "run", "--data", str(mat_dir), "--method", "alee"], capsys)
    assert code == 2 and "unknown zero-shot method 'alee'" in err and err.count("\n") == 1


def test_semshift_split_store_and_embeddings_read_as_the_same_data(tmp_path, small):
    n = small.labels.size
    paths = [f"img/{k:04d}.png" for k in range(n)]
    classes = [f"n{c:03d}" for c in range(small.n_classes)]
    rows = []
    for s in ("trainval", "train", "val", "test_seen", "test_unseen"):
        rows += [(paths[i], classes[small.labels[i]], s) for i in small.sets[s]]
    split_dir = tmp_path / "split"
    split_dir.mkdir()
    pd.DataFrame(rows, columns=["path", "class", "set"]).to_csv(
        split_dir / "images.csv", index=False
    )
    seen = sorted({classes[c] for c in small.seen_classes})
    SplitManifest(
        method="zsl",
        params={},
        taxonomy="custom",
        known=seen,
        bins={"unseen": sorted({classes[c] for c in small.unseen_classes})},
        extra={"images": "images.csv", "image_root": None},
    ).write(split_dir / "split.json")
    order = np.random.default_rng(0).permutation(n)  # the store's own order
    write_store(
        tmp_path / "store",
        index=pd.DataFrame({"path": [paths[k] for k in order], "label": small.labels[order]}),
        arrays={"features": small.features[order].astype(np.float32)},
    )
    emb = pd.DataFrame(small.embeddings[::-1], columns=[f"e{k}" for k in range(8)])
    emb.insert(0, "class", classes[::-1])
    emb.to_csv(tmp_path / "emb.csv", index=False)
    (tmp_path / "zsl.json").write_text(
        json.dumps({"split": "split", "store": "store", "embeddings": "emb.csv"})
    )
    data = read_zsl_data(tmp_path, name="mine")
    assert isinstance(data, ZSLData) and data.name == "mine"
    np.testing.assert_allclose(data.features, small.features.astype(np.float32))
    np.testing.assert_array_equal(data.labels, small.labels)
    np.testing.assert_allclose(data.embeddings, small.embeddings)
    for s in small.sets:
        np.testing.assert_array_equal(data.sets[s], np.sort(small.sets[s]))
    short = emb.iloc[1:]
    short.to_csv(tmp_path / "emb.csv", index=False)
    with pytest.raises(InputError, match=r"mismatched class counts: .* 1 of the split's 16"):
        read_semshift_zsl(split_dir, tmp_path / "store", tmp_path / "emb.csv")
