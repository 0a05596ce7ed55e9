"""The report's protocol sections: what each registered protocol declares, rendered.

A protocol declares its sections beside its function
(:class:`semshift.protocols.registry.ReportSection`, in ``register_protocol(sections=...)``).
:func:`protocol_sections` walks the registry in report order and renders each declared section
whose rows are present: a section's ``table`` (a DataFrame over the protocol's rows) becomes a
:class:`~semshift.report.tables.Table`, its ``figures`` saved PNGs; a section with a
``builder`` (the protocols shipped with semshift, whose sections read the run's score files
and images) is built by that report-side function from a :class:`SectionContext`. The shipped
builders are the functions of this module named in the protocols' declarations.
"""

from __future__ import annotations

import importlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from semshift.errors import InputError
from semshift.protocols.registry import PROTOCOLS, ReportSection
from semshift.report import figures as F
from semshift.report import tables as T
from semshift.report._load import RunData
from semshift.report.blocks import Block, FigureRef, Paragraph, Section
from semshift.report.gallery import Gallery, GallerySettings, operating_galleries
from semshift.report.tables.declared import section_table

__all__ = ["SectionContext", "protocol_sections", "render_section", "section_table"]


class Figures:
    """Save figures under ``figures/`` with unique names, closing each after saving."""

    def __init__(self, folder: Path, dpi: int) -> None:
        self.folder = folder
        self.dpi = dpi
        self.paths: list[Path] = []
        self.seconds: dict[str, float] = {}

    def save(self, name: str, fig: Figure | None, alt: str, caption: str) -> FigureRef | None:
        if fig is None:
            return None
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{name}.png"
        fig.savefig(path, dpi=self.dpi, metadata={"Software": None})
        fig.clear()
        self.paths.append(path)
        return FigureRef(path, alt, caption)

    def timed(self, name: str, make: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        out = make()
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0
        return out


@dataclass
class SectionContext:
    """What a report-side section builder reads.

    Attributes
    ----------
    run : RunData
        The run's output folder, read.
    present : list of str
        The ``protocol`` values of the results, in report order.
    figures : Figures
        Saves (and times) the section's figures.
    fpr_note : str
        The sentence stating the run's FPR@95 convention.
    settings : GallerySettings
        The operating-point gallery settings of the run.
    galleries : list of Gallery
        Galleries shown, for the report's size bound (builders append theirs).
    """

    run: RunData
    present: list[str]
    figures: Figures
    fpr_note: str
    settings: GallerySettings
    galleries: list[Gallery] = field(default_factory=list)

    @property
    def results(self) -> pd.DataFrame:
        """The tidy results table."""
        return self.run.results


def _add(blocks: list[Block], block: Block | None) -> None:
    if block is not None:
        blocks.append(block)


# --------------------------------------------------------------------------- generic sections
def render_section(section: ReportSection, rows: pd.DataFrame, figs: Figures) -> list[Block]:
    """The blocks of a declared section without a builder: its table, then its figures."""
    blocks: list[Block] = []
    _add(blocks, figs.timed("tables", lambda: section_table(section, rows)))
    if section.figures is not None:
        made = figs.timed(section.key, lambda: section.figures(rows))  # type: ignore[misc]
        for name, fig, alt, caption in made:
            _add(blocks, figs.save(name, fig, alt, caption))
    return blocks


def _builder(section: ReportSection) -> Callable[[SectionContext], list[Block] | None]:
    assert section.builder is not None
    module, _, name = section.builder.rpartition(":")
    module = module or __name__
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise InputError(
            f"report section {section.key!r}: builder {section.builder!r} not found ({exc})"
        ) from None
    return fn


def protocol_sections(ctx: SectionContext) -> list[Section]:
    """Every section the registered protocols declare whose rows are present, in report order
    (:attr:`~semshift.protocols.registry.ProtocolSpec.report_order`); each key once."""
    res = ctx.results
    present = set(ctx.present)
    out: list[Section] = []
    done: set[str] = set()
    for spec in sorted(PROTOCOLS.values(), key=lambda s: (s.report_order, s.name)):
        for section in spec.sections:
            show_for = section.show_for or spec.rows
            if section.key in done or not present.intersection(show_for):
                continue
            done.add(section.key)
            if section.builder is not None:
                blocks = _builder(section)(ctx)
            else:
                rows = res[res["protocol"].isin(show_for)].reset_index(drop=True)
                blocks = render_section(section, rows, ctx.figures)
            if blocks is not None:
                out.append(Section(section.key, section.title, blocks))
    return out


# --------------------------------------------------------------------------- shipped builders
def sanity_delta(provenance: dict[str, Any]) -> float:
    """``config.protocols.sanity.delta`` from results.json, else 0.05."""
    try:
        delta = provenance["config"]["protocols"]["sanity"]["delta"]
        value = float(delta)
    except (KeyError, TypeError, ValueError):
        return 0.05
    return value if math.isfinite(value) else 0.05


def osr_section(ctx: SectionContext) -> list[Block]:
    """Open-set recognition: SSB's table, the other metrics, level and OSCR curves."""
    res, figs, run = ctx.results, ctx.figures, ctx.run
    blocks: list[Block] = [figs.timed("tables", lambda: T.osr_table(res))]
    _add(blocks, figs.timed("tables", lambda: T.osr_metrics_table(res, fpr_note=ctx.fpr_note)))
    _add(
        blocks,
        figs.save(
            "level_curves",
            figs.timed("level_curves", lambda: F.level_curves_figure(res)),
            "AUROC vs semantic level per detector",
            "AUROC x100 vs semantic shift, smaller shift on the left (OSR splits "
            "hard < medium < easy: SSB's Hard bin is the smallest shift"
            + ("; graded grid level means" if "graded" in ctx.present else "")
            + "), one line per detector. With more than 8 detectors MSP and the two best and "
            "two worst by mean AUROC are coloured (worst dashed), the others grey.",
        ),
    )
    _add(
        blocks,
        figs.save(
            "oscr_curves",
            figs.timed("oscr", lambda: F.oscr_figure(run)),
            "OSCR curves per detector and split",
            "Correct classification rate vs false positive rate, computed from scores/: "
            "known correct = label == pred on id_test; one panel per split, smaller semantic "
            "shift first (hard < medium < easy). Each curve ends at the closed-set accuracy. "
            "With more than 8 detectors MSP and the two best and two worst by mean area under "
            "the curve are coloured (worst dashed), the others grey.",
        ),
    )
    return blocks


def newclass_failure_section(ctx: SectionContext) -> list[Block]:
    """New-class vs failure detection (ImageNet-OOD Table 1) and the correct / incorrect views."""
    from semshift.report.sections_shift import failure_view_blocks

    return [T.newclass_failure_table(ctx.results), *failure_view_blocks(ctx)]


def decomposition_section(ctx: SectionContext) -> list[Block]:
    """The AUROC decomposition (ImageNet-OOD Table 4) and its bars."""
    res, figs = ctx.results, ctx.figures
    blocks: list[Block] = [T.decomposition_table(res)]
    _add(
        blocks,
        figs.save(
            "decomposition",
            figs.timed("decomposition", lambda: F.decomposition_figure(res)),
            "AUROC decomposition bars per detector",
            "AUROC of all ID (circle), correctly classified ID (up triangle) and misclassified "
            "ID (down triangle) test samples against the pooled OOD; one row per detector, "
            "highest all-ID AUROC first.",
        ),
    )
    return blocks


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)


