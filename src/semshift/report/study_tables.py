"""The seed papers' headline tables, in their own layouts, from a study's numbers.

Each builder takes the study's frames (``summary``: means over models with bootstrap CIs;
``values``: each model's value) and returns a :class:`~semshift.report.tables.Table`, or None
when the study has nothing for it:

- :func:`ssb_table1`: SSB Table 1, datasets side by side (Acc., AUROC Easy / Hard, OSCR Easy /
  Hard per dataset, one row per detector), with the published rows beside when given;
- :func:`imagenet_ood_table1`: ImageNet-OOD Table 1, each (reference, OOD) pair a column, new-class
  and failure detection side by side (mean AUROC over models);
- :func:`sood_table1`: SOOD-ImageNet Table 1, one row per model (backbone): macro-F1 on Easy and
  Hard and the relative drop Easy -> Hard;
- :func:`isood_table1`: IS-OOD Table 1, the correlation and sensitivity of each detector's AUROC
  to the semantic and the covariate level (mean over models);
- :func:`ssb_seed_table`: SSB Table 1 for open-set training methods each trained with several
  seeds (seed means with image-bootstrap CIs and DeLong p-values against a reference method;
  the glyph demo's table, :mod:`semshift.demo.table1`);
- :func:`zsl_table1` and :func:`zsl_table2`: the proposed-splits paper's Tables 1 (ZSL top-1,
  V1 next to V2 per dataset, differences over 0.5 points marked) and 2 (ts / tr / H on V2),
  each method's published row beside ours.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from semshift.report.tables import Cell, Column, Table

__all__ = [
    "ZSL_DATASETS",
    "ZSL_HIGHLIGHT",
    "imagenet_ood_table1",
    "isood_table1",
    "sood_table1",
    "ssb_seed_table",
    "ssb_table1",
    "zsl_dataset_key",
    "zsl_table1",
    "zsl_table2",
]

_SPLITS = ("easy", "hard")


def _cell(row: pd.Series | None) -> Cell:
    if row is None:
        return Cell()
    return Cell(float(row["mean"]), float(row["ci_low"]), float(row["ci_high"]))


def _lookup(frame: pd.DataFrame, keys: Sequence[str]) -> dict[tuple, pd.Series]:
    return {tuple(r[k] for k in keys): r for _, r in frame.iterrows()}


def ssb_table1(
    summary: pd.DataFrame,
    datasets: Sequence[str] | None = None,
    *,
    published: pd.DataFrame | None = None,
    settings: Mapping[str, tuple[str, str]] | None = None,
) -> Table | None:
    """SSB Table 1 over the study's OSR datasets with Easy and Hard splits.

    ``published`` (``published_numbers("ssb", "Table 1")``) and ``settings`` (study dataset ->
    (paper, published dataset)) add the paper's rows (``MLS (published)``, ...) under ours, in
    the datasets that reproduce a published one.
    """
    osr = summary[summary["protocol"] == "osr"]
    if datasets is None:
        has = osr[osr["split"].isin(_SPLITS)]
        datasets = list(dict.fromkeys(has["dataset"]))
    if not datasets:
        return None
    det = osr[osr["detector"].notna() & osr["split"].isin(_SPLITS)]
    detectors = list(dict.fromkeys(det.loc[det["dataset"].isin(datasets), "detector"]))
    if not detectors:
        return None
    acc = _lookup(osr[osr["detector"].isna() & (osr["metric"] == "accuracy")], ["dataset"])
    look = _lookup(det, ["dataset", "detector", "metric", "split"])
    cols = []
    for d in datasets:
        cols.append(Column("Acc.", d))
        cols += [Column(f"{m} {s.capitalize()}", d) for m in ("AUROC", "OSCR") for s in _SPLITS]
    rows, cells = [], []
    for det_name in detectors:
        line = []
        for d in datasets:
            line.append(_cell(acc.get((d,))))
            for m in ("auroc", "oscr"):
                line += [_cell(look.get((d, det_name, m, s))) for s in _SPLITS]
        rows.append(det_name)
        cells.append(line)
    if published is not None and settings:
        pub = published[published["paper"] == "ssb"]
        for method in dict.fromkeys(pub["method"]):
            line, any_value = [], False
            for d in datasets:
                setting = settings.get(d)
                mine = pub[(pub["method"] == method) & (pub["dataset"] == (setting or ("", ""))[1])]
                get = {(r.metric, r.split): r.value for r in mine.itertuples(index=False)}
                vals = [get.get(("accuracy", ""), math.nan)]
                vals += [get.get((m, s), math.nan) for m in ("auroc", "oscr") for s in _SPLITS]
                any_value |= bool(np.isfinite(vals).any())
                line += [Cell(v) for v in vals]
            if any_value:
                label = str(pub.loc[pub["method"] == method, "row"].iloc[0])
                rows.append(f"{label} (published)")
                cells.append(line)
    return Table("study-ssb-table1", "SSB Table 1: open-set recognition, Easy / Hard",
                 "x100; ours: mean over models [bootstrap CI over models]; Acc. is the models' "
                 "closed-set accuracy; published rows as printed by Vaze et al. (Medium merged "
                 "into Hard).", "Detector", cols, rows, cells)  # fmt: skip


def imagenet_ood_table1(summary: pd.DataFrame, dataset: str) -> Table | None:
    """ImageNet-OOD Table 1: mean AUROC over models of each (reference, OOD) pair, new-class
    detection then failure detection."""
    pair = summary["set"].astype(str).str.contains(" vs ", regex=False)
    mine = (summary["dataset"] == dataset) & summary["protocol"].isin(["newclass", "failure"])
    rows = summary[mine & (summary["metric"] == "auroc") & pair]
    if rows.empty:
        return None
    pairs = list(dict.fromkeys(rows["set"]))
    detectors = list(dict.fromkeys(rows["detector"].dropna()))
    look = _lookup(rows, ["protocol", "detector", "set"])
    cols = [Column(p, g) for g in ("New-class detection", "Failure detection") for p in pairs]
    cells = [[_cell(look.get((proto, d, p))) for proto in ("newclass", "failure") for p in pairs]
             for d in detectors]  # fmt: skip
    return Table(f"study-{dataset}-imagenet-ood-table1",
                 f"{dataset}: ImageNet-OOD Table 1, each pair on its own",
                 "AUROC x100, mean over models [bootstrap CI over models]; new-class: known "
                 "classes (covariate-shifted too) are ID; failure: correctly classified images "
                 "are ID.", "Detector", cols, detectors, cells)  # fmt: skip


def sood_table1(values: pd.DataFrame, dataset: str) -> Table | None:
    """SOOD-ImageNet Table 1: per model, macro-F1 on Easy and Hard and the drop Easy -> Hard
    (relative, in %), from the ``generalisation`` protocol's sets with splits easy and hard."""
    rows = values[(values["dataset"] == dataset) & (values["protocol"] == "generalisation")
                  & (values["metric"] == "macro_f1") & values["split"].isin(_SPLITS)]  # fmt: skip
    if rows.empty:
        return None
    models = list(dict.fromkeys(rows["model"]))
    f1 = {(r.model, r.split): r.value for r in rows.itertuples(index=False)}
    cells = []
    for m in models:
        easy, hard = f1.get((m, "easy"), math.nan), f1.get((m, "hard"), math.nan)
        drop = (hard - easy) / easy if easy else math.nan
        cells.append([Cell(easy), Cell(hard), Cell(drop)])
    cols = [Column("F1 Easy", None, "max", "r"), Column("F1 Hard", None, "max", "r"),
            Column("Drop (%)", None, "max")]  # fmt: skip
    return Table(f"study-{dataset}-sood-table1", f"{dataset}: SOOD-ImageNet Table 1",
                 "Macro-F1 (two decimals, as the paper prints it) on the Easy and Hard "
                 "splits and the relative drop Easy -> Hard in %.", "Model", cols, models,
                 cells)  # fmt: skip


