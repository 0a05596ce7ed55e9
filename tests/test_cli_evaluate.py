"""``semshift evaluate`` (detectors on feature stores, no config file) and ``semshift report``."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from semshift import detectors
from semshift.cli._options import detector_spec
from semshift.cli.runs import selections
from semshift.features import open_store
from tests.run.conftest import build_stores


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    return build_stores(tmp_path_factory.mktemp("cli_evaluate"))


def _args(stores, out, *extra):
    return [
        "evaluate", "--train", str(stores["train"]), "--test", str(stores["test"]),
        "--ood", f"easy={stores['ood']}", "--select", "easy:split=easy",
        "--ood", f"hard={stores['ood']}", "--select", "hard:split=hard",
        "--covariate", f"cov={stores['cov']}", "-d", "msp", "-d", "energy", "-d", "knn:k=3",
        "--bootstrap", "20", "--out", str(out), "--quiet", *extra,
    ]  # fmt: skip


def test_evaluate_stores_and_repeat_it_from_the_written_config(stores, tmp_path, semshift):
    out = tmp_path / "ev"
    done = semshift(*_args(stores, out, "--protocol", "osr", "--protocol", "newclass_failure"))
    assert done.returncode == 0, done.stderr
    assert "Open-set recognition (SSB Table 1)" in done.stdout and "AUROC Easy" in done.stdout
    assert f"report: {out / 'report.html'}" in done.stdout
    table = pd.read_parquet(out / "results.parquet")
    assert set(table["protocol"]) == {"osr", "newclass", "failure", "decomposition"}
    assert set(table["detector"].dropna()) == {"msp", "energy", "knn"}
    # MSP's AUROC on the easy split: the stores' rows selected and pooled, as sklearn says
    ood = open_store(stores["ood"]).select(split="easy")
    test = open_store(stores["test"])

    msp = detectors.get("msp").fit()
    scores = np.r_[
        msp.score(logits=test.arrays("logits")[0]), msp.score(logits=ood.arrays("logits")[0])
    ]
    is_ood = np.r_[np.zeros(len(test), bool), np.ones(len(ood), bool)]
    row = table.query("protocol == 'osr' and detector == 'msp' and split == 'easy'")
    auroc = row[row["metric"] == "auroc"]["value"].item()
    assert auroc == pytest.approx(roc_auc_score(~is_ood, scores), abs=1e-12)
    assert (row["n_ood"] == len(ood)).all()
    # the written config repeats the run from the cache
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["data"]["sets"]["easy"]["select"] == {"split": ["easy"]}
    assert cfg["detectors"][2] == {"name": "knn", "params": {"k": 3}}
    again = semshift("run", str(out / "config.json"), "--quiet")
    assert again.returncode == 0, again.stderr
    pd.testing.assert_frame_equal(pd.read_parquet(out / "results.parquet"), table)


def test_report_is_written_again_from_a_finished_run(stores, tmp_path, semshift):
    out = tmp_path / "ev"
    assert semshift(*_args(stores, out, "--no-report")).returncode == 0
    assert not (out / "report.html").exists()
    done = semshift("report", str(out), "--format", "md", "--title", "Tiny stores")
    assert done.returncode == 0, done.stderr
    assert f"report: {out / 'report.md'}" in done.stdout
    text = (out / "report.md").read_text()
    assert text.startswith("# Tiny stores") and "figures/" in text
    assert not (out / "report.html").exists()
    missing = semshift("report", str(tmp_path / "nothing"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert str(tmp_path / "nothing") in missing.stderr


def test_numeric_selections_and_bad_options_are_one_line(stores, tmp_path, semshift):
    assert selections(["test:sem_level=1", "test:sem_level=x"], {"test"}) == {
        "test": {"sem_level": ["1", 1, "x"]}
    }
    assert selections(["a:f=0.5", "a:ok=True"], {"a"}) == {
        "a": {"f": ["0.5", 0.5], "ok": ["True", True]}
    }
    assert detector_spec("knn") == {"name": "knn", "params": {}}
    assert detector_spec("nnguide:alpha=0.1, k=10,backend=numpy") == {
        "name": "nnguide", "params": {"alpha": 0.1, "k": 10, "backend": "numpy"}
    }  # fmt: skip
    out = tmp_path / "g"
    base = ["evaluate", "--train", str(stores["train"]), "--test", str(stores["test"]),
            "-d", "msp", "--bootstrap", "0", "--no-report", "--quiet"]  # fmt: skip
    done = semshift(*base, "--ood", f"g1={stores['graded']}", "--select", "g1:sem_level=1",
                    "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    table = pd.read_parquet(out / "results.parquet")
    assert (table.loc[table["metric"] == "auroc", "n_ood"] == 100).all()  # an integer column
    cases = {
        ("--ood", "easy"): "--ood: expected NAME=STORE, got 'easy'",
        ("--ood", f"test={stores['ood']}"): "--ood: set name 'test' is taken",
        ("--ood", f"a={stores['ood']}", "--select", "b:split=easy"): "--select 'b:split=easy': "
        "no set 'b'",
        ("--ood", f"a={stores['ood']}", "--select", "a-split"): "--select: expected SET:KEY=VALUE",
        ("--ood", f"a={stores['ood']}", "--protocol", "sanity"): "--protocol 'sanity': evaluate "
        "runs osr, newclass_failure, generalisation",
        ("--ood", f"a={stores['ood']}", "--covariate", f"a={stores['cov']}"): "set name(s) a "
        "given twice",
        (): "give at least one --ood NAME=STORE or --covariate NAME=STORE",
        ("--ood", f"a={tmp_path / 'none'}"): f"--ood a: feature store {tmp_path / 'none'} does "
        "not exist",
        ("--covariate", f"c={stores['ood']}"): "--covariate c: a covariate set needs known labels",
        ("--ood", f"a={stores['ood']}", "-d", "mps"): "--detector: unknown detector 'mps'",
        ("--ood", f"a={stores['ood']}", "--bootstrap", "-1"): "--bootstrap: input should be",
        ("--ood", f"a={stores['ood']}", "-d", "knn:5"): "--detector 'knn:5': expected NAME or",
        (
            "--ood",
            f"a={stores['ood']}",
            "-d",
            "knn:kk=5",
        ): "--detector: knn has no hyperparameter kk",
        ("--ood", f"a={stores['ood']}", "-d", "knn:k=0"): "--detector: knn: k must be an "
        "integer >= 1, got 0",
        ("--ood", f"a={stores['ood']}", "-d", "odin:temperature=-1"): "--detector: odin: "
        "temperature must be",
        ("--ood", f"a={stores['ood']}", "--select", "a:split=medium"): "--ood a: the set has zero "
        "samples",
    }
    for extra, message in cases.items():
        bad = semshift(*base, *extra, "--out", str(tmp_path / "bad"))
        assert bad.returncode == 2, (extra, bad.stdout)
        assert bad.stderr.startswith("error: ") and message in bad.stderr, (extra, bad.stderr)
        assert bad.stderr.count("\n") == 1


def test_evaluate_operating_point(stores, tmp_path, semshift):
    out = tmp_path / "op"
    args = [
        "evaluate", "--train", str(stores["train"]), "--test", str(stores["test"]),
        "--ood", f"easy={stores['ood']}", "-d", "msp", "--bootstrap", "0", "--out", str(out),
        "--quiet", "--no-report",
    ]  # fmt: skip
    done = semshift(*args, "--operating-point", "0.9")
    assert done.returncode == 0, done.stderr
    table = pd.read_parquet(out / "results.parquet")
    op = table[table["protocol"] == "operating_point"]
    thr = op[op["metric"] == "threshold"]
    assert thr["split"].item().startswith("id_test half")  # no --val: half of id_test
    assert set(op["metric"]) == {
        "threshold", "rejection_rate", "accepted_wrong_rate", "correct_rejection_rate",
    }  # fmt: skip
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["protocols"]["operating_point"] == {"recall": 0.9}
    bad = semshift(*args, "--operating-point", "1.5")
    assert bad.returncode == 2
    assert bad.stderr.strip().startswith("error: --operating-point:"), bad.stderr


def test_evaluate_with_openood_conventions(stores, tmp_path, semshift):
    """--conventions openood: FPR@95 and AUPR as OpenOOD v1.5 computes them, recorded in
    results.json and said in the report."""
    from semshift.metrics import ranking_metrics

    out = tmp_path / "oo"
    done = semshift(
        "evaluate", "--train", str(stores["train"]), "--test", str(stores["test"]),
        "--ood", f"easy={stores['ood']}", "-d", "msp", "-d", "energy", "--bootstrap", "0",
        "--conventions", "openood", "--out", str(out), "--quiet",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    table = pd.read_parquet(out / "results.parquet")
    osr = table[table["protocol"] == "osr"]
    assert {"fpr95_openood", "aupr_in_openood", "aupr_out_openood"} <= set(osr["metric"])
    assert "fpr95" not in set(osr["metric"])
    test = pd.read_parquet(out / "scores" / "id_test.parquet")
    ood = pd.read_parquet(out / "scores" / "easy.parquet")
    for det in ("msp", "energy"):
        s = np.r_[test[f"score:{det}"], ood[f"score:{det}"]]
        is_ood = np.r_[np.zeros(len(test), bool), np.ones(len(ood), bool)]
        ref = ranking_metrics(s, is_ood, conventions="openood")
        row = osr[(osr["detector"] == det) & (osr["split"] == "easy")].set_index("metric")
        assert row.loc["fpr95_openood", "value"] == pytest.approx(ref.fpr, abs=1e-12)
        assert row.loc["aupr_in_openood", "value"] == pytest.approx(ref.aupr_in, abs=1e-12)
        assert row.loc["aupr_out_openood", "value"] == pytest.approx(ref.aupr_out, abs=1e-12)
    prov = json.loads((out / "results.json").read_text())
    assert prov["conventions"] == "openood" and prov["config"]["conventions"] == "openood"
    assert "FPR@95 convention: openood" in (out / "report.md").read_text()
    bad = semshift("evaluate", "--train", str(stores["train"]), "--test", str(stores["test"]),
                   "--ood", f"easy={stores['ood']}", "--conventions", "sklearn",
                   "--out", str(tmp_path / "bad"), "--quiet")  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.startswith("error: --conventions:"), bad.stderr
