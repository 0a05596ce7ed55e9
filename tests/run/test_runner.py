"""The runner: outputs, stage caching, detector failures and bad input, on tiny stores."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from semshift.errors import InputError
from semshift.run import run

from .conftest import C, base_config, make_store


def _stages(out: Path) -> dict:
    return json.loads((out / "results.json").read_text())["stages"]


def _softmax_max(logits: np.ndarray) -> np.ndarray:
    z = logits.astype(np.float64)
    z = z - z.max(1, keepdims=True)
    p = np.exp(z)
    return (p / p.sum(1, keepdims=True)).max(1)


def test_outputs_follow_the_contract(stores, tmp_path):
    from semshift.features import open_store

    out = tmp_path / "out"
    result = run(base_config(stores, out, protocols={"osr": {}}), progress=False)
    assert result.output == out
    for name in ("results.parquet", "results.csv", "results.json"):
        assert (out / name).is_file()
    table = pd.read_parquet(out / "results.parquet")
    assert list(table.columns) == list(result.results.columns)
    assert len(pd.read_csv(out / "results.csv")) == len(table)
    # scores/<set>.parquet: one row per sample, the detector scores under score:<name>
    test = pd.read_parquet(out / "scores" / "id_test.parquet")
    logits, labels = (
        open_store(stores["test"]).arrays("logits")[0],
        open_store(stores["test"]).labels,
    )
    assert list(test.columns[:6]) == ["label", "pred", "role", "set", "semantic_level",
                                      "covariate_level"]  # fmt: skip
    np.testing.assert_array_equal(test["label"], labels)
    np.testing.assert_array_equal(test["pred"], logits.argmax(1))
    np.testing.assert_allclose(test["score:msp"], _softmax_max(logits), rtol=1e-6)
    easy = pd.read_parquet(out / "scores" / "easy.parquet")
    assert len(easy) == 80 and (easy["label"] == -1).all() and set(easy["semantic_level"]) == {"1"}
    assert set(easy["role"]) == {"ood"}
    # the tidy table: OSR accuracy = mean(pred == label) on id_test, one AUROC per split pool
    acc = table[(table.protocol == "osr") & (table.metric == "accuracy")]["value"].item()
    assert acc == pytest.approx(float((logits.argmax(1) == labels).mean()))
    auroc = table[(table.protocol == "osr") & (table.metric == "auroc")]
    assert set(auroc["set"]) == {"easy", "hard"} and set(auroc["detector"]) == {
        "msp", "energy", "knn", "mahalanobis"
    }  # fmt: skip
    from sklearn.metrics import roc_auc_score

    knn_easy = auroc[(auroc.detector == "knn") & (auroc.set == "easy")]["value"].item()
    s = np.r_[test["score:knn"], easy["score:knn"]]
    assert knn_easy == pytest.approx(roc_auc_score(np.r_[np.ones(120), np.zeros(80)], s))
    prov = json.loads((out / "results.json").read_text())
    assert prov["config"]["detectors"] == ["msp", "energy", "knn", "mahalanobis"]
    assert prov["fpr_convention"] == {"fpr95": "id_recall"}
    assert prov["versions"]["numpy"] == np.__version__
    assert set(prov["stages"]) == {"split", "extract", "score", "evaluate", "report"}
    assert prov["stages"]["score"]["cpu_seconds"] > 0 and prov["stages"]["score"]["seconds"] > 0
    assert prov["sets"]["easy"]["role"] == "ood"
    assert not prov["errors"]


def test_second_run_reuses_every_stage(stores, tmp_path):
    out = tmp_path / "out"
    cfg = base_config(stores, out, protocols={"osr": {}})
    first = run(cfg, progress=False)
    assert len(first.stages["score"].computed) == 4 * 4  # 4 detectors x (id_test + 3 sets)
    second = run(cfg, progress=False)
    stages = _stages(out)
    assert all(rec["cached"] for rec in stages.values()), stages
    assert stages["score"]["computed"] == [] and len(stages["score"]["reused"]) == 16
    assert stages["evaluate"]["reused"] == ["results"]
    pd.testing.assert_frame_equal(first.results, second.results)
    # --force recomputes and gives the same numbers
    forced = run(cfg, progress=False, force=True)
    assert len(forced.stages["score"].computed) == 16 and not forced.stages["evaluate"].cached
    pd.testing.assert_frame_equal(first.results, forced.results)


def test_a_new_detector_recomputes_only_its_scores(stores, tmp_path):
    out = tmp_path / "out"
    run(base_config(stores, out, protocols={"osr": {}}), progress=False)
    cfg = base_config(stores, out, protocols={"osr": {}})
    cfg["detectors"] = [*cfg["detectors"], "mls", {"name": "knn", "params": {"k": 3}}]
    with pytest.raises(InputError, match="knn listed twice"):
        run(cfg, progress=False)
    cfg["detectors"] = [*cfg["detectors"][:4], "mls"]
    result = run(cfg, progress=False)
    rec = result.stages["score"]
    assert sorted(rec.computed) == sorted(
        f"main/mls/{s}" for s in ("id_test", "easy", "hard", "cov")
    )
    assert len(rec.reused) == 16
    assert not result.stages["evaluate"].cached  # the tidy table is recomputed
    assert "mls" in set(result.results["detector"].dropna())
    # changing a hyperparameter is a new detector key
    cfg["detectors"] = ["msp", {"name": "knn", "params": {"k": 3}}]
    rec = run(cfg, progress=False).stages["score"]
    assert sorted({c.split("/")[1] for c in rec.computed}) == ["knn"]


def test_a_failing_detector_gives_error_rows_and_the_run_completes(stores, tmp_path):
    out = tmp_path / "out"
    cfg = base_config(stores, out, protocols={"osr": {}})
    cfg["detectors"] = ["msp", {"name": "knn", "params": {"k": 10_000}}]  # k > 240 train rows
    result = run(cfg, progress=False)
    assert any(e.startswith("detector knn: fit failed") for e in result.errors)
    rows = result.results[result.results["detector"] == "knn"]
    assert len(rows) and rows["value"].isna().all() and rows["error"].notna().all()
    ok = result.results[(result.results["detector"] == "msp") & (result.results.metric == "auroc")]
    assert ok["value"].notna().all() and ok["error"].isna().all()
    prov = json.loads((out / "results.json").read_text())
    assert any("knn" in e for e in prov["errors"])
    scores = pd.read_parquet(out / "scores" / "easy.parquet")
    assert scores["score:knn"].isna().all() and scores["score:msp"].notna().all()


def test_a_failure_the_inputs_cause_is_cached_and_force_retries_it(stores, tmp_path):
    out = tmp_path / "out"
    cfg = base_config(stores, out, protocols={"osr": {}})
    cfg["detectors"] = ["msp", {"name": "knn", "params": {"k": 10_000}}]  # k > 240 train rows
    first = run(cfg, progress=False)
    second = run(cfg, progress=False)
    rec = second.stages["score"]
    assert rec.computed == [] and "main/knn/fit failure" in rec.reused  # knn was not refitted
    assert second.errors == first.errors
    pd.testing.assert_frame_equal(first.results, second.results)
    forced = run(cfg, progress=False, force=True)
    assert "main/knn/fit failure" not in forced.stages["score"].reused
    assert forced.errors == first.errors


def test_a_score_failure_on_one_set_is_cached_for_that_set_only(stores, tmp_path, monkeypatch):
    from semshift import detectors as D

    cls = D.get_class("mls")
    real = cls._score

    def fails_on_id_test(self, inputs):  # id_test is the only set of 120 rows
        if inputs.get("logits").shape[0] == 120:
            raise ValueError("mls cannot score 120 rows")
        return real(self, inputs)

    out = tmp_path / "out"
    cfg = base_config(stores, out, protocols={"osr": {}})
    cfg["detectors"] = ["msp", "mls"]
    monkeypatch.setattr(cls, "_score", fails_on_id_test)
    first = run(cfg, progress=False)
    assert first.errors == ["detector mls on set id_test: ValueError: mls cannot score 120 rows"]
    monkeypatch.setattr(cls, "_score", real)
    second = run(cfg, progress=False)  # the same inputs: the recorded failure stands
    assert second.stages["score"].computed == [] and second.errors == first.errors
    assert "main/mls/id_test failure" in second.stages["score"].reused
    assert "main/mls/easy" in second.stages["score"].reused
    forced = run(cfg, progress=False, force=True)
    assert not forced.errors
    test = pd.read_parquet(out / "scores" / "id_test.parquet")
    assert test["score:mls"].notna().all()


def test_a_failure_of_the_machine_is_not_cached(stores, tmp_path, monkeypatch):
    from semshift import detectors as D

    cls = D.get_class("knn")
    real = cls._fit

    def out_of_memory(self, inputs):
        raise MemoryError("no room for the bank")

    out = tmp_path / "out"
    cfg = base_config(stores, out, protocols={"osr": {}})
    cfg["detectors"] = ["msp", "knn"]
    monkeypatch.setattr(cls, "_fit", out_of_memory)
    first = run(cfg, progress=False)
    assert first.errors == [
        "detector knn: fit failed on id_train: out of memory: no room for the bank; to lower it: "
        "SEMSHIFT_THREADS=1 (one detector at a time), SEMSHIFT_BLOCK_ROWS=4096 (smaller score "
        "blocks), a smaller block_size or batch size of the detector, or fewer rows (select)"
    ]
    monkeypatch.setattr(cls, "_fit", real)
    second = run(cfg, progress=False)  # retried without --force
    assert not second.errors
    assert sorted(second.stages["score"].computed) == sorted(
        f"main/knn/{s}" for s in ("id_test", "easy", "hard", "cov")
    )


def test_zero_sample_set_is_one_clear_error(stores, tmp_path):
    cfg = base_config(stores, tmp_path / "out")
    cfg["data"]["sets"]["easy"]["select"] = {"split": "medium"}
    with pytest.raises(InputError) as info:
        run(cfg, progress=False)
    msg = str(info.value)
    assert msg.startswith("config: data.sets.easy: the set has zero samples after select")
    assert "has 160 rows" in msg and "(split)" in msg


def test_class_count_mismatch_between_model_stores_and_class_list(stores, tmp_path):
    rng = np.random.default_rng(1)
    means = np.abs(rng.normal(0, 3, (C + 1, stores["means"].shape[1]))).astype(np.float32)
    w = means
    b = np.zeros(C + 1, np.float32)
    five = make_store(tmp_path / "five", rng, means, (w, b), 50)
    cfg = base_config(stores, tmp_path / "out")
    cfg["data"]["sets"]["cov"]["store"] = str(five)
    with pytest.raises(
        InputError, match=r"data.sets.cov: the store has 5 classes but id_train has 4"
    ):
        run(cfg, progress=False)
    cfg = base_config(stores, tmp_path / "out")
    cfg["model"] = {"name": "resnet18", "num_classes": 10}
    with pytest.raises(
        InputError, match=r"data.id_train: the store has 4 classes .* model.num_classes is 10"
    ):
        run(cfg, progress=False)
    listed = tmp_path / "classes.txt"
    listed.write_text("a\nb\nc\n")
    cfg = base_config(stores, tmp_path / "out", classes=str(listed))
    with pytest.raises(InputError, match=r"has 4 classes but the class list .* has 3"):
        run(cfg, progress=False)


def test_class_list_order_must_agree(tmp_path, stores):
    rng = np.random.default_rng(2)
    means, head = stores["means"], stores["head"]
    a = make_store(tmp_path / "a", rng, means, head, 40, classes=["w", "x", "y", "z"])
    b = make_store(tmp_path / "b", rng, means, head, 40, classes=["x", "w", "y", "z"])
    cfg = base_config(stores, tmp_path / "out")
    cfg["data"] = {"id_train": {"store": str(a)}, "id_test": {"store": str(b)}}
    with pytest.raises(
        InputError, match=r"data.id_test: the store's class list differs from that of id_train"
    ):
        run(cfg, progress=False)


def test_all_detectors_without_head_leaves_head_detectors_out(tmp_path, stores):
    from semshift.features import write_store

    rng = np.random.default_rng(3)
    paths = {}
    for name, n in (("train", 120), ("test", 60), ("ood", 40)):
        lab = np.arange(n) % C if name != "ood" else np.full(n, -1)
        logits = rng.normal(0, 1, (n, C)).astype(np.float32) + 3 * np.eye(C, dtype=np.float32)[
            lab % C
        ] * (name != "ood")
        idx = pd.DataFrame({"path": [f"{i}" for i in range(n)], "label": lab})
        write_store(tmp_path / name, index=idx, arrays={"logits": logits}, fsync=False)
        paths[name] = tmp_path / name
    cfg = {
        "output": str(tmp_path / "out"),
        "data": {"id_train": {"store": str(paths["train"])},
                 "id_test": {"store": str(paths["test"])},
                 "sets": {"ood": {"role": "ood", "store": str(paths["ood"])}}},
        "detectors": "all",
        "protocols": {"osr": {}},
        "bootstrap": {"n_resamples": 0},
    }  # fmt: skip
    result = run(cfg, progress=False)
    used = set(result.results["detector"].dropna())
    assert {"msp", "mls", "energy", "entropy", "gen", "klm", "temp_scaling", "openmax"} <= used
    assert not used & {"knn", "vim", "react", "mahalanobis", "odin", "rankfeat"}
    notes = result.provenance["notes"]
    assert notes["detectors_left_out"]["knn"] == "needs features"
    assert notes["detectors_left_out"]["react"] == "needs features, a head"
    assert notes["detectors_left_out"]["odin"].startswith(
        "no evaluated store has a 'odin' score column"
    )
    # no id_val: klm / temp_scaling take a seeded half of id_train, and results.json says so
    assert (
        "seeded half of id_train" in notes["val_source"] and "60 of 120 rows" in notes["val_source"]
    )
    assert not result.errors


def test_grid_levels_from_store_columns_and_from_a_table(stores, tmp_path):
    out = tmp_path / "out"
    cfg = base_config(stores, out)
    cfg["data"]["sets"] = {
        "grid": {"role": "ood", "store": str(stores["graded"]),
                 "grid": {"semantic": "sem_level", "covariate": "cov_level"}},
    }  # fmt: skip
    run(cfg, progress=False)
    frame = pd.read_parquet(out / "scores" / "grid.parquet")
    from semshift.features import open_store

    idx = open_store(stores["graded"]).index
    assert frame["semantic_level"].tolist() == idx["sem_level"].astype(str).tolist()
    assert frame["covariate_level"].tolist() == idx["cov_level"].astype(str).tolist()
    # the same levels from a levels.csv-style table matched by row, with one row left without level
    table = pd.DataFrame({"row": np.arange(len(idx))[::-1],
                          "s": idx["sem_level"].to_numpy()[::-1].astype(float),
                          "c": idx["cov_level"].to_numpy()[::-1]})  # fmt: skip
    table.loc[table.row == 0, "s"] = np.nan
    table.to_csv(tmp_path / "levels.csv", index=False)
    cfg["data"]["sets"]["grid"]["grid"] = {"semantic": "s", "covariate": "c",
                                           "table": str(tmp_path / "levels.csv")}  # fmt: skip
    run(cfg, progress=False)
    frame = pd.read_parquet(out / "scores" / "grid.parquet")
    expected = idx["sem_level"].astype(str).tolist()
    got = frame["semantic_level"]
    assert got.isna().tolist() == [True] + [False] * (len(idx) - 1)  # null level
    assert got.tolist()[1:] == expected[1:]
    table.iloc[:-1].to_csv(tmp_path / "short.csv", index=False)
    cfg["data"]["sets"]["grid"]["grid"]["table"] = str(tmp_path / "short.csv")
    with pytest.raises(InputError, match=r"grid.table: .* has 199 lines for a set of 200 rows"):
        run(cfg, progress=False)


def test_covariate_set_with_unknown_labels_is_refused(stores, tmp_path):
    cfg = base_config(stores, tmp_path / "out")
    cfg["data"]["sets"]["cov"]["store"] = str(stores["ood"])
    with pytest.raises(InputError, match=r"data.sets.cov: a covariate set needs known labels"):
        run(cfg, progress=False)


def test_a_failing_report_keeps_the_results(stores, tmp_path, monkeypatch):
    import semshift.run.report as report

    def broken(*args, **kwargs):
        raise RuntimeError("no figures today")

    monkeypatch.setattr(report, "write_report", broken, raising=False)
    out = tmp_path / "out"
    result = run(base_config(stores, out, protocols={"osr": {}}, report={}), progress=False)
    assert result.errors == ["report: RuntimeError: no figures today"]
    prov = json.loads((out / "results.json").read_text())
    assert prov["notes"]["report_error"] == "RuntimeError: no figures today"
    assert len(pd.read_parquet(out / "results.parquet")) == len(result.results) > 0


def test_every_protocol_and_a_failing_protocol_row(stores, tmp_path):
    from semshift.protocols import gzsl

    preds = tmp_path / "preds.csv"
    seen = [True, True, False, False, True, False]
    pd.DataFrame({"label": [0, 1, 2, 3, 0, 3], "pred": [0, 1, 1, 3, 0, 2], "seen": seen}).to_csv(
        preds, index=False
    )
    cfg = base_config(stores, tmp_path / "out")
    cfg["detectors"] = ["msp", "knn"]
    grid = {"semantic": "sem_level", "covariate": "cov_level"}
    cfg["data"]["sets"]["grid"] = {"role": "ood", "store": str(stores["graded"]), "grid": grid}
    cfg["protocols"] = {
        "osr": {}, "newclass_failure": {}, "graded": {"min_count": 5}, "generalisation": {},
        "gzsl": {"predictions": str(preds)},
        "sanity": {"stores": {0: {"id_train": str(stores["train"]), "id_test": str(stores["test"]),
                                  "easy": str(stores["ood"])}}},
    }  # fmt: skip
    result = run(cfg, progress=False)
    table = result.results
    assert set(table["protocol"]) == {
        "osr", "newclass", "failure", "decomposition", "graded", "sanity", "generalisation", "gzsl"
    }  # fmt: skip
    direct = gzsl(np.array([0, 1, 2, 3, 0, 3]), np.array([0, 1, 1, 3, 0, 2]), [0, 1], [2, 3])
    got = table[table.protocol == "gzsl"].set_index("metric")["value"]
    pd.testing.assert_series_equal(got, direct.set_index("metric")["value"], check_names=False)
    # the random-model store (here: the trained features) scored like the main run
    san = table[(table.protocol == "sanity") & (table.metric == "auroc") & (table.set == "easy")]
    osr_easy = table[(table.protocol == "osr") & (table.metric == "auroc") & (table.set == "easy")]
    assert set(san["split"]) == {"seed0"}
    assert san.set_index("detector")["value"].to_dict() == pytest.approx(
        osr_easy.set_index("detector")["value"].to_dict()
    )
    # a protocol that raises is one error row; the others are kept
    pd.DataFrame({"label": [0, 1], "pred": [0, 1], "seen": [True, False]}).iloc[:0].to_csv(
        preds, index=False
    )
    failed = run(cfg, progress=False)
    rows = failed.results[failed.results.protocol == "gzsl"]
    assert len(rows) == 1 and rows["value"].isna().all() and rows["error"].notna().all()
    assert any(e.startswith("protocol gzsl: ") for e in failed.errors)
    assert (failed.results.protocol == "osr").sum() == (table.protocol == "osr").sum()


def test_split_stage_builds_once_and_selects_ood_classes(stores, tmp_path):
    from semshift.features import write_store

    repo = Path(__file__).resolve().parents[2]
    # an OOD store whose rows carry the (toy aircraft) class id of each image
    rng = np.random.default_rng(4)
    classes = ["c172", "c172r", "737-500", "a320", "747-100"]
    n = 50
    wnid = np.array(classes)[np.arange(n) % 5]
    feats = np.abs(rng.normal(2, 2, (n, stores["means"].shape[1]))).astype(np.float32)
    w, b = stores["head"]
    idx = pd.DataFrame({"path": [f"{i}.png" for i in range(n)], "label": -1, "wnid": wnid})
    write_store(tmp_path / "ood", index=idx, fsync=False, head=(w, b),
                arrays={"logits": feats @ w.T + b, "features": feats})  # fmt: skip
    cfg = base_config(stores, tmp_path / "out", protocols={"osr": {}})
    cfg["taxonomy"] = str(repo / "examples" / "fgvc_aircraft_toy.csv")
    cfg["splits"] = {"air": {"builder": "ssb", "params": {
        "known": str(repo / "examples" / "fgvc_aircraft_toy_known.txt"), "pool": None,
        "preset": "hierarchy"}}}  # fmt: skip
    cfg["data"]["sets"] = {
        b: {"role": "ood", "split": b, "store": str(tmp_path / "ood"),
            "classes_from": {"split": "air", "bin": b, "column": "wnid"}}
        for b in ("easy", "hard")
    }  # fmt: skip
    result = run(cfg, progress=False)
    assert result.stages["split"].computed == ["air"]
    manifest = json.loads((tmp_path / "out" / "splits" / "air" / "split.json").read_text())
    assert manifest["bins"]["easy"] == ["c172", "c172r"] and manifest["bins"]["hard"] == [
        "737-500", "a320"
    ]  # fmt: skip
    osr = result.results[(result.results.protocol == "osr") & (result.results.metric == "auroc")]
    assert set(osr["n_ood"]) == {20}  # 2 classes x 10 rows each, the medium class left out
    again = run(cfg, progress=False)
    assert again.stages["split"].reused == ["air"] and again.stages["split"].cached
    cfg["data"]["sets"]["easy"]["classes_from"]["bin"] = "eazy"
    with pytest.raises(InputError, match=r"classes_from.bin: split 'air' has no bin 'eazy'"):
        run(cfg, progress=False)
