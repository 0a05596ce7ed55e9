"""`semshift run`, `evaluate`, `ensemble` and `report`: runs and their outputs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from semshift.errors import SemshiftError

if TYPE_CHECKING:
    pass

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


#: protocols ``semshift evaluate`` runs on stores alone (the others need a model or more config)
EVALUATE_PROTOCOLS = ("osr", "newclass_failure", "generalisation", "operating_point")


def _named_stores(items: list[str] | None, option: str) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for item in items or []:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise SemshiftError(f"{option}: expected NAME=STORE, got {item!r}")
        if name in out or name in ("train", "val", "test"):
            raise SemshiftError(f"{option}: set name {name!r} is taken; give each set its own name")
        out[name] = Path(path)
    return out


def selections(items: list[str] | None, sets: set[str]) -> dict[str, dict[str, list[object]]]:
    """``SET:KEY=VALUE`` options -> per set, per column, the accepted values.

    A value that reads as a number or a boolean also matches that number or boolean, so
    ``severity=3`` selects an integer column as well as a text one.
    """
    out: dict[str, dict[str, list[object]]] = {}
    for item in items or []:
        name, colon, cond = item.partition(":")
        key, eq, value = cond.partition("=")
        if not colon or not eq or not key:
            raise SemshiftError(f"--select: expected SET:KEY=VALUE, got {item!r}")
        if name not in sets:
            raise SemshiftError(
                f"--select {item!r}: no set {name!r}; sets: {', '.join(sorted(sets))}"
            )
        values: list[object] = [value]
        for conv in (int, float):
            try:
                values.append(conv(value))
                break
            except ValueError:
                continue
        if value.lower() in ("true", "false"):
            values.append(value.lower() == "true")
        out.setdefault(name, {}).setdefault(key, []).extend(values)
    return out


def search_spec(item: str) -> str | dict[str, object]:
    """``knn`` or ``knn:k=1,10,50,alpha=0.1,1`` -> a ``search.detectors`` entry of the config.

    After the colon, ``KEY=V1,V2,...`` gives a hyperparameter's candidates in the order tried;
    a value without ``=`` continues the previous key's list. Values are read as YAML scalars.
    """
    import yaml

    name, colon, rest = item.partition(":")
    if not colon:
        return name.strip()
    params: dict[str, list[object]] = {}
    key: str | None = None
    for token in rest.split(","):
        k, eq, value = token.partition("=")
        if eq:
            key = k.strip()
            if not key or key in params:
                raise SemshiftError(
                    f"--search-space {item!r}: expected NAME:KEY=V1,V2,... with each KEY once"
                )
            params[key] = []
        else:
            value = token
        if key is None or not value.strip():
            raise SemshiftError(f"--search-space {item!r}: expected NAME or NAME:KEY=V1,V2,...")
        try:
            params[key].append(yaml.safe_load(value))
        except yaml.YAMLError:
            params[key].append(value.strip())
    return {"name": name.strip(), "params": params}


@app.command("evaluate")
def evaluate_stores(
    train: Annotated[
        Path, typer.Option(help="Feature store of ID training data (fits detectors).")
    ],
    test: Annotated[Path, typer.Option(help="Feature store of ID test data.")],
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
            "default: every detector the stores allow).",
        ),
    ] = None,
    protocol: Annotated[
        list[str] | None,
        typer.Option(
            help="osr (default), newclass_failure, generalisation, operating_point (repeatable)."
        ),
    ] = None,
    metric: Annotated[
        list[str] | None,
        typer.Option(help="Ranking metric (repeatable; default auroc fpr95 aupr_in aupr_out)."),
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
        typer.Option("--search-objective", help="Ranking metric the search optimises."),
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

    oods = _named_stores(ood, "--ood")
    covs = _named_stores(covariate, "--covariate")
    clash = sorted(set(oods) & set(covs))
    if clash:
        raise SemshiftError(f"--ood and --covariate: set name(s) {', '.join(clash)} given twice")
    if not oods and not covs:
        raise SemshiftError("give at least one --ood NAME=STORE or --covariate NAME=STORE")
    protocols = list(dict.fromkeys(protocol or ["osr"]))
    bad = [p for p in protocols if p not in EVALUATE_PROTOCOLS]
    if bad:
        raise SemshiftError(
            f"--protocol {bad[0]!r}: evaluate runs {', '.join(EVALUATE_PROTOCOLS)}; the others "
            "need a model or more settings: use semshift run with a config"
        )
    search = search or bool(search_space)
    val_name: str | None = None
    val_path = Path()
    if search:
        if val_ood is None:
            raise SemshiftError("--search needs --val-ood STORE: the validation OOD set")
        if val is None:
            raise SemshiftError(
                "--search needs --val STORE: ID validation rows the detectors are not fitted on"
            )
        named = _named_stores([val_ood if "=" in val_ood else f"val_ood={val_ood}"], "--val-ood")
        val_name, val_path = next(iter(named.items()))
        if val_name in oods or val_name in covs:
            raise SemshiftError(f"--val-ood: set name {val_name!r} is taken by another set")
    elif val_ood is not None:
        raise SemshiftError("--val-ood goes with --search (or --search-space)")
    names = {"train": "id_train", "val": "id_val", "test": "id_test"}
    sets = {*names, *oods, *covs, *([val_name] if val_name else [])}
    sel = selections(select, sets - ({"val"} if val is None else set()))

    def source(name: str, path: Path) -> dict[str, object]:
        return {"store": str(path.absolute()), "select": sel.get(name, {})}

    data: dict[str, object] = {"id_train": source("train", train), "id_test": source("test", test)}
    if val is not None:
        data["id_val"] = source("val", val)
    data["sets"] = {
        **{n: {**source(n, p), "role": "ood", "split": n} for n, p in oods.items()},
        **{n: {**source(n, p), "role": "covariate"} for n, p in covs.items()},
    }
    if val_name is not None:  # searched on, never evaluated
        data["sets"][val_name] = {**source(val_name, val_path), "role": "ood"}  # type: ignore[index]
    if mixed_models:
        data["mixed_models"] = True
    protocols_cfg: dict[str, dict[str, object]] = {p: {} for p in protocols}
    if operating_point is not None:
        protocols_cfg["operating_point"] = {"recall": operating_point}
    cfg: dict[str, object] = {
        "name": out.name or "evaluate",
        "output": str(out.absolute()),
        "seed": seed,
        "data": data,
        "detectors": [detector_spec(d) for d in dict.fromkeys(detector)] if detector else "all",
        "protocols": protocols_cfg,
        "bootstrap": {"n_resamples": bootstrap, "seed": seed},
        "report": {"formats": ["html", "md"]} if report else None,
    }
    if metric:
        cfg["metrics"] = list(dict.fromkeys(metric))
    if val_name is not None:
        cfg["search"] = {
            "val_ood": val_name,
            "detectors": [search_spec(s) for s in dict.fromkeys(search_space)]
            if search_space
            else "all",
            "objective": search_objective,
        }
    if conventions is not None:
        cfg["conventions"] = conventions
    where = "semshift evaluate"
    files = {"config.json": json.dumps(cfg, indent=2) + "\n"}  # committed with the results
    lower = (
        "lower it with SEMSHIFT_THREADS=1 (fewer threads), SEMSHIFT_BLOCK_ROWS=4096 (smaller "
        "score blocks) or fewer rows (--select); finished stages stay in the cache of "
        f"{out}, its results.json says why, and the same command goes on from them"
    )
    try:
        with memory("evaluating", lower):
            result = run(
                load_config(cfg, source=where), progress=not quiet, force=force, wait=wait,
                files=files,
            )  # fmt: skip
    except SemshiftError as err:  # name the option, not the config key it became
        raise SemshiftError(_option_words(str(err), where, set(oods), val_name)) from None
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


def _option_words(message: str, where: str, oods: set[str], val_ood: str | None = None) -> str:
    """``<where>: data.sets.easy.store: ...`` -> ``--ood easy: ...`` (evaluate's options)."""
    import re

    if not message.startswith(f"{where}: "):
        return message
    key, sep, rest = message[len(where) + 2 :].partition(": ")
    if not sep:
        return message
    fixed = {"data.id_train": "--train", "data.id_test": "--test", "data.id_val": "--val"}
    m = re.fullmatch(r"(data\.id_\w+|data\.sets\.([^.]+))(\.select\b.*)?(\.\w+)?", key)
    if m is not None:
        name = m.group(2)
        if name is not None and name == val_ood:
            option = "--val-ood"
        elif name is not None:
            option = f"--ood {name}" if name in oods else f"--covariate {name}"
        else:
            option = fixed.get(m.group(1), m.group(1))
        if m.group(3):
            option = f"--select for {option}"
        return f"{option}: {rest}"
    for prefix, option in (("detectors", "--detector"), ("metrics", "--metric"),
                           ("bootstrap", "--bootstrap"),
                           ("protocols.operating_point.recall", "--operating-point"),
                           ("conventions", "--conventions"),
                           ("search.val_ood", "--val-ood"),
                           ("search.detectors", "--search-space"),
                           ("search.objective", "--search-objective"),
                           ("search", "--search"),
                           ("protocols", "--protocol")):  # fmt: skip
        if key.startswith(prefix):
            return f"{option}: {rest}"
    return message


@app.command("report")
def report_run(
    run_dir: Annotated[Path, typer.Argument(help="Output directory of semshift run / evaluate.")],
    format: Annotated[
        list[str] | None, typer.Option("--format", help="html and/or md (default both).")
    ] = None,
    title: Annotated[
        str | None, typer.Option(help="Report title (default: the run's name).")
    ] = None,
) -> None:
    """Write the report of a finished run again (tables and figures from its results).

    A folder whose run did not finish (killed or failed part-way) is refused, exit 2.
    """
    from semshift.run.report import rewrite_report

    t0 = time.perf_counter()
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
