"""SOOD stage 2 from stored image embeddings (issue 31 item 10): each image's score is the
cosine of its stored embedding and the text embedding of its bare super-class name, from
Python and ``splits superclass --image-store``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from semshift.cli import main
from semshift.errors import InputError
from semshift.features import write_store
from semshift.splits.superclass import (
    build_score_split,
    build_superclasses,
    score_embeddings,
    score_store,
    text_embeddings,
)

TOY = (
    "id,parent,name\nentity,,entity\ntool,entity,tool\nfruit,entity,fruit\ncar,entity,car\n"
    "awl,tool,awl\nchisel,tool,chisel\ndrill,tool,drill\napple,fruit,apple\npear,fruit,pear\n"
    "jeep,car,jeep\n"
)
POOL = ["awl", "chisel", "drill", "apple", "pear", "jeep"]
#: text embeddings of the names, in the order tool, fruit, car (car: one sub-class, dropped)
TEXT = np.array([[2.0, 0.0], [0.0, 3.0], [1.0, 1.0]])
#: (class id, path, angle in degrees, length): an image's embedding; "x" is in no super-class
ROWS = [
    ("pear", "pear/0.png", 30.0, 2.0),
    ("awl", "awl/1.png", 0.0, 1.0),
    ("awl", "awl/0.png", 60.0, 5.0),
    ("jeep", "jeep/0.png", 45.0, 1.0),
    ("chisel", "chisel/0.png", 90.0, 1.0),
    ("x", "x/0.png", 10.0, 1.0),
    ("apple", "apple/0.png", 180.0, 1.0),
    ("awl", "awl/2.png", 120.0, 1.0),
]


@pytest.fixture
def stage1(tmp_path: Path):
    tax = tmp_path / "toy.csv"
    tax.write_text(TOY)
    return build_superclasses(["tool", "fruit", "car"], POOL, taxonomy=str(tax), min_subclasses=2)


def _embeddings() -> np.ndarray:
    rad = np.deg2rad([r[2] for r in ROWS])
    return np.stack([np.cos(rad), np.sin(rad)], axis=1) * np.array([[r[3]] for r in ROWS])


def _expected(max_per_class: int | None = None) -> pd.DataFrame:
    """cos(angle) against tool = [1, 0], sin(angle) against fruit = [0, 1]; super-classes in
    the names' order, sub-classes in the assignment's (by id), then by path."""
    rows = [
        ("tool", "awl", "awl/0.png", 0.5),
        ("tool", "awl", "awl/1.png", 1.0),
        ("tool", "awl", "awl/2.png", -0.5),
        ("tool", "chisel", "chisel/0.png", 0.0),
        ("fruit", "apple", "apple/0.png", 0.0),
        ("fruit", "pear", "pear/0.png", 0.5),
    ]
    if max_per_class is not None:
        rows = [r for r in rows if r[2] not in ("awl/2.png", "awl/1.png")[: 3 - max_per_class]]
    return pd.DataFrame(rows, columns=["superclass", "class", "path", "score"])


def test_scores_are_cosines_with_the_super_class_text(stage1):
    classes = [r[0] for r in ROWS]
    paths = [r[1] for r in ROWS]
    got = score_embeddings(stage1, _embeddings(), classes, TEXT, paths=paths)
    pd.testing.assert_frame_equal(got, _expected(), atol=1e-12)
    # the first images by path of each sub-class
    capped = score_embeddings(stage1, _embeddings(), classes, TEXT, paths=paths, max_per_class=2)
    assert capped["path"].tolist() == _expected(2)["path"].tolist()
    # scaling an embedding changes nothing (cosine), row order changes nothing
    perm = np.random.default_rng(0).permutation(len(ROWS))
    again = score_embeddings(
        stage1, _embeddings()[perm] * 7.0, np.array(classes)[perm], TEXT * 3.0,
        paths=np.array(paths)[perm],
    )  # fmt: skip
    pd.testing.assert_frame_equal(again, got, atol=1e-12)
    # the split of the scores: stage 2 takes the table as it is
    split = build_score_split(stage1, got)
    assert set(split.subclasses["subclass"]) == {"awl", "chisel", "apple", "pear"}
    assert split.manifest.extra["unscored"] == ["drill"]


def test_bad_inputs_are_named(stage1):
    classes = [r[0] for r in ROWS]
    with pytest.raises(InputError, match=r"one row per super-class name \(3"):
        score_embeddings(stage1, _embeddings(), classes, TEXT[:2])
    with pytest.raises(InputError, match="text embeddings are 3-d but the image embeddings 2-d"):
        score_embeddings(stage1, _embeddings(), classes, np.ones((3, 3)))
    zero = _embeddings()
    zero[4] = 0.0  # chisel's image
    with pytest.raises(InputError, match="row 4 is zero, NaN or infinite"):
        score_embeddings(stage1, zero, classes, TEXT)
    with pytest.raises(InputError, match="no row belongs to a sub-class of a kept super-class"):
        score_embeddings(stage1, _embeddings()[:1], ["x"], TEXT)
    with pytest.raises(InputError, match=r"expected shape \(N, D\) with N = 7"):
        score_embeddings(stage1, _embeddings(), classes[:-1], TEXT)


def _store(path: Path, *, class_column: bool = False, model: str | None = None) -> Path:
    index = pd.DataFrame({"path": [f"/data/{r[1]}" for r in ROWS]})
    if class_column:  # a class_id column wins over the folder names
        index["class_id"] = [r[0] for r in ROWS]
        index["path"] = [f"/flat/{k}.png" for k in range(len(ROWS))]
    meta = {"model": model} if model else None
    write_store(path, index=index, arrays={"features": _embeddings()}, meta=meta, shard_size=3)
    return path


@pytest.mark.parametrize("class_column", [False, True])
def test_a_store_is_scored_block_by_block(stage1, tmp_path, class_column):
    from semshift.features import open_store

    store = open_store(_store(tmp_path / "store", class_column=class_column))
    got = score_store(stage1, store, TEXT, block_rows=2)
    want = score_embeddings(
        stage1, _embeddings(), [r[0] for r in ROWS], TEXT, paths=store.index["path"].to_numpy()
    )
    pd.testing.assert_frame_equal(got, want, atol=1e-6)  # float32 storage
    if not class_column:  # the paths of ROWS: the known answer's order
        assert got["score"].to_numpy() == pytest.approx(_expected()["score"].to_numpy(), abs=1e-6)
    with pytest.raises(InputError, match="no array 'logits'"):
        score_store(stage1, store, TEXT, array="logits")


def test_the_store_and_the_text_model_must_agree(stage1, tmp_path):
    from semshift.features import open_store

    store = open_store(_store(tmp_path / "s", model="open_clip/ViT-B-32"))
    with pytest.raises(InputError, match="image embeddings of 'open_clip/ViT-B-32', but the text"):
        score_store(stage1, store, TEXT, text_model="open_clip/RN50")
    assert len(score_store(stage1, store, TEXT, text_model="open_clip/ViT-B-32")) == 6


def _cli(tmp_path: Path, *extra: str) -> list[str]:
    tax = tmp_path / "toy.csv"
    tax.write_text(TOY)
    names = tmp_path / "names.txt"
    names.write_text("tool\nfruit\ncar\n")
    pool = tmp_path / "pool.txt"
    pool.write_text("\n".join(POOL) + "\n")
    return ["splits", "superclass", "--names", str(names), "--pool", str(pool),
            "--taxonomy", str(tax), "--min-subclasses", "2", "--out", str(tmp_path / "out"),
            *extra]  # fmt: skip


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    return int(exc.value.code or 0), capsys.readouterr().err


def test_the_cli_scores_a_store_against_given_text_embeddings(stage1, tmp_path, capsys):
    store = _store(tmp_path / "store")
    text = tmp_path / "text.npy"
    np.save(text, TEXT)
    args = _cli(tmp_path, "--image-store", str(store), "--text-embeddings", str(text))
    code, err = _run([*args, "--easy", "30"], capsys)
    assert code == 0, err
    out = tmp_path / "out"
    scores = pd.read_csv(out / "scores.csv")
    want = _expected()
    want["path"] = "/data/" + want["path"]
    pd.testing.assert_frame_equal(scores, want, atol=1e-6)
    split = json.loads((out / "split.json").read_text())
    assert split["method"] == "superclass:scores" and split["params"]["easy"] == 30.0
    # the options that do not fit together, each one line and exit 2
    for extra, message in (
        (["--image-store", str(store)], "--image-store needs the super-class names' text"),
        (["--text-embeddings", str(text)], "--text-embeddings scores --image-store"),
        (["--image-store", str(store), "--images", str(tmp_path)], "not --images and"),
        (["--image-store", str(store), "--text-embeddings", str(text), "--score-model",
          "open_clip/x", "--score-random-init"], "--image-store needs"),
    ):  # fmt: skip
        code, err = _run(_cli(tmp_path, *extra), capsys)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    np.save(text, TEXT[:2])
    code, err = _run(_cli(tmp_path, "--image-store", str(store), "--text-embeddings", str(text)),
                     capsys)  # fmt: skip
    assert code == 2 and "one row per super-class name (3" in err


def test_the_cli_embeds_the_names_with_the_store_models_text_tower(tmp_path, capsys):
    from semshift.features.models import load_model, register_open_clip_config
    from tests.features.conftest import TINY_CLIP

    model = "open_clip/semshift-tiny-clip-store"
    register_open_clip_config(model.split("/")[1], TINY_CLIP)
    rng = np.random.default_rng(1)
    emb = rng.normal(size=(len(ROWS), 32))
    index = pd.DataFrame({"path": [f"/data/{r[1]}" for r in ROWS]})
    write_store(tmp_path / "store", index=index, arrays={"features": emb}, meta={"model": model})
    args = _cli(tmp_path, "--image-store", str(tmp_path / "store"), "--score-model", model,
                "--score-random-init")  # fmt: skip
    code, err = _run(args, capsys)
    assert code == 0, err
    scores = pd.read_csv(tmp_path / "out" / "scores.csv")
    clip = load_model(model, random_init=True)  # random init is seeded: the same weights
    text = clip.encode_text(["tool", "fruit", "car"]).astype(np.float64)
    unit = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    by_path = {f"/data/{r[1]}": k for k, r in enumerate(ROWS)}
    sc = {"tool": 0, "fruit": 1}
    want = [
        float(unit[by_path[p]] @ text[sc[s]])
        for p, s in zip(scores["path"], scores["superclass"], strict=True)
    ]
    np.testing.assert_allclose(scores["score"], want, atol=1e-5)
    stage = build_superclasses(["tool", "fruit", "car"], POOL, taxonomy=str(tmp_path / "toy.csv"),
                               min_subclasses=2)  # fmt: skip
    np.testing.assert_allclose(text_embeddings(stage, clip), text, atol=1e-6)
    # --images with the same model, and the stage-2 options apply to computed scores too
    from tests.features.conftest import write_images

    write_images(tmp_path / "imgs", {"awl": 2, "chisel": 2, "apple": 2, "pear": 2}, size=32)
    images = [*args[: args.index("--image-store")], "--images", str(tmp_path / "imgs"),
              "--score-model", model, "--score-random-init", "--score-over", "kept"]  # fmt: skip
    code, err = _run(images, capsys)
    assert code == 0, err
    split = json.loads((tmp_path / "out" / "split.json").read_text())
    assert split["params"]["score_over"] == "kept"
    # a store of another model is refused
    write_store(tmp_path / "other", index=index, arrays={"features": emb},
                meta={"model": "open_clip/ViT-B-32"})  # fmt: skip
    args[args.index(str(tmp_path / "store"))] = str(tmp_path / "other")
    code, err = _run(args, capsys)
    assert code == 2 and "but the text embeddings come from" in err


def test_a_run_config_builds_the_split_from_a_store(stage1, tmp_path):
    from semshift.splits.registry import BuildContext, build_split

    (tmp_path / "toy.csv").write_text(TOY)
    _store(tmp_path / "store")
    np.save(tmp_path / "text.npy", TEXT)
    ctx = BuildContext(taxonomy=str(tmp_path / "toy.csv"), base_dir=tmp_path, where="run.yaml")
    params = {"names": ["tool", "fruit", "car"], "pool": POOL, "min_subclasses": 2,
              "image_store": "store", "text_embeddings": "text.npy", "easy": 30.0}  # fmt: skip
    manifest = build_split("superclass", params, ctx)
    frame = score_embeddings(stage1, _embeddings(), [r[0] for r in ROWS], TEXT)
    want = build_score_split(stage1, frame, easy=30.0).manifest
    assert manifest.method == "superclass:scores" and manifest.bins == want.bins
    got = manifest.extra["subclass_scores"]
    assert got == pytest.approx(want.extra["subclass_scores"], abs=1e-6)  # float32 storage
    for bad, message in (
        ({"text_embeddings": None}, "text_embeddings: needed with 'image_store'"),
        ({"image_store": None}, "text_embeddings: applies only with 'image_store'"),
        ({"scores": "text.npy"}, "image_store: give 'scores' or 'image_store', not both"),
    ):
        with pytest.raises(InputError, match=message):
            build_split("superclass", {**params, **bad}, ctx)
