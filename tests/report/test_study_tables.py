"""The papers' headline tables from a study's frames: SSB Table 1 with the published rows,
ImageNet-OOD Table 1 per pair, SOOD Table 1 per model and IS-OOD Table 1."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from semshift.report.study_tables import (
    imagenet_ood_table1,
    isood_table1,
    sood_table1,
    ssb_table1,
)


def _row(**kw):
    base = {"dataset": "d", "protocol": "osr", "set": None, "split": None,
            "semantic_level": None, "covariate_level": None, "detector": None,
            "metric": "auroc", "mean": math.nan, "sd": 0.0, "ci_low": math.nan,
            "ci_high": math.nan, "n_models": 3, "n_failed": 0}  # fmt: skip
    return {**base, **kw}


def test_ssb_table1_puts_datasets_side_by_side_with_the_published_rows():
    rows = []
    for d, shift in (("birds", 0.0), ("planes", 0.05)):
        rows.append(_row(dataset=d, set="id_test", metric="accuracy", mean=0.8 + shift))
        for s, base in (("easy", 0.9), ("hard", 0.8)):
            for m in ("auroc", "oscr"):
                rows.append(_row(dataset=d, set=s, split=s, detector="mls", metric=m,
                                 mean=base + shift - (0.1 if m == "oscr" else 0),
                                 ci_low=0.5, ci_high=0.99))  # fmt: skip
    pub = pd.DataFrame([
        {"paper": "ssb", "table": "Table 1", "row": "MLS", "column": "CUB AUROC Easy",
         "dataset": "cub", "method": "mls", "setting": "", "split": "easy", "metric": "auroc",
         "printed": "88.3", "value": 0.883},
        {"paper": "ssb", "table": "Table 1", "row": "MLS", "column": "CUB Acc.",
         "dataset": "cub", "method": "mls", "setting": "", "split": "", "metric": "accuracy",
         "printed": "86.2", "value": 0.862},
    ])  # fmt: skip
    table = ssb_table1(pd.DataFrame(rows), published=pub, settings={"birds": ("ssb", "cub")})
    assert table is not None
    assert table.rows == ["mls", "MLS (published)"]
    assert [c.full_label for c in table.columns[:5]] == [
        "birds Acc.", "birds AUROC Easy", "birds AUROC Hard", "birds OSCR Easy", "birds OSCR Hard"
    ]  # fmt: skip
    assert len(table.columns) == 10
    ours = table.cells[0]
    assert ours[0].value == 0.8 and ours[1].value == 0.9 and ours[4].value == pytest.approx(0.7)
    assert ours[5].value == pytest.approx(0.85)  # planes' accuracy
    published = table.cells[1]
    assert published[0].value == 0.862 and published[1].value == 0.883
    assert math.isnan(published[2].value) and math.isnan(published[5].value)
    assert "88.3" in table.to_markdown()
    assert ssb_table1(pd.DataFrame([_row(protocol="graded")])) is None


def test_imagenet_ood_table1_has_one_column_per_pair_and_goal():
    rows = [_row(protocol=p, set=s, detector=d, mean=v)
            for p, base in (("newclass", 0.8), ("failure", 0.9))
            for s in ("id_test vs imagenet-ood", "imagenet-r vs imagenet-ood")
            for d, v in (("msp", base), ("energy", base - 0.05))]  # fmt: skip
    rows.append(_row(protocol="newclass", set="id_test", detector="msp", mean=0.1))  # pooled
    table = imagenet_ood_table1(pd.DataFrame(rows), "d")
    assert table is not None and table.rows == ["msp", "energy"]
    assert [c.full_label for c in table.columns] == [
        "New-class detection id_test vs imagenet-ood",
        "New-class detection imagenet-r vs imagenet-ood",
        "Failure detection id_test vs imagenet-ood", "Failure detection imagenet-r vs imagenet-ood",
    ]  # fmt: skip
    assert [c.value for c in table.cells[1]] == pytest.approx([0.75, 0.75, 0.85, 0.85])


def test_sood_table1_has_the_drop_per_model():
    values = pd.DataFrame([
        {"dataset": "d", "protocol": "generalisation", "set": s, "split": s, "detector": None,
         "metric": "macro_f1", "model": m, "value": v}
        for m, e, h in (("resnet50", 0.62, 0.46), ("vit_b_16", 0.54, 0.39))
        for s, v in (("easy", e), ("hard", h))
    ])  # fmt: skip
    table = sood_table1(values, "d")
    assert table is not None and table.rows == ["resnet50", "vit_b_16"]
    assert table.cells[0][2].value == pytest.approx((0.46 - 0.62) / 0.62)
    assert "0.62" in table.to_markdown() and "-25.8" in table.to_markdown()


def test_isood_table1_reads_the_graded_trends():
    rows = [_row(protocol="graded", set="grid", split=a, detector="msp", metric=f"auroc.{n}",
                 mean=v) for a, n, v in (("semantic", "correlation", 0.9),
                 ("semantic", "sensitivity", 0.05), ("covariate", "correlation", 0.3),
                 ("covariate", "sensitivity", 0.01))]  # fmt: skip
    table = isood_table1(pd.DataFrame(rows), "d")
    assert table is not None
    assert [c.value for c in table.cells[0]] == [0.9, 0.05, 0.3, 0.01]
    assert table.columns[0].full_label == "semantic correlation"
