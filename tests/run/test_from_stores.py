"""``config_from_stores``: the run configuration ``semshift evaluate`` builds, as a library call.

A configuration from stores validates and runs; each bad input is the one line the command
prints (naming the option, not the configuration key).
"""

from __future__ import annotations

import json

import pytest

from semshift.errors import SemshiftError
from semshift.protocols import get_protocol, list_protocols
from semshift.run import config_from_stores, load_config
from semshift.run.from_stores import WHERE, evaluate_protocols, option_words


def test_a_config_from_stores_validates(stores, tmp_path):
    cfg = config_from_stores(
        stores["train"], stores["test"], ood={"easy": stores["ood"]},
        covariate=[f"cov={stores['cov']}"], select=["easy:split=easy"],
        detectors=["msp", "knn:k=3", "msp"], protocols=["osr", "newclass_failure"],
        metrics=["auroc", "fpr95"], bootstrap=10, output=tmp_path / "ev",
    )  # fmt: skip
    assert json.loads(json.dumps(cfg)) == cfg  # plain JSON values: config.json holds them
    assert cfg["name"] == "ev" and cfg["output"] == str((tmp_path / "ev").absolute())
    assert cfg["detectors"] == [{"name": "msp", "params": {}}, {"name": "knn", "params": {"k": 3}}]
    assert cfg["data"]["sets"]["easy"] == {
        "store": str(stores["ood"].absolute()), "select": {"split": ["easy"]}, "role": "ood",
        "split": "easy",
    }  # fmt: skip
    assert cfg["data"]["sets"]["cov"]["role"] == "covariate"
    run_cfg = load_config(cfg, source=WHERE)
    assert [s.name for s in run_cfg.detector_specs()] == ["msp", "knn"]
    assert run_cfg.protocols.enabled() == ["osr", "newclass_failure"]
    assert run_cfg.bootstrap.n_resamples == 10 and run_cfg.metrics == ["auroc", "fpr95"]


def test_a_search_config_from_stores(stores, tmp_path):
    cfg = config_from_stores(
        stores["train"], stores["test"], ood={"easy": stores["ood"]}, val=stores["test"],
        search_space=["knn:k=1,3"], val_ood=str(stores["cov"]), output=tmp_path / "s",
    )  # fmt: skip
    assert cfg["search"] == {
        "val_ood": "val_ood", "detectors": [{"name": "knn", "params": {"k": [1, 3]}}],
        "objective": "auroc",
    }  # fmt: skip
    assert cfg["data"]["sets"]["val_ood"]["role"] == "ood"


def test_evaluate_protocols_come_from_the_registry():
    from semshift.cli import runs

    want = [n for n in list_protocols() if get_protocol(n).on_stores]
    assert evaluate_protocols() == want
    assert list(runs.EVALUATE_PROTOCOLS) == want


def test_each_bad_input_is_the_commands_one_line(stores, tmp_path):
    base = {"output": tmp_path / "bad", "detectors": ["msp"], "bootstrap": 0}
    ood = {"ood": {"a": stores["ood"]}}
    cases = [
        ({"ood": ["easy"]}, "--ood: expected NAME=STORE, got 'easy'"),
        ({"ood": {"test": stores["ood"]}}, "--ood: set name 'test' is taken"),
        ({**ood, "select": ["b:split=easy"]}, "--select 'b:split=easy': no set 'b'"),
        ({**ood, "select": ["a-split"]}, "--select: expected SET:KEY=VALUE"),
        ({**ood, "protocols": ["sanity"]},
         "--protocol 'sanity': evaluate runs osr, newclass_failure, generalisation"),
        ({**ood, "covariate": {"a": stores["cov"]}}, "set name(s) a given twice"),
        ({}, "give at least one --ood NAME=STORE or --covariate NAME=STORE"),
        ({"ood": {"a": tmp_path / "none"}},
         f"--ood a: feature store {tmp_path / 'none'} does not exist"),
        ({"covariate": {"c": tmp_path / "none"}}, "--covariate c: feature store"),
        ({**ood, "detectors": ["mps"]}, "--detector: unknown detector 'mps'"),
        ({**ood, "bootstrap": -1}, "--bootstrap: input should be"),
        ({**ood, "detectors": ["knn:5"]}, "--detector 'knn:5': expected NAME or"),
        ({**ood, "detectors": ["knn:kk=5"]}, "--detector: knn has no hyperparameter kk"),
        ({**ood, "detectors": ["knn:k=0"]}, "--detector: knn: k must be an integer >= 1, got 0"),
        ({**ood, "detectors": ["odin:temperature=-1"]}, "--detector: odin: temperature must be"),
        ({**ood, "operating_point": 1.5}, "--operating-point:"),
        ({**ood, "conventions": "sklearn"}, "--conventions:"),
        ({**ood, "val_ood": str(stores["cov"])}, "--val-ood goes with --search"),
        ({**ood, "search": True}, "--search needs --val-ood STORE"),
        ({**ood, "search": True, "val_ood": str(stores["cov"])}, "--search needs --val STORE"),
        ({**ood, "search": True, "val_ood": f"a={stores['cov']}", "val": stores["test"]},
         "--val-ood: set name 'a' is taken by another set"),
        ({**ood, "search_space": ["knn:k"], "val_ood": str(stores["cov"]), "val": stores["test"]},
         "--search-space 'knn:k': expected NAME or"),
    ]  # fmt: skip
    for extra, message in cases:
        with pytest.raises(SemshiftError) as err:
            config_from_stores(stores["train"], stores["test"], **{**base, **extra})
        text = str(err.value)
        assert message in text and "\n" not in text, (extra, text)
        assert not text.startswith(WHERE), text  # the option, not the config key


def test_option_words_name_the_option():
    cfg = {"data": {"sets": {"e": {"role": "ood"}, "c": {"role": "covariate"}}},
           "search": {"val_ood": "v"}}  # fmt: skip
    assert option_words(f"{WHERE}: data.sets.e.store: gone", cfg) == "--ood e: gone"
    assert option_words(f"{WHERE}: data.sets.c: no labels", cfg) == "--covariate c: no labels"
    assert option_words(f"{WHERE}: data.sets.v.store: gone", cfg) == "--val-ood: gone"
    assert option_words(f"{WHERE}: data.id_val.select.x: bad", cfg) == "--select for --val: bad"
    assert option_words(f"{WHERE}: metrics[0]: unknown", cfg) == "--metric: unknown"
    assert option_words("elsewhere: data.sets.e: x", cfg) == "elsewhere: data.sets.e: x"
