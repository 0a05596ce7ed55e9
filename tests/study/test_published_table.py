"""The shipped published numbers: schema, counts per table, units, and sample rows checked
against verbatim copies of the seed papers' table lines (copied from the papers' plain text;
the seed texts are not read at test time)."""

from __future__ import annotations

import re

import pytest

from semshift.study.published import PUBLISHED_COLUMNS, published_numbers

#: seed 000 (The Semantic Shift Benchmark), lines 36-37: Table 1
SSB_ARPL = ("ARPL+\t85.9\t83.5 / 75.5\t76.0 / 69.6\t96.9\t94.8 / 83.6\t92.8 / 82.3\t91.5\t"
            "87.0 / 77.7\t83.3 / 74.9\t78.2\t79.3 / 74.0\t66.3 / 63.0")  # fmt: skip
SSB_MLS = ("MLS\t86.2\t88.3 / 79.3\t79.8 / 73.1\t97.1\t94.0 / 82.2\t92.2 / 81.1\t91.7\t"
           "90.7 / 82.3\t86.8 / 79.8\t78.8\t78.7 / 72.8\t67.0 / 63.4")  # fmt: skip
#: seed 001 (ImageNet-OOD), line 70 (new-class detection) and line 87 (failure detection)
INOOD_NEWCLASS_MSP = "| MSP | 55.5 | 48.0 | 46.4 | 84.6 | 79.8 | |"
INOOD_FAILURE_REACT = "| ReAct | 60.2 | 47.9 | 55.9 | 80.4 | 65.7 |"
#: seed 002 (SOOD-ImageNet), Table 1 rows, lines 76 and 80 (a no-break space before the
#: citation; the trailing marks are the table's CNN / Transformer columns)
SOOD_RESNET = "ResNet50\xa0[12] 0.62 0.46 -26.80 23.6 ×\\times×"
SOOD_VITL = "ViT\xa0[9] (L) 0.25 0.19 -24.12 303.4 ×\\times×"
#: seed 003 (proposed splits v2), lines 44 and 50 (Table 1) and line 63 (Table 2)
ZSL_ALE_T1 = "ALE [6]\t58.1\t58.1\t54.9\t54.9\t59.9\t59.9\t62.5\t62.5\t39.7\t39.7"
ZSL_GFZSL_T1 = "GFZSL [12]\t60.6\t60.8\t49.3\t49.3\t68.3\t68.2\t63.8\t63.8\t38.4\t38.4"
ZSL_ALE_T2 = ("ALE [6]\t21.8\t33.1\t26.3\t23.7\t62.8\t34.4\t16.8\t76.1\t27.5\t14.0\t81.8\t23.9\t"
              "4.6\t73.7\t8.7")  # fmt: skip
#: seed 004 (IS-OOD), lines 157 and 160 (Table 1; the text writes 5.56 as "5 56")
ISOOD_KNN = "KNN [5]\t0.98\t6.64\t-0.93\t2.18\t"
ISOOD_ASH = "ASH [8]\t0.98\t5 56\t-0.89\t1 73\t"


def _numbers(line: str) -> list[str]:
    """The cells of a verbatim line, in order ("88.3 / 79.3" is two; "5 56" stays one)."""
    if line.startswith("|"):
        return [c.strip() for c in line.strip("|").split("|")[1:] if c.strip()]
    if "\t" in line:
        cells = [c for c in line.split("\t")[1:] if c.strip()]
        return [x for c in cells for x in c.split(" / ")]
    return re.findall(r"-?\d+\.\d+", re.sub(r"\[\d+\]", "", line))


def _printed(paper: str, table: str, row: str, **where: str) -> list[str]:
    frame = published_numbers(paper, table)
    frame = frame[frame["row"] == row]
    for key, value in where.items():
        frame = frame[frame[key] == value]
    return frame["printed"].tolist()


@pytest.mark.parametrize(
    ("line", "paper", "table", "row", "where"),
    [
        (SSB_ARPL, "ssb", "Table 1", "ARPL+", {}),
        (SSB_MLS, "ssb", "Table 1", "MLS", {}),
        (INOOD_NEWCLASS_MSP, "imagenet-ood", "Table 1", "MSP", {"setting": "new-class"}),
        (INOOD_FAILURE_REACT, "imagenet-ood", "Table 1", "ReAct", {"setting": "failure"}),
        (SOOD_RESNET, "sood", "Table 1", "ResNet50", {}),
        (SOOD_VITL, "sood", "Table 1", "ViT (L)", {}),
        (ZSL_ALE_T1, "zsl-v2", "Table 1", "ALE", {}),
        (ZSL_GFZSL_T1, "zsl-v2", "Table 1", "GFZSL", {}),
        (ZSL_ALE_T2, "zsl-v2", "Table 2", "ALE", {}),
        (ISOOD_KNN, "isood", "Table 1", "KNN", {}),
        (ISOOD_ASH, "isood", "Table 1", "ASH", {}),
    ],
    ids=lambda v: v if isinstance(v, str) and len(v) < 14 else None,
)
def test_sample_rows_equal_the_papers_lines(line, paper, table, row, where):
    assert _printed(paper, table, row, **where) == _numbers(line)


def test_schema_units_and_counts():
    frame = published_numbers()
    assert tuple(frame.columns) == PUBLISHED_COLUMNS
    assert not frame.duplicated(["paper", "table", "row", "column"]).any()
    counts = frame.groupby(["paper", "table"]).size().to_dict()
    assert counts == {
        ("imagenet-ood", "Appendix D table"): 16, ("imagenet-ood", "Table 1"): 90,
        ("imagenet-ood", "Table 2 (Appendix B)"): 21, ("isood", "Table 1"): 32,
        ("isood", "Table 2"): 32, ("isood", "Table 3"): 30, ("isood", "Table 4"): 32,
        ("isood", "Table 5"): 32, ("isood", "Table 6"): 32, ("isood", "Table 7"): 32,
        ("sood", "Table 1"): 48, ("sood", "Table 2"): 44, ("ssb", "Table 1"): 40,
        ("zsl-v2", "Table 1"): 130, ("zsl-v2", "Table 2"): 210,
    }  # fmt: skip
    number = frame["printed"].str.replace(" ", ".", regex=False).astype(float)
    fraction = ~frame["metric"].isin(["f1", "miou", "params_m", "correlation"])
    assert (frame.loc[fraction, "value"] - number[fraction] / 100).abs().max() < 1e-12
    assert (frame.loc[~fraction, "value"] - number[~fraction]).abs().max() < 1e-12
    ssb = frame[frame["paper"] == "ssb"]
    assert set(ssb["method"]) == {"mls", "arpl"} and set(ssb["dataset"]) == {
        "cub", "scars", "aircraft", "imagenet"
    }  # fmt: skip


def test_an_unknown_paper_is_one_line():
    with pytest.raises(Exception, match=r"no published numbers of paper 'sbb'; papers: "):
        published_numbers("sbb")
