"""The report as a list of sections (tables, figures, text), rendered by ``html`` and ``markdown``.

Sections appear only for the protocols present in the results: each registered protocol
declares its own (:mod:`semshift.report.sections` renders them, in report order); then come the
score histograms, the hyperparameter search, errors and provenance. Figures are drawn here,
saved as PNG under ``<output>/figures/`` and closed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from semshift.report import figures as F
from semshift.report import tables as T
from semshift.report._load import RunData
from semshift.report.blocks import Block, FigureRef, Paragraph, Report, Section
from semshift.report.errors import group_errors
from semshift.report.gallery import GALLERY_DIR, Gallery, gallery_settings
from semshift.report.sections import Figures as _Figures
from semshift.report.sections import SectionContext, protocol_sections
from semshift.report.sections import sanity_delta as sanity_delta

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
    settings = gallery_settings(prov)
    ctx = SectionContext(run, present, figs, fpr_note, settings)
    sections = protocol_sections(ctx)
    galleries = ctx.galleries

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

    groups = group_errors(res, [str(e) for e in prov.get("errors") or []])
    failures = [g.line() for g in groups if g.kind == "failure"]
    not_evaluated = [g.line() for g in groups if g.kind == "n/a"]
    if failures or not_evaluated:
        blocks: list[Block] = []
        if failures:
            n = sum(g.count for g in groups if g.kind == "failure")
            blocks.append(
                Paragraph(
                    f"Detectors or sets that failed (the run went on): {n} result rows and "
                    f"messages, grouped by detector and reason:",
                    tuple(failures),
                )
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
