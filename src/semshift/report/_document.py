"""The report as a list of sections (tables, figures, text), rendered by ``html`` and ``markdown``.

Sections appear only for the protocols present in the results. Figures are drawn here, saved
as PNG under ``<output>/figures/`` and closed.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from semshift.report import figures as F
from semshift.report import tables as T
from semshift.report._load import RunData
from semshift.report.blocks import Block, FigureRef, Paragraph, Report, Section
from semshift.report.gallery import (
    GALLERY_DIR,
    Gallery,
    GallerySettings,
    gallery_settings,
    operating_galleries,
)

__all__ = ["FigureRef", "Gallery", "Paragraph", "Report", "Section", "build_report"]

#: Resolution of the saved PNGs: small, so 24-detector small multiples stay light.
DPI = 80


def fpr_convention(provenance: dict[str, Any]) -> str:
    """The FPR@95 convention of the run: ``openood`` when the run used OpenOOD v1.5's
    conventions, else ``results.json``'s ``fpr_convention``, else id_recall.

    The runner writes a mapping metric -> convention (``{"fpr95": "id_recall"}``); a plain
    string is accepted too.
    """
    if provenance.get("conventions") == "openood":
        return "openood"
    conv = provenance.get("fpr_convention")
    if isinstance(conv, str) and conv:
        return conv
    if isinstance(conv, dict) and conv:
        values = sorted({str(v) for v in conv.values()})
        return ", ".join(values) if len(values) > 1 else values[0]
    return "id_recall"


def fpr_sentence(provenance: dict[str, Any]) -> str:
    """One sentence stating the FPR@95 convention."""
    conv = fpr_convention(provenance)
    if conv == "id_recall":
        how = (
            "threshold at 95% ID recall (the largest t with at least 95% of ID scores >= t), "
            "FPR = fraction of OOD scores >= t (ODIN / SSB / classic)"
        )
    elif conv == "ood_recall":
        how = (
            "threshold catching 95% of the OOD samples (OOD = score <= t), FPR = fraction of "
            "ID scores <= t (OpenOOD >= v1.5)"
        )
    elif conv == "openood":
        how = (
            "OpenOOD v1.5's evaluator exactly: the first point of sklearn's roc_curve (OOD "
            "positive, collinear points dropped) whose OOD recall reaches 95%; AUPR-In/Out as "
            "sklearn auc(recall, precision); on tied scores the FPR can exceed the exact value"
        )
    else:
        how = "as recorded in results.json"
    return f"FPR@95 convention: {conv}: {how}."


def sanity_delta(provenance: dict[str, Any]) -> float:
    """``config.protocols.sanity.delta`` from results.json, else 0.05."""
    try:
        delta = provenance["config"]["protocols"]["sanity"]["delta"]
        value = float(delta)
    except (KeyError, TypeError, ValueError):
        return 0.05
    return value if math.isfinite(value) else 0.05


class _Figures:
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


def _add(section: Section, block: Block | None) -> None:
    if block is not None:
        section.blocks.append(block)


def build_report(run: RunData, *, title: str | None = None, dpi: int = DPI) -> Report:
    """Build every section for the protocols present and save the figures."""
    res = run.results
    prov = run.provenance
    figs = _Figures(run.root / "figures", dpi)
    present = run.protocols()
    fpr_note = fpr_sentence(prov)
    sections: list[Section] = []

    if "osr" in present:
        sec = Section("osr", "Open-set recognition")
        sec.blocks.append(figs.timed("tables", lambda: T.osr_table(res)))
        _add(sec, figs.timed("tables", lambda: T.osr_metrics_table(res, fpr_note=fpr_note)))
        _add(
            sec,
            figs.save(
                "level_curves",
                figs.timed("level_curves", lambda: F.level_curves_figure(res)),
                "AUROC vs semantic level per detector",
                "AUROC x100 vs semantic shift level (OSR splits easy < medium < hard"
                + ("; graded grid level means" if "graded" in present else "")
                + "), one line per detector.",
            ),
        )
        _add(
            sec,
            figs.save(
                "oscr_curves",
                figs.timed("oscr", lambda: F.oscr_figure(run)),
                "OSCR curves per detector and split",
                "Correct classification rate vs false positive rate, computed from scores/: "
                "known correct = label == pred on id_test. Each curve ends at the closed-set "
                "accuracy.",
            ),
        )
        sections.append(sec)

    if "newclass" in present or "failure" in present:
        sec = Section("newclass_failure", "New-class vs failure detection")
        sec.blocks.append(T.newclass_failure_table(res))
        sections.append(sec)

    if "decomposition" in present:
        sec = Section("decomposition", "AUROC decomposition")
        sec.blocks.append(T.decomposition_table(res))
        _add(
            sec,
            figs.save(
                "decomposition",
                figs.timed("decomposition", lambda: F.decomposition_figure(res)),
                "AUROC decomposition bars per detector",
                "AUROC of all ID, correctly classified ID and misclassified ID test samples "
                "against the pooled OOD.",
            ),
        )
        sections.append(sec)

    if "graded" in present:
        sec = Section("graded", "Graded semantic x covariate shift grid")
        for metric in T.graded_metrics(res):
            for axis in ("semantic", "covariate"):
                try:
                    sec.blocks.append(T.graded_level_table(res, metric=metric, axis=axis))
                except ValueError:
                    pass  # no level means for this metric / axis
            try:
                sec.blocks.append(T.graded_trend_table(res, metric=metric))
            except ValueError:
                pass
            t0 = time.perf_counter()
            pages = F.grid_heatmap_figures(res, metric)
            figs.seconds[f"heatmaps_{metric}"] = time.perf_counter() - t0
            for k, fig in enumerate(pages):
                suffix = "" if k == 0 else f"_{k + 1}"
                _add(
                    sec,
                    figs.save(
                        f"grid_{_safe(metric)}{suffix}",
                        fig,
                        f"{T.metric_label(metric)} heatmaps per detector",
                        f"{T.metric_label(metric)} per grid cell (rows: semantic level, columns: "
                        "covariate level); grey hatched cells are N/A (too few OOD samples).",
                    ),
                )
        if "osr" not in present:
            _add(
                sec,
                figs.save(
                    "level_curves",
                    figs.timed("level_curves", lambda: F.level_curves_figure(res)),
                    "AUROC vs semantic level per detector",
                    "AUROC x100 vs semantic level (mean over covariate levels), one line per "
                    "detector.",
                ),
            )
        sections.append(sec)

    galleries: list[Gallery] = []
    settings = gallery_settings(prov)
    if "operating_point" in present:
        t0 = time.perf_counter()
        sections += _operating_sections(run, settings, galleries)
        figs.seconds["operating_point"] = time.perf_counter() - t0

    if "sanity" in present:
        delta = sanity_delta(prov)
        sec = Section("sanity", "Random-model sanity check")
        sec.blocks.append(T.sanity_table(res, delta=delta))
        _add(
            sec,
            figs.save(
                "sanity",
                figs.timed("sanity", lambda: F.sanity_figure(res, delta)),
                "Sanity check: AUROC with CI per detector and set",
                f"AUROC with bootstrap CI of each random-init model; grey band 0.5 ± {delta:g}; "
                "flagged detectors in red.",
            ),
        )
        sections.append(sec)

    if "generalisation" in present:
        sec = Section("generalisation", "Generalisation under covariate shift")
        sec.blocks.append(T.generalisation_table(res))
        sections.append(sec)

    if "gzsl" in present:
        sec = Section("gzsl", "Generalised zero-shot learning")
        if (res.loc[res["protocol"] == "gzsl", "split"].notna()).any():
            sec.blocks.append(T.zsl_table(res))  # methods of the zsl protocol: Table 1 first
        sec.blocks.append(T.gzsl_table(res))
        sections.append(sec)

    if run.score_files:
        sec = Section("scores", "Score distributions")
        pages = figs.timed("histograms", lambda: F.score_histogram_figures(run))
        for k, fig in enumerate(pages):
            _add(
                sec,
                figs.save(
                    "score_histograms" + ("" if k == 0 else f"_{k + 1}"),
                    fig,
                    "Score histograms per detector",
                    "Normality scores (higher = more in-distribution) of ID test (grey) and each "
                    "other set, density per set.",
                ),
            )
        if sec.blocks:
            sections.append(sec)

    if run.search is not None and not run.search.empty:
        sections.append(_search_section(run, figs))

    errors = _errors(run)
    not_evaluated = _not_evaluated(run)
    if errors or not_evaluated:
        blocks: list[Block] = []
        if errors:
            blocks.append(
                Paragraph("Detectors or sets that failed (the run went on):", tuple(errors))
            )
        if not_evaluated:
            blocks.append(Paragraph("Not evaluated (N/A, not failures):", tuple(not_evaluated)))
        sections.append(Section("errors", "Errors and N/A", blocks))
    sections.append(Section("provenance", "Provenance", _provenance_blocks(run, fpr_note)))

    name = title or prov.get("name") or (prov.get("config") or {}).get("name")
    report_title = str(name) if name else f"semshift report: {run.root.name}"
    detectors = [d for d in dict.fromkeys(res["detector"]) if d is not None]
    intro = Paragraph(
        f"{len(detectors)} detector(s); protocols: {', '.join(present)}. Scores are normality "
        f"scores (higher = more in-distribution); table values are x100 with one decimal. "
        f"{fpr_note}"
    )
    report = Report(report_title, intro, sections, figs.paths, figs.seconds)
    if galleries:
        t0 = time.perf_counter()
        report.thumbnails = _fit_galleries(
            report, galleries, settings.max_report_bytes, run.root / GALLERY_DIR
        )
        figs.seconds["gallery_fit"] = time.perf_counter() - t0
    return report


def _operating_sections(
    run: RunData, settings: GallerySettings, galleries: list[Gallery]
) -> list[Section]:
    """The operating-point tables and the image gallery (its blocks appended to ``galleries``)."""
    res = run.results
    sec = Section("operating_point", "Operating point")
    sec.blocks.append(T.operating_point_overview_table(res, recall=settings.recall))
    detectors = T.operating_point_detectors(res)
    for det in detectors:
        sec.blocks.append(T.operating_point_table(res, det, recall=settings.recall))
    rows = res[
        (res["protocol"] == "operating_point")
        & (res["metric"] == "threshold")
        & res["error"].isna()
        & res["detector"].notna()
    ]
    thresholds = {str(r.detector): float(r.value) for r in rows.itertuples(index=False)}
    found, reason = operating_galleries(run, thresholds, detectors, settings.per_kind)
    gal = Section("operating_point_gallery", "Operating point: image gallery")
    if reason is not None:
        gal.blocks.append(Paragraph(f"No image gallery: {reason}."))
        return [sec, gal]
    gal.blocks.append(
        Paragraph(
            "Per detector, at its operating-point threshold t: the OOD images it accepts most "
            "confidently, the correctly classified ID test images it rejects, and the images "
            "where it disagrees most with msp. Each caption gives the predicted class, the "
            "nearest known class in the taxonomy (where the run recorded one), the score and "
            "the set."
        )
    )
    for det in detectors:
        for g in found.get(det, []):
            gal.blocks.append(g)
            galleries.append(g)
    return [sec, gal]


_CUT_NOTE = (
    "The gallery stopped at the report's size bound (max_report_bytes = {limit:,} bytes of "
    "report.html): {shown} of {total} thumbnails are shown, the best-ranked of every gallery "
    "first."
)


def _fit_galleries(
    report: Report, galleries: list[Gallery], max_bytes: int, folder: Path
) -> list[Path]:
    """Keep report.html within ``max_bytes``: add thumbnails, the best-ranked of every gallery
    first (rank 1 of each, then rank 2 ...), until the next one would pass the bound; say so
    in the report when some are left out. Writes the kept thumbnails under figures/gallery/
    (report.md links them) and returns their paths."""
    from semshift.report.html import render_html, thumbnail_html

    candidates = [list(g.thumbnails) for g in galleries]
    total = sum(len(c) for c in candidates)
    for g in galleries:
        g.thumbnails = []
    # the note is in place while measuring, with the widest numbers it can show
    gal_sec = next(s for s in report.sections if s.key == "operating_point_gallery")
    note = Paragraph(_CUT_NOTE.format(limit=max_bytes, shown=total, total=total))
    gal_sec.blocks.insert(1, note)
    size = len(render_html(report).encode("utf-8"))
    shown = 0
    stop = False
    for rank in range(max((len(c) for c in candidates), default=0)):
        for g, cands in zip(galleries, candidates, strict=True):
            if rank >= len(cands):
                continue
            cost = len(thumbnail_html(cands[rank]).encode("utf-8"))
            if size + cost > max_bytes:
                stop = True
                break
            g.thumbnails.append(cands[rank])
            size += cost
            shown += 1
        if stop:
            break
    if shown == total:
        gal_sec.blocks.remove(note)
    else:
        i = gal_sec.blocks.index(note)
        gal_sec.blocks[i] = Paragraph(_CUT_NOTE.format(limit=max_bytes, shown=shown, total=total))
    written: dict[Path, None] = {}
    for g in galleries:
        for t in g.thumbnails:
            path = folder / t.filename
            if path not in written:
                folder.mkdir(parents=True, exist_ok=True)
                path.write_bytes(t.data)
                written[path] = None
    return list(written)


def _search_section(run: RunData, figs: _Figures) -> Section:
    """The chosen hyperparameters and the sensitivity curves of a search (search.csv)."""
    assert run.search is not None
    notes = (run.provenance.get("notes") or {}).get("search") or {}
    defaults = notes.get("default_value") if isinstance(notes, dict) else None
    val_ood = notes.get("val_ood") if isinstance(notes, dict) else None
    sec = Section("search", "Hyperparameter search")
    sec.blocks.append(
        figs.timed(
            "tables",
            lambda: T.search_table(
                run.search,
                defaults=defaults if isinstance(defaults, dict) else None,
                val_ood=str(val_ood) if val_ood else None,
            ),
        )
    )
    skipped = notes.get("not_searched") if isinstance(notes, dict) else None
    if isinstance(skipped, dict) and skipped:
        sec.blocks.append(
            Paragraph("Not searched:", tuple(f"{k}: {v}" for k, v in skipped.items()))
        )
    leak = notes.get("leak_check") if isinstance(notes, dict) else None
    if isinstance(leak, dict) and leak:
        sec.blocks.append(
            Paragraph(
                f"Leak check passed: {leak.get('val_classes', '?')} validation OOD class(es) "
                f"against {leak.get('test_classes', '?')} test OOD class(es) of "
                f"{', '.join(map(str, leak.get('test_sets') or [])) or 'no set'}: no shared "
                f"class id, and in {leak.get('taxonomy', 'the taxonomy')} no shared node, "
                f"ancestor or descendant ({leak.get('val_classes_in_taxonomy', 0)} validation "
                f"and {leak.get('test_classes_in_taxonomy', 0)} test classes found there)."
            )
        )
    sens = run.search_sensitivity
    if sens is not None:
        pages = figs.timed("search", lambda: F.search_sensitivity_figures(sens))
        for k, fig in enumerate(pages):
            _add(
                sec,
                figs.save(
                    "search_sensitivity" + ("" if k == 0 else f"_{k + 1}"),
                    fig,
                    "Objective vs candidate per searched hyperparameter",
                    "The search objective on the validation sets against each candidate, the "
                    "other hyperparameters at their chosen values; red: chosen, grey cross: "
                    "the combination failed. Tidy values: search_sensitivity.csv.",
                ),
            )
    return sec


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)


def _not_evaluated(run: RunData) -> list[str]:
    """The runner's "n/a: ..." rows, once per protocol, set and message (not failures)."""
    res = run.results
    na = res[res["error"].map(T.is_na_note)]
    out: dict[str, int] = {}
    for r in na.itertuples(index=False):
        key = f"{r.protocol}: set {r.set}: {r.error}"
        out[key] = out.get(key, 0) + 1
    return [f"{k} ({n} row{'s' if n > 1 else ''})" for k, n in out.items()]