def _graded_metric_blocks(ctx: SectionContext, metric: str) -> list[Block]:
    res, figs = ctx.results, ctx.figures
    blocks: list[Block] = []
    for axis in ("semantic", "covariate"):
        try:
            blocks.append(T.graded_level_table(res, metric=metric, axis=axis))
        except ValueError:
            pass  # no level means for this metric / axis
    try:
        blocks.append(T.graded_trend_table(res, metric=metric))
    except ValueError:
        pass
    from semshift.report.sections_shift import axis_curve_blocks

    blocks += axis_curve_blocks(ctx, metric)
    t0 = time.perf_counter()
    pages = F.grid_heatmap_figures(res, metric)
    figs.seconds[f"heatmaps_{metric}"] = time.perf_counter() - t0
    for k, fig in enumerate(pages):
        suffix = "" if k == 0 else f"_{k + 1}"
        _add(
            blocks,
            figs.save(
                f"grid_{_safe(metric)}{suffix}",
                fig,
                f"{T.metric_label(metric)} heatmaps per detector",
                f"{T.metric_label(metric)} x100 per grid cell, written in each cell (rows: "
                "semantic level, growing upwards; columns: covariate level, growing to the "
                "right); grey hatched cells are N/A (too few OOD samples).",
            ),
        )
    return blocks


