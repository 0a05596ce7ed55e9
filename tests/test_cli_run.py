"""``semshift run``: exit 0 with the output path and headline table, exit 2 with one line."""

from __future__ import annotations

import pytest
import yaml

from tests.run.conftest import base_config, build_stores


@pytest.fixture(scope="module")
def config_file(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli_run")
    stores = build_stores(root / "stores")
    cfg = base_config(stores, root / "out", protocols={"osr": {}})
    cfg["output"] = "out"  # relative to the config file
    path = root / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_run_prints_the_output_path_and_headline(config_file, semshift):
    done = semshift("run", str(config_file), "--quiet")
    assert done.returncode == 0, done.stderr
    out = config_file.parent / "out"
    assert str(out) in done.stdout
    assert "Open-set recognition (SSB Table 1)" in done.stdout and "knn" in done.stdout
    assert "AUROC Easy" in done.stdout and "OSCR Easy" in done.stdout
    assert (out / "results.parquet").is_file()
    assert done.stderr == ""  # --quiet: no progress lines
    again = semshift("run", str(config_file), "--force")
    assert again.returncode == 0
    assert "score:" in again.stderr and "16 computed" in again.stderr  # stage timing lines


def test_config_errors_exit_2_with_one_line(config_file, tmp_path, semshift):
    cfg = yaml.safe_load(config_file.read_text())
    cfg["data"]["sets"]["easy"]["store"] = 3
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(cfg))
    done = semshift("run", str(bad))
    assert done.returncode == 2
    assert done.stderr == f"error: {bad}: data.sets.easy.store: expected a path, got 3\n"
    missing = semshift("run", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2
    assert missing.stderr.strip() == f"error: config file {tmp_path / 'nope.yaml'} does not exist"
    cfg = yaml.safe_load(config_file.read_text())
    cfg["data"]["sets"]["easy"]["select"] = {"split": "medium"}
    cfg["output"] = str(tmp_path / "out")
    bad.write_text(yaml.safe_dump(cfg))
    empty = semshift("run", str(bad), "--quiet")
    assert empty.returncode == 2
    assert empty.stderr.startswith(f"error: {bad}: data.sets.easy: the set has zero samples")
    assert empty.stderr.count("\n") == 1


def test_run_conventions_option_overrides_the_config(config_file, tmp_path, semshift):
    import json

    cfg = yaml.safe_load(config_file.read_text())
    cfg["output"] = str(tmp_path / "oo")
    path = config_file.parent / "run_openood.yaml"
    path.write_text(yaml.safe_dump(cfg))
    done = semshift("run", str(path), "--conventions", "openood", "--quiet")
    assert done.returncode == 0, done.stderr
    prov = json.loads((tmp_path / "oo" / "results.json").read_text())
    assert prov["conventions"] == "openood"
    assert "fpr95_openood" in prov["config"]["metrics"] and "fpr95" not in prov["config"]["metrics"]
    assert prov["fpr_convention"] == {"fpr95_openood": "openood"}
