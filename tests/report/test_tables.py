"""Tables from a hand-written results frame: values x100, bold on the best, CIs, errors."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from semshift.errors import InputError
from semshift.report import (
    decomposition_table,
    generalisation_table,
    graded_level_table,
    graded_trend_table,
    gzsl_table,
    headline_table,
    newclass_failure_table,
    osr_metrics_table,
    osr_table,
    sanity_table,
)
from semshift.report._load import RESULT_COLUMNS

NAN = math.nan


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    out = pd.DataFrame([{c: r.get(c) for c in RESULT_COLUMNS} for r in rows])
    for c in ("value", "ci_low", "ci_high"):
        out[c] = pd.to_numeric(out[c]).astype(np.float64)
    return out


def osr_rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        {"protocol": "osr", "set": "id_test", "metric": "accuracy", "value": 0.7612}
    ]
    # splits written out of order (hard first) to check easy < medium < hard
    vals = {
        ("mls", "hard"): (0.6543, 0.61),
        ("mls", "easy"): (0.8123, 0.70),
        ("msp", "hard"): (0.6601, 0.58),
        ("msp", "easy"): (0.7999, 0.66),
    }
    for (det, split), (au, os_) in vals.items():
        common = {"protocol": "osr", "set": f"{split}_a+{split}_b", "split": split, "detector": det}
        rows.append(
            {**common, "metric": "auroc", "value": au, "ci_low": au - 0.004, "ci_high": au + 0.0041}
        )
        rows.append({**common, "metric": "oscr", "value": os_})
        rows.append({**common, "metric": "fpr95", "value": 1 - au})
    rows.append(
        {
            "protocol": "osr",
            "set": "medium",
            "split": "medium",
            "detector": "mls",
            "metric": "auroc",
            "value": 0.71,
        }
    )
    rows.append(
        {
            "protocol": "osr",
            "set": "medium",
            "split": "medium",
            "detector": "msp",
            "value": NAN,
            "error": "ValueError: scores contain NaN",
        }
    )
    return rows


def test_osr_table_values_order_bold_ci_and_errors() -> None:
    t = osr_table(frame(osr_rows()))
    assert t.rows == ["mls", "msp"]
    assert [c.full_label for c in t.columns] == [
        "Acc",
        "AUROC Easy",
        "AUROC Medium",
        "AUROC Hard",
        "OSCR Easy",
        "OSCR Medium",
        "OSCR Hard",
    ]
    # x100, one decimal, CI in brackets
    assert t.text(0, 0) == "76.1"
    assert t.text(0, 1) == "81.2 [80.8, 81.6]"
    assert t.text(1, 3) == "66.0 [65.6, 66.4]"
    assert t.text(0, 4) == "70.0"
    # a metric-less error row (protocols.tidy.error_row) fills every cell of its split
    assert t.text(1, 2) == "err" and t.text(1, 5) == "err"
    assert t.text(0, 5) == "n/a"
    # best = max: mls on easy AUROC, msp on hard AUROC; Acc is one value -> not bold
    assert t.best(1) == {0} and t.best(3) == {1} and t.best(0) == set()
    assert t.best(2) == set()  # a single valid value is not a comparison
    md = t.to_markdown()
    assert "| mls | 76.1 | **81.2 [80.8, 81.6]** | 71.0 | 65.4 [65.0, 65.8] | **70.0** |" in md
    assert "ValueError: scores contain NaN" in md
    assert "err: msp (AUROC Medium, OSCR Medium): ValueError: scores contain NaN" in t.footnotes
    assert "highest for AUROC, OSCR" in t.caption
    assert "easy = easy_a+easy_b" in t.caption


def test_fpr95_lower_is_better_and_caption_says_so() -> None:
    t = osr_metrics_table(frame(osr_rows()), fpr_note="FPR@95 convention: id_recall.")
    assert t is not None
    # the metric-less error row of msp on medium stands for FPR@95 too
    assert [c.full_label for c in t.columns] == ["FPR@95 Easy", "FPR@95 Medium", "FPR@95 Hard"]
    assert t.text(0, 0) == "18.8" and t.text(1, 0) == "20.0"
    assert t.text(0, 1) == "n/a" and t.text(1, 1) == "err"
    assert t.best(0) == {0}  # 18.8 < 20.0
    assert t.best(2) == {1}  # msp 34.0 < mls 34.6
    assert "lowest for FPR@95" in t.caption and "id_recall" in t.caption
    assert osr_metrics_table(frame(osr_rows()[:2])) is None


def test_ties_after_rounding_are_all_bold() -> None:
    rows = [
        {"protocol": "decomposition", "detector": d, "metric": "auroc", "value": v}
        for d, v in (("a", 0.9121), ("b", 0.91249), ("c", 0.5))
    ]
    t = decomposition_table(frame(rows))
    assert t.best(0) == {0, 1}  # both display 91.2
    html = t.to_html()
    assert html.count("<strong>91.2</strong>") == 2


def test_html_two_header_rows_for_groups_and_escaping() -> None:
    rows = []
    for p in ("newclass", "failure"):
        for s in ("imagenet-r", "id_test"):
            for d, v in (("<msp>", 0.61), ("knn", 0.72)):
                rows.append(
                    {
                        "protocol": p,
                        "set": s,
                        "detector": d,
                        "metric": "auroc",
                        "value": v + (0.1 if p == "failure" else 0),
                    }
                )
    t = newclass_failure_table(frame(rows))
    assert [c.full_label for c in t.columns] == [
        "New-class detection imagenet-r vs OOD",
        "New-class detection ID vs OOD",
        "Failure detection imagenet-r vs OOD",
        "Failure detection ID vs OOD",
    ]
    assert t.text(0, 2) == "71.0" and t.text(1, 3) == "82.0"
    html = t.to_html()
    assert '<th colspan="2">New-class detection</th>' in html
    assert '<th colspan="2">Failure detection</th>' in html
    assert "<th>ID vs OOD</th>" in html
    assert "&lt;msp&gt;" in html and "<msp>" not in html
    assert html.count("<tr>") == 2 + 2  # two header rows, two detectors


def test_decomposition_columns() -> None:
    names = ("acc", "auroc", "auroc_correct", "auroc_incorrect", "auroc_correct_vs_incorrect")
    rows = [
        {
            "protocol": "decomposition",
            "set": "id_test",
            "detector": d,
            "metric": m,
            "value": 0.8 if m == "acc" else v + 0.01 * k,
        }
        for d, v in (("msp", 0.7), ("vim", 0.6))
        for k, m in enumerate(names)
    ]
    t = decomposition_table(frame(rows))
    assert [c.label for c in t.columns] == [
        "Acc",
        "AUROC ID vs OOD",
        "AUROC correct vs OOD",
        "AUROC incorrect vs OOD",
        "AUROC correct vs incorrect",
    ]
    assert t.text(1, 4) == "64.0"
    assert t.best(0) == set() and t.best(1) == {0}


def graded_rows() -> list[dict[str, Any]]:
    rows = []
    for d, base in (("msp", 0.9), ("knn", 0.8)):
        for lvl in ("10", "2", "1"):  # numeric order 1 < 2 < 10
            rows.append(
                {
                    "protocol": "graded",
                    "set": "grid",
                    "semantic_level": lvl,
                    "detector": d,
                    "metric": "auroc.level_mean",
                    "value": base - 0.01 * int(lvl),
                }
            )
            rows.append(
                {
                    "protocol": "graded",
                    "set": "grid",
                    "covariate_level": lvl,
                    "detector": d,
                    "metric": "fpr95.level_mean",
                    "value": 0.3 + 0.01 * int(lvl) + (0.1 if d == "msp" else 0),
                }
            )
        for axis, r, sens in (("semantic", -0.987, 0.0123), ("covariate", 0.5, 0.001)):
            rows.append(
                {
                    "protocol": "graded",
                    "set": "grid",
                    "split": axis,
                    "detector": d,
                    "metric": "auroc.correlation",
                    "value": r,
                }
            )
            rows.append(
                {
                    "protocol": "graded",
                    "set": "grid",
                    "split": axis,
                    "detector": d,
                    "metric": "auroc.sensitivity",
                    "value": sens,
                }
            )
    return rows


def test_graded_level_and_trend_tables() -> None:
    res = frame(graded_rows())
    t = graded_level_table(res, metric="auroc", axis="semantic")
    assert [c.label for c in t.columns] == ["1", "2", "10"]
    assert t.text(0, 2) == "80.0" and t.best(0) == {0}
    f = graded_level_table(res, metric="fpr95", axis="covariate")
    assert f.text(0, 0) == "41.0" and f.text(1, 0) == "31.0"
    assert f.best(0) == {1}  # lower FPR is better
    tr = graded_trend_table(res, metric="auroc")
    assert [c.full_label for c in tr.columns] == [
        "Semantic r",
        "Semantic sens.",
        "Covariate r",
        "Covariate sens.",
    ]
    assert tr.text(0, 0) == "-0.99" and tr.text(0, 1) == "1.2" and tr.text(0, 3) == "0.1"
    assert all(tr.best(j) == set() for j in range(4))
    with pytest.raises(InputError, match=r"graded auroc\.level_mean"):
        graded_level_table(res, metric="auroc", axis="covariate")
    with pytest.raises(InputError, match="axis must be"):
        graded_level_table(res, axis="diagonal")  # type: ignore[arg-type]


def test_sanity_table_worst_seed_mark_and_flag() -> None:
    rows = []
    for seed, (v_msp, v_en) in (("seed0", (0.49, 0.70)), ("seed1", (0.53, 0.62))):
        for d, v in (("msp", v_msp), ("energy", v_en)):
            rows.append(
                {
                    "protocol": "sanity",
                    "set": "easy",
                    "split": seed,
                    "detector": d,
                    "metric": "auroc",
                    "value": v,
                    "ci_low": v - 0.02,
                    "ci_high": v + 0.02,
                }
            )
    rows.append(
        {"protocol": "sanity", "split": "all", "detector": "msp", "metric": "flagged", "value": 0.0}
    )
    rows.append(
        {
            "protocol": "sanity",
            "split": "all",
            "detector": "energy",
            "metric": "flagged",
            "value": 1.0,
        }
    )
    t = sanity_table(frame(rows), delta=0.05)
    assert [c.full_label for c in t.columns] == ["AUROC easy", "Flagged"]
    # msp: the seed furthest from 0.5 is seed1 (0.53); its CI [51, 55] overlaps the band
    assert t.text(0, 0) == "53.0 [51.0, 55.0]"
    assert t.text(1, 0) == "70.0 [68.0, 72.0]†"
    assert t.text(0, 1) == "no" and t.text(1, 1) == "yes"
    assert "0.5 ± 0.05" in t.caption
    assert "\\*" not in t.to_markdown() and "†" in t.to_markdown()
    # the failure goal: one AUROC column (furthest from 0.5 over sets and seeds; a seed with
    # no correct image is n/a and does not hide the others) and its verdict
    fail = [
        {"protocol": "sanity", "set": s, "split": seed, "detector": "msp",
         "metric": "failure.auroc", "value": v, "ci_low": v - 0.02, "ci_high": v + 0.02,
         "error": None}
        for s, seed, v in (("easy", "seed0", 0.56), ("hard", "seed1", 0.38))
    ] + [
        {"protocol": "sanity", "set": "easy", "split": "seed2", "detector": "msp",
         "metric": "failure.auroc", "value": float("nan"),
         "error": "n/a: no ID test image is classified correctly by this random model"},
        {"protocol": "sanity", "split": "all", "detector": "msp", "metric": "failure.flagged",
         "value": 1.0},
    ]  # fmt: skip
    f = sanity_table(frame(rows + fail), delta=0.05)
    assert [c.full_label for c in f.columns] == [
        "AUROC easy", "Flagged", "Failure AUROC", "Failure Flagged",
    ]  # fmt: skip
    row = f.rows.index("msp")
    assert f.text(row, 2) == "38.0 [36.0, 40.0]†" and f.text(row, 3) == "yes"
    assert "appendix F" in f.caption


def test_generalisation_and_gzsl() -> None:
    rows = [
        {"protocol": "generalisation", "set": "hard", "metric": "accuracy", "value": 0.6},
        {"protocol": "generalisation", "set": "id_test", "metric": "accuracy", "value": 0.8},
        {
            "protocol": "generalisation",
            "set": "hard",
            "metric": "accuracy.relative_drop",
            "value": 0.25,
        },
        {
            "protocol": "generalisation",
            "set": "hard",
            "metric": "macro_f1.delta_easy_hard",
            "value": -0.24,
        },
        {"protocol": "gzsl", "metric": "ts", "value": 0.2345},
        {"protocol": "gzsl", "metric": "tr", "value": 0.8},
        {"protocol": "gzsl", "metric": "h", "value": 0.3627},
    ]
    g = generalisation_table(frame(rows))
    assert g.rows == ["id_test", "hard"]
    assert [c.label for c in g.columns] == ["Acc", "Acc drop", "Macro-F1 Δ Easy→Hard"]
    assert [g.text(0, 0), g.text(1, 0), g.text(0, 1), g.text(1, 1)] == [
        "80.0",
        "60.0",
        "n/a",
        "25.0",
    ]
    assert g.text(1, 2) == "-24.0" and "SOOD's Delta" in g.caption
    z = gzsl_table(frame(rows))
    assert z.rows == ["model"] and [c.label for c in z.columns] == ["ts", "tr", "H"]
    assert [z.text(0, j) for j in range(3)] == ["23.4", "80.0", "36.3"]
    assert "Best per column" not in z.caption  # one row: nothing to compare


def test_headline_table_prefers_osr_and_renders_in_rich() -> None:
    res = frame(osr_rows() + graded_rows())
    h = headline_table(res)
    assert h.key == "osr" and h.text(0, 1) == "81.2"  # CIs hidden in the terminal table
    console = Console(width=200, record=True, color_system=None)
    console.print(h.to_rich())
    text = console.export_text()
    assert "AUROC Easy" in text and "81.2" in text and "mls" in text
    assert headline_table(frame(graded_rows())).key == "graded_auroc_semantic"


def test_headline_table_when_every_graded_cell_is_na() -> None:
    """A grid whose every cell is too small (a sampled benchmark): the AUROC table, no crash."""
    rows = [
        {"protocol": "graded", "set": f"cov_{c}_sem_0", "semantic_level": "0",
         "covariate_level": str(c), "detector": "mls", "metric": "auroc", "value": None,
         "error": "n/a: fewer than 10 samples"}
        for c in range(3)
    ]  # fmt: skip
    rows.append({"protocol": "graded", "set": "grid", "semantic_level": "0", "detector": "mls",
                 "metric": "auroc.level_mean", "value": None,
                 "error": "n/a: no valid cell at this level"})  # fmt: skip
    h = headline_table(frame(rows))
    assert h.key == "graded_auroc_semantic" and h.rows == ["mls"]
    assert all(h.text(0, j) in ("", "n/a", "-") for j in range(len(h.columns)))


def test_tables_read_a_run_directory(run_dir: Path) -> None:
    t = osr_table(run_dir)
    assert t.rows == ["msp", "energy", "knn", "broken"]
    assert t.footnotes == [
        "err: broken (AUROC Hard, OSCR Hard): RuntimeError: singular covariance in broken.fit"
    ]
    res = pd.read_parquet(run_dir / "results.parquet")
    acc = res[(res["protocol"] == "osr") & (res["metric"] == "accuracy")]["value"].iloc[0]
    assert t.text(0, 0) == f"{round(acc * 100, 1):.1f}"


def test_bad_input_is_named() -> None:
    with pytest.raises(InputError, match=r"missing column\(s\) \['ci_low'"):
        osr_table(frame(osr_rows()).drop(columns=["ci_low"]))
    with pytest.raises(InputError, match="no osr rows"):
        osr_table(frame(graded_rows()))
    bad = frame(osr_rows())
    bad.loc[3, "metric"] = None
    with pytest.raises(InputError, match="no metric, first at row 3"):
        osr_table(bad)
    with pytest.raises(InputError, match="file not found"):
        osr_table(Path("/nonexistent/results.parquet"))
