"""A study dataset that reproduces a published setting gets the paper's numbers beside its
own: published, ours, the difference and whether the published value is inside our CI."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from semshift.errors import InputError
from semshift.report.study import published_table
from semshift.study import load_study
from semshift.study.published import compare_published, published_numbers, published_setting
from tests.study.conftest import study_dict


def _summary() -> pd.DataFrame:
    rows = [
        ("mls", "easy", "auroc", 0.90, 0.87, 0.93), ("mls", "hard", "auroc", 0.70, 0.68, 0.72),
        ("mls", "easy", "oscr", 0.80, 0.70, 0.85), (None, None, "accuracy", 0.86, 0.85, 0.87),
    ]  # fmt: skip
    return pd.DataFrame([
        {"dataset": "birds", "protocol": "osr", "set": split or "id_test", "split": split,
         "semantic_level": None, "covariate_level": None, "detector": d, "metric": m,
         "mean": v, "sd": 0.01, "ci_low": lo, "ci_high": hi, "n_models": 3, "n_failed": 0}
        for d, split, m, v, lo, hi in rows
    ])  # fmt: skip


def test_published_cells_are_matched_by_detector_split_and_metric() -> None:
    got = compare_published(_summary(), {"birds": ("ssb", "cub")})
    pub = published_numbers("ssb", "Table 1")
    cub = pub[pub["dataset"] == "cub"]
    assert len(got) == len(cub[(cub["metric"] != "accuracy") | (cub["method"] == "mls")])
    key = got.set_index(["detector", "split", "metric"], drop=False)
    easy = key.loc[("mls", "easy", "auroc")]
    assert easy["published"] == pytest.approx(0.883) and easy["ours"] == 0.90
    assert easy["difference"] == pytest.approx(0.90 - 0.883) and easy["inside_ci"] is True
    hard = key.loc[("mls", "hard", "auroc")]
    assert hard["published"] == pytest.approx(0.793) and hard["inside_ci"] is False
    acc = got[got["metric"] == "accuracy"].iloc[0]
    assert acc["published"] == pytest.approx(0.862) and acc["ours"] == 0.86
    assert acc["row"] == "MLS" and acc["inside_ci"] is True
    arpl = got[got["detector"] == "arpl"]
    assert len(arpl) == 4 and arpl["ours"].isna().all()  # the study has no ARPL+ numbers
    table = published_table(got, "birds")
    assert table is not None
    text = table.to_markdown()
    assert "88.3" in text and "90.0 [87.0, 93.0]" in text


def test_settings_come_from_benchmarks_or_the_study_file(study_root: Path) -> None:
    assert published_setting("ssb:cub") == ("ssb", "cub")
    with pytest.raises(InputError, match=r"no published setting 'ssb:cubb'; settings: .*ssb:cub"):
        published_setting("ssb:cubb")
    d = study_dict(study_root)
    d["datasets"]["colours"]["published"] = "ssb:aircraft"
    st = load_study(d, base_dir=study_root)
    assert st.published == {"colours": ("ssb", "aircraft")}
    d["datasets"]["colours"]["published"] = "ssb:planes"
    with pytest.raises(InputError) as err:
        load_study(d, base_dir=study_root)
    assert str(err.value).startswith("study: datasets.colours.published: no published setting")
    assert np.isfinite(published_numbers("ssb")["value"]).all()


def test_imagenet_ood_pairs_and_isood_trends_are_matched() -> None:
    rows = [
        {"dataset": "inet", "protocol": "newclass", "set": "imagenet-r vs imagenet-ood",
         "detector": "msp", "metric": "auroc", "mean": 0.47, "ci_low": 0.45, "ci_high": 0.49},
        {"dataset": "inet", "protocol": "failure", "set": "id_test vs openimage-o",
         "detector": "energy", "metric": "auroc", "mean": 0.9, "ci_low": 0.88, "ci_high": 0.92},
        {"dataset": "grid", "protocol": "graded", "set": "grid", "split": "semantic",
         "detector": "knn", "metric": "auroc.sensitivity", "mean": 0.066, "ci_low": 0.06,
         "ci_high": 0.07},
    ]  # fmt: skip
    summary = pd.DataFrame(rows).assign(n_models=13, n_failed=0)
    got = compare_published(summary, {"inet": ("imagenet-ood", "*"),
                                      "grid": ("isood", "imagenet-21k")})  # fmt: skip
    inet = got[got["dataset"] == "inet"]
    assert len(inet) == 2 * 9  # the two pairs the study has, nine detectors each
    r = inet[(inet["detector"] == "msp") & (inet["column"] == "IN-R vs IN-OOD (new-class)")]
    assert r["published"].iloc[0] == pytest.approx(0.48) and r["ours"].iloc[0] == 0.47
    assert r["inside_ci"].iloc[0] is True
    o = inet[(inet["detector"] == "energy") & (inet["column"] == "IN-1K vs OpenImage-O (failure)")]
    assert o["published"].iloc[0] == pytest.approx(0.885) and o["inside_ci"].iloc[0] is True
    assert inet["ours"].notna().sum() == 2
    grid = got[got["dataset"] == "grid"]
    assert len(grid) == 3 * 32  # Tables 1, 4 and 6 (ImageNet-21K): AUROC, FPR@95, AUPR
    k = grid[(grid["detector"] == "knn") & (grid["table"] == "Table 1")
             & (grid["column"] == "Semantic sensitivity")]  # fmt: skip
    assert k["published"].iloc[0] == pytest.approx(0.0664) and k["ours"].iloc[0] == 0.066
    assert published_setting("imagenet-ood:*") == ("imagenet-ood", "*")


def test_sood_table1_is_matched_per_backbone() -> None:
    values = pd.DataFrame([
        {"dataset": "sood", "protocol": "generalisation", "set": s, "split": s,
         "detector": None, "metric": "macro_f1", "model": m, "value": v}
        for m, e, h in (("resnet50", 0.60, 0.45), ("my_net", 0.5, 0.4))
        for s, v in (("easy", e), ("hard", h))
    ])  # fmt: skip
    got = compare_published(pd.DataFrame(columns=["dataset"]),
                            {"sood": ("sood", "sood-imagenet-c")}, values)  # fmt: skip
    assert set(got["row"]) == {"ResNet50"} and len(got) == 3  # F1 Easy, F1 Hard, drop
    by = got.set_index("column")
    assert by.loc["F1 Easy", "published"] == 0.62 and by.loc["F1 Easy", "ours"] == 0.60
    assert by.loc["Drop (%)", "published"] == pytest.approx(-0.268)
    assert by.loc["Drop (%)", "ours"] == pytest.approx((0.45 - 0.60) / 0.60)
    assert by["inside_ci"].isna().all()
    assert published_setting("sood:sood-imagenet-c") == ("sood", "sood-imagenet-c")