def isood_table1(summary: pd.DataFrame, dataset: str) -> Table | None:
    """IS-OOD Table 1: correlation and sensitivity of AUROC to each shift axis per detector."""
    wanted = summary["metric"].isin(["auroc.correlation", "auroc.sensitivity"])
    rows = summary[(summary["dataset"] == dataset) & (summary["protocol"] == "graded") & wanted]
    if rows.empty:
        return None
    axes = [a for a in ("semantic", "covariate") if a in set(rows["split"])]
    detectors = list(dict.fromkeys(rows["detector"].dropna()))
    look = _lookup(rows, ["detector", "split", "metric"])
    cols = [Column(name, axis, None, "r") for axis in axes
            for name in ("correlation", "sensitivity")]  # fmt: skip
    cells = [[_cell(look.get((d, a, f"auroc.{n}"))) for a in axes
              for n in ("correlation", "sensitivity")] for d in detectors]  # fmt: skip
    return Table(f"study-{dataset}-isood-table1", f"{dataset}: IS-OOD Table 1",
                 "Pearson correlation and sensitivity (least-squares slope) of AUROC level "
                 "means against the level, mean over models [bootstrap CI over models].",
                 "Detector", cols, detectors, cells)  # fmt: skip


def ssb_seed_table(
    results: pd.DataFrame,
    *,
    reference: str,
    key: str = "ssb_seed_table",
    title: str = "SSB Table 1 over training seeds",
    ci: bool = True,
) -> Table:
    """SSB Table 1's layout for open-set training methods, each trained with several seeds.

    ``results`` is the tidy table of :func:`semshift.demo.table1.evaluate_table1` (columns
    ``kind`` (``mean`` / ``seed``), ``method``, ``label``, ``seed``, ``split`` (``id`` and the
    open-set splits), ``metric`` (``accuracy``, ``auroc``, ``oscr``), ``value``, ``ci_low``,
    ``ci_high``, ``delong_p``). Rows: methods (their labels); columns: Acc, AUROC per split,
    OSCR per split (x100, mean over seeds with the bootstrap CI), then the DeLong p-value of
    each AUROC against ``reference``'s (a method name; its own p is 1).
    """
    mean = results[results["kind"] == "mean"]
    methods = list(dict.fromkeys(mean["method"]))
    splits = [s for s in dict.fromkeys(mean["split"]) if s != "id"]
    cells_by: dict[tuple[str, str, str], Cell] = {}
    pvals: dict[tuple[str, str], Cell] = {}
    for r in mean.itertuples(index=False):
        cells_by[(str(r.method), str(r.split), str(r.metric))] = Cell(
            float(r.value), float(r.ci_low), float(r.ci_high)
        )
        if r.metric == "auroc":
            pvals[(str(r.method), str(r.split))] = Cell(float(r.delong_p))
    columns = [Column("Acc")]
    columns += [Column(s.capitalize(), group="AUROC") for s in splits]
    columns += [Column(s.capitalize(), group="OSCR") for s in splits]
    columns += [Column(s.capitalize(), group="DeLong p", direction=None, kind="score")
                for s in splits]  # fmt: skip
    empty = Cell()
    cells = []
    for m in methods:
        row = [cells_by.get((m, "id", "accuracy"), empty)]
        row += [cells_by.get((m, s, "auroc"), empty) for s in splits]
        row += [cells_by.get((m, s, "oscr"), empty) for s in splits]
        row += [pvals.get((m, s), empty) for s in splits]
        cells.append(row)
    labels = [str(mean[mean["method"] == m]["label"].iloc[0]) for m in methods]
    seeds = results.loc[results["kind"] == "seed", "seed"].dropna().unique()
    ref_label = labels[methods.index(reference)] if reference in methods else reference
    caption = (
        f"Closed-set accuracy, AUROC (known vs unknown) and OSCR (exact) x100, mean over "
        f"{len(seeds)} training seed(s), with percentile bootstrap 95 % CIs over the test "
        f"images (ID and open-set images resampled separately; every seed's model scored on "
        f"the same resamples, the same resamples for every method). DeLong p: two-sided test "
        f"of the method's seed-mean AUROC against {ref_label}'s on the same images (1 for "
        f"{ref_label} itself). Best per column in bold."
    )
    return Table(
        key=key,
        title=title,
        caption=caption,
        row_header="Method",
        columns=columns,
        rows=labels,
        cells=cells,
        ci=ci,
    )


