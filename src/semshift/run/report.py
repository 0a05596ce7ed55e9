"""The report stage: :func:`semshift.report.write_report` over the output directory.

The report reads only the output directory (results, ``results.json``, per-sample scores), so
it can be rewritten later with ``semshift report RUN_DIR``. Its key is the evaluation's key, the
formats, the run name and the semshift version; an unchanged report is not rewritten. A report
failure is recorded (the results stay) and the run goes on.
"""

from __future__ import annotations

from collections.abc import Callable

from semshift import __version__
from semshift.report import ReportPaths, write_report
from semshift.run.cache import stable_hash
from semshift.run.context import RunContext, one_line
from semshift.run.evaluate import EvaluateStage

__all__ = ["run_report"]


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
            marker = ctx.cache.root / "report_written.key"
            paths = {f: ctx.out / f"report.{f}" for f in formats}
            if (
                not ctx.force
                and marker.is_file()
                and marker.read_text() == key
                and all(p.is_file() for p in paths.values())
            ):
                rec.reused.append("report")
                figures = sorted((ctx.out / "figures").glob("*.png"))
                return ReportPaths(html=paths.get("html"), md=paths.get("md"), figures=figures)
            marker.unlink(missing_ok=True)
            write_json()  # the report reads results.json
            written = write_report(ctx.out, formats=formats)
            marker.write_text(key)
            rec.computed.append("report")
            return written
        except Exception as err:
            msg = one_line(err)
            ctx.errors.append(f"report: {msg}")
            ctx.notes["report_error"] = msg
            ctx.log.line(f"[red]report failed[/red]: {msg} (results are kept in {ctx.out})")
            return None
