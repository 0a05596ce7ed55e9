"""The installed ``semshift`` command: outputs, exit codes, one-line errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from semshift.demo.build import DEMO_MODEL_LEVEL
from semshift.detectors import list_detectors

EXE = shutil.which("semshift") or str(Path(sys.executable).parent / "semshift")


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_splits_ssb_writes_three_imagenet_bins(tmp_path):
    out = tmp_path / "ssb"
    res = run("splits", "ssb", "--preset", "ssb", "--out", str(out))
    assert res.returncode == 0, res.stderr
    split = json.loads((out / "split.json").read_text())
    assert list(split)[:6] == ["method", "params", "taxonomy", "semshift_version", "known", "bins"]
    assert {k: len(v) for k, v in split["bins"].items()} == {
        "easy": 1000,
        "medium": 1000,
        "hard": 1000,
    }
    audit = pd.read_csv(out / "audit.csv")
    assert len(audit) == 10_230
    assert "candidates 10230 (overlap removed: 991)" in res.stdout.replace("\n", " ")
    show = run("splits", "show", str(out))
    assert show.returncode == 0 and "1000" in show.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["splits", "ssb", "--out", "o", "--known", "imagenet2k"], "neither a shipped class list"),
        (["splits", "ssb", "--out", "o", "--preset", "foo"], "unknown preset 'foo'"),
        (["splits", "ssb"], "Missing option '--out'"),
        (["splits", "ssb", "--out", "o", "--bin-size", "5000"], "exceed the 10230 candidates"),
        (["splits", "ssb", "--out", "o", "--quantiles", "a,b"], "--quantiles: expected two"),
        (["taxonomy", "show", "dgo"], "unknown wordnet-3.0 node 'dgo'; did you mean"),
        (["taxonomy", "show", "x", "--taxonomy", "nope.csv"], "use 'wordnet' or a .csv/.json"),
        (["splits", "show", "missing-dir"], "cannot read split manifest"),
        (["nosuchcommand"], "No such command"),
    ],
)
def test_user_mistakes_print_one_line_and_exit_2(tmp_path, args, needle):
    res = run(*args, cwd=tmp_path)
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error: ") and needle in lines[0]
    assert not (tmp_path / "o").exists()  # nothing half-written


def test_bad_custom_taxonomy_names_file_and_line(tmp_path):
    tax = tmp_path / "tax.csv"
    tax.write_text("id,parent\nroot,\na,root\nb,zz\n")
    res = run("splits", "ssb", "--out", "o", "--taxonomy", str(tax), "--known", "a", cwd=tmp_path)
    assert res.returncode == 2
    assert f"{tax}, line 4: parent 'zz' of 'b' is not defined" in res.stderr


def test_custom_hierarchy_split_from_the_cli(tmp_path, aircraft_csv):
    known = tmp_path / "known.txt"
    known.write_text("737-300\n737-400\na319\n")
    res = run(
        "splits",
        "ssb",
        "--preset",
        "hierarchy",
        "--taxonomy",
        str(aircraft_csv),
        "--known",
        str(known),
        "--out",
        str(tmp_path / "air"),
    )
    assert res.returncode == 0, res.stderr
    bins = json.loads((tmp_path / "air" / "split.json").read_text())["bins"]
    assert sorted(bins["hard"]) == ["737-500", "a320"]


def test_taxonomy_commands():
    res = run("taxonomy", "distance", "dog.n.01", "cat.n.01")
    assert res.returncode == 0
    assert "path 4, lch 2.0281, wup 0.8571" in res.stdout
    show = run("taxonomy", "show", "n02084071")
    assert "dog.n.01" in show.stdout and "canine (n02083346)" in show.stdout


def test_version_and_help():
    assert run("--version").stdout.strip().startswith("semshift ")
    res = run("--help")
    assert res.returncode == 0 and "splits" in res.stdout and "demo" in res.stdout


def test_small_demo_runs_offline_end_to_end_then_from_cache(tmp_path):
    """`semshift demo --size small`: data, model, every detector and protocol, report; then the
    second run reuses every cached stage."""
    out = tmp_path / "demo"
    cmd = [EXE, "demo", "--size", "small", "--out", str(out), "--quiet"]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "closed-set accuracy" in first.stdout and "report.html" in first.stdout
    # one screen: the headline table cut to the best, the baselines and the worst; the run's
    # failures once, grouped; no progress bars (stderr is not a terminal)
    assert len(first.stdout.splitlines()) <= 45, first.stdout
    assert "detectors left out here" in first.stdout and "━" not in first.stderr
    run_dir = out / "run"
    results = pd.read_parquet(run_dir / "results.parquet")
    protocols = set(results["protocol"])
    assert {"osr", "newclass", "failure", "decomposition", "graded", "sanity"} <= protocols
    assert "generalisation" in protocols
    detectors = set(results["detector"].dropna())
    assert {"msp", "energy", "knn", "odin", "rankfeat", "vim"} <= detectors
    # every post-hoc detector and the demo's model-level ones, but those the demo's model
    # cannot compute (noted as skipped); --all-detectors would add the other model-level ones
    notes = json.loads((run_dir / "results.json").read_text())["notes"]
    skipped = set(notes.get("skipped_model_level", {}))
    wanted = set(list_detectors(level="post_hoc")) | set(DEMO_MODEL_LEVEL)
    assert detectors == wanted - skipped
    html = (run_dir / "report.html").read_text()
    # every figure embedded: as a plain figure, or kept under its interactive chart
    figures = html.count('<figure class="plot"><img src="data:image/png;base64,')
    charts = html.count('<figure class="plot interactive">')
    assert charts >= 2  # the level curves and the OSCR curves
    assert figures + charts == len(list((run_dir / "figures").glob("*.png")))
    # the operating point's gallery: thumbnails with captions, the report under 10 MB
    assert "operating_point" in protocols
    assert html.count('<figure class="thumb">') > 0
    assert (run_dir / "report.html").stat().st_size < 10_000_000
    provenance = json.loads((run_dir / "results.json").read_text())
    assert all(provenance["stages"][s]["computed"] for s in ("extract", "score", "evaluate"))

    second = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "demo data reused" in second.stdout
    again = json.loads((run_dir / "results.json").read_text())
    for name, stage in again["stages"].items():
        assert not stage["computed"], f"stage {name} recomputed {stage['computed']}"
    pd.testing.assert_frame_equal(pd.read_parquet(run_dir / "results.parquet"), results)
    _the_demo_stores_are_indexed_and_evaluate_searches_on_them(out, first.stdout)


def _the_demo_stores_are_indexed_and_evaluate_searches_on_them(out: Path, stdout: str) -> None:
    """stores.json names each set's store; the open-set stores carry their images' classes, so
    a search with a validation OOD set runs on them."""
    index = json.loads((out / "stores.json").read_text())
    assert f"feature stores of the {len(index)} sets by name: {out / 'stores.json'}" in stdout
    assert {"id_train", "id_val", "id_test", "easy", "medium", "hard"} <= set(index)
    store = {name: out / rel for name, rel in index.items()}
    hard = pd.read_parquet(store["hard"] / "index.parquet")
    assert (hard["label"] == -1).all() and hard["path"].str.contains("/").all()  # class folders
    res = run("evaluate", "--train", str(store["id_train"]), "--val", str(store["id_val"]),
              "--test", str(store["id_test"]), "--ood", f"hard={store['hard']}",
              "--val-ood", f"medium={store['medium']}", "--search", "-d", "knn",
              "--bootstrap", "0", "--out", str(out / "eval"))  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "search: knn k=" in res.stdout


def test_splits_cleaning_from_the_cli(tmp_path):
    res = run("splits", "cleaning", "--out", str(tmp_path / "clean"))
    assert res.returncode == 0, res.stderr
    split = json.loads((tmp_path / "clean" / "split.json").read_text())
    assert split["method"] == "cleaning" and list(split["bins"]) == ["kept", "dropped"]
    assert len(split["bins"]["kept"]) + len(split["bins"]["dropped"]) == 11_221
    assert split["params"]["exclude_subtrees"] == ["n00004475"]  # organism.n.01
    bad = run("splits", "cleaning", "--out", "o", "--exclude-subtree", "organizm", cwd=tmp_path)
    assert bad.returncode == 2 and "did you mean organism" in bad.stderr


def test_splits_graded_from_npy_files(tmp_path):
    import numpy as np

    from semshift.splits.graded import LAID

    rng = np.random.default_rng(0)
    np.save(tmp_path / "id.npy", rng.normal(size=(200, 8)).astype(np.float32))
    np.save(tmp_path / "test.npy", rng.normal(size=(120, 8)).astype(np.float32))
    LAID(W=np.eye(8)).save(tmp_path / "laid.npz")
    res = run(
        "splits",
        "graded",
        "--id-features",
        "id.npy",
        "--test-features",
        "test.npy",
        "--laid",
        "laid.npz",
        "--out",
        "g",
        "--levels",
        "3",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    cells = pd.read_csv(tmp_path / "g" / "cells.csv")
    assert len(cells) == 9 and cells["count"].sum() == 120
    levels = pd.read_csv(tmp_path / "g" / "levels.csv")
    assert set(levels.sem_level) <= {1, 2, 3} and len(levels) == 120
    np.save(tmp_path / "bad.npy", rng.normal(size=(5, 6)).astype(np.float32))
    bad = run(
        "splits",
        "graded",
        "--id-features",
        "id.npy",
        "--test-features",
        "bad.npy",
        "--laid",
        "laid.npz",
        "--out",
        "g2",
        cwd=tmp_path,
    )
    assert bad.returncode == 2 and "LAID expects features of dimension 8" in bad.stderr


def test_splits_ambiguity_reads_feature_stores(tmp_path):
    """Rule 5 from two feature stores: candidate images near ID images are dropped."""
    import numpy as np

    from semshift.features import write_store

    rng = np.random.default_rng(0)
    id_feats = rng.normal(size=(50, 6)).astype(np.float32)
    write_store(
        tmp_path / "id",
        index=pd.DataFrame({"path": [f"id{i}.jpg" for i in range(50)], "split": ["val"] * 50}),
        arrays={"features": id_feats},
        fsync=False,
    )
    near = id_feats[:3] + 0.001
    far = rng.normal(size=(5, 6)).astype(np.float32) + 20
    cand = np.concatenate([near, far])
    labels = [0, 0, 0, 1, 1, 1, 1, 1]
    write_store(
        tmp_path / "cand",
        index=pd.DataFrame({"path": [f"c{i}.jpg" for i in range(8)], "label": labels}),
        arrays={"features": cand},
        meta={"classes": {"ids": ["n001", "n002"]}},
        fsync=False,
    )
    base = ["splits", "ambiguity", "--id-store", "id", "--candidates", "cand",
            "--threshold", "0.5"]  # fmt: skip
    res = run(*base, "--id-select", "split=val", "--out", "amb", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    images = pd.read_csv(tmp_path / "amb" / "images.csv")
    assert images["dropped"].tolist() == [True] * 3 + [False] * 5
    assert images["nearest_id"].tolist()[:3] == [0, 1, 2]
    classes = pd.read_csv(tmp_path / "amb" / "classes.csv").set_index("class")
    assert classes.loc["n001", "dropped"] and not classes.loc["n002", "dropped"]
    bad = run(*base, "--id-select", "split", "--out", "amb2", cwd=tmp_path)
    assert bad.returncode == 2 and "--id-select: expected KEY=VALUE" in bad.stderr


def test_splits_ambiguity_takes_open_set_classes_from_their_folders(tmp_path):
    """Candidates outside the class list (label -1) are classed by their folder (the demo's
    open-set stores); flat files without a class are counted as 'unknown', with a warning."""
    import numpy as np

    from semshift.features import write_store

    rng = np.random.default_rng(1)
    id_feats = rng.normal(size=(20, 4)).astype(np.float32)
    write_store(tmp_path / "id", index=pd.DataFrame({"path": [f"a/{i}.png" for i in range(20)]}),
                arrays={"features": id_feats}, fsync=False)  # fmt: skip
    cand = np.concatenate([id_feats[:2] + 1e-3, rng.normal(size=(4, 4)).astype(np.float32) + 9])
    paths = ["u41/0.png", "u41/1.png", "u42/0.png", "u42/1.png", "flat0.png", "flat1.png"]
    write_store(tmp_path / "cand", index=pd.DataFrame({"path": paths, "label": [-1] * 6}),
                arrays={"features": cand}, meta={"classes": {"ids": ["a"]}},
                fsync=False)  # fmt: skip
    res = run("splits", "ambiguity", "--id-store", "id", "--candidates", "cand",
              "--threshold", "0.5", "--out", "amb", cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stderr
    classes = pd.read_csv(tmp_path / "amb" / "classes.csv").set_index("class")
    assert sorted(classes.index) == ["u41", "u42", "unknown"]
    assert classes.loc["u41", "dropped"] and not classes.loc["u42", "dropped"]
    assert "2 of 6 candidate image(s) have no class" in res.stdout
