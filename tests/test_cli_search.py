"""``semshift evaluate --search``: end to end on small stores, and every mistake as one line."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from semshift.cli.runs import search_spec
from semshift.errors import SemshiftError
from tests.run.search_stores import build_search_stores


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    return build_search_stores(tmp_path_factory.mktemp("cli_search"))


def _args(stores, out, *extra):
    return [
        "evaluate", "--train", str(stores["train"]), "--val", str(stores["val"]),
        "--test", str(stores["test"]), "--ood", f"far={stores['far']}", "-d", "msp", "-d", "knn",
        "-d", "react", "--bootstrap", "0", "--out", str(out), "--quiet", "--no-report", *extra,
    ]  # fmt: skip


def test_search_end_to_end(stores, tmp_path, semshift):
    out = tmp_path / "ev"
    search = ["--search", "--val-ood", str(stores["valood"])]
    done = semshift(*_args(stores, out, *search, "--search-space", "knn:k=1,10,50",
                           "--search-space", "react"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    notes = json.loads((out / "results.json").read_text())["notes"]["search"]
    assert set(notes["chosen"]) == {"knn", "react"} and notes["val_ood"] == "val_ood"
    k = notes["chosen"]["knn"]["k"]
    assert f"search: knn k={k} (auroc {notes['value']['knn']:.4f} on validation)" in done.stdout
    trials = pd.read_csv(out / "search.csv")
    assert trials.groupby("detector").size().to_dict() == {"knn": 3, "react": 4}
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["search"]["detectors"] == [{"name": "knn", "params": {"k": [1, 10, 50]}}, "react"]
    assert cfg["data"]["sets"]["val_ood"]["role"] == "ood"
    results = pd.read_parquet(out / "results.parquet")
    assert "val_ood" not in set(results["set"].dropna())
    # the written config repeats the run, the search from the cache
    again = semshift("run", str(out / "config.json"), "--quiet")
    assert again.returncode == 0, again.stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--search-space", "knn:kk=1,2"],
         "error: --search-space: knn has no hyperparameter kk; accepted: k, backend"),
        (["--search-space", "knn:k=0,10"], "error: --search-space: knn: k must be an integer >= 1"),
        (["--search-space", "react:percentile=85,120"],
         "error: --search-space: react: percentile must be a number in [0, 100], got 120"),
        (["--search-space", "knn:1,2"], "error: --search-space 'knn:1,2': expected NAME or NAME:"),
        (["--search-space", "odin", "-d", "odin"],
         "error: --search-space: odin is a model-level detector: it is computed during feature"),
        (["--search-objective", "nope"], "error: --search-objective: unknown metric 'nope'"),
    ],
)  # fmt: skip
def test_bad_search_options_are_one_line(stores, tmp_path, semshift, extra, message):
    args = _args(stores, tmp_path / "ev", "--search", "--val-ood", f"v={stores['valood']}", *extra)
    done = semshift(*args)
    assert done.returncode == 2
    assert done.stderr.startswith(message), done.stderr
    assert done.stderr.count("\n") == 1


def test_a_leak_and_missing_options_are_one_line(stores, tmp_path, semshift):
    leak = semshift(*_args(stores, tmp_path / "a", "--search", "--val-ood", str(stores["far"])))
    assert leak.returncode == 2
    assert leak.stderr == (
        "error: --val-ood: validation OOD set 'val_ood' leaks into test OOD set 'far': class "
        "n04379243 is in both sets; the validation OOD classes must be unrelated to every test "
        "OOD class\n"
    )
    dog = semshift(
        *_args(stores, tmp_path / "b", "--search", "--val-ood", str(stores["valood"])),
        "--ood",
        f"dog={stores['dog']}",
    )
    assert dog.returncode == 2 and "is an ancestor in wordnet-3.0 of validation class" in dog.stderr
    assert not (tmp_path / "b" / "search.csv").exists()
    alone = semshift(*_args(stores, tmp_path / "c", "--val-ood", str(stores["valood"])))
    assert alone.stderr == "error: --val-ood goes with --search (or --search-space)\n"
    no_ood = semshift(*_args(stores, tmp_path / "d", "--search"))
    assert no_ood.stderr.startswith("error: --search needs --val-ood STORE")
    args = _args(stores, tmp_path / "e", "--search", "--val-ood", "x=/nowhere")
    i = args.index("--val")
    del args[i : i + 2]
    no_val = semshift(*args)
    assert no_val.stderr.startswith("error: --search needs --val STORE: ID validation rows")


def test_search_space_parser():
    assert search_spec("knn") == "knn"
    assert search_spec("knn:k=1,10,50") == {"name": "knn", "params": {"k": [1, 10, 50]}}
    assert search_spec("nnguide:k=1,10,alpha=0.1,1.0") == {
        "name": "nnguide", "params": {"k": [1, 10], "alpha": [0.1, 1.0]},
    }  # fmt: skip
    assert search_spec("cadref:logit_method=msp,energy") == {
        "name": "cadref", "params": {"logit_method": ["msp", "energy"]},
    }  # fmt: skip
    for bad in ("knn:1,2", "knn:k=1,k=2", "knn:k=", "knn:=3"):
        with pytest.raises(SemshiftError, match="--search-space"):
            search_spec(bad)
