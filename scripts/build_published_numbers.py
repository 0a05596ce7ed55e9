"""Write ``src/semshift/study/data/published_numbers.csv`` from the seed papers' text.

Every number the five seed papers print in their result tables, parsed from the papers' plain
text (not retyped), one row per cell: ``paper, table, row, column, dataset, method, setting,
split, metric, printed, value``. ``value`` is in semshift's units: percentages become fractions
(AUROC, OSCR, accuracy, top-1, ts / tr / H, SOOD's relative drop, ImageNet-OOD's rejection rate,
IS-OOD's sensitivity, in metric % per level); SOOD's F1 / mIoU are fractions already and
correlations and model sizes stay as printed.

Left out: cells the text lost (the unlabelled second row of each goal in ImageNet-OOD's appendix
D table, whose method name is missing from the text) and the PASS-distance regression table of
ImageNet-OOD's appendix C (intercepts and slopes with standard errors; the ``distance``
protocol of issue 31 will compare with it).

Usage::

    python scripts/build_published_numbers.py /work/shared/seeds
"""

from __future__ import annotations

import argparse
import csv
import re
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src/semshift/study/data/published_numbers.csv"
COLUMNS = ["paper", "table", "row", "column", "dataset", "method", "setting", "split", "metric",
           "printed", "value"]  # fmt: skip
DETECTORS = {
    "MSP": "msp", "Max-Logit": "mls", "Energy": "energy", "Mahalanobis": "mahalanobis",
    "ViM": "vim", "KNN": "knn", "Max-Cosine": "max_cosine", "ASH-B": "ash_b", "ReAct": "react",
    "ODIN": "odin", "GradNorm": "gradnorm", "OpenMax": "openmax", "MDS": "mahalanobis",
    "DICE": "dice", "RankFeat": "rankfeat", "MLS": "mls", "ARPL+": "arpl",
}  # fmt: skip
SOOD = {
    "EfficientNet (B6)": "efficientnet_b6", "MaxxViT-V2 (L)": "maxxvitv2_rmlp_large_rw_224",
    "MobileNetV3": "mobilenet_v3_large", "ResNet50": "resnet50", "Swinv2 (B)": "swin_v2_b",
    "Swinv2 (L)": "swinv2_large_window12_192", "ViT (B)": "vit_b_16", "ViT (L)": "vit_l_16",
}  # fmt: skip


def _seed(seeds: Path, prefix: str) -> list[str]:
    (path,) = sorted(seeds.glob(f"{prefix}_*.txt"))
    return path.read_text(encoding="utf-8").splitlines()


def _slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")


def _row(out, paper, table, row, column, dataset, method, setting, split, metric, printed,
         percent):  # fmt: skip
    number = float(printed.replace(" ", "."))
    value = number / 100 if percent else number
    out.append([paper, table, row, column, dataset, method, setting, split, metric, printed,
                repr(round(value, 10))])  # fmt: skip


def ssb(seeds: Path, out: list) -> None:
    lines = _seed(seeds, "000")
    body = [ln for ln in lines if ln.startswith(("ARPL+\t", "MLS\t"))][:2]
    datasets = [("CUB", "cub"), ("SCars", "scars"), ("FGVC-Aircraft", "aircraft"),
                ("ImageNet", "imagenet")]  # fmt: skip
    for line in body:
        label, *cells = line.split("\t")
        for k, (name, key) in enumerate(datasets):
            acc, auroc, oscr = cells[3 * k : 3 * k + 3]
            _row(out, "ssb", "Table 1", label, f"{name} Acc.", key, DETECTORS[label], "", "",
                 "accuracy", acc, True)  # fmt: skip
            for metric, pair in (("auroc", auroc), ("oscr", oscr)):
                for split, printed in zip(("easy", "hard"), pair.split(" / "), strict=True):
                    _row(out, "ssb", "Table 1", label, f"{name} {metric.upper()} "
                         f"{split.capitalize()}", key, DETECTORS[label], "", split, metric,
                         printed, True)  # fmt: skip