def graded_section(ctx: SectionContext) -> list[Block]:
    """The graded grid: level and trend tables and heatmaps per metric (IS-OOD)."""
    res, figs = ctx.results, ctx.figures
    blocks: list[Block] = []
    for metric in T.graded_metrics(res):
        blocks += _graded_metric_blocks(ctx, metric)
    if "osr" not in ctx.present:
        _add(
            blocks,
            figs.save(
                "level_curves",
                figs.timed("level_curves", lambda: F.level_curves_figure(res)),
                "AUROC vs semantic level per detector",
                "AUROC x100 vs semantic level (mean over covariate levels), smaller shift on the "
                "left, one line per detector. With more than 8 detectors MSP and the two best "
                "and two worst by mean AUROC are coloured (worst dashed), the others grey.",
            ),
        )
    return blocks


def operating_point_section(ctx: SectionContext) -> list[Block]:
    """The operating-point overview and one table per detector."""
    t0 = time.perf_counter()
    res, recall = ctx.results, ctx.settings.recall
    blocks: list[Block] = [T.operating_point_overview_table(res, recall=recall)]
    for det in T.operating_point_detectors(res):
        blocks.append(T.operating_point_table(res, det, recall=recall))
    _count(ctx, "operating_point", t0)
    return blocks


def operating_point_gallery_section(ctx: SectionContext) -> list[Block]:
    """The operating-point image gallery (its galleries appended to ``ctx.galleries``)."""
    t0 = time.perf_counter()
    res = ctx.results
    detectors = T.operating_point_detectors(res)
    rows = res[
        (res["protocol"] == "operating_point")
        & (res["metric"] == "threshold")
        & res["error"].isna()
        & res["detector"].notna()
    ]
    thresholds = {str(r.detector): float(r.value) for r in rows.itertuples(index=False)}
    found, reason = operating_galleries(ctx.run, thresholds, detectors, ctx.settings.per_kind)
    _count(ctx, "operating_point", t0)
    if reason is not None:
        return [Paragraph(f"No image gallery: {reason}.")]
    blocks: list[Block] = [
        Paragraph(
            "Per detector, at its operating-point threshold t: the OOD images it accepts most "
            "confidently, the correctly classified ID test images it rejects, and the images "
            "where it disagrees most with msp. Each caption gives the predicted class, the "
            "nearest known class in the taxonomy (where the run recorded one), the score and "
            "the set."
        )
    ]
    for det in detectors:
        for g in found.get(det, []):
            blocks.append(g)
            ctx.galleries.append(g)
    return blocks


def _count(ctx: SectionContext, key: str, t0: float) -> None:
    seconds = ctx.figures.seconds
    seconds[key] = seconds.get(key, 0.0) + time.perf_counter() - t0


def sanity_section(ctx: SectionContext) -> list[Block]:
    """The random-model sanity check: table and AUROC-with-CI figure."""
    res, figs = ctx.results, ctx.figures
    delta = sanity_delta(ctx.run.provenance)
    blocks: list[Block] = [T.sanity_table(res, delta=delta)]
    _add(
        blocks,
        figs.save(
            "sanity",
            figs.timed("sanity", lambda: F.sanity_figure(res, delta)),
            "Sanity check: AUROC with CI per detector and set",
            f"AUROC with bootstrap CI of each random-init model; grey band 0.5 ± {delta:g}; "
            "flagged detectors in red.",
        ),
    )
    return blocks


def generalisation_section(ctx: SectionContext) -> list[Block]:
    """Accuracy and macro-F1 under covariate shift (SOOD)."""
    return [T.generalisation_table(ctx.results)]


def gzsl_section(ctx: SectionContext) -> list[Block]:
    """GZSL: the zero-shot methods' table (when the zsl protocol ran), then ts / tr / H."""
    res = ctx.results
    blocks: list[Block] = []
    if (res.loc[res["protocol"] == "gzsl", "split"].notna()).any():
        blocks.append(T.zsl_table(res))  # methods of the zsl protocol: Table 1 first
    blocks.append(T.gzsl_table(res))
    return blocks
