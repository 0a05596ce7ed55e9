"""``semshift demo --study``: four GlyphNet widths trained on the tiny demo data (the default
width is the demo's own model), run as a study over the open-set bins; cached on re-run."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
from tests.demo.conftest import TINY

from semshift.demo.study import STUDY_WIDTHS, demo_study
from semshift.study import load_study


@pytest.fixture(scope="module")
def study(tiny_demo, tmp_path_factory):
    out = tmp_path_factory.mktemp("demo_study")
    shutil.copytree(tiny_demo.root, out / "data")  # the tiny build, reused by fingerprint
    lines: list[str] = []
    result = demo_study(out, params=TINY, n_resamples=100, progress=False, log=lines.append)
    return out, result, lines


def test_the_variants_train_and_every_cell_runs(study, tiny_demo):
    out, result, lines = study
    assert [o.status for o in result.outcomes] == ["done"] * 4, [o.reason for o in result.outcomes]
    assert sum(line.startswith("trained glyphnet-w") for line in lines) == 3  # w16 is reused
    models = {m.key: m for m in result.study.models}
    assert set(models) == set(STUDY_WIDTHS)
    assert models["glyphnet-w16"].weights == str(out / "data" / tiny_demo.weights_path.name)
    assert models["glyphnet-w4"].kwargs == {"widths": [4, 8, 16, 32]}
    summary = pd.read_csv(out / "study" / "summary.csv")
    auroc = summary[(summary["metric"] == "auroc") & summary["detector"].notna()]
    assert set(auroc["set"]) == {"easy", "medium", "hard"}
    logit = auroc[auroc["detector"].isin(["msp", "mls", "energy"])]
    assert len(logit) == 9 and (logit["n_models"] == 4).all()
    assert auroc["n_models"].between(1, 4).all()  # a detector may fail to fit a tiny model
    relation = pd.read_csv(out / "study" / "relation.csv")
    assert set(relation["metric"]) == {"auroc", "oscr"}
    assert (relation.loc[relation["detector"] == "msp", "n_models"] == 4).all()
    assert (out / "study" / "figures" / "relation_glyphs_auroc.png").is_file()
    # the written study file re-runs the same study
    again = load_study(out / "study" / "study.yaml")
    assert [c.output for c in again.cells] == [c.output for c in result.study.cells]


def test_a_rerun_trains_nothing_and_computes_nothing(study):
    out, first, _ = study
    lines: list[str] = []
    result = demo_study(out, params=TINY, n_resamples=100, progress=False, log=lines.append)
    assert not any(line.startswith("trained") for line in lines)
    assert all(o.computed == () for o in result.outcomes)
    pd.testing.assert_frame_equal(result.summary, first.summary)