def _md_cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def imagenet_ood(seeds: Path, out: list) -> None:
    lines = _seed(seeds, "001")
    start = next(i for i, ln in enumerate(lines) if ln.startswith("| Goal | Method | IN-OOD"))
    pairs = [("IN-C vs IN-OOD", "imagenet-c:imagenet-ood"),
             ("IN-R vs IN-OOD", "imagenet-r:imagenet-ood"),
             ("IN-Sketch vs IN-OOD", "imagenet-sketch:imagenet-ood"),
             ("IN-1K vs OpenImage-O", "imagenet-1k:openimage-o"),
             ("IN-1K vs IN-OOD", "imagenet-1k:imagenet-ood")]  # fmt: skip
    rows = []
    for ln in lines[start + 1 :]:
        if not ln.startswith("|"):
            break
        cells = [c for c in _md_cells(ln) if c]
        if cells[0] in ("New-class Detection", "Failure Detection"):
            cells = cells[1:]
        rows.append(cells)
    assert len(rows) == 18, len(rows)
    for k, (label, *numbers) in enumerate(rows):
        setting = "new-class" if k < 9 else "failure"
        for (column, key), printed in zip(pairs, numbers, strict=True):
            _row(out, "imagenet-ood", "Table 1", label, f"{column} ({setting})", key,
                 DETECTORS[label], setting, "", "auroc", printed, True)  # fmt: skip
    # Appendix B: rejection rate of correctly classified images at the ID-recall threshold
    start = next(i for i, ln in enumerate(lines) if ln.startswith("| ImageNet (Russakovsky"))
    sets = [("ImageNet", "imagenet-1k"), ("ImageNet-C", "imagenet-c"),
            ("ImageNet-R", "imagenet-r")]  # fmt: skip
    for ln in lines[start + 2 :]:
        if not ln.startswith("|"):
            break
        label, *numbers = [c for c in _md_cells(ln) if c]
        label = re.sub(r"\s*\(.*\)$", "", label)
        for (column, key), printed in zip(sets, numbers, strict=True):
            _row(out, "imagenet-ood", "Table 2 (Appendix B)", label, column, key,
                 DETECTORS[label], "", "", "rejection_rate", printed, True)  # fmt: skip
    # Appendix D: a single ResNet-50, OpenImage-O and ImageNet-OOD
    start = next(i for i, ln in enumerate(lines)
                 if ln.startswith("| Goal | Method | OpenImage-O | ImageNet-OOD |"))  # fmt: skip
    setting = ""
    for ln in lines[start + 2 :]:
        if not ln.startswith("|"):
            break
        cells = [c for c in _md_cells(ln) if c]
        if cells[0] in ("New-class Detection", "Failure Detection"):
            setting = "new-class" if cells[0].startswith("New") else "failure"
            cells = cells[1:]
        if cells[0] not in DETECTORS:
            continue  # the text lost this row's method name
        label, *numbers = cells
        for (column, key), printed in zip(
            (("OpenImage-O", "imagenet-1k:openimage-o"), ("ImageNet-OOD",
             "imagenet-1k:imagenet-ood")), numbers, strict=True):  # fmt: skip
            _row(out, "imagenet-ood", "Appendix D table", label, f"{column} ({setting})", key,
                 DETECTORS[label], setting, "", "auroc", printed, True)  # fmt: skip


def sood(seeds: Path, out: list) -> None:
    lines = _seed(seeds, "002")
    pattern = re.compile(r"^(?:\\hdashline)?(.+?) (\d\.\d\d) (\d\.\d\d) (-\d+\.\d\d) ([\d.]+) ×")
    for table, dataset, metric in (("Table 1", "sood-imagenet-c", "f1"),
                                   ("Table 2", "sood-imagenet-s", "miou")):  # fmt: skip
        start = next(i for i, ln in enumerate(lines) if ln.startswith(f"{table}: Results"))
        n = 0
        for ln in lines[start + 1 :]:
            m = pattern.match(ln)
            if m is None:
                if n:
                    break
                continue
            n += 1
            label = re.sub(r"\s*\[\d+\]", "", m.group(1)).strip()
            method = SOOD.get(label, _slug(label)) if table == "Table 1" else _slug(label)
            easy, hard, drop, size = m.group(2, 3, 4, 5)
            for column, split, met, printed, pct in (
                (f"{metric.upper()} Easy", "easy", metric, easy, False),
                (f"{metric.upper()} Hard", "hard", metric, hard, False),
                ("Drop (%)", "", f"{metric}_drop", drop, True),
                ("Size (M)", "", "params_m", size, False),
            ):
                _row(out, "sood", table, label, column, dataset, method, "", split, met,
                     printed, pct)  # fmt: skip


