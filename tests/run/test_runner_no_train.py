"""A run without ``data.id_train``: the detectors that need no fitting, the same numbers as a
run with training data, and a one-line refusal of anything that would need fitting."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from semshift.errors import InputError
from semshift.run import run
from semshift.run.config import fit_free_detectors

from .conftest import base_config


def _without_train(cfg: dict) -> dict:
    cfg["data"] = {k: v for k, v in cfg["data"].items() if k != "id_train"}
    return cfg


def _rows(out) -> pd.DataFrame:
    t = pd.read_parquet(out / "results.parquet")
    return t.sort_values(list(t.columns.drop("value"))).reset_index(drop=True)


def test_fit_free_detectors_give_the_numbers_of_a_run_with_training_data(stores, tmp_path):
    dets = ["msp", "energy", "mls"]
    with_train = run(
        base_config(stores, tmp_path / "a", detectors=dets, protocols={"osr": {}}), progress=False
    )
    without = run(
        _without_train(base_config(stores, tmp_path / "b", detectors=dets, protocols={"osr": {}})),
        progress=False,
    )
    a, b = _rows(with_train.output), _rows(without.output)
    assert len(a) > 0 and set(b["detector"].dropna()) == set(dets)
    pd.testing.assert_frame_equal(a, b)
    scores_a = pd.read_parquet(tmp_path / "a" / "scores" / "easy.parquet")
    scores_b = pd.read_parquet(tmp_path / "b" / "scores" / "easy.parquet")
    pd.testing.assert_frame_equal(scores_a, scores_b)


def test_all_means_every_fit_free_detector_and_says_why_the_others_are_left_out(stores, tmp_path):
    cfg = _without_train(
        base_config(stores, tmp_path / "o", detectors="all", protocols={"osr": {}})
    )
    result = run(cfg, progress=False)
    ran = set(result.results["detector"].dropna())
    assert ran and ran <= set(fit_free_detectors())
    assert {"msp", "energy", "mls", "entropy"} <= ran
    assert "knn" not in ran and "mahalanobis" not in ran
    left = result.provenance["notes"]["detectors_left_out"]
    assert "no data.id_train" in left["knn"]


@pytest.mark.parametrize(
    ("over", "where", "what"),
    [
        (
            {"detectors": ["msp", "knn"], "protocols": {}},
            r"detectors\[1\]",
            "detector knn is fitted",
        ),
        ({"detectors": ["msp"]}, "protocols.sanity", "give data.id_train"),
    ],
)
def test_anything_that_needs_fitting_is_refused_in_one_line(stores, tmp_path, over, where, what):
    if "protocols" not in over:  # the random-model check, its stores precomputed
        store = str(stores["test"])
        over = {**over, "protocols": {"sanity": {"stores": {0: {"id_test": store}}}}}
    cfg = _without_train(base_config(stores, tmp_path / "x", **over))
    with pytest.raises(InputError, match=where) as err:
        run(cfg, progress=False)
    assert what in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "x").exists() or not any((tmp_path / "x").iterdir())


def test_semshift_evaluate_without_train(stores, tmp_path):
    from typer.testing import CliRunner

    from semshift.cli import app

    out = tmp_path / "ev"
    base = ["evaluate", "--test", str(stores["test"]), "--ood", f"easy={stores['ood']}",
            "--select", "easy:split=easy", "--bootstrap", "0", "--out", str(out)]  # fmt: skip
    done = CliRunner().invoke(app, [*base, "-d", "msp", "-d", "energy"])
    assert done.exit_code == 0, done.output
    table = pd.read_parquet(out / "results.parquet")
    assert set(table["detector"].dropna()) == {"msp", "energy"}
    exe = shutil.which("semshift") or str(Path(sys.executable).parent / "semshift")
    refused = subprocess.run(
        [exe, *base, "-d", "msp", "-d", "knn"], capture_output=True, text=True, timeout=120
    )
    assert refused.returncode == 2
    line = refused.stderr.strip()
    assert "\n" not in line and "--detector: detector knn is fitted" in line
    assert "give --train" in line
