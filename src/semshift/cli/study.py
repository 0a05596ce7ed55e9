"""``semshift study``: run a study (models x datasets x seeds, each cell a cached run) and
check one before it runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from semshift.cli._app import register_command_group
from semshift.cli._options import ForceOption, QuietOption, Table, console

study_app = register_command_group(
    "study",
    typer.Typer(
        help="Studies: many models x datasets -> tables over models (see docs/studies.md).",
        no_args_is_help=True,
    ),
    builtin=True,
)

StudyArgument = Annotated[Path, typer.Argument(help="The study file (YAML).")]


@study_app.command("check")
def study_check(
    study: StudyArgument,
    files: Annotated[
        bool, typer.Option("--files/--no-files", help="Check every file and store the cells name.")
    ] = True,
) -> None:
    """Validate a study file and every cell's run configuration; list the cells."""
    from semshift.study import load_study

    st = load_study(study, check_files=files)
    table = Table(title=f"study {st.config.name}: {len(st.cells)} cells -> {st.output}")
    for col in ("model", "dataset", "seed", "done before"):
        table.add_column(col)
    for c in st.cells:
        done = (c.output / "results.parquet").is_file()
        table.add_row(c.model, c.dataset, str(c.seed), "yes" if done else "no")
    console.print(table)


@study_app.command("run")
def study_run(
    study: StudyArgument,
    jobs: Annotated[
        str | None,
        typer.Option(
            help="Cells at once on this machine: a number or 'auto' (default: the study's jobs)."
        ),
    ] = None,
    executor: Annotated[
        str | None, typer.Option(help="local or ray (default: the study's executor).")
    ] = None,
    report: Annotated[
        bool, typer.Option("--report/--no-report", help="Write report.md / report.html.")
    ] = True,
    force: ForceOption = False,
    quiet: QuietOption = False,
) -> None:
    """Run every cell of a study, then write its tables and report.

    Finished cells are cached (a re-run computes nothing; an added model only its cells). A
    failing cell is reported with its reason while the others finish; the command then exits 1.
    """
    from semshift.errors import InputError
    from semshift.study import load_study, run_study

    n_jobs: int | str | None = None
    if jobs is not None:
        if jobs != "auto" and not (jobs.isdigit() and int(jobs) > 0):
            raise InputError(f"--jobs: a positive number or 'auto', got {jobs!r}")
        n_jobs = jobs if jobs == "auto" else int(jobs)
    if executor is not None and executor not in ("local", "ray"):
        raise InputError(f"--executor: 'local' or 'ray', got {executor!r}")
    st = load_study(study)
    console.print(f"study {st.config.name}: {len(st.cells)} cells -> {st.output}")
    result = run_study(st, jobs=n_jobs, executor=executor, force=force, report=report,
                       log=None if quiet else console.print)  # fmt: skip
    done = len(result.outcomes) - len(result.failed)
    console.print(
        f"{done} of {len(result.outcomes)} cells done in {result.seconds:.1f} s | wrote "
        f"{st.output}/results.parquet, summary.csv" + (", report.html" if report else "")
    )
    if result.failed:
        console.print(f"[red]{len(result.failed)} cell(s) failed:[/red]")
        for o in result.failed:
            console.print(f"  {o.cell.name}: {o.reason}", markup=False)
        raise typer.Exit(1)
