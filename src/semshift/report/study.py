"""A study's report: means over models, ranks, per-model breakdowns and the accuracy-vs-AUROC
relation, as tables (:class:`~semshift.report.tables.Table`), a figure, Markdown and HTML.

Everything here takes the study's frames (:mod:`semshift.study.aggregate` builds them); nothing
reads a run.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from semshift.report.figures import detector_colors
from semshift.report.tables import Cell, Column, Table, metric_direction, metric_label

__all__ = [
    "mean_rank_table",
    "over_models_table",
    "per_model_table",
    "published_table",
    "relation_figure",
    "relation_table",
    "write_study_report",
]


def _set_label(row: pd.Series) -> str:
    split = row.get("split")
    name = str(row["set"]) if row.get("set") is not None else "all"
    if split is not None and isinstance(split, str) and split and split != name:
        return f"{name} ({split})"
    return name


def _columns(frame: pd.DataFrame) -> tuple[list[tuple[str, str]], list[Column]]:
    """(set label, metric) column keys in first-seen order, and their Columns."""
    keys = list(dict.fromkeys(zip(frame["set_label"], frame["metric"], strict=True)))
    cols = [Column(metric_label(m), s, metric_direction(m)) for s, m in keys]
    return keys, cols


def over_models_table(
    summary: pd.DataFrame,
    dataset: str,
    protocol: str,
    metrics: Sequence[str] | None = None,
    *,
    key: str = "",
) -> Table | None:
    """Mean over models (with its bootstrap CI) of every detector on one dataset and protocol:
    rows detectors, columns set x metric (``metrics`` only, when given); closed-set accuracy
    (no detector) in the caption."""
    rows = summary[(summary["dataset"] == dataset) & (summary["protocol"] == protocol)]
    if metrics is not None:
        rows = rows[rows["metric"].isin(list(metrics)) | rows["detector"].isna()]
    if rows.empty:
        return None
    rows = rows.assign(set_label=rows.apply(_set_label, axis=1))
    det = rows[rows["detector"].notna()]
    if det.empty:
        return None
    keys, cols = _columns(det)
    detectors = list(dict.fromkeys(det["detector"]))
    look = {(r.detector, r.set_label, r.metric): r for r in det.itertuples(index=False)}
    cells = []
    for d in detectors:
        line = []
        for s, m in keys:
            r = look.get((d, s, m))
            line.append(Cell() if r is None else Cell(r.mean, r.ci_low, r.ci_high))
        cells.append(line)
    n = int(det["n_models"].max())
    acc = rows[rows["detector"].isna() & (rows["metric"] == "accuracy")]
    extra = ""
    if not acc.empty:
        a = acc.iloc[0]
        extra = f" Closed-set accuracy {100 * a['mean']:.1f} (sd {100 * a['sd']:.1f})."
    caption = (
        f"Mean over {n} model{'s' if n != 1 else ''} [bootstrap CI over models] "
        f"x100; best bold.{extra}"
    )
    what = "" if metrics is None else f" ({', '.join(metric_label(m) for m in metrics)})"
    return Table(f"study-{dataset}-{protocol}{key}",
                 f"{dataset}: {protocol}, mean over models{what}", caption, "Detector", cols,
                 detectors, cells)  # fmt: skip


def per_model_table(
    values: pd.DataFrame, dataset: str, protocol: str, metric: str, set_name: str
) -> Table | None:
    """One metric on one set, every detector (rows) for every model (columns)."""
    rows = values[
        (values["dataset"] == dataset)
        & (values["protocol"] == protocol)
        & (values["metric"] == metric)
        & (values["set"] == set_name)
        & values["detector"].notna()
    ]
    if rows.empty:
        return None
    models = list(dict.fromkeys(rows["model"]))
    detectors = list(dict.fromkeys(rows["detector"]))
    look = {(r.detector, r.model): r.value for r in rows.itertuples(index=False)}
    cols = [Column(m, None, metric_direction(metric)) for m in models]
    cells = [[Cell(look.get((d, m), math.nan)) for m in models] for d in detectors]
    return Table(f"study-{dataset}-{protocol}-{metric}-{set_name}-models",
                 f"{dataset}: {metric_label(metric)} on {set_name} per model",
                 "x100 (mean over seeds); best per model bold.", "Detector", cols, detectors,
                 cells)  # fmt: skip


def mean_rank_table(ranks: pd.DataFrame, dataset: str, protocol: str) -> Table | None:
    """Mean rank of each detector (over models and sets), one column per metric."""
    rows = ranks[(ranks["dataset"] == dataset) & (ranks["protocol"] == protocol)]
    if rows.empty:
        return None
    metrics = list(dict.fromkeys(rows["metric"]))
    detectors = list(rows.sort_values("mean_rank", kind="stable")["detector"].drop_duplicates())
    look = {(r.detector, r.metric): r.mean_rank for r in rows.itertuples(index=False)}
    cols = [Column(metric_label(m), "mean rank", "min", "score") for m in metrics]
    cells = [[Cell(look.get((d, m), math.nan)) for m in metrics] for d in detectors]
    return Table(f"study-{dataset}-{protocol}-ranks", f"{dataset}: {protocol}, mean rank",
                 "Rank 1 = best detector of a model on a set; mean over models and sets; "
                 "lowest bold.", "Detector", cols, detectors, cells)  # fmt: skip


def relation_table(relation: pd.DataFrame, dataset: str, metric: str) -> Table | None:
    """Pearson and Spearman of closed-set accuracy against ``metric`` over models."""
    rows = relation[(relation["dataset"] == dataset) & (relation["metric"] == metric)]
    if rows.empty:
        return None
    rows = rows.assign(set_label=rows.apply(_set_label, axis=1))
    sets = list(dict.fromkeys(rows["set_label"]))
    detectors = list(dict.fromkeys(rows["detector"]))
    look = {(r.detector, r.set_label): r for r in rows.itertuples(index=False)}
    cols = [Column(name, s, None, "r") for s in sets for name in ("Pearson", "Spearman")]
    cells = []
    for d in detectors:
        line = []
        for s in sets:
            r = look.get((d, s))
            for name in ("pearson", "spearman"):
                if r is None:
                    line.append(Cell())
                else:
                    line.append(Cell(getattr(r, name), getattr(r, f"{name}_low"),
                                     getattr(r, f"{name}_high")))  # fmt: skip
        cells.append(line)
    n = int(rows["n_models"].max())
    few = " With fewer than 8 models the bootstrap CI says little." if n < 8 else ""
    return Table(f"study-{dataset}-relation-{metric}",
                 f"{dataset}: closed-set accuracy vs {metric_label(metric)} across models",
                 f"Correlation over {n} models [bootstrap CI over models]. SSB's claim: a "
                 f"better closed-set classifier is a better open-set one (positive).{few}",
                 "Detector", cols, detectors, cells)  # fmt: skip


def relation_figure(
    points: pd.DataFrame, dataset: str, metric: str = "auroc", *, highlight: int = 6
) -> Figure | None:
    """Closed-set accuracy (x) against ``metric`` (y), one point per model, one panel per set;
    the ``highlight`` detectors with the highest mean are coloured and labelled, the rest grey."""
    rows = points[(points["dataset"] == dataset) & (points["metric"] == metric)]
    if rows.empty:
        return None
    rows = rows.assign(set_label=rows.apply(_set_label, axis=1))
    sets = list(dict.fromkeys(rows["set_label"]))
    best = rows.groupby("detector", sort=False)["value"].mean().sort_values(ascending=False)
    shown = list(best.index[:highlight])
    colours = detector_colors(shown)
    ncol = min(3, len(sets))
    nrow = math.ceil(len(sets) / ncol)
    height = 3.4 * nrow + 1.2
    fig = Figure(figsize=(4.2 * ncol, height))  # fixed margins: no layout engine pass
    fig.subplots_adjust(left=0.08 if ncol > 1 else 0.16, right=0.98, wspace=0.3, hspace=0.45,
                        top=1 - 0.55 / height, bottom=1.05 / height)  # fmt: skip
    axes = np.atleast_1d(fig.subplots(nrow, ncol, squeeze=False)).ravel()
    for ax, s in zip(axes, sets, strict=False):
        sub = rows[rows["set_label"] == s]
        grey = sub[~sub["detector"].isin(shown)]
        if not grey.empty:  # markers only, all alike: one artist for every other detector
            ax.plot(grey["accuracy"] * 100, grey["value"] * 100, marker=".", ms=3, ls="",
                    color="#b0b0b0", zorder=1)  # fmt: skip
        for d, g in sub[sub["detector"].isin(shown)].groupby("detector", sort=False):
            g = g.sort_values("accuracy")
            style, colour = colours[d]
            ax.plot(g["accuracy"] * 100, g["value"] * 100, marker="o", ms=4, ls=style,
                    lw=1, color=colour, label=str(d), zorder=3)  # fmt: skip
        ax.set_title(s, fontsize=9)
        ax.set_xlabel("closed-set accuracy (%)", fontsize=8)
        ax.set_ylabel(f"{metric_label(metric)} (%)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in axes[len(sets) :]:
        ax.set_visible(False)
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(6, len(handles)),
                   fontsize=7, frameon=False)  # fmt: skip
    fig.suptitle(f"{dataset}: accuracy vs {metric_label(metric)}, one point per model "
                 f"(top {len(shown)} detectors coloured, others grey)", fontsize=10)  # fmt: skip
    return fig


def published_table(compared: pd.DataFrame, dataset: str) -> Table | None:
    """The published numbers of one study dataset beside ours: published, ours [CI over
    models], the difference and whether the published value is inside our CI."""
    rows = compared[compared["dataset"] == dataset]
    if rows.empty:
        return None
    labels = [f"{r.table} {r.row}: {r.column}" for r in rows.itertuples(index=False)]
    cols = [
        Column("Published", None, None),
        Column("Ours", None, None),
        Column("Ours - published", None, None),
        Column("Inside our CI", None, None, "flag"),
    ]
    cells = []
    for r in rows.itertuples(index=False):
        flag = math.nan if r.inside_ci is None or r.inside_ci != r.inside_ci else float(r.inside_ci)
        cells.append([Cell(r.published), Cell(r.ours, r.ci_low, r.ci_high), Cell(r.difference),
                      Cell(flag)])  # fmt: skip
    paper = str(rows["paper"].iloc[0])
    n = int(rows["n_models"].max())
    return Table(f"study-{dataset}-published", f"{dataset}: {paper} as published and ours",
                 f"x100. Ours: mean over {n} model(s) [bootstrap CI over models]; n/a: the "
                 "study has no such number.", "Published cell", cols, labels, cells)  # fmt: skip


def write_study_report(
    out: str | Path,
    *,
    title: str,
    summary: pd.DataFrame,
    values: pd.DataFrame,
    mean_ranks: pd.DataFrame,
    relation: pd.DataFrame,
    points: pd.DataFrame,
    failed: Sequence[str] = (),
    setup: str = "",
    published: pd.DataFrame | None = None,
    published_numbers: pd.DataFrame | None = None,
    settings: Mapping[str, tuple[str, str]] | None = None,
) -> dict[str, Path]:
    """``report.md``, ``report.html`` and ``figures/*.png`` of a study under ``out``.

    First the seed papers' headline tables the study has numbers for
    (:mod:`semshift.report.study_tables`; ``published_numbers`` and ``settings``, study dataset
    -> (paper, published dataset), add SSB's published rows); then per dataset and protocol:
    the mean over models, the mean ranks, per-model tables of each set's AUROC and the
    relation to accuracy; then the published numbers beside ours and the failed cells.
    """
    from semshift.report import study_tables as headline

    out = Path(out)
    figures = out / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    md: list[str] = [f"# {title}", ""]
    body: list[str] = [f"<h1>{html.escape(title)}</h1>"]
    if setup:
        md += [setup, ""]
        body.append(f"<p>{html.escape(setup)}</p>")
    files: dict[str, Path] = {}

    def add(table: Table | None) -> None:
        if table is None:
            return
        md.extend([table.to_markdown(), ""])
        body.append(table.to_html())

    heads = [headline.ssb_table1(summary, published=published_numbers, settings=settings)]
    heads += [
        headline.zsl_table1(summary, value="mean", published=published_numbers),
        headline.zsl_table2(summary, value="mean", published=published_numbers),
    ]
    for dataset in dict.fromkeys(summary["dataset"]):
        heads += [
            headline.imagenet_ood_table1(summary, dataset),
            headline.sood_table1(values, dataset),
            headline.isood_table1(summary, dataset),
        ]
    if any(t is not None for t in heads):
        md += ["## The papers' tables", ""]
        body.append("<h2>The papers' tables</h2>")
        for table in heads:
            add(table)
    for dataset in dict.fromkeys(summary["dataset"]):
        md += [f"## {dataset}", ""]
        body.append(f"<h2>{html.escape(str(dataset))}</h2>")
        for protocol in dict.fromkeys(summary.loc[summary["dataset"] == dataset, "protocol"]):
            here = summary[(summary["dataset"] == dataset) & (summary["protocol"] == protocol)]
            metrics = list(dict.fromkeys(here.loc[here["detector"].notna(), "metric"]))
            head = [m for m in ("auroc", "oscr") if m in metrics]
            rest = [m for m in metrics if m not in head]
            add(over_models_table(summary, dataset, protocol, head or None))
            if head and rest:
                add(over_models_table(summary, dataset, protocol, rest, key="-more"))
            add(mean_rank_table(mean_ranks, dataset, protocol))
            sub = values[(values["dataset"] == dataset) & (values["protocol"] == protocol)]
            if sub["model"].nunique() > 1:
                for set_name in dict.fromkeys(sub.loc[sub["metric"] == "auroc", "set"]):
                    add(per_model_table(values, dataset, protocol, "auroc", set_name))
        for metric in ("auroc", "oscr"):
            add(relation_table(relation, dataset, metric))
            fig = relation_figure(points, dataset, metric)
            if fig is not None:
                name = f"relation_{dataset}_{metric}.png"
                fig.savefig(figures / name, dpi=110, metadata={"Software": None})
                files[name] = figures / name
                md += [f"![accuracy vs {metric}](figures/{name})", ""]
                body.append(f'<img src="figures/{name}" alt="accuracy vs {metric}" '
                            'style="max-width:100%">')  # fmt: skip
    if published is not None and not published.empty:
        md += ["## Published numbers beside ours", ""]
        body.append("<h2>Published numbers beside ours</h2>")
        for dataset in dict.fromkeys(published["dataset"]):
            add(published_table(published, dataset))
    if failed:
        md += ["## Failed cells", "", *[f"- {f}" for f in failed], ""]
        items = "".join(f"<li>{html.escape(f)}</li>" for f in failed)
        body += ["<h2>Failed cells</h2>", f"<ul>{items}</ul>"]
    files["md"] = out / "report.md"
    files["md"].write_text("\n".join(md).rstrip() + "\n", encoding="utf-8")
    files["html"] = out / "report.html"
    files["html"].write_text(
        '<!doctype html>\n<html><head><meta charset="utf-8"><title>'
        + html.escape(title)
        + "</title><style>body{font-family:sans-serif;max-width:1200px;margin:auto}"
        "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;"
        "padding:2px 6px}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n",
        encoding="utf-8",
    )
    return files
