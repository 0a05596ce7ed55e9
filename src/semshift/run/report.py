"""The report stage: :func:`semshift.report.write_report` over the output directory.

The report reads only the output directory (results, ``results.json``, per-sample scores), so
it can be rewritten later with ``semshift report RUN_DIR``. Its key is the evaluation's key, the
formats, the run name and the semshift version; an unchanged report is not rewritten (the
committed one is linked into the run's staging folder). A report failure is recorded (the
results stay) and the run goes on. The report is written into the staging folder with the
results and committed with them; the paths returned are those it will have once committed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from semshift import __version__
from semshift.locking import folder_lock
from semshift.report import ReportPaths, read_commit, write_report
from semshift.run._commit import carry, committed_files, record_report
from semshift.run.cache import stable_hash
from semshift.run.context import RunContext, one_line
from semshift.run.evaluate import EvaluateStage

__all__ = ["REPORT_MARKER", "mark_report_committed", "rewrite_report", "run_report"]

#: In the cache: the key of the report the committed output folder holds.
REPORT_MARKER = "report_written.key"


def _final(paths: ReportPaths, staging: Path, root: Path) -> ReportPaths:
    """``paths`` under ``staging`` as the paths they will have in ``root``."""

    def move(p: Path) -> Path:
        return root / p.relative_to(staging) if p.is_relative_to(staging) else p

    return ReportPaths(
        html=None if paths.html is None else move(paths.html),
        md=None if paths.md is None else move(paths.md),
        figures=[move(p) for p in paths.figures],
        seconds=dict(paths.seconds),
        gallery=[move(p) for p in paths.gallery],
    )


def _reuse(ctx: RunContext, formats: tuple[str, ...]) -> ReportPaths | None:
    """The committed report, linked into the staging folder; None when it is not all there."""
    root = ctx.cfg.output
    figures = committed_files(root, ("figures/",))
    if ctx.out == root or not carry(root, ctx.out, [f"report.{f}" for f in formats] + figures):
        return None
    return ReportPaths(
        html=root / "report.html" if "html" in formats else None,
        md=root / "report.md" if "md" in formats else None,
        figures=sorted(root / r for r in figures if r.count("/") == 1 and r.endswith(".png")),
    )


def run_report(
    ctx: RunContext, evaluated: EvaluateStage, write_json: Callable[[], None]
) -> ReportPaths | None:
    """Write the configured report formats; ``write_json`` first writes ``results.json``."""
    cfg = ctx.cfg
    with ctx.stage("report") as rec:
        if cfg.report is None:
            return None
        try:
            formats = tuple(cfg.report.formats)
            key = stable_hash(
                {"results": evaluated.key, "scores": evaluated.scores_key, "formats": formats,
                 "name": cfg.name, "semshift": __version__}
            )  # fmt: skip
            rec.keys["report"] = key
            marker = ctx.cache.root / REPORT_MARKER
            if not ctx.force and marker.is_file() and marker.read_text() == key:
                reused = _reuse(ctx, formats)
                if reused is not None:
                    rec.reused.append("report")
                    return reused
            marker.unlink(missing_ok=True)
            write_json()  # the report reads results.json
            written = write_report(ctx.out, formats=formats)
            rec.computed.append("report")
            return _final(written, ctx.out, ctx.cfg.output)
        except Exception as err:
            msg = one_line(err)
            ctx.errors.append(f"report: {msg}")
            ctx.notes["report_error"] = msg
            ctx.log.line(f"[red]report failed[/red]: {msg} (results are kept in {ctx.cfg.output})")
            return None


def mark_report_committed(ctx: RunContext) -> None:
    """Record that the committed output folder holds the report of this run's key."""
    key = ctx.stages["report"].keys.get("report") if "report" in ctx.stages else None
    if isinstance(key, str):
        ctx.cache.root.mkdir(parents=True, exist_ok=True)
        (ctx.cache.root / REPORT_MARKER).write_text(key)


def rewrite_report(
    run_dir: str | Path, *, formats: Sequence[str] = ("html", "md"), title: str | None = None
) -> tuple[ReportPaths, bool]:
    """Write the report of a finished run again (``semshift report RUN_DIR``).

    The folder is locked while it is written (a run into it waits, and this waits for a run);
    :func:`semshift.report.write_report` refuses a folder that holds no finished run; the
    commit record then lists the new report files.

    Returns
    -------
    (ReportPaths, bool)
        What was written, and whether the folder has a commit record (False for a run of an
        older semshift, which cannot be checked for a run stopped part-way).
    """
    folder = Path(run_dir)
    lock: Any = (
        folder_lock(folder, what="output folder") if folder.is_dir() else contextlib.nullcontext()
    )
    with lock:
        paths = write_report(folder, formats=tuple(formats), title=title)
        committed = read_commit(folder) is not None
        if committed:
            record_report(folder)
    return paths, committed