#: The proposed-splits paper's datasets, in its tables' column order.
ZSL_DATASETS = ("sun", "cub", "awa1", "awa2", "apy")
#: V1 and V2 values further apart than this (a fraction: 0.5 points) are marked, as the paper
#: prints them in red.
ZSL_HIGHLIGHT = 0.005
_ZSL_MARK = "†"


def zsl_dataset_key(name: str) -> str:
    """A dataset's name as the published numbers spell it: ``"AWA2"`` -> ``"awa2"``,
    ``"aPY"`` -> ``"apy"`` (lower case, letters and digits only)."""
    return "".join(ch for ch in str(name).lower() if ch.isalnum())


def _zsl_datasets(rows: pd.DataFrame) -> list[str]:
    names = list(dict.fromkeys(map(str, rows["set"])))
    paper = {k: i for i, k in enumerate(ZSL_DATASETS)}
    return sorted(names, key=lambda n: (paper.get(zsl_dataset_key(n), len(paper)), names.index(n)))


def _zsl_published(published: pd.DataFrame | None, table: str) -> pd.DataFrame | None:
    if published is None:
        return None
    pub = published[(published["paper"] == "zsl-v2") & (published["table"] == table)]
    return pub if len(pub) else None


def _zsl_rows(
    ours: list[tuple[str, list[Cell]]],
    published: Mapping[str, tuple[str, list[Cell]]],
) -> tuple[list[str], list[list[Cell]]]:
    """Our rows, each followed by the paper's row of the same method (when it has one)."""
    labels: list[str] = []
    cells: list[list[Cell]] = []
    for method, line in ours:
        labels.append(method)
        cells.append(line)
        if method in published:
            title, pub_line = published[method]
            labels.append(f"{title} (published)")
            cells.append(pub_line)
    return labels, cells


