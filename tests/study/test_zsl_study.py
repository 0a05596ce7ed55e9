"""A study dataset running the ``zsl`` protocol on several datasets: the paper's zero-shot
Tables 1 and 2 in the study report, and the published cells matched in published.csv."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from semshift.metrics import gzsl
from semshift.study import load_study, run_study
from semshift.training.zsl import evaluate_zsl, read_xlsa, write_xlsa
from tests.study.conftest import study_dict
from tests.training.planted import planted


def test_a_study_reports_the_zero_shot_tables_beside_the_papers(study_root: Path, tmp_path):
    cub = write_xlsa(planted(n_seen=12, n_unseen=4, dim=16, att=8, per_class=12, seed=5),
                     tmp_path / "mats" / "CUB")  # fmt: skip
    awa2 = write_xlsa(planted(n_seen=12, n_unseen=4, dim=16, att=8, per_class=12, seed=6),
                      tmp_path / "mats" / "AWA2")  # fmt: skip
    zsl = {"datasets": [{"features": str(p / "res101.mat"), "splits": str(p / "att_splits.mat")}
                        for p in (awa2, cub)],
           "methods": ["eszsl"], "versions": ["v1", "v2"]}  # fmt: skip
    d = study_dict(study_root, output=str(tmp_path / "out"))
    d["models"] = d["models"][:2]
    d["datasets"]["zero-shot"] = {
        **d["datasets"]["colours"], "protocols": {"zsl": zsl}, "published": "zsl-v2:*",
    }  # fmt: skip
    del d["datasets"]["colours"]
    res = run_study(load_study(d, base_dir=study_root))
    assert not res.failed
    rows = res.results[res.results["protocol"] == "gzsl"]
    assert set(rows["set"]) == {"CUB", "AWA2"}
    # every model's cell trains the same methods on the same features: one value per cell
    o = evaluate_zsl(read_xlsa(cub), "eszsl", split="v2")
    want = gzsl(o.scores, o.labels, o.seen, o.unseen).as_dict()
    got = rows[(rows["set"] == "CUB") & (rows["split"] == "v2")]
    for metric, value in want.items():
        assert (got[got["metric"] == metric]["value"] == value).all()
    report = (tmp_path / "out" / "report.md").read_text()
    t1 = report.index("Table 1 of the proposed splits (V1 vs V2)")
    t2 = report.index("Generalised zero-shot learning: Table 2")
    assert t1 < t2 and "ESZSL (published)" in report[t1:]
    # CUB before AWA2, as in the paper
    header = report[t1:].split("\n| Method |", 1)[1].split("\n", 1)[0]
    assert header.index("CUB") < header.index("AWA2")
    pub = pd.read_csv(tmp_path / "out" / "published.csv")
    z = pub[(pub["paper"] == "zsl-v2") & (pub["detector"] == "eszsl")]
    # Table 1: 2 datasets x V1, V2; Table 2: 2 datasets x ts, tr, H
    assert len(z) == 2 * 2 + 2 * 3 and z["ours"].notna().all()
    cub_v2 = z[(z["table"] == "Table 1") & (z["column"] == "CUB V2")].iloc[0]
    assert cub_v2["published"] == pytest.approx(0.519)
    assert cub_v2["ours"] == pytest.approx(want["zsl_top1"])
