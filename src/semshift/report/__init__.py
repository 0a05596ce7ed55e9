"""semshift.report: tables, figures, report.html and report.md from a run's output directory.

Reads only what ``semshift run`` writes (docs/design/run.md): ``results.parquet``,
``results.json``, ``scores/<set>.parquet`` and ``sanity/seed<k>/<set>.parquet``.

- :func:`write_report`: ``report.html`` (self-contained, figures and thumbnails as data
  URIs), ``report.md`` (figures linked), ``figures/*.png`` and ``figures/gallery/*``;
- ``tables``: the papers' tables (:func:`osr_table`, :func:`newclass_failure_table`,
  :func:`decomposition_table`, graded, operating-point, sanity, generalisation and GZSL tables)
  and :func:`headline_table`, each a :class:`Table` rendering to Markdown, HTML and rich;
- ``figures``: matplotlib ``Figure`` builders (Agg, no pyplot state) and :func:`oscr_curve`;
- ``gallery``: the operating-point image gallery (thumbnails of what a detector's rejection
  threshold accepts and rejects), kept within ``protocols.operating_point.max_report_bytes``.
- :func:`check_committed`: whether an output folder holds a finished run, every result file as
  its ``commit.json`` records it (:mod:`._commit`); :func:`load_run` checks it first.

Example
-------
>>> from semshift.report import write_report          # doctest: +SKIP
>>> paths = write_report("runs/demo")                  # doctest: +SKIP
>>> paths.html                                         # doctest: +SKIP
PosixPath('runs/demo/report.html')
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from semshift.errors import InputError
from semshift.report._commit import (
    COMMIT_FILE,
    STAGING_DIR,
    CommitRecord,
    RunNotFinishedError,
    check_committed,
    is_report_file,
    read_commit,
)
from semshift.report._load import RunData, load_run, read_search_table
from semshift.report.figures import oscr_curve
from semshift.report.tables import (
    Cell,
    Column,
    Table,
    decomposition_table,
    generalisation_table,
    graded_level_table,
    graded_trend_table,
    gzsl_table,
    headline_table,
    newclass_failure_table,
    operating_point_overview_table,
    operating_point_table,
    osr_metrics_table,
    osr_table,
    sanity_table,
    search_table,
    zsl_table,
)

__all__ = [
    "COMMIT_FILE",
    "STAGING_DIR",
    "Cell",
    "Column",
    "CommitRecord",
    "ReportPaths",
    "RunData",
    "RunNotFinishedError",
    "Table",
    "check_committed",
    "decomposition_table",
    "generalisation_table",
    "graded_level_table",
    "graded_trend_table",
    "gzsl_table",
    "headline_table",
    "is_report_file",
    "load_run",
    "newclass_failure_table",
    "operating_point_overview_table",
    "operating_point_table",
    "oscr_curve",
    "osr_metrics_table",
    "osr_table",
    "read_commit",
    "read_search_table",
    "sanity_table",
    "search_table",
    "write_report",
    "zsl_table",
]

_FORMATS = ("html", "md")


@dataclass
class ReportPaths:
    """What :func:`write_report` wrote.

    Attributes
    ----------
    html, md : Path or None
        ``report.html`` / ``report.md`` (None when that format was not asked for).
    figures : list of Path
        Every PNG under ``figures/``, in report order.
    gallery : list of Path
        The thumbnails under ``figures/gallery/`` that report.md links (the operating-point
        gallery; report.html embeds the same ones).
    seconds : dict of str to float
        Time spent per part (tables, each figure kind, rendering), for benchmarks.
    """

    html: Path | None = None
    md: Path | None = None
    figures: list[Path] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    gallery: list[Path] = field(default_factory=list)


def write_report(
    output_dir: str | os.PathLike[str],
    *,
    formats: Sequence[str] = _FORMATS,
    title: str | None = None,
) -> ReportPaths:
    """Write ``report.html`` / ``report.md`` and ``figures/*.png`` into a run's output folder.

    Parameters
    ----------
    output_dir : path
        The run's output directory (with ``results.parquet``).
    formats : sequence of {"html", "md"}, default ("html", "md")
    title : str, optional
        Report title; default the run name from ``results.json``.

    Returns
    -------
    ReportPaths

    Raises
    ------
    InputError
        Unknown format, missing or malformed results.

    Notes
    -----
    Old PNGs in ``figures/`` and old thumbnails in ``figures/gallery/`` are removed first, so
    the folders hold exactly this report's images. Sections appear only for the protocols
    present in the results. The operating-point gallery stops adding thumbnails when
    report.html would pass ``protocols.operating_point.max_report_bytes`` of the run's
    results.json (default 10 MB) and says so in the report.
    """
    fmts = tuple(dict.fromkeys(formats))
    bad = [f for f in fmts if f not in _FORMATS]
    if bad or not fmts:
        raise InputError(f"formats: unknown {bad or 'none given'}; choose from {list(_FORMATS)}")
    from semshift.report._document import build_report
    from semshift.report.html import render_html
    from semshift.report.markdown import render_markdown

    t0 = time.perf_counter()
    run = load_run(output_dir)
    fig_dir = run.root / "figures"
    if fig_dir.is_dir():
        for old in [*fig_dir.glob("*.png"), *fig_dir.glob("gallery/*.jpg")]:
            old.unlink()
        for old in fig_dir.glob("gallery/*.png"):
            old.unlink()
    report = build_report(run, title=title)
    paths = ReportPaths(
        figures=list(report.figures),
        seconds=dict(report.timings),
        gallery=list(report.thumbnails),
    )
    t1 = time.perf_counter()
    if "html" in fmts:
        paths.html = run.root / "report.html"
        _write_text(paths.html, render_html(report))
    if "md" in fmts:
        paths.md = run.root / "report.md"
        _write_text(paths.md, render_markdown(report, run.root))
    paths.seconds["render"] = time.perf_counter() - t1
    paths.seconds["total"] = time.perf_counter() - t0
    return paths


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
