"""The contract end to end: the real runner's output directory renders with every section."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
from tests.run.conftest import base_config, build_stores

from semshift.run import run


def test_real_run_output_renders(tmp_path: Path) -> None:
    stores = build_stores(tmp_path / "stores")
    preds = tmp_path / "preds.csv"
    pd.DataFrame(
        {
            "label": [0, 1, 2, 3, 0, 3],
            "pred": [0, 1, 1, 3, 0, 2],
            "seen": [True, True, False, False, True, False],
        }
    ).to_csv(preds, index=False)
    cfg = base_config(stores, tmp_path / "out")
    cfg["detectors"] = ["msp", "knn"]
    grid = {"semantic": "sem_level", "covariate": "cov_level"}
    cfg["data"]["sets"]["grid"] = {"role": "ood", "store": str(stores["graded"]), "grid": grid}
    cfg["protocols"] = {
        "osr": {},
        "newclass_failure": {},
        "graded": {"min_count": 5},
        "generalisation": {},
        "gzsl": {"predictions": str(preds)},
        "sanity": {
            "stores": {
                0: {
                    "id_train": str(stores["train"]),
                    "id_test": str(stores["test"]),
                    "easy": str(stores["ood"]),
                }
            }
        },
    }
    cfg["report"] = {"formats": ["html", "md"]}
    result = run(cfg, progress=False)
    assert result.errors == []
    out = tmp_path / "out"
    md = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    sections = re.findall(r'<a id="(\w+)"></a>', md)
    assert sections[:9] == [
        "osr",
        "osr_class_pairs",  # SSB Fig. 1: here a sentence saying the stores have no image paths
        "newclass_failure",
        "decomposition",
        "graded",
        "sanity",
        "generalisation",
        "gzsl",
        "scores",
    ]
    figures = sorted(p.name for p in (out / "figures").glob("*.png"))
    assert html.count('<img src="data:image/png;base64,') == len(figures) >= 8
    assert "| msp |" in md and "| knn |" in md
    assert "FPR@95 convention: id_recall" in md
