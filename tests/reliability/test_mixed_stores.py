"""Stores from different classifiers, and labels the head cannot hold (issue 20, defects 6-7).

Both ran with exit 0 and meaningless numbers before: a test store from another model (or
another random initialisation) was scored against detectors fitted on id_train's, and labels
outside the head's classes gave accuracy 0.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from semshift.errors import InputError
from semshift.run import run
from tests.run.conftest import C, D, base_config, build_stores, make_store


def _means_head(seed: int) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    means = np.abs(rng.normal(0, 3, (C, D))).astype(np.float32)
    return means, (means, (-0.5 * (means**2).sum(1)).astype(np.float32))


@pytest.fixture
def two_models(tmp_path):
    """train/test/ood of model A, and a test store of model B (another head)."""
    rng = np.random.default_rng(1)
    means, head_a = _means_head(0)
    _, head_b = _means_head(7)
    return {
        "train": make_store(tmp_path / "train", rng, means, head_a, 80),
        "test": make_store(tmp_path / "test", rng, means, head_a, 40),
        "test_b": make_store(tmp_path / "test_b", rng, means, head_b, 40),
        "ood": make_store(
            tmp_path / "ood", rng, means, head_a, 40, shift=3.0, labels=np.full(40, -1)
        ),
        "bad_labels": _relabelled(make_store(tmp_path / "bad", rng, means, head_a, 40)),
    }


def _relabelled(path, labels=None):
    """The store at ``path`` rewritten with ``labels`` (default: cycling over C + 3 values)."""
    from semshift.features import open_store, write_store

    st = open_store(path)
    index = st.index.copy()
    index["label"] = np.arange(len(index)) % (C + 3) if labels is None else labels
    arrays = {"logits": st.arrays("logits")[0], "features": st.arrays("features")[0]}
    head = st.head
    shutil.rmtree(path)
    write_store(path, index=index[["path", "label"]], arrays=arrays, head=head, fsync=False)
    return path


def _config(stores: dict, out, test: str) -> dict:
    return {
        "output": str(out),
        "data": {
            "id_train": {"store": str(stores["train"])},
            "id_test": {"store": str(stores[test])},
            "sets": {"ood": {"role": "ood", "store": str(stores["ood"])}},
        },
        "detectors": ["msp", "knn"],
        "protocols": {"osr": {}},
        "bootstrap": {"n_resamples": 0},
        "report": {"formats": ["md"]},
    }


def test_a_store_of_another_model_is_refused(two_models, tmp_path) -> None:
    with pytest.raises(InputError, match=r"data\.id_test: the store comes from another model "
                       r"than id_train .*head differ.*data\.mixed_models: true"):  # fmt: skip
        run(_config(two_models, tmp_path / "out", "test_b"), progress=False)
    notes = json.loads((tmp_path / "out" / "results.json").read_text())["notes"]
    assert "comes from another model" in notes["failed"]  # the record says why it stopped


def test_mixed_models_on_purpose_is_recorded_and_reported(two_models, tmp_path) -> None:
    cfg = _config(two_models, tmp_path / "out", "test_b")
    cfg["data"]["mixed_models"] = True
    run(cfg, progress=False)
    notes = json.loads((tmp_path / "out" / "results.json").read_text())["notes"]
    assert list(notes["mixed_models"]) == ["id_test"]
    assert "not id_train's model" in notes["mixed_models"]["id_test"]
    md = (tmp_path / "out" / "report.md").read_text()
    assert "Cross-model study (data.mixed_models)" in md and "id_test: model" in md


def test_the_same_model_runs_without_a_note(two_models, tmp_path) -> None:
    run(_config(two_models, tmp_path / "out", "test"), progress=False)
    notes = json.loads((tmp_path / "out" / "results.json").read_text())["notes"]
    assert "mixed_models" not in notes


def test_labels_outside_the_head_are_refused(two_models, tmp_path) -> None:
    with pytest.raises(InputError, match=r"data\.id_test: 16 row\(s\) have a label outside the "
                       r"head's 4 classes \(first: label 4 of im4\.png\)"):  # fmt: skip
        run(_config(two_models, tmp_path / "out", "bad_labels"), progress=False)


def test_the_base_config_stores_agree(tmp_path) -> None:
    """The shared runner fixtures (one head) pass the new checks unchanged."""
    stores = build_stores(tmp_path / "stores")
    run(base_config(stores, tmp_path / "out", protocols={"osr": {}}), progress=False)
    notes = json.loads((tmp_path / "out" / "results.json").read_text())["notes"]
    assert "mixed_models" not in notes and "failed" not in notes


def test_a_negative_label_is_reported_as_it_is(two_models, tmp_path) -> None:
    """A label of -7 was reported as "label -1"."""
    labels = np.arange(40) % C
    labels[5] = -7
    two_models["minus7"] = _relabelled(two_models["test"], labels)
    with pytest.raises(InputError, match=r"1 row\(s\) have a label outside .*label -7 of im5"):
        run(_config(two_models, tmp_path / "out", "minus7"), progress=False)


def test_evaluate_refuses_and_accepts_on_request(two_models, tmp_path) -> None:
    import subprocess
    import sys
    from pathlib import Path

    exe = shutil.which("semshift") or str(Path(sys.executable).parent / "semshift")
    args = [exe, "evaluate", "--train", str(two_models["train"]), "--test",
            str(two_models["test_b"]), "--ood", f"ood={two_models['ood']}", "--detector", "msp",
            "--bootstrap", "0", "--no-report", "--quiet"]  # fmt: skip
    res = subprocess.run([*args, "--out", str(tmp_path / "a")], capture_output=True, text=True)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "comes from another model than id_train" in lines[0]
    ok = subprocess.run([*args, "--out", str(tmp_path / "b"), "--mixed-models"],
                        capture_output=True, text=True)  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    notes = json.loads((tmp_path / "b" / "results.json").read_text())["notes"]
    assert list(notes["mixed_models"]) == ["id_test"]
