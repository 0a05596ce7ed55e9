"""Report blocks of the shift views: the distance regression's section, the correct / incorrect
figures of the new-class section and the graded grid's level curves along both axes.

:func:`distance_regression_section` is the builder the ``distance_regression`` protocol names;
:func:`failure_view_blocks` and :func:`axis_curve_blocks` are added to the new-class and graded
sections by :mod:`semshift.report.sections`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from semshift.report.blocks import Block
from semshift.report.figures_failure import (
    MAX_DETECTORS,
    correct_incorrect_histogram_figure,
    failure_rank_figure,
)
from semshift.report.figures_levels import axis_level_curves_figure
from semshift.report.figures_regression import (
    distance_regression_figure,
    distance_regression_table,
    distance_verdict_table,
)
from semshift.report.tables import metric_label

if TYPE_CHECKING:
    from semshift.report.sections import SectionContext

__all__ = ["axis_curve_blocks", "distance_regression_section", "failure_view_blocks"]


def distance_regression_section(ctx: SectionContext) -> list[Block]:
    """The OLS table, the verdict table and AUROC vs distance per subset (ImageNet-OOD Fig. 3)."""
    res, figs = ctx.results, ctx.figures
    blocks: list[Block] = [
        figs.timed("tables", lambda: distance_regression_table(res)),
        figs.timed("tables", lambda: distance_verdict_table(res)),
    ]
    ref = figs.save(
        "distance_regression",
        figs.timed("distance_regression", lambda: distance_regression_figure(res)),
        "AUROC vs mean distance to the ID set per equal-count subset, per detector",
        "AUROC x100 of the ID test set against each equal-count subset of the covariate-shift "
        "side (blue) and the semantic-shift side (red), at the subset's mean distance to the "
        "nearest ID training image in the reference space; lines: the OLS fits of the table "
        f"(at most the first {MAX_DETECTORS} detectors).",
    )
    if ref is not None:
        blocks.append(ref)
    return blocks


def failure_view_blocks(ctx: SectionContext) -> list[Block]:
    """Fig. 5 (rank percentiles of correct ID, incorrect ID, OOD) and Figs. 6-9 (score
    histograms split by correct / incorrect) of ImageNet-OOD, from the run's score tables."""
    figs, run = ctx.figures, ctx.run
    blocks: list[Block] = []
    more = f" (at most the first {MAX_DETECTORS} detectors)"
    for name, make, alt, caption in (
        (
            "failure_ranks",
            lambda: failure_rank_figure(run),
            "Rank percentiles of correct ID, incorrect ID and OOD images per detector",
            "Each image's rank percentile among the ID test and pooled OOD images (0 = lowest "
            "score, most OOD-looking; 100 = highest): boxes of the quartiles, whiskers 1.5 IQR, "
            "red line the median. A good new-class detector ranks OOD low and correct ID high; "
            "ranking misclassified ID images high is no merit for catching failures "
            f"(ImageNet-OOD Fig. 5){more}.",
        ),
        (
            "correct_incorrect_scores",
            lambda: correct_incorrect_histogram_figure(run),
            "Score histograms split by correct / incorrect classification per detector",
            "Densities of the normality scores of correctly classified and misclassified ID test "
            "images, of correctly classified and misclassified covariate-shift images (every "
            "covariate set pooled) and of the pooled OOD images (ImageNet-OOD Figs. 6-9)"
            f"{more}.",
        ),
    ):
        ref = figs.save(name, figs.timed(name, make), alt, caption)
        if ref is not None:
            blocks.append(ref)
    return blocks


def axis_curve_blocks(ctx: SectionContext, metric: str) -> list[Block]:
    """``metric`` vs level along the semantic and the covariate axis (IS-OOD Figs. 6, 13, 17)."""
    figs = ctx.figures
    label = metric_label(metric)
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in metric)
    ref = figs.save(
        f"axis_curves_{safe}",
        figs.timed("axis_curves", lambda: axis_level_curves_figure(ctx.results, metric)),
        f"{label} vs semantic level and vs covariate level per detector",
        f"{label} x100 at each semantic level (mean over covariate levels, left) and at each "
        "covariate level (mean over semantic levels, right), smaller shift on the left, one "
        "line per detector. With more than 8 detectors MSP and the two best and two worst by "
        "mean are coloured (worst dashed), the others grey.",
    )
    return [ref] if ref is not None else []
