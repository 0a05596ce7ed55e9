"""SOOD-ImageNet's training recipe (AdamW) beside SGD, the optimiser check on resume, and the
super-class split written as a labelled image list for ``semshift train``."""

from __future__ import annotations

import json

import pytest
import torch

from semshift.cli import main
from semshift.errors import InputError, UnknownNameError
from semshift.features.data import open_source
from semshift.splits.manifest import SplitManifest
from semshift.training.checkpoint import read_checkpoint
from semshift.training.loop import check_checkpoint_optimizer, make_optimizer, train
from semshift.training.recipe import Recipe, TrainConfig, check_config_file
from semshift.training.superclass_list import superclass_labels, write_superclass_list

from .images import write_class_images

TINY = {"epochs": 1, "batch_size": 8, "randaugment_n": 0, "flip": False}


def cli(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    got = capsys.readouterr()
    return int(exc.value.code or 0), got.out, got.err


def test_sood_recipe_is_the_papers_and_options_override_it():
    r = Recipe.from_dict({"name": "sood"})
    assert (r.optimizer, r.lr, r.weight_decay, r.batch_size, r.epochs) == (
        "adamw", 1.25e-3, 5e-3, 48, 25,
    )  # fmt: skip
    assert r.num_restarts == 0 and r.cycle_epochs == 25  # one cosine cycle over the 25 epochs
    assert Recipe.from_dict({"name": "sood", "epochs": 3}).epochs == 3
    assert Recipe.from_dict({"name": "ssb"}) == Recipe()
    with pytest.raises(UnknownNameError, match="Did you mean 'sood'"):
        Recipe.from_dict({"name": "sod"})
    with pytest.raises(InputError, match="optimizer must be one of 'sgd', 'adamw', got 'adam'"):
        Recipe(optimizer="adam")


def test_sgd_recipes_keep_their_json_so_older_runs_compare_equal():
    assert "optimizer" not in Recipe().to_dict()
    assert Recipe(optimizer="adamw").to_dict()["optimizer"] == "adamw"
    cfg = TrainConfig(model="demo-glyphnet", data="x", recipe=Recipe.from_dict({"name": "sood"}))
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg
    got = check_config_file({"recipe": {"name": "sood", "lr": 1e-3}}, "/runs/train.yaml")
    assert Recipe.from_dict(got["recipe"]).lr == 1e-3
    with pytest.raises(InputError, match=r"train\.yaml: .*unknown recipe 'fast'"):
        check_config_file({"recipe": {"name": "fast"}}, "/runs/train.yaml")


def test_adamw_first_step_is_the_known_decoupled_update():
    # AdamW, one step: w <- w (1 - lr wd), then w <- w - lr m^/(sqrt(v^) + eps) = w - lr sign(g)
    w = torch.tensor([1.0, -2.0], requires_grad=True)
    opt = make_optimizer(Recipe(optimizer="adamw", lr=0.1, weight_decay=0.01), [w])
    w.grad = torch.tensor([0.5, -3.0])
    opt.step()
    expected = torch.tensor([1.0 * (1 - 0.001) - 0.1, -2.0 * (1 - 0.001) + 0.1])
    torch.testing.assert_close(w.detach(), expected, rtol=0, atol=1e-6)
    sgd = make_optimizer(Recipe(lr=0.1, momentum=0.9, weight_decay=0.0), [w])
    assert type(sgd).__name__ == "SGD" and sgd.param_groups[0]["momentum"] == 0.9


def test_adamw_run_resumes_and_a_checkpoint_of_another_optimiser_is_refused(tmp_path):
    data = write_class_images(tmp_path / "imgs", {"a": 4, "b": 4})
    recipe = Recipe.from_dict({"name": "sood", **TINY})
    cfg = TrainConfig(model="demo-glyphnet", data=str(data), recipe=recipe)
    res = train(cfg, tmp_path / "adamw", threads=1)
    ckpt = read_checkpoint(tmp_path / "adamw" / "checkpoint.safetensors")
    assert ckpt.meta["config"]["recipe"]["optimizer"] == "adamw"
    assert {"exp_avg", "exp_avg_sq"} <= set(ckpt.optimizer["state"][0])
    assert res.history[0]["lr"] == pytest.approx(1.25e-3)
    # the same checkpoint under an SGD recipe: one line naming both optimisers
    with pytest.raises(InputError, match="holds the state of optimizer adamw, but this run uses "):
        check_checkpoint_optimizer(ckpt, Recipe(), tmp_path / "adamw" / "checkpoint.safetensors")
    # an SGD run whose checkpoint is resumed under an AdamW configuration
    sgd = TrainConfig(model="demo-glyphnet", data=str(data), recipe=Recipe(**TINY))
    train(sgd, tmp_path / "sgd", threads=1)
    meta_file = tmp_path / "sgd" / "train.json"
    meta = json.loads(meta_file.read_text())
    two = Recipe(**{**TINY, "epochs": 2, "optimizer": "adamw"})
    meta["config"]["recipe"] = two.to_dict()
    meta_file.write_text(json.dumps(meta))
    again = TrainConfig(model="demo-glyphnet", data=str(data), recipe=two)
    with pytest.raises(InputError, match=r"optimizer sgd, but this run uses adamw; resume it"):
        train(again, tmp_path / "sgd", resume=True, threads=1)


def _scored_split() -> SplitManifest:
    return SplitManifest(
        "superclass:scores", {}, "wordnet", [],
        {"iid": ["n02", "n01"], "easy": ["n03"], "hard": ["n04"]},
        extra={
            "superclass_of": {"n01": "boat", "n02": "sea bird", "n03": "boat", "n04": "sea bird"},
            "superclass_nodes": {"cake": 9, "sea bird": 1, "boat": 2},
            "dropped": {"cake": 4},
        },
    )  # fmt: skip


def test_superclass_list_labels_each_image_with_its_superclass(tmp_path):
    root = write_class_images(tmp_path / "imgs", {"n01": 2, "n02": 3, "n03": 1, "n04": 1})
    split = _scored_split().write(tmp_path / "split")
    res = write_superclass_list(split, root, tmp_path / "lists")
    assert res.superclasses == ["sea bird", "boat"] and res.counts == {"sea bird": 3, "boat": 2}
    assert (tmp_path / "lists" / "classes.txt").read_text() == "sea_bird sea bird\nboat boat\n"
    top = root.resolve()
    assert res.images.read_text().splitlines() == [
        f"{top}/n02/000.png\t0", f"{top}/n02/001.png\t0", f"{top}/n02/002.png\t0",
        f"{top}/n01/000.png\t1", f"{top}/n01/001.png\t1",
    ]  # fmt: skip
    src = open_source(res.images, res.classes)
    assert src.labels.tolist() == [0, 0, 0, 1, 1] and src.classes.ids == ("sea_bird", "boat")
    hard = write_superclass_list(split, root, tmp_path / "hard", part="hard")
    assert hard.counts == {"sea bird": 1, "boat": 0} and hard.superclasses == res.superclasses
    assert write_superclass_list(split, root, tmp_path / "all", part="all").n_images == 7


def test_superclass_list_refuses_what_it_cannot_list(tmp_path):
    root = write_class_images(tmp_path / "imgs", {"n01": 1})
    split = _scored_split()
    with pytest.raises(InputError, match=r"1 sub-classes of part 'iid' have no folder \(e.g. n02"):
        write_superclass_list(split, root, tmp_path / "x")
    res = write_superclass_list(split, root, tmp_path / "x", allow_missing=True)
    assert res.missing == ["n02"] and res.n_images == 1
    with pytest.raises(InputError, match="part 'test': use one of iid, easy, hard, all"):
        superclass_labels(split, "test")
    stage1 = SplitManifest("superclass", {}, "wordnet", [], {"boat": ["n01"]})
    assert superclass_labels(stage1, "all") == (["boat"], {"n01": "boat"})
    with pytest.raises(InputError, match="has no scores"):
        superclass_labels(stage1, "iid")
    other = SplitManifest("ssb", {}, "wordnet", ["n01"], {"easy": ["n02"]})
    with pytest.raises(InputError, match="is not a super-class split"):
        write_superclass_list(other, root, tmp_path / "y")


def test_cli_superclass_list_then_train_with_the_sood_recipe(capsys, tmp_path):
    root = write_class_images(tmp_path / "imgs", {"n01": 4, "n02": 4, "n03": 1, "n04": 1})
    split = _scored_split().write(tmp_path / "split")
    code, out, err = cli(capsys, "splits", "superclass-list", "--split", str(split),
                         "--images", str(root), "--out", str(tmp_path / "lists"))  # fmt: skip
    assert code == 0, err
    assert "8 images of 2 sub-classes (iid) labelled with 2 super-classes" in out
    none = str(tmp_path / "none")
    code, out, err = cli(capsys, "splits", "superclass-list", "--split", str(split),
                         "--images", none, "--out", str(tmp_path / "l2"))  # fmt: skip
    assert code == 2 and "is not a folder of sub-class folders" in err
    run = tmp_path / "run"
    code, out, err = cli(capsys, "train", "--model", "demo-glyphnet", "--data",
                         str(tmp_path / "lists" / "images.txt"), "--classes",
                         str(tmp_path / "lists" / "classes.txt"), "--out", str(run),
                         "--recipe", "sood", "--epochs", "1", "--batch-size", "8",
                         "--randaugment", "0", "9", "--threads", "1", "--no-progress")  # fmt: skip
    assert code == 0, err
    stored = json.loads((run / "train.json").read_text())["config"]
    assert stored["recipe"]["optimizer"] == "adamw" and stored["recipe"]["lr"] == 1.25e-3
    assert stored["recipe"]["batch_size"] == 8 and stored["recipe"]["weight_decay"] == 5e-3
    assert stored["num_classes"] == 2
