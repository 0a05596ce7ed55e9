"""Every shipped example config loads and validates; demo.yaml runs from a built demo."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from semshift.run.config import load_config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "configs").glob("*.yaml"))


def test_there_are_example_configs():
    assert {p.name for p in EXAMPLES} >= {
        "demo.yaml",
        "imagenet_ssb.yaml",
        "imagenet_ood_newclass_failure.yaml",
        "isood_graded.yaml",
    }


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_config_loads_and_validates(path: Path):
    cfg = load_config(path, check_files=False)
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert cfg.name == raw["name"]
    assert cfg.output == (path.parent / raw["output"]).resolve()
    assert cfg.protocols.enabled() == [p for p in cfg.protocols.enabled() if p in raw["protocols"]]
    assert set(cfg.protocols.enabled()) == set(raw["protocols"])
    if cfg.model is not None:
        from semshift.features.models import is_model

        assert is_model(cfg.model.name), cfg.model.name


def test_demo_yaml_runs_from_a_built_demo_in_a_fresh_process(tmp_path):
    """``semshift run examples/configs/demo.yaml --force`` in a process that never imported
    semshift.demo: the demo model is found through its entry point."""
    from tests.demo.conftest import TINY

    from semshift.demo import build_demo_data

    demo = build_demo_data(tmp_path / "semshift-demo", params=TINY, progress=False)
    configs = tmp_path / "examples" / "configs"
    configs.mkdir(parents=True)
    path = demo.write_config(configs / "demo.yaml", tmp_path / "semshift-demo" / "run")
    # the layout of the shipped file: paths relative to it, into ../../semshift-demo
    shipped = yaml.safe_load((ROOT / "examples" / "configs" / "demo.yaml").read_text("utf-8"))
    written = yaml.safe_load(path.read_text("utf-8"))
    assert written["model"] == {**shipped["model"], "num_classes": written["model"]["num_classes"]}
    assert written["data"]["id_train"] == shipped["data"]["id_train"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from semshift.cli import main; main(sys.argv[1:])",
         "run", str(path), "--force", "--quiet"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:] + proc.stdout[-2000:]
    out = tmp_path / "semshift-demo" / "run"
    prov = json.loads((out / "results.json").read_text())
    assert prov["config"]["model"]["name"] == "demo-glyphnet"
    assert (out / "report.html").is_file()
    shutil.rmtree(out)
