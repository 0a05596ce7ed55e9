"""The search stage of a run: values chosen on id_val vs the validation OOD set, used by the score
stage (and its cache keys), written as tables and into the report; every leak refused."""

from __future__ import annotations

import copy
import json
import re

import numpy as np
import pandas as pd
import pytest
from tests.run.search_stores import DOG, build_search_stores, search_config

from semshift import detectors
from semshift.errors import InputError
from semshift.features import open_store
from semshift.protocols.search import search_detector
from semshift.run import load_config, run


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    return build_search_stores(tmp_path_factory.mktemp("search_stores"))


@pytest.fixture(scope="module")
def searched(stores, tmp_path_factory):
    out = tmp_path_factory.mktemp("search_run") / "out"
    cfg = search_config(stores, out, report={"formats": ["md"]})
    return cfg, run(cfg, progress=False)


def _arrays(path, *names):
    return open_store(path).arrays(*names)


def test_the_chosen_value_is_the_search_optimum_and_is_evaluated(stores, searched):
    _, result = searched
    (f_train,) = _arrays(stores["train"], "features")
    (f_val,) = _arrays(stores["val"], "features")
    (f_ood,) = _arrays(stores["valood"], "features")
    ref = search_detector(
        "knn",
        fit_inputs={"features": f_train},
        id_val={"features": f_val},
        val_ood={"features": f_ood},
        space={"k": [1, 10, 50]},
    )
    notes = result.provenance["notes"]["search"]
    assert notes["chosen"] == {"knn": ref.chosen}
    assert notes["value"]["knn"] == pytest.approx(ref.value, abs=1e-12)
    assert notes["leak_check"]["test_sets"] == ["far"]
    # the evaluated knn is the one with the chosen k, fitted on id_train
    k = ref.chosen["k"]
    (f_test,) = _arrays(stores["test"], "features")
    expected = detectors.get("knn", k=k).fit(features=f_train).score(features=f_test)
    scores = pd.read_parquet(result.output / "scores" / "id_test.parquet")
    np.testing.assert_allclose(scores["score:knn"].to_numpy(), expected, rtol=1e-6)


def test_the_validation_ood_set_is_never_evaluated(searched):
    _, result = searched
    assert "valood" not in set(result.results["set"].dropna())
    assert not (result.output / "scores" / "valood.parquet").exists()
    assert set(result.results["set"].dropna()) == {"id_test", "far"}


def test_tables_report_and_stage_record(searched):
    _, result = searched
    trials = pd.read_csv(result.output / "search.csv")
    assert trials["candidate"].tolist() == [1, 10, 50]
    assert set(trials["detector"]) == {"knn"} and trials["chosen"].sum() == 1
    sens = pd.read_csv(result.output / "search_sensitivity.csv")
    assert sens["value"].tolist() == trials["value"].tolist()  # one hyperparameter
    md = (result.output / "report.md").read_text()
    chosen = result.provenance["notes"]["search"]["chosen"]["knn"]["k"]
    assert "## Hyperparameter search" in md and f"| knn: k={chosen} |" in md
    assert "Leak check passed: 1 validation OOD class(es)" in md
    assert (result.output / "figures" / "search_sensitivity.png").is_file()
    assert result.stages["search"].computed == ["knn"]
    assert list(result.provenance["stages"]) == [
        "split", "extract", "search", "score", "evaluate", "report",
    ]  # fmt: skip


def test_a_rerun_reuses_the_search_and_other_candidates_change_the_keys(stores, searched):
    cfg, first = searched
    again = run(cfg, progress=False)
    assert again.stages["search"].reused == ["knn"] and again.stages["search"].computed == []
    assert again.stages["score"].computed == []
    fit_key = first.provenance["stages"]["score"]["keys"]["main"]["detectors"]["knn"]
    other = copy.deepcopy(cfg)
    chosen = first.provenance["notes"]["search"]["chosen"]["knn"]["k"]
    other["output"] = str(first.output.parent / "other")
    k = next(c for c in (1, 10, 50) if c != chosen)
    other["search"]["detectors"] = [{"name": "knn", "params": {"k": [k]}}]
    changed = run(other, progress=False)
    new_key = changed.provenance["stages"]["score"]["keys"]["main"]["detectors"]["knn"]
    assert new_key != fit_key  # the chosen value is part of the fit key ...
    old_eval = first.provenance["stages"]["evaluate"]["keys"]["results"]
    assert changed.provenance["stages"]["evaluate"]["keys"]["results"] != old_eval  # ... and more
    # msp is not searched: its fit key stays
    msp = first.provenance["stages"]["score"]["keys"]["main"]["detectors"]["msp"]
    assert changed.provenance["stages"]["score"]["keys"]["main"]["detectors"]["msp"] == msp


