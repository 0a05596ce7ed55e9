"""``semshift run``: the stages split, extract, search, score, evaluate, report, in order.

:func:`run` takes a configuration (:mod:`semshift.run.config`) and writes the output directory
described in ``docs/design/run.md``. Each stage lives in its own module and caches what it
computes under ``<output>/.cache`` by content hash (:mod:`semshift.run.cache`) as soon as it is
done. A detector that raises while fitting or scoring gets an error recorded (its rows carry
the error) and the run goes on; so does a protocol that raises (one error row). Bad input (a
missing file, an empty set, a damaged store, class lists that do not match) raises
:class:`~semshift.errors.InputError` with one line naming the set and the key path; what the
finished stages computed stays in the cache.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from semshift import __version__
from semshift.locking import folder_lock
from semshift.report import ReportPaths
from semshift.run.config import RunConfig, load_config
from semshift.run.context import RunContext, StageRecord, one_line
from semshift.run.evaluate import run_evaluate
from semshift.run.extract import ExtractStage, run_extract
from semshift.run.report import run_report
from semshift.run.score import run_score
from semshift.run.search import run_search
from semshift.run.split import run_split

__all__ = ["RunResult", "run"]


@dataclass
class RunResult:
    """The outcome of :func:`run`.

    Attributes
    ----------
    output : Path
        The output directory.
    results : DataFrame
        The tidy table (columns :data:`semshift.protocols.tidy.RESULT_COLUMNS`).
    stages : dict of str to StageRecord
    errors : list of str
        Detector, protocol and report errors (the run went on after each).
    provenance : dict
        The contents of ``results.json``.
    report : ReportPaths or None
        What :func:`semshift.report.write_report` wrote, when a report was written.
    """

    output: Path
    results: pd.DataFrame
    stages: dict[str, StageRecord]
    errors: list[str]
    provenance: dict[str, Any]
    report: ReportPaths | None = None


def _versions() -> dict[str, str | None]:
    import importlib.metadata as md
    import sys

    out: dict[str, str | None] = {"python": platform.python_version()}
    for pkg in ("numpy", "scipy", "scikit-learn", "pandas", "pyarrow", "pydantic", "torch",
                "torchvision", "faiss-cpu"):  # fmt: skip
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    out["platform"] = sys.platform
    return out


def _report_json(paths: ReportPaths | None) -> dict[str, str] | None:
    if paths is None:
        return None
    return {"html": str(paths.html), "md": str(paths.md), "figures": str(paths.figures),
            "seconds": str(paths.seconds)}  # fmt: skip


def provenance(
    ctx: RunContext, extracted: ExtractStage | None, report: ReportPaths | None
) -> dict[str, Any]:
    """The contents of ``results.json``: config, versions, seeds, stage records and notes."""
    from semshift.metrics.registry import get_metric

    cfg = ctx.cfg
    conventions = {}
    for m in cfg.metrics:
        kw = dict(get_metric(m).kwargs)
        if "convention" in kw:
            conventions[m] = kw["convention"]
        elif m == "fpr95_openood":
            conventions[m] = "openood"
    sources = extracted.sources if extracted is not None else {}
    return {
        "name": cfg.name,
        "semshift_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "config": cfg.to_json(),
        "config_source": cfg.source,
        "versions": _versions(),
        "seeds": {
            "run": cfg.seed,
            "bootstrap": cfg.bootstrap.seed,
            "sanity_models": sorted(extracted.random_worlds) if extracted is not None else [],
        },
        "fpr_convention": conventions,
        "conventions": cfg.conventions,
        "stages": {k: v.to_json() for k, v in ctx.stages.items()},
        "total_seconds": round(time.perf_counter() - ctx.t_start, 4),
        "detectors": ctx.detector_info,
        "sets": {
            n: {"role": s.role, "store": str(s.store_path), "key": s.key}
            for n, s in sources.items()
        },
        "notes": ctx.notes,
        "errors": ctx.errors,
        "report": _report_json(report),
    }


def run(
    config: str | Path | Mapping[str, Any] | RunConfig,
    *,
    progress: bool = True,
    force: bool = False,
    base_dir: str | Path | None = None,
    wait: bool = True,
) -> RunResult:
    """Run a benchmark configuration: split, extract, search, score, evaluate, report.

    Parameters
    ----------
    config : path, mapping or RunConfig
        A YAML file, its contents as a dict (paths relative to ``base_dir``, default the current
        directory) or a validated :class:`~semshift.run.config.RunConfig`.
    progress : bool
        Progress bars and one timing line per stage (on stderr).
    force : bool
        Recompute every stage, ignoring (and overwriting) the cache.
    base_dir : path, optional
        Folder relative paths of a dict config are resolved against.
    wait : bool
        While another run writes the same output folder (its lock,
        :func:`semshift.locking.folder_lock`), wait for it (default) or raise
        :class:`~semshift.locking.LockedError` at once.

    Returns
    -------
    RunResult
        The tidy table, stage records and errors; the output directory holds
        ``results.parquet``, ``results.csv``, ``results.json``, ``scores/`` and the report.

    Raises
    ------
    InputError
        Bad configuration or data (one line naming the key path or set). Results of stages
        already finished stay in the output directory and its cache.

    Examples
    --------
    A stores-only study (see ``examples/configs/``)::

        result = run("examples/configs/imagenet_ssb.yaml")
        result.results  # the tidy table; semshift.report.headline_table(result.results)
    """
    cfg = load_config(config, base_dir=base_dir)
    with folder_lock(cfg.output, what="output folder", wait=wait):
        return _run_locked(cfg, progress=progress, force=force)


def _run_locked(cfg: RunConfig, *, progress: bool, force: bool) -> RunResult:
    """:func:`run` with the output folder locked."""
    ctx = RunContext(cfg, progress=progress, force=force)
    cfg.output.mkdir(parents=True, exist_ok=True)
    extracted: ExtractStage | None = None
    report: ReportPaths | None = None

    def write_json() -> None:
        ctx.cache.write_json(cfg.output / "results.json", provenance(ctx, extracted, report))

    try:
        splits = run_split(ctx)
        extracted = run_extract(ctx, splits)
        searched = run_search(ctx, extracted)  # nothing without a search: section
        scored = run_score(ctx, extracted, searched.chosen)
        evaluated = run_evaluate(ctx, scored)
        write_json()
        report = run_report(ctx, evaluated, write_json)
    except BaseException as err:
        ctx.notes["failed"] = one_line(err)
        try:
            write_json()
        except Exception:
            pass
        raise
    write_json()
    return RunResult(
        output=cfg.output,
        results=evaluated.results,
        stages=ctx.stages,
        errors=list(ctx.errors),
        provenance=provenance(ctx, extracted, report),
        report=report,
    )
