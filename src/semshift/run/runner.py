"""``semshift run``: the stages split, extract, search, score, evaluate, report, in order.

:func:`run` takes a configuration (:mod:`semshift.run.config`) and writes the output directory
described in ``docs/design/run.md``. Each stage lives in its own module and caches what it
computes under ``<output>/.cache`` by content hash (:mod:`semshift.run.cache`) as soon as it is
done. A detector that raises while fitting or scoring gets an error recorded (its rows carry
the error) and the run goes on; so does a protocol that raises (one error row). Bad input (a
missing file, an empty set, a damaged store, class lists that do not match) raises
:class:`~semshift.errors.InputError` with one line naming the set and the key path; what the
finished stages computed stays in the cache.

The outputs are committed at once (:mod:`semshift.run._commit`): the stages write into
``<output>/.staging/``, and only a run that finished moves them into place and writes
``commit.json`` last, so a run killed or failed part-way leaves the previous run's outputs as
they were (a failed run with no committed run before it writes its ``results.json``, which
says why it stopped). Readers (:func:`semshift.report.load_run`) refuse a folder whose files
do not match its record.
"""

from __future__ import annotations

import functools
import platform
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from semshift import __version__
from semshift.locking import folder_lock
from semshift.report import ReportPaths, RunNotFinishedError, read_commit
from semshift.run._commit import publish, start_staging
from semshift.run.config import RunConfig, load_config
from semshift.run.context import RunContext, StageRecord, one_line
from semshift.run.evaluate import mark_scores_committed, run_evaluate
from semshift.run.extract import ExtractStage, run_extract
from semshift.run.report import mark_report_committed, run_report
from semshift.run.score import run_score
from semshift.run.search import run_search
from semshift.run.split import run_split

__all__ = ["RunResult", "run", "run_stores"]


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

    def stores(self) -> dict[str, Path]:
        """The feature store of every set of the run's model, by set name
        (:func:`run_stores`)."""
        return run_stores(self.output, self.provenance)


def run_stores(output: str | Path, provenance: Mapping[str, Any] | None = None) -> dict[str, Path]:
    """The feature store of every set of a finished run, by set name: the stores the run
    extracted (under ``<output>/.cache/extract/``) and the ones its configuration named.

    The random-init copies of the sanity check are left out. ``provenance`` is the run's
    ``results.json`` (read from ``output`` when not given).
    """
    import json

    out = Path(output)
    prov = provenance
    if prov is None:
        prov = json.loads((out / "results.json").read_text(encoding="utf-8"))
    stores: dict[str, Path] = {}
    data = (prov.get("config") or {}).get("data") or {}
    given = {k: data.get(k) for k in ("id_train", "id_val", "id_test")}
    given.update(data.get("sets") or {})
    for name, src in given.items():
        if isinstance(src, Mapping) and src.get("store"):
            stores[name] = Path(str(src["store"]))
    keys = ((prov.get("stages") or {}).get("extract") or {}).get("keys") or {}
    for label, key in keys.items():
        if " (" not in label and isinstance(key, str):  # "<set> (random seed k)": a copy
            stores[label] = out / ".cache" / "extract" / key
    order = [n for n in given if n in stores]
    return {n: stores[n] for n in order + sorted(set(stores) - set(order))}


def _versions() -> dict[str, str | None]:
    """The versions of the packages the numbers depend on (read once per process: each
    look-up parses a package's metadata, about 2 ms)."""
    return dict(_versions_once())


@functools.cache
def _versions_once() -> dict[str, str | None]:
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
    files: Mapping[str, str] | None = None,
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
    files : dict of str to str, optional
        Text files (by name) to write into the output directory with the run's outputs and
        commit with them (``semshift evaluate``'s ``config.json``).

    Returns
    -------
    RunResult
        The tidy table, stage records and errors; the output directory holds
        ``results.parquet``, ``results.csv``, ``results.json``, ``scores/``, the report and
        ``commit.json`` (written last, when everything else is in place).

    Raises
    ------
    InputError
        Bad configuration or data (one line naming the key path or set). Results of stages
        already finished stay in the cache; the output directory keeps its committed run.

    Examples
    --------
    A stores-only study (see ``examples/configs/``)::

        result = run("examples/configs/imagenet_ssb.yaml")
        result.results  # the tidy table; semshift.report.headline_table(result.results)
    """
    cfg = load_config(config, base_dir=base_dir)
    with folder_lock(cfg.output, what="output folder", wait=wait):
        return _run_locked(cfg, progress=progress, force=force, files=files or {})


def _run_locked(
    cfg: RunConfig, *, progress: bool, force: bool, files: Mapping[str, str]
) -> RunResult:
    """:func:`run` with the output folder locked."""
    ctx = RunContext(cfg, progress=progress, force=force)
    cfg.output.mkdir(parents=True, exist_ok=True)
    ctx.out = start_staging(cfg.output)  # every stage writes here; published at the end
    extracted: ExtractStage | None = None
    report: ReportPaths | None = None
    publishing = False

    def write_json(folder: Path = ctx.out) -> None:
        ctx.cache.write_json(folder / "results.json", provenance(ctx, extracted, report))

    try:
        for name, text in files.items():
            ctx.cache.write_text(ctx.out / name, text)
        splits = run_split(ctx)
        extracted = run_extract(ctx, splits)
        searched = run_search(ctx, extracted)  # nothing without a search: section
        scored = run_score(ctx, extracted, searched.chosen)
        evaluated = run_evaluate(ctx, scored)
        write_json()
        report = run_report(ctx, evaluated, write_json)
        write_json()
        publishing = True
        publish(cfg.output, ctx.out)
    except BaseException as err:
        ctx.notes["failed"] = one_line(err)
        if not publishing:  # a run killed while publishing keeps its staging folder (torn)
            _record_failure(ctx, lambda: write_json(cfg.output))
        raise
    mark_scores_committed(ctx, evaluated)
    if report is not None:
        mark_report_committed(ctx)
    return RunResult(
        output=cfg.output,
        results=evaluated.results,
        stages=ctx.stages,
        errors=list(ctx.errors),
        provenance=provenance(ctx, extracted, report),
        report=report,
    )


def _record_failure(ctx: RunContext, write_json: Any) -> None:
    """A run that stopped: its staging folder goes; its ``results.json`` (saying why) is
    written into the output folder unless that holds a committed run, which stays as it was."""
    shutil.rmtree(ctx.out, ignore_errors=True)
    try:
        committed = read_commit(ctx.cfg.output) is not None
    except RunNotFinishedError:
        committed = True  # a record, unreadable: leave the folder as it is
    if not committed:
        try:
            write_json()
        except Exception:
            pass
