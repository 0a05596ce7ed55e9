"""`semshift run`, `evaluate`, `ensemble` and `report`: runs and their outputs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from semshift.errors import SemshiftError

if TYPE_CHECKING:
    pass

from semshift.cli import _choices
from semshift.cli._app import app
from semshift.cli._options import (
    ConventionsOption,
    ForceOption,
    QuietOption,
    WaitOption,
    console,
    detector_spec,
    memory,
    print_run,
)


@app.command("run")
def run_config(
    config: Annotated[Path, typer.Argument(help="YAML run configuration (see examples/configs).")],
    conventions: ConventionsOption = None,
    force: ForceOption = False,
    wait: WaitOption = True,
    quiet: QuietOption = False,
) -> None:
    """Run a benchmark: split, extract, score, evaluate and report, each stage cached."""
    from semshift.run import load_config, run

    over = {"conventions": conventions} if conventions is not None else None
    result = run(load_config(config, overrides=over), progress=not quiet, force=force, wait=wait)
    print_run(result)


def __getattr__(name: str) -> object:
    """``EVALUATE_PROTOCOLS`` (from the protocol registry) and the option parsers that moved to
    :mod:`semshift.run.from_stores` (``selections``, ``search_spec``), imported on first use:
    the protocol registry and semshift.run take a second to import, which every ``semshift``
    call would pay at start-up."""
    if name == "EVALUATE_PROTOCOLS":
        from semshift.run.from_stores import evaluate_protocols

        return tuple(evaluate_protocols())
    if name in ("selections", "search_spec", "_named_stores"):
        from semshift.run import from_stores

        return getattr(from_stores, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@app.command("evaluate")
def evaluate_stores(
    test: Annotated[Path, typer.Option(help="Feature store of ID test data.")],
    train: Annotated[
        Path | None,
        typer.Option(
            help="Feature store of ID training data (fits detectors); leave it out to run only "
            "the detectors that need no fitting (msp, energy, mls ...)."
        ),
    ] = None,
    ood: Annotated[
        list[str] | None, typer.Option(help="Semantic-shift set NAME=STORE (repeatable).")
    ] = None,
    covariate: Annotated[
        list[str] | None,
        typer.Option(help="Covariate-shift set NAME=STORE: ID classes, labels known (repeatable)."),
    ] = None,
    val: Annotated[
        Path | None, typer.Option(help="Feature store of ID validation data (temperature etc.).")
    ] = None,
    select: Annotated[
        list[str] | None,
        typer.Option(
            help="Rows of one set by a group column, SET:KEY=VALUE with SET train, val, test or "
            "a set name (repeatable; values of one key are alternatives)."
        ),
    ] = None,
    detector: Annotated[
        list[str] | None,
        typer.Option(
            "--detector",
            "-d",
            help="Detector NAME or NAME:KEY=VALUE,... with parameters, e.g. knn:k=50 (repeatable; "
            "default: every detector the stores allow): " + _choices.detectors() + ".",
        ),
    ] = None,
    protocol: Annotated[
        list[str] | None,
        typer.Option(
            help="Protocol (repeatable; default osr): "
            + _choices.listed_names("evaluate_protocols")
            + "."
        ),
    ] = None,
    metric: Annotated[
        list[str] | None,
        typer.Option(
            help="Ranking metric (repeatable; default auroc fpr95 aupr_in aupr_out): "
            + _choices.listed_names("ranking_metrics")
            + "."
        ),
    ] = None,
    conventions: ConventionsOption = None,
    operating_point: Annotated[
        float | None,
        typer.Option(
            "--operating-point",
            help="ID recall of the rejection threshold (e.g. 0.95, chosen on --val, else on half "
            "of --test): rejection and accepted-and-wrong rates per set and an image gallery.",
        ),
    ] = None,
    bootstrap: Annotated[
        int, typer.Option(help="Bootstrap resamples for confidence intervals (0: none).")
    ] = 1000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap.")] = 0,
    out: Annotated[Path, typer.Option(help="Output directory (results, scores, cache).")] = Path(
        "runs/evaluate"
    ),
    report: Annotated[
        bool, typer.Option("--report/--no-report", help="Write report.html and report.md.")
    ] = True,
    mixed_models: Annotated[
        bool,
        typer.Option(
            "--mixed-models",
            help="Accept stores of different models or heads (a cross-model study; the "
            "report says so). Without it such stores are refused.",
        ),
    ] = False,
    search: Annotated[
        bool,
        typer.Option(
            "--search",
            help="Choose hyperparameters on --val vs --val-ood (never on test data) over each "
            "detector's declared candidates; model-level detectors are not searched.",
        ),
    ] = False,
    search_space: Annotated[
        list[str] | None,
        typer.Option(
            "--search-space",
            help="Search only this detector, NAME or NAME:KEY=V1,V2,... with candidates, e.g. "
            "knn:k=1,10,50 (repeatable; implies --search).",
        ),
    ] = None,
    val_ood: Annotated[
        str | None,
        typer.Option(
            "--val-ood",
            help="Validation OOD store for --search, STORE or NAME=STORE: searched on, never "
            "evaluated; its classes must be unrelated to every --ood class.",
        ),
    ] = None,
    search_objective: Annotated[
        str,
        typer.Option(
            "--search-objective",
            help="Ranking metric the search optimises: "
            + _choices.listed_names("ranking_metrics")
            + ".",
        ),
    ] = "auroc",
    force: ForceOption = False,
    wait: WaitOption = True,
    quiet: QuietOption = False,
) -> None:
    """Evaluate detectors on feature stores: fit on --train, score --test and the shifted sets.

    What semshift run does with a config of stores; that config goes to OUT/config.json.
    """
    import json

    from semshift.run import load_config, run
    from semshift.run.from_stores import WHERE, config_from_stores, option_words

    cfg = config_from_stores(
        train, test, ood=ood, covariate=covariate, val=val, select=select, detectors=detector,
        protocols=protocol, metrics=metric, conventions=conventions,
        operating_point=operating_point, bootstrap=bootstrap, seed=seed, output=out,
        report=report, mixed_models=mixed_models, search=search, search_space=search_space,
        val_ood=val_ood, search_objective=search_objective,
    )  # fmt: skip
    files = {"config.json": json.dumps(cfg, indent=2) + "\n"}  # committed with the results
    lower = (
        "lower it with SEMSHIFT_THREADS=1 (fewer threads), SEMSHIFT_BLOCK_ROWS=4096 (smaller "
        "score blocks) or fewer rows (--select); finished stages stay in the cache of "
        f"{out}, its results.json says why, and the same command goes on from them"
    )
    try:
        with memory("evaluating", lower):
            result = run(
                load_config(cfg, source=WHERE), progress=not quiet, force=force, wait=wait,
                files=files,
            )  # fmt: skip
    except SemshiftError as err:  # name the option, not the config key it became
        raise SemshiftError(option_words(str(err), cfg)) from None
    print_run(result)


@app.command("ensemble")
def ensemble_stores(
    member: Annotated[
        list[str],
        typer.Option(help="Feature store of one network over the images (repeatable, 2 or more)."),
    ],
    out: Annotated[Path, typer.Option(help="CSV to write: sample_id, path, label, score.")],
    rule: Annotated[
        str, typer.Option(help="msp (max of the mean softmax, default) or energy (mean logits).")
    ] = "msp",
    detector: Annotated[
        str | None,
        typer.Option(
            "--detector",
            "-d",
            help="Average this detector's scores instead (NAME or NAME:KEY=VALUE,...); each "
            "member's detector is fitted on its --train store.",
        ),
    ] = None,
    train: Annotated[
        list[str] | None,
        typer.Option(help="Training store of each member, in --member order (with --detector)."),
    ] = None,
    select: Annotated[
        list[str] | None,
        typer.Option(help="Rows of every member by a group column, KEY=VALUE (repeatable)."),
    ] = None,
) -> None:
    """Deep ensemble: one score per image from several networks' stores of the same images.

    Higher = more in-distribution; see docs/methods.md#deep-ensemble.
    """
    from semshift.features.ensemble import ensemble_detector_scores, ensemble_scores
    from semshift.features.store import atomic_write, open_verified
    from semshift.run.from_stores import selections

    for item in select or []:
        if "=" not in item or item.startswith("="):
            raise SemshiftError(f"--select: expected KEY=VALUE, got {item!r}")
    cond = selections([f"members:{s}" for s in select or []], {"members"}).get("members", {})
    if detector is None and train:
        raise SemshiftError("--train goes with --detector (the logit rules fit nothing)")
    if train and len(train) != len(member):
        raise SemshiftError(
            f"--train: {len(train)} training store(s) for {len(member)} --member store(s); give "
            "one training store per member, in --member order"
        )
    # every store verified; each --train store must be of its member's model (members differ)
    paths = {f"--member {k}": m for k, m in enumerate(member)}
    paths.update({f"--train {k}": t for k, t in enumerate(train or [])})
    pairs = [(f"--member {k}", f"--train {k}") for k in range(len(train or []))]
    opened = list(open_verified(paths, same_model=pairs).values())
    members = [st.select(**cond) for st in opened[: len(member)]]
    if detector is None:
        result = ensemble_scores(members, rule)
    else:
        spec = detector_spec(detector)
        params = spec["params"]
        assert isinstance(params, dict)
        trains = [st.all() for st in opened[len(member) :]]
        result = ensemble_detector_scores(trains, members, str(spec["name"]), params)
    frame = result.index[["sample_id", "path", "label"]].assign(score=result.scores)
    out.parent.mkdir(parents=True, exist_ok=True)
    data = frame.to_csv(index=False).encode()
    atomic_write(out, lambda f: f.write(data))  # written aside: a full disk leaves no part
    console.print(
        f"ensemble {result.rule} of {len(members)} members: {len(frame):,} images -> {out}"
    )


@app.command("report")
def report_run(
    run_dir: Annotated[Path, typer.Argument(help="Output directory of semshift run / evaluate.")],
    format: Annotated[
        list[str] | None, typer.Option("--format", help="html and/or md (default both).")
    ] = None,
    title: Annotated[
        str | None, typer.Option(help="Report title (default: the run's name).")
    ] = None,
    quiet: QuietOption = False,
) -> None:
    """Write the report of a finished run again (tables and figures from its results).

    A folder whose run did not finish (killed or failed part-way) is refused, exit 2.
    """
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from semshift.progress import bar_console, progress_wanted
    from semshift.run.report import rewrite_report

    t0 = time.perf_counter()
    spinner = Progress(
        SpinnerColumn(), TextColumn(f"writing the report of {run_dir}"), TimeElapsedColumn(),
        console=bar_console(), disable=not progress_wanted(not quiet), transient=True,
    )  # fmt: skip
    with spinner:
        spinner.add_task("report", total=None)
        paths, committed = rewrite_report(run_dir, formats=format or ("html", "md"), title=title)
    if not committed:
        console.print(
            f"[yellow]warning[/yellow]: {run_dir} has no commit record (written by an older "
            "semshift), so it cannot be checked for a run stopped part-way; run it again to "
            "commit it"
        )
    for kind in ("html", "md"):
        path = getattr(paths, kind, None)
        if path is not None:
            console.print(f"report: {path}")
    console.print(f"{len(paths.figures)} figures in {time.perf_counter() - t0:.1f} s")
