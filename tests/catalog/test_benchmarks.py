"""The benchmark registry, its run configs, ``check`` on generated release trees, and one
benchmark run end to end through the CLI on a miniature CUB of real images."""

from __future__ import annotations

import doctest
import json
import os
from pathlib import Path

import numpy as np
import pytest

import semshift.catalog.benchmarks as benchmarks_module
from semshift.catalog import (
    benchmark_config,
    check_benchmark,
    get_benchmark,
    imagenet_ood_images,
    isood_cells,
    isood_imagenet1k,
    list_benchmarks,
    list_hash,
    published_split,
    ssb_imagenet21k_val_files,
)
from semshift.catalog.layouts import open_layout
from semshift.errors import InputError, UnknownNameError
from semshift.run import load_config
from semshift.taxonomy import load_classlist
from tests.tiny_model import TINY_CNN as TINY
from tests.tiny_model import save_tiny_cnn_weights

ALL = ["imagenet-ood", "isood-imagenet", "ssb-aircraft", "ssb-cub", "ssb-imagenet"]
ALL += ["ssb-imagenet-fall11", "ssb-scars"]
FINE = {"ssb-cub": "cub", "ssb-scars": "scars", "ssb-aircraft": "aircraft"}


def touch(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb"):
        pass


def touch_all(root: Path, rels: list[str]) -> None:
    """Empty files ``root/<rel>``: each folder made once, each file one ``os.open``."""
    for folder in {rel.rpartition("/")[0] for rel in rels}:
        os.makedirs(os.path.join(root, folder), exist_ok=True)
    flags = os.O_CREAT | os.O_WRONLY
    for rel in rels:
        os.close(os.open(os.path.join(root, rel), flags, 0o644))


def test_doctests():
    import importlib
    import pkgutil

    modules = [benchmarks_module] + [
        importlib.import_module(f"{benchmarks_module.__name__}.{m.name}")
        for m in pkgutil.iter_modules(benchmarks_module.__path__)
    ]
    results = [doctest.testmod(m, optionflags=doctest.NORMALIZE_WHITESPACE) for m in modules]
    assert sum(r.failed for r in results) == 0 and sum(r.attempted for r in results) > 0


def test_registry_names_roots_and_hashes():
    assert list_benchmarks() == ALL
    for name in list_benchmarks():
        b = get_benchmark(name)
        assert b.list_hash == list_hash(b.published)
        assert {s.role for s in b.sets()} >= {"id_train", "id_test", "ood"}
    assert get_benchmark("ssb-cub").roots == ("cub",)
    assert get_benchmark("imagenet-ood").optional_roots == (
        "imagenet_r", "imagenet_sketch", "imagenet_c", "openimage_o",
    )  # fmt: skip
    with pytest.raises(UnknownNameError, match=r"unknown benchmark 'ssb-cb'.*'ssb-cub'"):
        get_benchmark("ssb-cb")


@pytest.mark.parametrize("name", sorted(FINE))
def test_fine_grained_sets_are_the_published_bins(name):
    man = published_split(name)
    merged = {s.name: s for s in get_benchmark(name).sets()}
    assert merged["id_train"].classes == merged["id_test"].classes == len(man.known)
    assert merged["easy"].classes == len(man.bins["easy"])
    assert merged["hard"].classes == len(man.bins["medium"]) + len(man.bins["hard"])
    kept = {s.name: s for s in get_benchmark(name).sets(medium_as_hard=False)}
    assert [kept[b].classes for b in ("easy", "medium", "hard")] == [
        len(man.bins[b]) for b in ("easy", "medium", "hard")
    ]
    with pytest.raises(InputError, match="takes no option train_per_class"):
        get_benchmark(name).sets(train_per_class=3)


def test_imagenet_set_sizes_come_from_the_shipped_lists():
    files = ssb_imagenet21k_val_files()
    ssb = {s.name: s for s in get_benchmark("ssb-imagenet").sets(train_per_class=7)}
    bins = published_split("ssb-imagenet").bins
    assert ssb["easy"].images == sum(len(files[w]) for w in bins["easy"]) == 50_000
    assert ssb["hard"].images == 49_000 and ssb["hard"].classes == 980
    assert ssb["id_train"].images == 7_000
    ood = {s.name: s for s in get_benchmark("imagenet-ood").sets()}
    assert ood["imagenet-ood"].images == len(imagenet_ood_images()) == 31_802
    isood = {s.name: s for s in get_benchmark("isood-imagenet").sets()}
    cells = {k: v for k, v in isood_cells().items() if v}
    assert len(cells) == 61  # three of the 64 cells are empty in the release
    assert {k: isood[k].images for k in cells} == {k: len(v) for k, v in cells.items()}
    assert (isood["cov_2_sem_5"].covariate_level, isood["cov_2_sem_5"].semantic_level) == (2, 5)
    assert isood["id_test"].images == len(isood_imagenet1k("test")) == 45_000


@pytest.mark.parametrize("name", ALL)
def test_benchmark_config_validates(name, tmp_path):
    b = get_benchmark(name)
    keys = (*b.roots, *b.optional_roots)
    roots = {k: tmp_path / k for k in keys}
    for p in roots.values():
        p.mkdir()
    cfg = benchmark_config(
        name, roots=roots, model={"name": "resnet50", "weights": "IMAGENET1K_V2"},
        out=tmp_path / "out", conventions="openood",
    )  # fmt: skip
    loaded = load_config(cfg, check_files=False)
    assert b.list_hash in loaded.name and "openood" in loaded.name
    assert loaded.model is not None and loaded.model.num_classes == b.num_classes
    assert set(loaded.data.sets) == {s.name for s in b.sets() if s.role in ("ood", "covariate")}
    assert loaded.protocols.enabled() == sorted(b.protocols, key=loaded.protocols.enabled().index)
    assert loaded.metrics != load_config({**cfg, "conventions": "exact"}, check_files=False).metrics
    # the config names lists, never inlines the images
    assert len(json.dumps(cfg)) < 30_000


def test_benchmark_config_root_errors(tmp_path):
    model = {"name": "resnet50", "weights": "IMAGENET1K_V2"}
    with pytest.raises(InputError, match=r"needs --root cub=PATH"):
        benchmark_config("ssb-cub", roots={}, model=model, out=tmp_path)
    with pytest.raises(InputError, match=r"unknown root 'imagenet1k'; it reads cub"):
        benchmark_config("ssb-cub", roots={"cub": tmp_path, "imagenet1k": tmp_path},
                         model=model, out=tmp_path)  # fmt: skip
    with pytest.raises(InputError, match=r"root cub=.*nowhere is not a folder"):
        benchmark_config("ssb-cub", roots={"cub": tmp_path / "nowhere"}, model=model, out=tmp_path)


# ---------------------------------------------------------------------------------------------
# check on generated trees (empty files; the real names and structure)
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def imagenet_tree(tmp_path_factory):
    """ImageNet-1K train (3 images per class) and the 50,000 val images in class folders, the
    whole ImageNet-21K release holding the ImageNet-OOD images, and a 21K-P winter21 val tree of
    SSB's files."""
    root = tmp_path_factory.mktemp("imagenet")
    wnids = load_classlist("imagenet1k").ids
    rels = [f"imagenet1k/train/{w}/{w}_{k}.JPEG" for w in wnids for k in range(3)]
    rels += [f"imagenet1k/val/{wnids[(k - 1) % 1000]}/ILSVRC2012_val_{k:08d}.JPEG"
             for k in range(1, 50_001)]  # fmt: skip
    rels += [f"whole/{rel}" for rel in imagenet_ood_images()]
    rels += [f"p21k/imagenet21k_val/{w}/{n}" for w, names in ssb_imagenet21k_val_files().items()
             for n in names]  # fmt: skip
    touch_all(root, rels)
    return root


def test_check_imagenet_ood_counts_and_missing_files(imagenet_tree):
    roots = {"imagenet1k": imagenet_tree / "imagenet1k", "imagenet21k": imagenet_tree / "whole"}
    result = check_benchmark("imagenet-ood", roots, train_per_class=2)
    assert result.counts == {"id_train": 2000, "id_test": 50_000, "imagenet-ood": 31_802}
    assert result.list_hash == list_hash("imagenet-ood")
    with pytest.raises(InputError, match="holds 3 images, fewer than per_class=4"):
        check_benchmark("imagenet-ood", roots, train_per_class=4)
    gone = sorted(imagenet_ood_images())[:5]
    for rel in gone:
        os.rename(imagenet_tree / "whole" / rel, imagenet_tree / "whole" / f"{rel}.bak")
    try:
        with pytest.raises(InputError) as info:
            check_benchmark("imagenet-ood", roots, train_per_class=2)
    finally:
        for rel in gone:
            os.rename(imagenet_tree / "whole" / f"{rel}.bak", imagenet_tree / "whole" / rel)
    msg = str(info.value)
    assert "\n" not in msg and "set imagenet-ood" in msg
    assert "5 of 31802 listed images missing" in msg and f"first: {gone[0]}, {gone[1]}" in msg


def test_check_ssb_imagenet(imagenet_tree):
    roots = {"imagenet1k": imagenet_tree / "imagenet1k", "imagenet21k": imagenet_tree / "p21k"}
    result = check_benchmark("ssb-imagenet", roots, train_per_class=3)
    assert result.counts == {"id_train": 3000, "id_test": 50_000, "easy": 50_000, "hard": 49_000}
    # the whole-release tree is not a 21K-P tree: the SSB val files are not there
    with pytest.raises(InputError, match=r"set easy: .*listed images missing"):
        check_benchmark(
            "ssb-imagenet", {**roots, "imagenet21k": imagenet_tree / "whole"}, train_per_class=3
        )


def test_deterministic_train_subset(imagenet_tree):
    src = benchmarks_module.imagenet1k_subset(imagenet_tree / "imagenet1k", per_class=2)
    first = load_classlist("imagenet1k").ids[0]
    # evenly spaced over the sorted names: the first and the last
    assert src.names[:2] == [f"train/{first}/{first}_0.JPEG", f"train/{first}/{first}_2.JPEG"]
    assert src.labels[:4].tolist() == [0, 0, 1, 1]


# ---------------------------------------------------------------------------------------------
# miniature fine-grained releases of real images, with the published splits' classes
# ---------------------------------------------------------------------------------------------


def _image(path: Path, rng: np.random.Generator, t: int) -> None:
    """An 8x8 RGB image of class ``t`` (a little signal in channel t % 3); format by suffix."""
    from PIL import Image

    arr = rng.integers(0, 255, (8, 8, 3)).astype(np.uint8)
    arr[..., t % 3] = 255
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(arr).save(path)


def _mini_cub(root: Path, per_class: int = 1) -> Path:
    """CUB_200_2011/ with 200 classes, ``per_class`` train and test 8x8 PNGs each."""
    top = root / "CUB_200_2011"
    rng = np.random.default_rng(0)
    images, labels, split, classes = [], [], [], []
    img_id = 0
    for t in range(1, 201):
        folder = f"{t:03d}.Bird_{t}"
        classes.append(f"{t} {folder}")
        for k in range(2 * per_class):
            img_id += 1
            rel = f"{folder}/Bird_{t}_{k}.png"
            _image(top / "images" / rel, rng, t)
            images.append(f"{img_id} {rel}")
            labels.append(f"{img_id} {t}")
            split.append(f"{img_id} {int(k < per_class)}")
    for fname, lines in (("images.txt", images), ("image_class_labels.txt", labels),
                         ("train_test_split.txt", split), ("classes.txt", classes)):  # fmt: skip
        (top / fname).write_text("\n".join(lines) + "\n")
    return top


def _car_name(k: int) -> str:
    """Class ``k`` of the miniature Stanford Cars in devkit order (names.csv line k + 1): the
    sorted folder order is a different permutation, and one name holds a "/" as in the real
    release."""
    if k == 173:
        return "Ram C/V Cargo Van Minivan 2012"
    return f"Make{(83 * k) % 196:03d} Model Sedan {2000 + k % 13}"


def _car(k: int) -> str:
    """The class folder of devkit class ``k``."""
    return _car_name(k).replace("/", "-")


def _mini_scars(root: Path) -> Path:
    """The Kaggle folder release: car_data/car_data/{train,test}/<class name>/ with 196
    classes, one 8x8 JPEG in each, and names.csv (devkit order) beside car_data/."""
    top = root / "car_data" / "car_data"
    rng = np.random.default_rng(1)
    for split in ("train", "test"):
        for k in range(196):
            _image(top / split / _car(k) / f"{split}{k:05d}.jpg", rng, k)
    (root / "names.csv").write_text("".join(f"{_car_name(k)}\n" for k in range(196)))
    assert sorted(map(_car, range(196))) != [_car(k) for k in range(196)]
    return top


def _variant(k: int) -> str:
    """Variant ``k`` of the miniature FGVC-Aircraft (sorted order = k; names hold spaces)."""
    return f"Variant {k:03d}-{k % 7}00"


def _mini_aircraft(root: Path) -> Path:
    """fgvc-aircraft-2013b/data/ with 100 variants (and variants.txt), one 8x8 JPEG per variant
    in each of train, val and test; the split files list the variants out of sorted order."""
    data = root / "fgvc-aircraft-2013b" / "data"
    rng = np.random.default_rng(2)
    order = [(37 * k) % 100 for k in range(100)]  # a permutation: file order is not sorted
    (data / "images").mkdir(parents=True)
    (data / "variants.txt").write_text("".join(f"{_variant(k)}\n" for k in order))
    for s, split in enumerate(("train", "val", "test")):
        lines = []
        for k in order:
            img_id = f"{1_000_000 + 1000 * s + k:07d}"
            _image(data / "images" / f"{img_id}.jpg", rng, k)
            lines.append(f"{img_id} {_variant(k)}")
        (data / f"images_variant_{split}.txt").write_text("\n".join(lines) + "\n")
    return data


def test_check_ssb_cub_on_a_miniature_release(tmp_path):
    top = _mini_cub(tmp_path)
    result = check_benchmark("ssb-cub", {"cub": tmp_path})
    assert result.counts == {"id_train": 100, "id_test": 100, "easy": 32, "hard": 68}
    kept = check_benchmark("ssb-cub", {"cub": top}, medium_as_hard=False)
    assert kept.counts == {"id_train": 100, "id_test": 100, "easy": 32, "medium": 34, "hard": 34}
    easy = published_split("ssb-cub").bins["easy"]
    victim = next((top / "images").glob(f"{int(easy[0]) + 1:03d}.*/*_1.png"))
    victim.unlink()
    with pytest.raises(
        InputError,
        match=r"set id_test: cub200: 1 of 200 listed images are missing under .*, first 0",
    ):
        check_benchmark("ssb-cub", {"cub": tmp_path})


def _tiny_weights(path: Path, num_classes: int) -> Path:
    """The shared tiny CNN's seeded initial weights for ``num_classes``."""
    return save_tiny_cnn_weights(path, num_classes)


def _benchmark_args(name: str, root: str, data: Path, weights: Path, out: Path) -> list[str]:
    return ["benchmark", "run", name, "--model", TINY, "--weights", str(weights),
            "--root", f"{root}={data}", "--out", str(out), "-d", "mls", "-d", "msp",
            "--preset", "resize32-crop32", "--bootstrap", "0", "--quiet"]  # fmt: skip


def test_benchmark_run_end_to_end_through_the_cli(tmp_path, semshift):
    """``semshift benchmark run ssb-cub``: extraction through a tiny CNN, OSR with MSP and MLS,
    config.json re-runnable by ``semshift run``."""
    import pandas as pd

    _mini_cub(tmp_path / "data")
    weights = _tiny_weights(tmp_path / "tiny.pt", 100)
    out = tmp_path / "out"
    args = _benchmark_args("ssb-cub", "cub", tmp_path / "data", weights, out)
    r = semshift(*args)
    assert r.returncode == 0, r.stderr
    record = json.loads((out / "benchmark.json").read_text())
    assert record == {"name": "ssb-cub", "list_hash": "9bc6fceed92275f6",
                      "fpr_convention": "exact"}  # fmt: skip
    res = pd.read_csv(out / "results.csv")
    osr = res[(res.protocol == "osr") & (res.metric == "auroc")]
    assert sorted(osr.split) == ["easy", "easy", "hard", "hard"]
    assert sorted(set(osr.detector)) == ["mls", "msp"]
    assert osr.value.between(0, 1).all() and (osr.n_id == 100).all()
    assert sorted(osr[osr.split == "easy"].n_ood) == [32, 32]
    test = pd.read_parquet(out / "scores" / "id_test.parquet")
    known = published_split("ssb-cub").known
    # label = position in the published known list; class_id = the CUB class folder
    want = {f"{int(c) + 1:03d}.Bird_{int(c) + 1}": k for k, c in enumerate(known)}
    assert (test["label"] == test["class_id"].map(want)).all() and len(test) == 100
    easy = pd.read_parquet(out / "scores" / "easy.parquet")
    assert (easy["label"] == -1).all() and len(easy) == 32
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["data"]["sets"]["hard"]["layout"]["params"]["bin"] == "hard"
    again = semshift("run", str(out / "config.json"), "--quiet")
    assert again.returncode == 0, again.stderr
    assert pd.read_csv(out / "results.csv").equals(res)
    bad = semshift(*args[:-1], "--root", "imagenet1k=/tmp")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "unknown root 'imagenet1k'" in bad.stderr


# name -> (root key, miniature release builder, class name of published class index c)
_FINE_RELEASES = {
    "ssb-scars": ("scars", _mini_scars, _car),
    "ssb-aircraft": ("aircraft", _mini_aircraft, _variant),
}


@pytest.mark.parametrize("name", sorted(_FINE_RELEASES))
def test_fine_grained_benchmark_run_end_to_end_through_the_cli(name, tmp_path, semshift):
    """``semshift benchmark run ssb-scars / ssb-aircraft`` on a miniature release with one train
    and one test image per class: the published known classes as the classifier's labels, the
    Easy bin and Hard (+ Medium, merged by default) as the OSR sets; config.json re-runnable."""
    import pandas as pd

    root, build, class_name = _FINE_RELEASES[name]
    build(tmp_path / "data")
    man = published_split(name)
    assert "medium" in man.bins  # both published splits have a Medium bin
    known = man.known
    easy_ids = {class_name(int(c)) for c in man.bins["easy"]}
    hard_ids = {class_name(int(c)) for c in (*man.bins["medium"], *man.bins["hard"])}
    weights = _tiny_weights(tmp_path / "tiny.pt", len(known))
    out = tmp_path / "out"
    counts = {"id_train": len(known), "id_test": len(known), "easy": len(easy_ids)}
    assert check_benchmark(name, {root: tmp_path / "data"}).counts == {
        **counts, "hard": len(hard_ids),
    }  # fmt: skip
    r = semshift(*_benchmark_args(name, root, tmp_path / "data", weights, out))
    assert r.returncode == 0, r.stderr
    record = json.loads((out / "benchmark.json").read_text())
    assert record == {"name": name, "list_hash": list_hash(name), "fpr_convention": "exact"}
    res = pd.read_csv(out / "results.csv")
    osr = res[(res.protocol == "osr") & (res.metric == "auroc")]
    assert sorted(osr.split) == ["easy", "easy", "hard", "hard"]
    assert sorted(set(osr.detector)) == ["mls", "msp"]
    assert osr.value.between(0, 1).all() and (osr.n_id == len(known)).all()
    # one test image per unknown class: n_ood = the classes of the bin
    assert sorted(osr[osr.split == "easy"].n_ood) == [len(easy_ids)] * 2
    assert sorted(osr[osr.split == "hard"].n_ood) == [len(hard_ids)] * 2
    # label = position in the published known list (the index into the release's sorted order)
    want = {class_name(int(c)): k for k, c in enumerate(known)}
    test = pd.read_parquet(out / "scores" / "id_test.parquet")
    assert len(test) == len(known) and set(test["class_id"]) == set(want)
    assert (test["label"] == test["class_id"].map(want)).all()
    cfg = json.loads((out / "config.json").read_text())
    assert set(cfg["data"]["sets"]) == {"easy", "hard"}
    # id_train is not scored (MSP / MLS fit nothing): read it through the config's layout
    layout = cfg["data"]["id_train"]["layout"]
    train = open_layout(layout["name"], layout["root"], **layout["params"])
    assert [want[c] for c in train.groups["class_id"]] == train.labels.tolist()
    assert sorted(train.labels.tolist()) == list(range(len(known)))
    for b, ids in (("easy", easy_ids), ("hard", hard_ids)):
        scores = pd.read_parquet(out / "scores" / f"{b}.parquet")
        assert (scores["label"] == -1).all() and len(scores) == len(ids)
        assert set(scores["class_id"]) == ids
    again = semshift("run", str(out / "config.json"), "--quiet")
    assert again.returncode == 0, again.stderr
    assert pd.read_csv(out / "results.csv").equals(res)