def zsl_table1(
    rows: pd.DataFrame, *, value: str = "value", published: pd.DataFrame | None = None
) -> Table | None:
    """The proposed-splits paper's Table 1: ZSL top-1 per method, each dataset's V1 next to V2.

    ``rows`` are ``gzsl`` result rows (``set`` = dataset, ``split`` = ``v1`` / ``v2``,
    ``detector`` = method, ``metric`` ``zsl_top1``), the value in column ``value`` (``value``
    for a run, ``mean`` for a study's summary) with ``ci_low`` / ``ci_high``. A cell whose V1
    and V2 values differ by more than 0.5 points is marked †, as the paper prints them in red.
    With ``published`` (the shipped numbers, :func:`semshift.study.published_numbers`), the
    paper's row of each method follows ours, on the datasets whose names match the paper's
    (:func:`zsl_dataset_key`), marked the same way. None when there are no ZSL rows.
    """
    zsl = rows[(rows["protocol"] == "gzsl") & (rows["metric"] == "zsl_top1")]
    zsl = zsl[zsl["detector"].notna()]
    if zsl.empty:
        return None
    datasets = _zsl_datasets(zsl)
    versions = sorted(map(str, dict.fromkeys(zsl["split"].dropna())))
    look = {(str(r.detector), str(r.set), str(r.split)): r for r in zsl.itertuples(index=False)}

    def pair(vals: list[float], make: Any) -> list[Cell]:
        mark = ""
        if len(vals) == 2 and all(math.isfinite(v) for v in vals):
            mark = _ZSL_MARK if abs(vals[0] - vals[1]) > ZSL_HIGHLIGHT + 1e-12 else ""
        return [make(i, mark) for i in range(len(vals))]

    ours: list[tuple[str, list[Cell]]] = []
    for method in dict.fromkeys(map(str, zsl["detector"])):
        line: list[Cell] = []
        for d in datasets:
            got = [look.get((method, d, v)) for v in versions]
            vals = [float(getattr(g, value)) if g is not None else math.nan for g in got]

            def make(i: int, mark: str, got: list[Any] = got, vals: list[float] = vals) -> Cell:
                g = got[i]
                if g is None:
                    return Cell()
                return Cell(vals[i], float(g.ci_low), float(g.ci_high), mark=mark)

            line += pair(vals, make)
        ours.append((method, line))
    pub_rows: dict[str, tuple[str, list[Cell]]] = {}
    pub = _zsl_published(published, "Table 1")
    if pub is not None:
        get = {(r.method, r.dataset, r.setting.lower()): r for r in pub.itertuples(index=False)}
        for method, _ in ours:
            line, any_value = [], False
            for d in datasets:
                got = [get.get((method, zsl_dataset_key(d), v)) for v in versions]
                vals = [float(g.value) if g is not None else math.nan for g in got]
                any_value |= any(g is not None for g in got)
                line += pair(vals, lambda i, mark, vals=vals: Cell(vals[i], mark=mark))
            if any_value:
                title = str(pub.loc[pub["method"] == method, "row"].iloc[0])
                pub_rows[method] = (title, line)
    labels, cells = _zsl_rows(ours, pub_rows)
    cols = [Column(v.upper(), d) for d in datasets for v in versions]
    return Table(
        "zsl-table1", "Zero-shot learning: Table 1 of the proposed splits (V1 vs V2)",
        "ZSL top-1 x100: per-class top-1 accuracy on unseen test images over the unseen classes"
        "; V1 chooses hyperparameters on train / val sets that hold test_seen images, V2 on sets "
        "without them. † V1 and V2 differ by more than 0.5 points (red in the paper)."
        + (" Published rows as printed by Xian et al. (Table 1)." if pub_rows else ""),
        "Method", cols, labels, cells,
    )  # fmt: skip