def zsl(seeds: Path, out: list) -> None:
    lines = _seed(seeds, "003")
    datasets = [("SUN", "sun"), ("CUB", "cub"), ("AWA1", "awa1"), ("AWA2", "awa2"),
                ("aPY", "apy")]  # fmt: skip
    heads = [i for i, ln in enumerate(lines) if ln.startswith("Method\tSUN")]
    for table, start in zip(("Table 1", "Table 2"), heads, strict=True):
        for ln in lines[start + 2 :]:
            if not re.match(r"^[A-Z]", ln) or "\t" not in ln:
                break
            label, *numbers = [c for c in ln.split("\t") if c.strip()]
            label = re.sub(r"\s*\[\d+\]", "", label).strip()
            method = _slug(label.replace("*", "_star"))
            if table == "Table 1":
                for k, (name, key) in enumerate(datasets):
                    for j, version in enumerate(("V1", "V2")):
                        _row(out, "zsl-v2", table, label, f"{name} {version}", key, method,
                             version, "", "top1", numbers[2 * k + j], True)  # fmt: skip
            else:
                for k, (name, key) in enumerate(datasets):
                    for j, split in enumerate(("ts", "tr", "h")):
                        column = f"{name} {'H' if split == 'h' else split}"
                        _row(out, "zsl-v2", table, label, column, key, method, "gzsl", split,
                             split, numbers[3 * k + j], True)  # fmt: skip


def isood(seeds: Path, out: list) -> None:
    """Tables 1-2 and 4-7 (correlation and sensitivity of AUROC, FPR@95, AUPR on ImageNet-21K
    and Syn-IS; the header lines come in table order) and Table 3 (LAID vs PCA zero-shot)."""
    lines = _seed(seeds, "004")
    heads = [i for i, ln in enumerate(lines) if ln.startswith("\tSem")]
    tables = [("Table 1", "auroc", "imagenet-21k"), ("Table 2", "auroc", "syn-is"),
              ("Table 4", "fpr95", "imagenet-21k"), ("Table 5", "fpr95", "syn-is"),
              ("Table 6", "aupr", "imagenet-21k"), ("Table 7", "aupr", "syn-is")]  # fmt: skip
    assert len(heads) == len(tables), heads
    cols = (("semantic", "correlation"), ("semantic", "sensitivity"),
            ("covariate", "correlation"), ("covariate", "sensitivity"))  # fmt: skip
    for (table, setting, dataset), head in zip(tables, heads, strict=True):
        n = 0
        for ln in lines[head + 2 :]:
            if not re.match(r"^\S.*\[\d+\]\t", ln):
                if n:
                    break
                continue
            n += 1
            label, *numbers = [c for c in ln.split("\t") if c.strip()]
            label = re.sub(r"\s*\[\d+\]", "", label).strip()
            for (axis, metric), printed in zip(cols, numbers, strict=True):
                _row(out, "isood", table, label, f"{axis.capitalize()} {metric}", dataset,
                     DETECTORS.get(label, _slug(label)), setting, axis, metric, printed,
                     metric == "sensitivity")  # fmt: skip
        assert n == 8, (table, n)
    # Table 3: zero-shot top-1 / top-5 of CLIP and of the decomposed features (LAID vs PCA)
    end = next(i for i, ln in enumerate(lines) if ln.startswith("Table 3:"))
    start = max(i for i in range(end) if lines[i].startswith("\tAcc@1"))
    sets = [("ImageNet-1K", "imagenet-1k"), ("ImageNet-C", "imagenet-c"),
            ("ImageNet-R", "imagenet-r")]  # fmt: skip
    part = ""
    for ln in lines[start + 1 : end]:
        cells = [c for c in ln.split("\t") if c.strip()]
        if len(cells) == 2 and cells[1].endswith("Feature"):
            part = cells[1].split()[0].lower()
            continue
        if len(cells) != 7:
            continue
        label, *numbers = cells
        row = label if not part else f"{label} ({part} feature)"
        for k, (name, key) in enumerate(sets):
            for j, metric in enumerate(("acc1", "acc5")):
                _row(out, "isood", "Table 3", row, f"{name} {'Acc@1' if j == 0 else 'Acc@5'}",
                     key, _slug(label), part, "", metric, numbers[2 * k + j], True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seeds", type=Path, help="folder of the seed papers' text")
    args = parser.parse_args()
    rows: list[list[str]] = []
    for build in (ssb, imagenet_ood, sood, zsl, isood):
        build(args.seeds, rows)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(COLUMNS)
        writer.writerows(rows)
    print(f"wrote {len(rows)} rows to {OUT}")


if __name__ == "__main__":
    main()
