""":func:`run_study`: every cell of a study, then its tidy table, aggregates and report.

Files under the study's ``output``:

- ``cells/<dataset>/<model>/seed<k>/``: each cell's run folder (``semshift run``'s files);
- ``study.json``: the study file as validated, every cell's status, reason, seconds and the
  stages it computed;
- ``results.parquet`` / ``results.csv``: the tidy table, a run's columns after ``model``,
  ``dataset`` and ``seed``;
- ``summary.csv``: mean, sd, bootstrap CI over models per dataset, protocol, set, detector and
  metric (:func:`~semshift.study.aggregate.aggregate_over_models`);
- ``models.csv``: each model's value (mean over seeds); ``ranks.csv`` and ``mean_ranks.csv``;
- ``relation.csv``: closed-set accuracy against AUROC / OSCR across models;
- ``published.csv``: the seed papers' numbers beside ours, for datasets that reproduce one;
- ``report.md``, ``report.html``, ``figures/``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from semshift.study.aggregate import (
    CELL_COLUMNS,
    accuracy_relation,
    aggregate_over_models,
    detector_ranks,
    mean_ranks,
    model_values,
)
from semshift.study.config import Study, load_study
from semshift.study.execute import CellOutcome, run_cells
from semshift.study.published import compare_published

__all__ = ["StudyResult", "collect_results", "run_study", "summarise_study"]


@dataclass
class StudyResult:
    """What :func:`run_study` gave.

    Attributes
    ----------
    study : Study
    outcomes : list of CellOutcome
        One per cell, in the study's cell order.
    results : DataFrame
        The tidy table of every finished cell.
    summary, values, ranks, mean_ranks, relation, points : DataFrame
        The aggregates (see :mod:`semshift.study.aggregate`).
    published : DataFrame
        Published numbers beside ours (:func:`semshift.study.published.compare_published`),
        for the datasets that reproduce a published setting; empty otherwise.
    files : dict of str to Path
    seconds : float
    """

    study: Study
    outcomes: list[CellOutcome]
    results: pd.DataFrame
    summary: pd.DataFrame
    values: pd.DataFrame
    ranks: pd.DataFrame
    mean_ranks: pd.DataFrame
    relation: pd.DataFrame
    points: pd.DataFrame
    published: pd.DataFrame = field(default_factory=pd.DataFrame)
    files: dict[str, Path] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def failed(self) -> list[CellOutcome]:
        """The cells that failed."""
        return [o for o in self.outcomes if o.status == "failed"]


def collect_results(study: Study, outcomes: list[CellOutcome]) -> pd.DataFrame:
    """The tidy table of the finished cells: each run's ``results.parquet`` with the cell's
    ``model``, ``dataset`` and ``seed`` in front, in cell order."""
    frames = []
    for o in outcomes:
        if o.status != "done":
            continue
        frame = pd.read_parquet(o.cell.output / "results.parquet")
        frame.insert(0, "seed", o.cell.seed)
        frame.insert(0, "dataset", o.cell.dataset)
        frame.insert(0, "model", o.cell.model)
        frames.append(frame)
    if not frames:
        from semshift.protocols.tidy import RESULT_COLUMNS

        return pd.DataFrame(columns=[*CELL_COLUMNS, *RESULT_COLUMNS])
    return pd.concat(frames, ignore_index=True)


def summarise_study(results: pd.DataFrame, *, n_resamples: int, level: float, seed: int) -> dict:
    """Every aggregate of a study's tidy table (the bootstrap settings are the study's)."""
    values = model_values(results)
    summary = aggregate_over_models(
        results, n_resamples=n_resamples, level=level, seed=seed, values=values
    )
    ranks = detector_ranks(results, values=values)
    relation, points = accuracy_relation(
        results, n_resamples=n_resamples, level=level, seed=seed, values=values
    )
    return {
        "summary": summary,
        "values": values,
        "ranks": ranks,
        "mean_ranks": mean_ranks(ranks),
        "relation": relation,
        "points": points,
    }


def _write(result: StudyResult, *, report: bool) -> dict[str, Path]:
    from semshift.report.study import write_study_report

    out = result.study.output
    out.mkdir(parents=True, exist_ok=True)
    files = {"results": out / "results.parquet"}
    result.results.to_parquet(files["results"], index=False)
    result.results.to_csv(out / "results.csv", index=False)
    for name in ("summary", "values", "ranks", "mean_ranks", "relation"):
        fname = "models.csv" if name == "values" else f"{name}.csv"
        getattr(result, name).to_csv(out / fname, index=False)
        files[name] = out / fname
    if not result.published.empty:
        files["published"] = out / "published.csv"
        result.published.to_csv(files["published"], index=False)
    cfg = result.study.config
    record = {
        "name": cfg.name,
        "source": result.study.source,
        "study": cfg.model_dump(mode="json"),
        "cells": [
            {
                "model": o.cell.model,
                "dataset": o.cell.dataset,
                "seed": o.cell.seed,
                "output": str(o.cell.output),
                "status": o.status,
                "reason": o.reason,
                "seconds": round(o.seconds, 3),
                "computed": list(o.computed),
                "errors": list(o.errors),
            }
            for o in result.outcomes
        ],
    }
    files["study"] = out / "study.json"
    files["study"].write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    if report:
        n_models = len({o.cell.model for o in result.outcomes if o.status == "done"})
        setup = (
            f"{n_models} models x {len(cfg.datasets)} datasets x {len(cfg.seeds)} seed(s): "
            f"{len(result.outcomes) - len(result.failed)} of {len(result.outcomes)} cells ran."
        )
        files.update(
            write_study_report(
                out, title=f"Study {cfg.name}", summary=result.summary, values=result.values,
                mean_ranks=result.mean_ranks, relation=result.relation, points=result.points,
                failed=[f"{o.cell.name}: {o.reason}" for o in result.failed], setup=setup,
                published=result.published,
                published_numbers=_numbers_of(result.study.published),
                settings=result.study.published,
            )
        )  # fmt: skip
    return files


def _numbers_of(settings: Mapping[str, tuple[str, str]]) -> pd.DataFrame | None:
    """The published numbers of the papers the study reproduces (None when none)."""
    from semshift.study.published import published_numbers

    papers = sorted({paper for paper, _ in settings.values()})
    if not papers:
        return None
    return pd.concat([published_numbers(p) for p in papers], ignore_index=True)


def run_study(
    study: str | Path | Mapping[str, Any] | Study,
    *,
    jobs: int | str | None = None,
    executor: str | None = None,
    force: bool = False,
    report: bool = True,
    log: Callable[[str], Any] | None = None,
) -> StudyResult:
    """Run every cell of a study (cached: finished cells cost nothing), then aggregate.

    Parameters
    ----------
    study : path, mapping or Study
        A study file, its contents or a :func:`load_study` result.
    jobs, executor : optional
        Override the study's ``jobs`` and ``executor``.
    force : bool
        Recompute every stage of every cell.
    report : bool
        Write ``report.md`` / ``report.html`` and the figures.
    log : callable, optional
        Called with one line per finished cell.

    Returns
    -------
    StudyResult
        Failed cells are in ``outcomes`` (and ``failed``) with their one-line reasons; the
        aggregates cover the cells that finished.
    """
    t0 = time.perf_counter()
    st = study if isinstance(study, Study) else load_study(study)
    say = log or (lambda _line: None)

    def progress(o: CellOutcome) -> None:
        if o.status == "done":
            what = ", ".join(o.computed) if o.computed else "all cached"
            say(f"{o.cell.name}: done in {o.seconds:.1f} s ({what})")
        else:
            say(f"{o.cell.name}: FAILED: {o.reason}")

    outcomes = run_cells(st, jobs=jobs, executor=executor, force=force, on_done=progress)
    results = collect_results(st, outcomes)
    boot = st.config.run.get("bootstrap", {}) or {}
    parts = summarise_study(
        results,
        n_resamples=int(boot.get("n_resamples", 1000)),
        level=float(boot.get("level", 0.95)),
        seed=int(boot.get("seed", 0)),
    )
    result = StudyResult(st, outcomes, results, **parts)
    if st.published:
        result.published = compare_published(result.summary, st.published, result.values)
    result.files = _write(result, report=report)
    result.seconds = time.perf_counter() - t0
    return result