def _errors(run: RunData) -> list[str]:
    res = run.results
    bad = res[res["error"].notna() & ~res["error"].map(T.is_na_note)]
    out: dict[str, None] = {}
    for r in bad.itertuples(index=False):
        where = ", ".join(
            f"{k} {v}"
            for k, v in (("detector", r.detector), ("set", r.set), ("split", r.split))
            if v is not None
        )
        out.setdefault(f"{r.protocol}: {where or 'run'}: {r.error}", None)
    for e in run.provenance.get("errors") or []:
        out.setdefault(str(e), None)
    return list(out)


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _provenance_blocks(run: RunData, fpr_note: str) -> list[Block]:
    prov = run.provenance
    blocks: list[Block] = [Paragraph(fpr_note)]
    if not prov:
        blocks.append(Paragraph(f"No results.json in {run.root}: provenance unknown."))
        return blocks
    notes = prov.get("notes")
    mixed = notes.get("mixed_models") if isinstance(notes, dict) else None
    if isinstance(mixed, dict) and mixed:
        blocks.append(
            Paragraph(
                "Cross-model study (data.mixed_models): these sets were scored by another "
                "classifier than id_train's, so their scores and the detectors fitted on "
                "id_train come from different models:",
                tuple(f"{k}: {v}" for k, v in mixed.items()),
            )
        )
    cfg = prov.get("config") or {}
    if isinstance(cfg, dict) and cfg:
        keys = ("name", "seed", "detectors", "protocols", "metrics", "bootstrap", "model")
        items = tuple(f"{k}: {_short(cfg[k])}" for k in keys if k in cfg)
        if items:
            blocks.append(Paragraph("Configuration:", items))
    versions = prov.get("versions")
    if isinstance(versions, dict) and versions:
        items = tuple(f"{k} {v}" for k, v in versions.items() if v is not None)
        if prov.get("semshift_version"):
            items = (f"semshift {prov['semshift_version']}", *items)
        blocks.append(Paragraph("Versions:", items))
    seeds = prov.get("seeds")
    if seeds:
        blocks.append(Paragraph(f"Seeds: {_short(seeds)}"))
    timings: list[str] = []
    stages = prov.get("stages")
    if isinstance(stages, dict):
        for k, v in stages.items():
            secs = v.get("seconds") if isinstance(v, dict) else v
            if isinstance(secs, int | float):
                timings.append(f"{k}: {secs:.2f} s")
    plain = prov.get("timings")
    if isinstance(plain, dict):
        timings += [f"{k}: {v:.2f} s" for k, v in plain.items() if isinstance(v, int | float)]
    if isinstance(prov.get("total_seconds"), int | float):
        timings.append(f"total: {prov['total_seconds']:.2f} s")
    if timings:
        blocks.append(
            Paragraph(
                "Stage timings of the run in results.json when this report was written (a stage "
                "taken from the cache counts only its lookup):",
                tuple(timings),
            )
        )
    if prov.get("created"):
        blocks.append(Paragraph(f"Run created: {prov['created']}"))
    return blocks
