"""Options, parsers and printers shared by several command modules."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from semshift.errors import SemshiftError

if TYPE_CHECKING:
    from rich.table import Table as RichTable

    from semshift.run import RunResult


console = Console(soft_wrap=True)  # paths and messages are never broken across lines


def Table(*args: Any, **kwargs: Any) -> RichTable:
    """A :class:`rich.table.Table`, rich's table module imported on first use (10 ms that the
    commands printing no table, ``--version`` and ``taxonomy show``, do not pay)."""
    from rich.table import Table as table

    return table(*args, **kwargs)


#: the --taxonomy option every taxonomy-aware command takes
TaxonomyOption = Annotated[str, typer.Option(help="'wordnet' or a .csv/.json hierarchy.")]
#: the --force and --quiet options of the commands that drive the runner
ForceOption = Annotated[
    bool, typer.Option("--force", help="Recompute every stage, ignoring the cache.")
]
QuietOption = Annotated[
    bool, typer.Option("--quiet", help="No progress bars or stage timing lines.")
]
#: --device, --workers and --progress/--no-progress of the commands that run a model
DeviceOption = Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")]
WorkersOption = Annotated[int, typer.Option(help="DataLoader worker processes.")]
ProgressOption = Annotated[bool, typer.Option(help="Show the progress bar.")]
#: --wait/--no-wait of the commands that write an output folder or a store
WaitOption = Annotated[
    bool,
    typer.Option(
        "--wait/--no-wait",
        help="While another process writes the same output folder: wait for it, or exit 2.",
    ),
]


@contextmanager
def memory(doing: str, lower: str) -> Iterator[None]:
    """Out of memory (or threads) inside the block: one line saying what needed how much
    (:func:`semshift.errors.out_of_memory`), while ``doing`` what, and ``lower``: which
    options lower it. What was written before (shards, checkpoints, the run's cache) stays."""
    from semshift.errors import ResourceError, out_of_memory

    try:
        yield
    except (MemoryError, RuntimeError) as err:
        what = out_of_memory(err)
        if what is None:
            raise
        raise ResourceError(f"{what}, {doing}; {lower}") from None


#: the --conventions option of the commands that compute ranking metrics
ConventionsOption = Annotated[
    str | None,
    typer.Option(
        "--conventions",
        help="exact (default) or openood: FPR@95 and AUPR-In/Out exactly as OpenOOD v1.5's "
        "evaluator computes them (they differ on tied scores); recorded in the results.",
    ),
]


def detector_spec(item: str) -> dict[str, object]:
    """``knn`` or ``knn:k=50,backend=numpy`` -> a detector entry of the config
    (:func:`semshift.run.from_stores.detector_spec`, imported when first used)."""
    from semshift.run.from_stores import detector_spec as spec

    return spec(item)


#: A terminal's headline table shows at most this many detectors (the report has them all).
TERMINAL_ROWS = 14


def compact_table(table: Any, *, where: Any = None, rows: int = TERMINAL_ROWS) -> Any:
    """The headline table cut to fit a screen: with more than ``rows`` detectors, the best
    ones (by the mean of the row's values), MSP and MLS (the baselines) and the worst two, in
    the table's order, with a caption line saying how many are left out and where they are."""
    import dataclasses
    import math

    if len(table.rows) <= rows:
        return table
    sign = {"max": 1.0, "min": -1.0}
    ranked = [j for j, c in enumerate(table.columns) if c.direction in sign and c.label != "Acc"]
    means = []
    for line in table.cells:  # the mean of the ranked columns, each in its better direction
        vals = [sign[table.columns[j].direction] * line[j].value for j in ranked
                if line[j].ok and math.isfinite(line[j].value)]  # fmt: skip
        means.append(sum(vals) / len(vals) if vals else -math.inf)
    order = sorted(range(len(table.rows)), key=lambda i: (-means[i], table.rows[i]))
    keep = set(order[:2]) | set(order[-2:])  # the worst two, the best ones below
    keep |= {i for i, r in enumerate(table.rows) if r in ("msp", "mls")}
    for i in order:
        if len(keep) >= rows:
            break
        keep.add(i)
    idx = sorted(keep)
    report = f" in {where.md or where.html}" if where is not None else " in the report"
    note = (f"{len(table.rows) - len(idx)} of {len(table.rows)} detectors left out here (shown:"
            f" the best by mean, msp / mls and the worst two); every row is{report}.")  # fmt: skip
    return dataclasses.replace(
        table,
        rows=[table.rows[i] for i in idx],
        cells=[table.cells[i] for i in idx],
        caption=f"{table.caption} {note}",
    )


def print_run(result: RunResult) -> None:
    """The headline table, the errors the run went on after, and where everything is."""
    from semshift.report import headline_table

    if len(result.results):
        try:
            table = headline_table(result.results)
        except SemshiftError as exc:  # no protocol with a table: the rows are in results.csv
            console.print(f"no headline table: {exc}")
        else:
            console.print(compact_table(table, where=result.report).to_rich())
    search = (result.provenance.get("notes") or {}).get("search") or {}
    for det, chosen in (search.get("chosen") or {}).items():
        values = ", ".join(f"{k}={v}" for k, v in chosen.items())
        value = (search.get("value") or {}).get(det)
        on = f" ({search.get('objective')} {value:.4f} on validation)" if value is not None else ""
        console.print(f"search: {det} {values}{on}")
    from semshift.report.errors import group_errors

    groups = group_errors(result.results, result.errors)
    failures = [g for g in groups if g.kind == "failure"]
    if failures:
        where = " (details: the report's section Errors and N/A)" if result.report else ""
        console.print(
            f"[yellow]{len(failures)} warning(s)[/yellow], grouped by detector and reason{where}:"
        )
        for g in failures:
            console.print(f"- {g.line()}", markup=False, soft_wrap=True)
    total = result.provenance.get("total_seconds", 0.0)
    console.print(f"{result.output} ({len(result.results)} result rows, {total:.1f} s)")
    report = result.report
    for kind in ("html", "md"):
        path = getattr(report, kind, None)
        if path is not None:
            console.print(f"report: {path}")