def zsl_table2(
    rows: pd.DataFrame, *, value: str = "value", published: pd.DataFrame | None = None
) -> Table | None:
    """The proposed-splits paper's Table 2: GZSL ts / tr / H per method and dataset on V2.

    ``rows`` and ``value`` as for :func:`zsl_table1`; the V2 rows are used (the only version
    when there is one). With ``published``, the paper's row of each method follows ours
    (CMT*'s row appears when a ``cmt_star`` method ran). None when there are no GZSL rows.
    """
    g = rows[(rows["protocol"] == "gzsl") & rows["metric"].isin(["ts", "tr", "h"])]
    g = g[g["detector"].notna()]
    versions = sorted(map(str, dict.fromkeys(g["split"].dropna())))
    if versions:
        g = g[g["split"].astype(str) == ("v2" if "v2" in versions else versions[-1])]
    if g.empty:
        return None
    datasets = _zsl_datasets(g)
    metrics = ("ts", "tr", "h")
    look = {(str(r.detector), str(r.set), str(r.metric)): r for r in g.itertuples(index=False)}
    ours: list[tuple[str, list[Cell]]] = []
    for method in dict.fromkeys(map(str, g["detector"])):
        line = []
        for d in datasets:
            for m in metrics:
                r = look.get((method, d, m))
                line.append(
                    Cell(float(getattr(r, value)), float(r.ci_low), float(r.ci_high))
                    if r is not None
                    else Cell()
                )
        ours.append((method, line))
    pub_rows: dict[str, tuple[str, list[Cell]]] = {}
    pub = _zsl_published(published, "Table 2")
    if pub is not None:
        get = {(r.method, r.dataset, r.metric): r.value for r in pub.itertuples(index=False)}
        for method, _ in ours:
            vals = [get.get((method, zsl_dataset_key(d), m), math.nan)
                    for d in datasets for m in metrics]  # fmt: skip
            if any(math.isfinite(v) for v in vals):
                title = str(pub.loc[pub["method"] == method, "row"].iloc[0])
                pub_rows[method] = (title, [Cell(v) for v in vals])
    labels, cells = _zsl_rows(ours, pub_rows)
    cols = [Column({"h": "H"}.get(m, m), d) for d in datasets for m in metrics]
    return Table(
        "zsl-table2", "Generalised zero-shot learning: Table 2 of the proposed splits (V2)",
        "Per-class top-1 x100 on Proposed Split V2: ts = unseen-class test images over all "
        "classes, tr = seen-class test images over all classes, H = their harmonic mean."
        + (" Published rows as printed by Xian et al. (Table 2)." if pub_rows else ""),
        "Method", cols, labels, cells,
    )  # fmt: skip
