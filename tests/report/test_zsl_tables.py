"""The proposed-splits paper's zero-shot Tables 1 and 2 (``report.study_tables``): the paper's
layout, the V1 / V2 highlight and the published rows beside ours, on hand-built rows."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from semshift.report.study_tables import zsl_dataset_key, zsl_table1, zsl_table2
from semshift.study.published import published_numbers


def _rows(values: dict[tuple[str, str, str, str], float]) -> pd.DataFrame:
    """gzsl rows from (method, dataset, version, metric) -> value."""
    return pd.DataFrame(
        [
            {"protocol": "gzsl", "detector": m, "set": d, "split": v, "metric": k,
             "value": x, "ci_low": math.nan, "ci_high": math.nan}
            for (m, d, v, k), x in values.items()
        ]
    )  # fmt: skip


def test_dataset_names_are_keyed_as_the_paper_spells_them():
    assert [zsl_dataset_key(n) for n in ("AWA2", "aPY", "CUB", "SUN", "awa-1")] == [
        "awa2", "apy", "cub", "sun", "awa1",
    ]  # fmt: skip


def test_table1_puts_v1_next_to_v2_in_the_papers_dataset_order_and_marks_big_differences():
    rows = _rows({
        ("eszsl", "AWA2", "v1", "zsl_top1"): 0.600, ("eszsl", "AWA2", "v2", "zsl_top1"): 0.590,
        ("eszsl", "mine", "v1", "zsl_top1"): 0.300, ("eszsl", "mine", "v2", "zsl_top1"): 0.305,
        ("eszsl", "CUB", "v1", "zsl_top1"): 0.500, ("eszsl", "CUB", "v2", "zsl_top1"): 0.504,
        ("eszsl", "CUB", "v2", "ts"): 0.1,
    })  # fmt: skip
    t = zsl_table1(rows)
    assert t is not None
    # the paper's order (CUB before AWA2), then datasets it does not have
    assert [c.full_label for c in t.columns] == [
        "CUB V1", "CUB V2", "AWA2 V1", "AWA2 V2", "mine V1", "mine V2",
    ]  # fmt: skip
    assert t.rows == ["eszsl"]
    line = t.cells[0]
    assert [c.value for c in line] == [0.5, 0.504, 0.6, 0.59, 0.3, 0.305]
    # AWA2 differs by 1 point: both cells marked; 0.4 and exactly 0.5 points are not
    assert [c.mark for c in line] == ["", "", "†", "†", "", ""]
    assert "†" in t.to_markdown() and "0.5 points" in t.caption


def test_published_rows_follow_ours_with_the_papers_values_and_marks():
    rows = _rows({
        ("eszsl", "CUB", "v1", "zsl_top1"): 0.52, ("eszsl", "CUB", "v2", "zsl_top1"): 0.51,
        ("sje", "SUN", "v1", "zsl_top1"): 0.50, ("sje", "SUN", "v2", "zsl_top1"): 0.50,
        ("mystery", "SUN", "v1", "zsl_top1"): 0.1, ("mystery", "SUN", "v2", "zsl_top1"): 0.1,
    })  # fmt: skip
    t = zsl_table1(rows, published=published_numbers())
    assert t is not None
    assert t.rows == ["eszsl", "ESZSL (published)", "sje", "SJE (published)", "mystery"]
    cols = [c.full_label for c in t.columns]
    assert cols == ["SUN V1", "SUN V2", "CUB V1", "CUB V2"]
    pub_eszsl = t.cells[1]
    # ESZSL: SUN 54.5 / 54.5, CUB 53.9 / 51.9 (red in the paper)
    assert [c.value for c in pub_eszsl] == pytest.approx([0.545, 0.545, 0.539, 0.519])
    assert [c.mark for c in pub_eszsl] == ["", "", "†", "†"]
    # SJE: SUN 53.7 / 52.7 (red), CUB 53.9 / 53.9
    assert [c.mark for c in t.cells[3]] == ["†", "†", "", ""]
    assert "Published rows as printed" in t.caption


def test_table2_shows_v2_ts_tr_h_with_the_papers_rows():
    rows = _rows({
        ("cmt_star", "aPY", v, k): x
        for v in ("v1", "v2")
        for k, x in (("ts", 0.1 if v == "v2" else 0.9), ("tr", 0.7), ("h", 0.2))
    })  # fmt: skip
    t = zsl_table2(rows, published=published_numbers())
    assert t is not None
    assert [c.full_label for c in t.columns] == ["aPY ts", "aPY tr", "aPY H"]
    assert t.rows == ["cmt_star", "CMT* (published)"]
    assert [c.value for c in t.cells[0]] == [0.1, 0.7, 0.2]  # V2, not V1
    assert [c.value for c in t.cells[1]] == pytest.approx([0.109, 0.742, 0.19])


def test_no_zsl_rows_no_table():
    rows = _rows({("eszsl", "CUB", "v2", "ts"): 0.1})
    assert zsl_table1(rows) is None
    assert zsl_table2(rows.assign(protocol="osr")) is None
