"""Messages a user can act on (issue 27, parts 10 and 15): one ``error:`` line, exit 2, that says
what is wrong and the real way out.

- ``semshift store repair`` rebuilds a store whose ``meta.json`` cannot be read (from its
  extraction record and the shards' own commit records), or says what cannot be recovered;
  extracting onto a damaged store points to ``semshift store repair``, not to deleting it.
- ``semshift benchmark check`` / ``run`` no longer advise ``missing='skip'`` (a Python keyword,
  no option of theirs).
- ``detectors: msp`` in a run config says a list (or ``'all'``) is expected; a lemma in a class
  list is called a lemma, with the ids of the nodes it names; ``semshift splits laid`` checks
  its options before it builds the model, and the model's library prints nothing.
- A zero-shot class without images is refused (``semshift splits zsl``, ``semshift zsl run`` on
  either format) instead of being dropped, which left one unseen class and a 100 % top-1.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.reliability.conftest import extract_args
from tests.reliability.test_tracebacks import one_error
from tests.tiny_model import save_tiny_cnn_weights


def _extract(cli, images: Path, weights: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return cli(extract_args(images, weights, out))


@pytest.fixture
def store(images, tiny, tmp_path, cli) -> Path:
    """A finished store of 6 images in 3 shards, extracted by the CLI."""
    out = tmp_path / "store"
    done = _extract(cli, images, tiny, out)
    assert done.returncode == 0, done.stderr
    return out


def _logits(path: Path) -> np.ndarray:
    from semshift.features import open_store

    return open_store(path).all().arrays("logits")[0]


# --------------------------------------------------------------------------- store repair
def test_verify_of_an_unreadable_meta_json_points_to_repair(store, cli) -> None:
    (store / "meta.json").write_bytes(b'{"format": 3, "model": "caf')
    done = cli(["store", "verify", store])
    assert done.returncode == 2
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {store / 'meta.json'}: unreadable")
    assert lines[0].endswith(f"`semshift store repair {store}` rebuilds it from the shards")


def test_repair_rebuilds_an_unreadable_meta_json(store, images, tiny, cli) -> None:
    want = _logits(store)
    (store / "meta.json").write_bytes(b'{"format": 3, "model": "caf\xe9"')
    done = cli(["store", "repair", store])
    assert done.returncode == 0, done.stderr
    assert f"{store}: meta.json unreadable (" in done.stdout
    assert "): removed; removed damaged shard(s) none; 3 intact shard(s) kept" in done.stdout
    assert "writes meta.json again" in done.stdout
    again = _extract(cli, images, tiny, store)
    assert again.returncode == 0, again.stderr
    assert "(3 resumed)" in again.stdout  # nothing recomputed
    np.testing.assert_array_equal(_logits(store), want)
    assert cli(["store", "verify", store]).returncode == 0


def test_repair_with_a_damaged_shard_and_meta_json_recomputes_only_that_shard(
    store, images, tiny, cli
) -> None:
    want = _logits(store)
    (store / "meta.json").write_text("{not json")
    victim = next((store / "shards").glob("00001*.npy"))
    victim.write_bytes(victim.read_bytes()[:-8] + b"\0" * 8)
    done = cli(["store", "repair", store])
    assert done.returncode == 0, done.stderr
    assert "removed damaged shard(s) 1; 2 intact shard(s) kept" in done.stdout
    again = _extract(cli, images, tiny, store)
    assert "(2 resumed)" in again.stdout, again.stderr
    np.testing.assert_array_equal(_logits(store), want)


def test_repair_says_what_cannot_be_recovered(store, cli) -> None:
    (store / "meta.json").write_text("{not json")
    (store / "run.json").write_bytes(b"\xff\xfe")
    line = one_error(
        cli(["store", "repair", store]),
        str(store / "meta.json"),
        f"it cannot be rebuilt: extraction record {store / 'run.json'} is not UTF-8",
        f"Nothing in {store} can be recovered: extract the store again into a new folder",
    )
    assert "save it as UTF-8" not in line


@pytest.mark.parametrize("damage", ["shard", "meta.json"])
def test_extracting_onto_a_damaged_store_points_to_repair(
    store, images, tiny, cli, damage: str
) -> None:
    if damage == "shard":
        victim = next((store / "shards").glob("00002*.npy"))
        victim.write_bytes(victim.read_bytes()[:-4] + b"\0\0\0\1")
        needle = "shard 2 (shards/"
    else:
        (store / "meta.json").write_bytes(b"\x00garbage")
        needle = "meta.json"
    line = one_error(
        _extract(cli, images, tiny, store),
        f"{store} holds a damaged feature store",
        needle,
        f"run `semshift store repair {store}`, then this extraction again",
    )
    assert "delete" not in line
    assert cli(["store", "repair", store]).returncode == 0
    assert _extract(cli, images, tiny, store).returncode == 0


def test_extracting_onto_an_intact_store_is_still_refused(store, images, tiny, cli) -> None:
    one_error(_extract(cli, images, tiny, store), "already holds a finished store (intact)")


# --------------------------------------------------------------------------- benchmarks
def test_benchmarks_do_not_advise_a_python_keyword(tmp_path, cli) -> None:
    from semshift.catalog.layouts import cub200, layout_parameters
    from semshift.catalog.lists import published_split
    from semshift.errors import InputError
    from tests.catalog.test_benchmarks import _benchmark_args, _mini_cub

    top = _mini_cub(tmp_path / "data")
    easy = published_split("ssb-cub").bins["easy"]
    next((top / "images").glob(f"{int(easy[0]) + 1:03d}.*/*_1.png")).unlink()
    check = one_error(
        cli(["benchmark", "check", "ssb-cub", "--root", f"cub={tmp_path / 'data'}"]),
        "set id_test: cub200: 1 of 200 listed images are missing",
        "; complete the download (a benchmark reads every image its lists name)",
    )
    assert "missing='skip'" not in check and "skip" not in check
    weights = save_tiny_cnn_weights(tmp_path / "tiny.pt", 100)
    run = one_error(
        cli(_benchmark_args("ssb-cub", "cub", tmp_path / "data", weights, tmp_path / "out")),
        "1 of 200 listed images are missing",
        "; complete the download (a benchmark reads every image its lists name)",
    )
    assert "skip" not in run
    # elsewhere (a run config's own layout) the advice names a parameter the layout takes
    with pytest.raises(InputError) as info:
        cub200(top.parent, "test")
    assert "the layout parameter missing: skip" in str(info.value)
    assert "missing" in layout_parameters("cub200")


# --------------------------------------------------------------------------- config words
def test_detectors_given_as_one_name_say_a_list_is_expected(tmp_path, cli) -> None:
    cfg = tmp_path / "run.yaml"
    cfg.write_text(
        "name: x\noutput: o\ndata:\n  id_train: {store: a}\n  id_test: {store: a}\n"
        "  sets: {}\ndetectors: msp\n"
    )
    line = one_error(
        cli(["run", cfg]),
        f"{cfg}: detectors: expected a list of detector names or 'all', got 'msp'",
    )
    assert "expected one of 'all'," not in line


def test_a_lemma_in_a_class_list_is_called_a_lemma(tmp_path, cli) -> None:
    known = tmp_path / "known.txt"
    known.write_text("n01440764\ndog\n")
    line = one_error(
        cli(["splits", "ssb", "--known", known, "--out", tmp_path / "o"]),
        f"'dog' ({known}, line 2; 1 unknown in all) is a lemma (a word), not a wordnet-3.0 node id",
        "n02084071 (dog)",
        "write the id of the one you mean",
    )
    assert "did you mean dog" not in line
    known.write_text("n01440764\ndog.n.01\n")
    one_error(
        cli(["splits", "ssb", "--known", known, "--out", tmp_path / "o"]),
        "'dog.n.01'",
        "is an alias, not a wordnet-3.0 node id; write its id n02084071",
    )


# --------------------------------------------------------------------------- LAID
def test_laid_checks_its_options_before_building_the_model(tmp_path, monkeypatch, cli) -> None:
    from semshift.features import models

    def never(*args, **kwargs):
        raise AssertionError("the model is built after the options are checked")

    monkeypatch.setattr(models, "load_model", never)
    base = [
        "splits",
        "laid",
        "--model",
        "open_clip/ViT-B-32",
        "--random-init",
        "--out",
        tmp_path / "laid.npz",
    ]
    one_error(cli([*base, "--epochs", "0"]), "LAID training: --epochs must be >= 1, got 0")
    one_error(cli([*base, "--triplets", "0"]), "LAID training: --triplets must be >= 1, got 0")
    labels = tmp_path / "one.txt"
    labels.write_text("n01440764\n")
    one_error(cli([*base, "--labels", labels]), "LAID needs at least two labels, got 1")


def test_laid_prints_no_library_warning(tmp_path, cli, caplog) -> None:
    from semshift.features.models import register_open_clip_config
    from tests.splits.test_graded import TINY_CLIP

    register_open_clip_config("semshift-msg-clip", TINY_CLIP)
    labels = tmp_path / "two.txt"
    labels.write_text("n01440764\nn01443537\n")
    done = cli(
        [
            "splits",
            "laid",
            "--model",
            "open_clip/semshift-msg-clip",
            "--random-init",
            "--labels",
            labels,
            "--triplets",
            "20",
            "--epochs",
            "1",
            "--out",
            tmp_path / "laid.npz",
        ]
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert not [r for r in caplog.records if "pretrained" in r.getMessage()]


# --------------------------------------------------------------------------- zero-shot classes
def _wordnet_split_inputs(tmp_path: Path, without: str | None) -> list[str]:
    ids = [
        "n01440764",
        "n01443537",
        "n01484850",
        "n01491361",
        "n01494475",
        "n01496331",
        "n01498041",
        "n01514668",
    ]
    (tmp_path / "classes.txt").write_text("\n".join(ids) + "\n")
    (tmp_path / "unseen.txt").write_text("n01498041\nn01514668\n")
    (tmp_path / "images.txt").write_text(
        "".join(f"{c}/{k}.jpg {c}\n" for c in ids if c != without for k in range(5))
    )
    return [
        "splits",
        "zsl",
        "--classes",
        str(tmp_path / "classes.txt"),
        "--images",
        str(tmp_path / "images.txt"),
        "--unseen",
        str(tmp_path / "unseen.txt"),
    ]


def test_splits_zsl_refuses_a_class_without_images(tmp_path, cli) -> None:
    args = _wordnet_split_inputs(tmp_path, without="n01514668")
    one_error(
        cli([*args, "--out", tmp_path / "o"]),
        "the test_unseen set would have no image "
        "of 1 of its 2 classes ('n01514668': 1 with no image in",
        str(tmp_path / "images.txt"),
    )
    assert not (tmp_path / "o").exists()
    ok = cli([*_wordnet_split_inputs(tmp_path, without=None), "--out", tmp_path / "o"])
    assert ok.returncode == 0, ok.stderr
    few = cli(
        [
            *args[:-2],
            "--unseen",
            tmp_path / "unseen.txt",
            "--test-seen-fraction",
            "0.95",
            "--out",
            tmp_path / "o2",
        ]
    )
    one_error(
        few,
        "the trainval set would have no image of",
        "with too few images for test_seen_fraction 0.95",
    )


def _semshift_zsl_dir(root: Path, drop_unseen: int | None) -> Path:
    """A ``zsl.json`` folder (split, store, embeddings) of planted data with 2 unseen classes;
    ``drop_unseen``: the images of that unseen class left out of the image table."""
    from semshift.features import write_store
    from semshift.splits.manifest import SplitManifest
    from tests.training.planted import planted

    data = planted(n_seen=6, n_unseen=2, dim=8, att=4, per_class=6, seed=1)
    classes = [f"c{c}" for c in range(data.n_classes)]
    paths = [f"img/{k:03d}.png" for k in range(data.labels.size)]
    unseen = [classes[c] for c in data.unseen_classes]
    rows = [(paths[i], classes[data.labels[i]], s) for s in data.sets for i in data.sets[s]]
    if drop_unseen is not None:
        rows = [r for r in rows if r[1] != unseen[drop_unseen]]
    split = root / "split"
    split.mkdir(parents=True)
    pd.DataFrame(rows, columns=["path", "class", "set"]).to_csv(split / "images.csv", index=False)
    seen = [classes[c] for c in data.seen_classes]
    SplitManifest(
        method="zsl",
        params={},
        taxonomy="custom",
        known=seen,
        bins={"unseen": unseen},
        extra={"images": "images.csv"},
    ).write(split)
    write_store(
        root / "store",
        index=pd.DataFrame({"path": paths, "label": data.labels}),
        arrays={"features": data.features.astype(np.float32)},
        fsync=False,
    )
    emb = pd.DataFrame(data.embeddings, columns=[f"e{k}" for k in range(4)])
    emb.insert(0, "class", classes)
    emb.to_csv(root / "emb.csv", index=False)
    spec = {"split": "split", "store": "store", "embeddings": "emb.csv"}
    (root / "zsl.json").write_text(json.dumps(spec))
    return root


def test_zsl_run_refuses_an_unseen_class_without_images(tmp_path, cli) -> None:
    good = _semshift_zsl_dir(tmp_path / "good", drop_unseen=None)
    done = cli(["zsl", "run", "--data", good, "--method", "eszsl"])
    assert done.returncode == 0 and "(6 seen, 2 unseen)" in done.stdout, done.stderr
    bad = _semshift_zsl_dir(tmp_path / "bad", drop_unseen=1)
    one_error(
        cli(["zsl", "run", "--data", bad, "--method", "eszsl"]),
        f"zero-shot split {bad / 'split'}: the test_unseen set has no image of 1 of its 2 "
        "classes ('c7')",
        "dropped from the evaluation silently",
    )


def test_zsl_run_refuses_a_mat_class_without_images(tmp_path, cli) -> None:
    from scipy.io import loadmat, savemat

    from semshift.errors import InputError
    from semshift.training.zsl import ZSLData, write_xlsa
    from tests.training.planted import planted

    data = planted(n_seen=6, n_unseen=2, dim=8, att=4, per_class=6, seed=1)
    gone = int(data.unseen_classes[-1])
    sets = dict(data.sets)
    sets["test_unseen"] = sets["test_unseen"][data.labels[sets["test_unseen"]] != gone]
    root = write_xlsa(data, tmp_path / "DATA")  # then the class's images leave test_unseen
    mat = loadmat(str(root / "att_splits.mat"))
    mat["test_unseen_loc"] = (sets["test_unseen"] + 1).reshape(-1, 1).astype(np.float64)
    savemat(str(root / "att_splits.mat"), {k: v for k, v in mat.items() if not k.startswith("__")})
    one_error(
        cli(["zsl", "run", "--data", root, "--method", "eszsl"]),
        f"{root / 'att_splits.mat'}: 1 of the 8 classes have no image in any set "
        f"('{data.class_names[gone]}')",
        "left out of the top-1 silently",
    )
    with pytest.raises(InputError, match=r"1 of the 8 classes have no image in any set"):
        ZSLData(data.name, data.features, data.labels, data.embeddings, data.class_names, sets)