def test_search_all_skips_model_level_detectors_with_a_note(stores, tmp_path):
    cfg = search_config(stores, tmp_path / "out", detectors=["msp", "react", "odin"])
    cfg["search"]["detectors"] = "all"
    result = run(cfg, progress=False)
    notes = result.provenance["notes"]["search"]
    assert set(notes["chosen"]) == {"react"}
    assert notes["not_searched"]["odin"].startswith("model-level: computed during feature")
    assert set(result.results["detector"].dropna()) == {"msp", "react", "odin"}


def test_a_searched_model_level_detector_is_refused(stores, tmp_path):
    cfg = search_config(stores, tmp_path / "out", detectors=["msp", "odin"])
    cfg["search"]["detectors"] = ["odin"]
    with pytest.raises(InputError, match=r"^config: search\.detectors\[0\]: odin is a model-level"):
        load_config(cfg)


def test_a_validation_class_below_a_test_class_is_a_leak(stores, tmp_path):
    cfg = search_config(stores, tmp_path / "out")
    cfg["data"]["sets"]["dog"] = {"role": "ood", "split": "dog", "store": str(stores["dog"])}
    with pytest.raises(InputError) as info:
        run(cfg, progress=False)
    assert str(info.value) == (
        "config: search.val_ood: validation OOD set 'valood' leaks into test OOD set 'dog': test "
        f"class {DOG} (dog) is an ancestor in wordnet-3.0 of validation class n02085620 "
        "(Chihuahua); the validation OOD classes must be unrelated to every test OOD class"
    )
    assert not (tmp_path / "out" / "search.csv").exists()  # refused before any fitting


def test_the_same_class_id_is_a_leak_and_id_val_must_not_be_id_test(stores, tmp_path):
    cfg = search_config(stores, tmp_path / "a")
    cfg["data"]["sets"]["far"]["store"] = str(stores["valood"])
    with pytest.raises(InputError, match="class n02085620 is in both sets"):
        run(cfg, progress=False)
    cfg = search_config(stores, tmp_path / "b")
    cfg["data"]["id_val"] = {"store": str(stores["test"])}
    message = "config: search: data.id_val is the same store and rows as data.id_test"
    with pytest.raises(InputError, match="^" + re.escape(message)):
        run(cfg, progress=False)


def test_shared_image_files_are_leaks(stores, tmp_path):
    root = tmp_path / "images"
    from semshift.features import write_store

    def copy_store(src, dst, prefix=""):
        s = open_store(src)
        index = s.index[["path", "label"]].copy()
        index["path"] = [prefix + p for p in index["path"]]
        if "class_id" in s.index:
            index["class_id"] = s.index["class_id"]
        arrays = dict(zip(("logits", "features", "odin"), s.arrays("logits", "features", "odin"),
                          strict=True))  # fmt: skip
        write_store(dst, index=index, arrays=arrays, head=s.head, fsync=False,
                    meta={"dataset": {"root": str(root)}})  # fmt: skip
        return dst

    val = copy_store(stores["val"], tmp_path / "val")
    test = copy_store(stores["test"], tmp_path / "test")  # the same im<i>.png files under root
    cfg = search_config(stores, tmp_path / "out")
    cfg["data"]["id_val"], cfg["data"]["id_test"] = {"store": str(val)}, {"store": str(test)}
    with pytest.raises(InputError, match=r"data.id_val shares 80 image file\(s\) with data.id_test "
                       rf"\(first: {root}/im0.png\)"):  # fmt: skip
        run(cfg, progress=False)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: c["data"].pop("id_val"),
         "config: search: needs data.id_val: ID validation rows"),
        (lambda c: c["search"].update(val_ood="nope"),
         "config: search.val_ood: no set named 'nope'"),
        (lambda c: c["data"]["sets"]["valood"].update(role="covariate"),
         "config: search.val_ood: set 'valood' has role 'covariate'; the validation OOD set"),
        (lambda c: c["search"].update(detectors=[{"name": "knn", "params": {"kk": [1]}}]),
         "config: search.detectors[0]: knn has no hyperparameter kk; accepted: k, backend"),
        (lambda c: c["search"].update(detectors=[{"name": "knn", "params": {"k": [0, 5]}}]),
         "config: search.detectors[0]: knn: k must be an integer >= 1, got 0"),
        (lambda c: c["search"].update(detectors=["react"]),
         "config: search.detectors[0]: react is not among the run's detectors (msp, knn)"),
        (lambda c: c["search"].update(objective="accuracy"),
         "config: search.objective: objective 'accuracy' is not a ranking metric"),
        (lambda c: c["search"].update(detectors=["knn"], max_combinations=3),
         "config: search.detectors[0]: knn: 8 combinations exceed search.max_combinations = 3"),
        (lambda c: c.update(detectors=["msp", {"name": "knn", "params": {"k": 5}}]),
         "config: search.detectors[0]: knn: k is both fixed (k=5) and searched"),
    ],
)  # fmt: skip
def test_bad_search_config_is_one_line(stores, tmp_path, edit, message):
    cfg = search_config(stores, tmp_path / "out")
    edit(cfg)
    with pytest.raises(InputError) as info:
        load_config(cfg)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_the_config_round_trips_through_results_json(searched):
    _, result = searched
    stored = json.loads((result.output / "results.json").read_text())["config"]["search"]
    assert stored == {
        "val_ood": "valood", "objective": "auroc", "max_combinations": 256,
        "detectors": [{"name": "knn", "params": {"k": [1, 10, 50]}}],
    }  # fmt: skip


