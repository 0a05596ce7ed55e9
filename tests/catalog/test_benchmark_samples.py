"""``semshift benchmark run --sample N`` end to end for the ImageNet benchmarks (ssb-imagenet,
imagenet-ood, isood-imagenet) on miniature trees holding only the sampled files, with a tiny CNN.

The sampled files are computed here independently of the library: the sorted published list,
positions ``floor(linspace(0, n - 1, N))``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from semshift.catalog import (
    check_benchmark,
    imagenet_ood_images,
    isood_cells,
    isood_imagenet1k,
    list_hash,
    ssb_imagenet21k_val_files,
)
from semshift.errors import InputError
from semshift.taxonomy import load_classlist
from tests.tiny_model import TINY_CNN, save_tiny_cnn_weights

N = 6  # images per set
WNIDS = load_classlist("imagenet1k").ids


def _evenly(items: list[str], n: int = N) -> list[str]:
    items = sorted(items)
    if n >= len(items):
        return items
    return [items[int(i)] for i in np.floor(np.linspace(0, len(items) - 1, n))]


def _image(path: Path, seed: int) -> None:
    from PIL import Image

    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rng.integers(0, 255, (8, 8, 3)).astype(np.uint8)).save(path)


def _in1k(root: Path, val_names: list[str], n: int = N) -> dict[str, str]:
    """ImageNet-1K train folders of the ``n`` sampled classes (``--train-per-class 1``) and the
    sampled val files in class
    folders (image k of the val list in class folder k mod 1000, as a label); returns
    file name -> wnid of the val images."""
    for k in np.floor(np.linspace(0, 999, n)).astype(int).tolist():  # one image per class
        _image(root / "train" / WNIDS[k] / f"{WNIDS[k]}_0.JPEG", k)
    wnid_of = {}
    for name in val_names:
        k = int(name.split("_")[-1].split(".")[0])
        wnid_of[name] = WNIDS[k % 1000]
        _image(root / "val" / wnid_of[name] / name, k)
    return wnid_of


def _val_list() -> list[str]:
    return _evenly([f"ILSVRC2012_val_{k:08d}.JPEG" for k in range(1, 50_001)])


def _args(
    name: str, roots: dict[str, Path], weights: Path, out: Path, *extra: str, n: int = N
) -> list[str]:
    args = ["benchmark", "run", name, "--model", TINY_CNN, "--weights", str(weights),
            "--out", str(out), "--preset", "resize32-crop32", "--bootstrap", "0", "--quiet",
            "--sample", str(n), "--train-per-class", "1", *extra]  # fmt: skip
    for key, path in roots.items():
        args += ["--root", f"{key}={path}"]
    return args


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    return save_tiny_cnn_weights(tmp_path_factory.mktemp("w") / "tiny.pt", 1000)


def _scores(out: Path, set_name: str) -> pd.DataFrame:
    return pd.read_parquet(out / "scores" / f"{set_name}.parquet")


def test_ssb_imagenet_sample_run(tmp_path, weights, semshift):
    files = ssb_imagenet21k_val_files()
    from semshift.catalog import published_split

    bins = published_split("ssb-imagenet").bins
    in1k, p21k = tmp_path / "in1k", tmp_path / "p21k"
    wnid_of = _in1k(in1k, _val_list())
    wanted = {b: _evenly([f"{w}/{f}" for w in bins[b] for f in files[w]]) for b in bins}
    for rels in wanted.values():
        for i, rel in enumerate(rels):
            _image(p21k / "imagenet21k_val" / rel, 1000 + i)
    roots = {"imagenet1k": in1k, "imagenet21k": p21k}
    counts = check_benchmark("ssb-imagenet", roots, train_per_class=1, sample=N).counts
    assert counts == {"id_train": N, "id_test": N, "easy": N, "hard": N}
    # without --sample the same tree is a partial benchmark: refused, never silently measured
    with pytest.raises(InputError, match=r"set id_train: .*994 of 1000 class folders missing"):
        check_benchmark("ssb-imagenet", roots, train_per_class=1)
    out = tmp_path / "out"
    r = semshift(*_args("ssb-imagenet", roots, weights, out, "-d", "msp", "-d", "knn:k=1"))
    assert r.returncode == 0, r.stderr
    record = json.loads((out / "benchmark.json").read_text())
    assert record == {"name": "ssb-imagenet", "list_hash": list_hash("ssb-imagenet"),
                      "fpr_convention": "exact", "sample": N}  # fmt: skip
    cfg = json.loads((out / "config.json").read_text())
    assert "SAMPLE of 6 images per set" in cfg["name"]
    # both committed with the results (a killed re-run cannot leave them from another run)
    from semshift.report import check_committed

    assert {"config.json", "benchmark.json"} <= set(check_committed(out).results)
    res = pd.read_csv(out / "results.csv")
    osr = res[(res.protocol == "osr") & (res.metric == "auroc")]
    assert sorted(osr.split) == ["easy", "easy", "hard", "hard"]
    assert (osr.n_id == N).all() and (osr.n_ood == N).all()
    test = _scores(out, "id_test")
    # label = index of the val image's wnid in the sorted ImageNet-1K list
    names = [p.rsplit("/", 1)[-1] for p in test["path"]]
    assert sorted(names) == _val_list()
    assert test["label"].tolist() == [WNIDS.index(wnid_of[n]) for n in names]
    for b in ("easy", "hard"):
        got = sorted("/".join(p.split("/")[-2:]) for p in _scores(out, b)["path"])
        assert got == wanted[b] and (_scores(out, b)["label"] == -1).all()
    # the report names the benchmark, its list hash, the FPR convention and the sample
    report = (out / "report.md").read_text()
    head = report.splitlines()[0]
    assert "ssb-imagenet" in head and list_hash("ssb-imagenet") in head
    assert "fpr exact" in head and "SAMPLE of 6 images per set" in head


def test_imagenet_ood_sample_run_with_covariate_sets(tmp_path, weights, semshift):
    in1k, whole = tmp_path / "in1k", tmp_path / "whole"
    _in1k(in1k, _val_list())
    ood = _evenly(imagenet_ood_images())
    for i, rel in enumerate(ood):
        _image(whole / rel, 2000 + i)
    cdir = tmp_path / "imagenet-c"
    for corr in ("fog", "gaussian_noise"):
        for sev in range(1, 6):
            for w in WNIDS[:2]:
                _image(cdir / corr / str(sev) / w / f"{corr}_{sev}.JPEG", sev)
    rdir = tmp_path / "imagenet-r"
    for k in (1, 7):
        _image(rdir / "imagenet-r" / WNIDS[k] / "art_0.jpg", k)
    roots = {"imagenet1k": in1k, "imagenet21k": whole, "imagenet_c": cdir, "imagenet_r": rdir}
    out = tmp_path / "out"
    extra = ("--c-by-severity", "--corrupt", "gaussian_blur:5", "-d", "msp", "-d", "energy")
    r = semshift(*_args("imagenet-ood", roots, weights, out, *extra))
    assert r.returncode == 0, r.stderr
    cfg = json.loads((out / "config.json").read_text())
    sets = cfg["data"]["sets"]
    assert set(sets) == {"imagenet-ood", "imagenet-r", "corrupt-gaussian_blur-5",
                         *(f"imagenet-c-{s}" for s in range(1, 6))}  # fmt: skip
    assert sets["imagenet-c-3"]["covariate_level"] == 3
    assert sets["corrupt-gaussian_blur-5"]["corruption"] == {"name": "gaussian_blur", "severity": 5}
    res = pd.read_csv(out / "results.csv")
    # ImageNet-OOD's protocols: new-class and failure detection with the decomposition, and OSR
    assert set(res.protocol) == {"newclass", "failure", "decomposition", "osr"}
    newclass = res[(res.protocol == "newclass") & (res.metric == "auroc")]
    pooled = newclass[~newclass.set.str.contains(" vs ")]
    assert set(pooled.set) == {"id_test", *sets} - {"imagenet-ood"}
    # Table 1's pairs: every reference vs each OOD set; with one OOD set, equal to the pool
    pairs = newclass[newclass.set.str.contains(" vs ")]
    assert set(pairs.set) == {f"{s} vs imagenet-ood" for s in pooled.set}
    by_set = pooled.set_index(["set", "detector"])["value"]
    for row in pairs.itertuples():
        assert row.value == by_set[(row.set.removesuffix(" vs imagenet-ood"), row.detector)]
    # each ImageNet-C severity set holds that severity only (2 corruptions x 2 classes: 4 <= N)
    c3 = _scores(out, "imagenet-c-3")
    assert len(c3) == 4 and all("/3/" in p for p in c3["path"])
    assert c3["label"].tolist() == [0, 1, 0, 1]  # the wnid folders' ImageNet-1K indices
    got = sorted("/".join(p.split("/")[-2:]) for p in _scores(out, "imagenet-ood")["path"])
    assert got == ood
    # semshift's own corruption of the same sampled val images: same paths and labels, its own
    # store (the corruption is part of the extraction's cache key)
    blur, test = _scores(out, "corrupt-gaussian_blur-5"), _scores(out, "id_test")
    assert blur["path"].tolist() == test["path"].tolist()
    assert blur["label"].tolist() == test["label"].tolist()
    stores = json.loads((out / "results.json").read_text())["sets"]
    assert stores["corrupt-gaussian_blur-5"]["store"] != stores["id_test"]["store"]
    meta = json.loads((Path(stores["corrupt-gaussian_blur-5"]["store"]) / "meta.json").read_text())
    assert "gaussian_blur" in json.dumps(meta)
    bad = semshift(*_args("imagenet-ood", roots, weights, out, "--corrupt", "gausian_blur:5"))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "unknown corruption 'gausian_blur' (did you mean 'gaussian_blur'?)" in bad.stderr


def test_isood_sample_run_fills_the_grid(tmp_path, weights, semshift):
    """Ten images per cell, the least the graded protocol measures a cell on."""
    n = 10
    in1k, p21k = tmp_path / "in1k", tmp_path / "p21k"
    test_names = _evenly([p.rsplit("/", 1)[-1] for p in isood_imagenet1k("test")], n)
    _in1k(in1k, test_names, n)
    cells = {c: _evenly(f, n) for c, f in isood_cells().items() if f}
    assert len(cells) == 61
    seed = 0
    for rels in cells.values():
        for rel in rels:
            seed += 1
            _image(p21k / rel.removeprefix("./"), seed)
    roots = {"imagenet1k": in1k, "imagenet21k": p21k}
    out = tmp_path / "out"
    r = semshift(*_args("isood-imagenet", roots, weights, out, "-d", "mls", n=n))
    assert r.returncode == 0, r.stderr
    res = pd.read_csv(out / "results.csv")
    graded = res[res.protocol == "graded"]
    # one AUROC per non-empty cell, at its (semantic, covariate) level
    cellwise = graded[(graded.metric == "auroc") & graded.set.str.startswith("cov_")]
    assert set(cellwise.set) == set(cells)
    assert (cellwise.n_id == n).all()
    assert dict(zip(cellwise.set, cellwise.n_ood, strict=True)) == {
        c: len(f) for c, f in cells.items()
    }
    # IS-OOD's smallest cells hold fewer than 10 images: n/a with the reason, never a number
    small = cellwise.set.map(lambda c: len(cells[c]) < n)
    assert small.sum() == 4 and cellwise[small].value.isna().all()
    assert (cellwise[small].error == "n/a: fewer than 10 samples").all()
    assert cellwise[~small].value.between(0, 1).all()
    levels = {c: (int(c.split("_")[3]), int(c.split("_")[1])) for c in cells}
    got = {r.set: (int(r.semantic_level), int(r.covariate_level)) for r in cellwise.itertuples()}
    assert got == levels


def test_sample_flag_errors(tmp_path, weights, semshift):
    r = semshift("benchmark", "check", "ssb-cub", "--root", f"cub={tmp_path}", "--sample", "0")
    assert r.returncode == 2 and "--sample: expected a positive number, got 0" in r.stderr
    r = semshift("benchmark", "check", "ssb-imagenet", "--keep-medium")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "--keep-medium does not apply to ssb-imagenet" in r.stderr
    r = semshift("benchmark", "check", "ssb-cub", "--c-by-severity", "--root", f"cub={tmp_path}")
    assert r.returncode == 2 and "--c-by-severity does not apply to ssb-cub" in r.stderr


def test_ssb_imagenet_fall11_sample_run(tmp_path, weights, semshift):
    """The fall11 variant selects whole 21K-P fall11 class folders of each bin: every folder
    must be present; the sample is taken over the images they hold."""
    from semshift.catalog import published_split

    bins = published_split("ssb-imagenet-fall11").bins
    in1k, p21k = tmp_path / "in1k", tmp_path / "p21k"
    _in1k(in1k, _val_list())
    for b in ("easy", "hard"):
        for i, w in enumerate(bins[b]):
            _image(p21k / "imagenet21k_val" / w / f"{w}_{i}.JPEG", i)
    roots = {"imagenet1k": in1k, "imagenet21k": p21k}
    counts = check_benchmark("ssb-imagenet-fall11", roots, train_per_class=1, sample=N).counts
    assert counts == {"id_train": N, "id_test": N, "easy": N, "hard": N}
    out = tmp_path / "out"
    r = semshift(*_args("ssb-imagenet-fall11", roots, weights, out, "-d", "mls"))
    assert r.returncode == 0, r.stderr
    for b in ("easy", "hard"):
        folders = [p.split("/")[-2] for p in _scores(out, b)["path"]]
        assert folders == _evenly(list(bins[b]))  # one image per folder: the folders sampled
    gone = bins["hard"][3]
    (p21k / "imagenet21k_val" / gone / f"{gone}_3.JPEG").unlink()
    (p21k / "imagenet21k_val" / gone).rmdir()
    with pytest.raises(InputError, match=rf"set hard: .*1 class folders missing.*{gone}"):
        check_benchmark("ssb-imagenet-fall11", roots, train_per_class=1, sample=N)
