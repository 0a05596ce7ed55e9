"""Running a study's cells: one after another, in worker processes, or on a Ray cluster.

Every cell is an ordinary :func:`semshift.run.run` into its own folder, so its stages are cached
by content hash: a re-run computes nothing, and a model added to the study computes only its
own cells. A cell that fails is reported with its one-line reason and the others go on.

Executors:

- ``local`` with ``jobs: 1``: in this process, one after another, dataset by dataset: the
  models of a dataset run one after the other and share its decoded images
  (:func:`semshift.features.decoded.shared_decoding`: a set is decoded once when it fits the
  memory budget, an eighth of the memory up to 2 GiB; the features come from identical uint8
  images, so no number changes).
- ``local`` with ``jobs: N`` (or ``auto``): ``N`` worker processes (spawned, so no thread pool
  is inherited), each with ``cores / N`` PyTorch threads; the study's ``plugins`` are imported
  in every worker. ``auto`` takes one worker per two cores, no more than the cells, and no more
  than the memory allows at 4 GiB a worker. Each worker shares decoded images between the
  cells it runs (the budget divided among the workers).
- ``ray``: one Ray task per cell (1 CPU each) on the cluster at ``ray_address`` (a local Ray
  instance when none is given).

The numbers do not depend on the executor: each cell's run is deterministic whatever its thread
count (the runner's contract), and cells share nothing but read-only inputs.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from semshift.features.decoded import default_budget, shared_decoding
from semshift.study.config import Cell, Study

__all__ = ["CellOutcome", "auto_jobs", "run_cells"]

#: memory a worker process is given room for when ``jobs: auto`` picks the worker count
WORKER_MEMORY = 4 << 30


@dataclass(frozen=True)
class CellOutcome:
    """What running one cell gave.

    Attributes
    ----------
    cell : Cell
    status : {"done", "failed"}
    reason : str
        The one-line reason of a failure ("" when done).
    seconds : float
        Wall time of the cell's run.
    errors : tuple of str
        Detector, protocol and report errors the run went on after (a done cell may have some).
    computed : tuple of str
        The stages that computed something (empty when everything was cached).
    """

    cell: Cell
    status: Literal["done", "failed"]
    reason: str = ""
    seconds: float = 0.0
    errors: tuple[str, ...] = ()
    computed: tuple[str, ...] = ()


def _one_line(err: BaseException) -> str:
    from semshift.errors import SemshiftError

    text = str(err).strip().splitlines()
    first = text[0] if text else ""
    if isinstance(err, SemshiftError):
        return first or type(err).__name__
    return f"{type(err).__name__}: {first}" if first else type(err).__name__


def _run_cell(cell: Cell, base_dir: str, force: bool) -> dict[str, Any]:
    """Run one cell; a plain dict back (it crosses process and Ray boundaries)."""
    from semshift.run import load_config, run

    t0 = time.perf_counter()
    try:
        cfg = load_config(cell.config, base_dir=base_dir, source=f"cell {cell.name}")
        result = run(cfg, progress=False, force=force)
    except Exception as err:  # a failing cell must not stop the others
        return {"status": "failed", "reason": _one_line(err), "seconds": time.perf_counter() - t0}
    computed = [name for name, rec in result.stages.items() if not rec.cached]
    return {
        "status": "done",
        "seconds": time.perf_counter() - t0,
        "errors": list(result.errors),
        "computed": computed,
    }


def _dataset_major(cells: Sequence[Cell]) -> list[int]:
    """Cell positions in the order the cells run: dataset by dataset (then seed), so that the
    models of one dataset follow each other and share its decoded images."""
    first = {d: k for k, d in reversed(list(enumerate(c.dataset for c in cells)))}
    return sorted(range(len(cells)), key=lambda k: (first[cells[k].dataset], cells[k].seed, k))


#: the worker process's :func:`shared_decoding` context, open for the process's lifetime
_WORKER_DECODING = contextlib.ExitStack()


def _init_worker(plugins: Sequence[str], threads: int, decoded_bytes: int = 0) -> None:
    import importlib

    import torch

    torch.set_num_threads(max(1, threads))
    if decoded_bytes > 0:
        _WORKER_DECODING.enter_context(shared_decoding(decoded_bytes))
    for name in plugins:
        importlib.import_module(name)


def auto_jobs(n_cells: int) -> int:
    """Worker processes for ``jobs: auto``: one per two cores, within the cells and memory."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    by_cores = max(1, (cores or 1) // 2)
    try:
        avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        by_memory = max(1, int(avail // WORKER_MEMORY))
    except (ValueError, OSError, AttributeError):
        by_memory = by_cores
    return max(1, min(by_cores, by_memory, n_cells))


def _outcome(cell: Cell, got: dict[str, Any]) -> CellOutcome:
    return CellOutcome(
        cell,
        got["status"],
        got.get("reason", ""),
        float(got.get("seconds", 0.0)),
        tuple(got.get("errors", ())),
        tuple(got.get("computed", ())),
    )


def run_cells(
    study: Study,
    cells: Sequence[Cell] | None = None,
    *,
    jobs: int | str | None = None,
    executor: str | None = None,
    force: bool = False,
    on_done: Callable[[CellOutcome], Any] | None = None,
) -> list[CellOutcome]:
    """Run ``cells`` (default: all of the study's) and return their outcomes in cell order.

    Parameters
    ----------
    jobs, executor : optional
        Override the study's ``jobs`` and ``executor``.
    force : bool
        Recompute every stage of every cell.
    on_done : callable, optional
        Called with each outcome as it arrives (progress lines).
    """
    todo = list(study.cells if cells is None else cells)
    how = executor or study.config.executor
    want = jobs if jobs is not None else study.config.jobs
    n = auto_jobs(len(todo)) if want == "auto" else max(1, min(int(want), len(todo) or 1))
    say = on_done or (lambda _o: None)
    base = str(study.base_dir)
    results: dict[int, CellOutcome] = {}
    if how == "ray":
        results = _on_ray(study, todo, base, force, say)
    elif n == 1:
        with shared_decoding():
            for k in _dataset_major(todo):
                results[k] = _outcome(todo[k], _run_cell(todo[k], base, force))
                say(results[k])
    else:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor, as_completed

        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        threads = max(1, (cores or 1) // n)
        with ProcessPoolExecutor(
            max_workers=n,
            mp_context=mp.get_context("spawn"),
            initializer=_init_worker,
            initargs=(tuple(study.config.plugins), threads, default_budget() // n),
        ) as pool:
            futures = {
                pool.submit(_run_cell, todo[k], base, force): k for k in _dataset_major(todo)
            }
            for fut in as_completed(futures):
                k = futures[fut]
                try:
                    got = fut.result()
                except Exception as err:  # a worker that died
                    got = {"status": "failed", "reason": f"worker process: {_one_line(err)}"}
                results[k] = _outcome(todo[k], got)
                say(results[k])
    return [results[k] for k in range(len(todo))]


def _on_ray(
    study: Study,
    todo: Sequence[Cell],
    base: str,
    force: bool,
    say: Callable[[CellOutcome], Any],
) -> dict[int, CellOutcome]:
    """One Ray task per cell (1 CPU), on ``ray_address`` or a local instance."""
    from semshift.features.ray_executor import connect

    ray = connect(study.config.ray_address)
    plugins = tuple(study.config.plugins)

    def task(cell: Cell) -> dict[str, Any]:
        _init_worker(plugins, 1)
        return _run_cell(cell, base, force)

    remote = ray.remote(num_cpus=1)(task)
    refs = {remote.remote(c): k for k, c in enumerate(todo)}
    results: dict[int, CellOutcome] = {}
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        k = refs[ready[0]]
        try:
            got = ray.get(ready[0])
        except Exception as err:  # a task that died
            got = {"status": "failed", "reason": f"ray task: {_one_line(err)}"}
        results[k] = _outcome(todo[k], got)
        say(results[k])
    return results