def test_grood_val_ood_takes_its_prototype_from_the_validation_ood_set(stores, tmp_path):
    # OpenOOD's configured GrOOD: the OOD prototype is the mean feature of the validation OOD
    # set (search.val_ood, leak-checked against the test sets); searched and fitted on it
    grood = {"name": "grood", "params": {"noise": "val_ood"}}
    cfg = search_config(stores, tmp_path / "out", detectors=["msp", grood])
    cfg["search"]["detectors"] = [{"name": "grood", "params": {"k": [1, 3]}}]
    result = run(cfg, progress=False)
    assert not result.errors
    f_train, z_train = _arrays(stores["train"], "features", "logits")
    y_train = open_store(stores["train"]).labels
    (f_ood,) = _arrays(stores["valood"], "features")
    (f_test,) = _arrays(stores["test"], "features")
    k = result.provenance["notes"]["search"]["chosen"]["grood"]["k"]
    det = detectors.get("grood", k=k, noise="val_ood").fit(
        features=f_train, logits=z_train, labels=y_train, val_ood_features=f_ood
    )
    np.testing.assert_allclose(det.noise_prototype_, f_ood.astype(np.float64).mean(axis=0))
    scores = pd.read_parquet(result.output / "scores" / "id_test.parquet")
    np.testing.assert_allclose(scores["score:grood"].to_numpy(), det.score(features=f_test))
    # a different validation OOD set is a different fit
    key = result.provenance["stages"]["score"]["keys"]["main"]["detectors"]["grood"]
    proto = {"name": "grood", "params": {"noise": "proto_mean"}}
    other_cfg = search_config(stores, tmp_path / "out2", detectors=["msp", proto])
    other_cfg["search"]["detectors"] = cfg["search"]["detectors"]
    other = run(other_cfg, progress=False)
    assert other.provenance["stages"]["score"]["keys"]["main"]["detectors"]["grood"] != key


def test_grood_val_ood_without_a_validation_ood_set_fails_its_fit_only(stores, tmp_path):
    grood = {"name": "grood", "params": {"noise": "val_ood"}}
    cfg = search_config(stores, tmp_path / "out", detectors=["msp", grood])
    del cfg["search"]
    del cfg["data"]["sets"]["valood"]
    result = run(cfg, progress=False)
    assert any(
        e.startswith(
            "detector grood: fit failed on id_train: grood.fit: noise='val_ood' needs "
            "`val_ood_features`"
        )
        for e in result.errors
    ), result.errors
    scores = pd.read_parquet(result.output / "scores" / "id_test.parquet")
    assert scores["score:msp"].notna().all() and scores["score:grood"].isna().all()


def test_grood_val_ood_in_random_model_worlds_uses_their_own_validation_ood_set(stores, tmp_path):
    # the sanity check's random-model world has its own copy of the validation OOD set (here
    # precomputed stores: the trained features again), so its grood fits like the main one
    grood = {"name": "grood", "params": {"noise": "val_ood"}}
    cfg = search_config(stores, tmp_path / "out", detectors=["msp", grood])
    cfg["search"]["detectors"] = [{"name": "grood", "params": {"k": [1, 3]}}]
    random_stores = {"id_train": str(stores["train"]), "id_test": str(stores["test"]),
                     "valood": str(stores["valood"]), "far": str(stores["far"])}  # fmt: skip
    cfg["protocols"] = {"osr": {}, "sanity": {"stores": {0: random_stores}}}
    result = run(cfg, progress=False)
    assert not result.errors
    table = result.results
    san = table[(table.protocol == "sanity") & (table.metric == "auroc") & (table.set == "far")]
    osr = table[(table.protocol == "osr") & (table.metric == "auroc") & (table.set == "far")]
    assert set(san["detector"]) == {"msp", "grood"}
    assert san.set_index("detector")["value"].to_dict() == pytest.approx(
        osr.set_index("detector")["value"].to_dict()
    )
