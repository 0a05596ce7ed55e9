"""`semshift benchmark ...`: the seed papers' benchmarks."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from semshift.errors import SemshiftError

if TYPE_CHECKING:
    pass

from semshift.cli import _choices
from semshift.cli._app import benchmark_app
from semshift.cli._options import (
    ConventionsOption,
    ForceOption,
    QuietOption,
    Table,
    WaitOption,
    console,
    detector_spec,
    print_run,
)

# --------------------------------------------------------------------------- benchmark


def _benchmark_argument() -> Any:
    """The NAME argument; called in each signature, which typer evaluates when it builds the
    command, so a benchmark registered after this module was imported is listed too."""
    return typer.Argument(
        help=f"Benchmark name (semshift benchmark list): {_choices.listed_names('benchmarks')}."
    )


RootOption = Annotated[
    list[str] | None,
    typer.Option("--root", help="KEY=PATH: a dataset root the benchmark reads (repeatable)."),
]
TrainPerClassOption = Annotated[
    int | None,
    typer.Option(
        "--train-per-class", help="ImageNet benchmarks: training images per class (default 50)."
    ),
]
KeepMediumOption = Annotated[
    bool,
    typer.Option(
        "--keep-medium",
        help="SSB fine-grained: keep Medium as its own set (SSB merges it into Hard).",
    ),
]
SampleOption = Annotated[
    int | None,
    typer.Option(
        "--sample",
        help="A quick look: N images of each set, evenly spaced over its list (labelled as a "
        "sample; not comparable with the literature).",
    ),
]
CBySeverityOption = Annotated[
    bool,
    typer.Option("--c-by-severity", help="imagenet-ood: one ImageNet-C set per severity (1..5)."),
]
CorruptOption = Annotated[
    list[str] | None,
    typer.Option(
        "--corrupt",
        help="imagenet-ood: NAME:SEVERITY, ImageNet val with semshift's own corruption as a "
        f"covariate set (repeatable); NAME: {_choices.listed(_choices.CORRUPTIONS)}.",
    ),
]

#: benchmark option -> the command-line flag that sets it
_BENCHMARK_FLAGS = {
    "train_per_class": "--train-per-class",
    "medium_as_hard": "--keep-medium",
    "c_by_severity": "--c-by-severity",
    "corruptions": "--corrupt",
    "sample": "--sample",
}


def _roots_option(items: list[str] | None) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for item in items or []:
        key, sep, path = item.partition("=")
        if not sep or not key or not path:
            raise SemshiftError(f"--root: expected KEY=PATH, got {item!r}")
        if key in out:
            raise SemshiftError(f"--root: {key} given twice")
        out[key] = Path(path)
    return out


def _benchmark_options(
    name: str,
    train_per_class: int | None = None,
    keep_medium: bool = False,
    sample: int | None = None,
    c_by_severity: bool = False,
    corrupt: list[str] | None = None,
) -> dict[str, object]:
    """The benchmark options the flags set, each checked to apply to benchmark ``name``."""
    from semshift.catalog.benchmarks import get_benchmark

    bench = get_benchmark(name)
    for flag, value in (("--train-per-class", train_per_class), ("--sample", sample)):
        if value is not None and value < 1:
            raise SemshiftError(f"{flag}: expected a positive number, got {value}")
    options: dict[str, object] = {}
    if train_per_class is not None:
        options["train_per_class"] = train_per_class
    if keep_medium:
        options["medium_as_hard"] = False
    if sample is not None:
        options["sample"] = sample
    if c_by_severity:
        options["c_by_severity"] = True
    if corrupt:
        options["corruptions"] = tuple(corrupt)
    takes = [*bench.options, "sample"]
    for key in options:
        if key not in takes:
            flags = ", ".join(_BENCHMARK_FLAGS[k] for k in takes)
            raise SemshiftError(
                f"{_BENCHMARK_FLAGS[key]} does not apply to {name} (it takes {flags})"
            )
    return options


@benchmark_app.command("list")
def benchmark_list(
    wide: Annotated[
        bool, typer.Option("--wide", help="Every set with its size, the list source and hash.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Every benchmark's details as JSON (for scripts).")
    ] = False,
) -> None:
    """The benchmarks: one line each (name, sets, roots needed, description); --wide for the
    sets and list sources, --json for scripts."""
    import json

    from semshift.catalog.benchmarks import get_benchmark, list_benchmarks

    benches = [get_benchmark(name) for name in list_benchmarks()]
    if as_json:
        out = []
        for b in benches:
            info = b.info
            out.append({
                "name": b.name, "description": b.description, "roots": list(b.roots),
                "optional_roots": list(b.optional_roots), "protocols": list(b.protocols),
                "sets": [{"name": s.name, "role": s.role, "images": s.images,
                          "classes": s.classes, "optional": s.optional} for s in b.sets()],
                "lists": f"{info.repository}@{info.commit}", "license": info.license,
                "list_hash": b.list_hash,
            })  # fmt: skip
        typer.echo(json.dumps(out, indent=1))
        return
    if not wide:  # one line per benchmark, whatever the terminal's width
        rows = []
        for b in benches:
            sets = b.sets()
            n_opt = sum(s.optional for s in sets)
            roots = ",".join(b.roots) + (f" +{len(b.optional_roots)}" if b.optional_roots else "")
            rows.append((b.name, f"{len(sets) - n_opt}" + (f"+{n_opt}" if n_opt else ""), roots))
        fixed = [max(len(r[i]) for r in [*rows, ("name", "sets", "roots")]) for i in range(3)]
        room = max(16, console.width - sum(fixed) - 13)  # 13: the borders and padding
        table = Table(title="benchmarks (--wide: sets and list sources; --json: everything)")
        for head, w in zip(("name", "sets", "roots"), fixed, strict=True):
            table.add_column(
                head, no_wrap=True, min_width=w, justify="right" if head == "sets" else "left"
            )
        table.add_column("description", no_wrap=True, max_width=room)
        for b, row in zip(benches, rows, strict=True):
            desc = b.description if len(b.description) <= room else b.description[: room - 1] + "…"
            table.add_row(*row, desc)
        console.print(table)
        return
    table = Table(title="benchmarks")
    table.add_column("name", no_wrap=True)
    table.add_column("sets (images / classes)")
    table.add_column("roots")
    table.add_column("lists", overflow="fold")
    table.add_column("list hash", no_wrap=True)
    for b in benches:
        sets = b.sets()
        shown = []
        for s in sets:
            size = "/".join("?" if v is None else f"{v:,}" for v in (s.images, s.classes))
            shown.append(f"{s.name} {size}" + (" (optional)" if s.optional else ""))
        roots = ", ".join(b.roots) + (
            f" (optional {', '.join(b.optional_roots)})" if b.optional_roots else ""
        )
        info = b.info
        table.add_row(
            b.name, "\n".join(shown), roots, f"{info.repository}@{info.commit}", b.list_hash
        )
    console.print(table)


@benchmark_app.command("check")
def benchmark_check(
    name: Annotated[str, _benchmark_argument()],
    root: RootOption = None,
    train_per_class: TrainPerClassOption = None,
    keep_medium: KeepMediumOption = False,
    sample: SampleOption = None,
    c_by_severity: CBySeverityOption = False,
    corrupt: CorruptOption = None,
) -> None:
    """Verify that every image the benchmark lists is on disk; print the count per set."""
    from semshift.catalog.benchmarks import check_benchmark

    options = _benchmark_options(name, train_per_class, keep_medium, sample, c_by_severity, corrupt)
    result = check_benchmark(name, _roots_option(root), **options)
    table = Table(title=f"{result.name} (lists {result.list_hash})")
    table.add_column("set")
    table.add_column("images", justify="right")
    table.add_column("listed", justify="right")
    for set_name, n in result.counts.items():
        want = result.expected.get(set_name)
        table.add_row(set_name, f"{n:,}", "-" if want is None else f"{want:,}")
    console.print(table)
    console.print(f"{result.total:,} images present, checked in {result.seconds:.1f} s")


@benchmark_app.command("run")
def benchmark_run(
    name: Annotated[str, _benchmark_argument()],
    model: Annotated[str, typer.Option("--model", help="Model name (semshift.features).")],
    weights: Annotated[
        str, typer.Option("--weights", help="Weights file or torchvision name (IMAGENET1K_V2).")
    ],
    out: Annotated[Path, typer.Option("--out", help="Output folder (config.json goes here).")],
    root: RootOption = None,
    detector: Annotated[
        list[str] | None,
        typer.Option(
            "--detector",
            "-d",
            help="NAME or NAME:KEY=VALUE,... (repeatable; default msp, mls): "
            + _choices.detectors()
            + ".",
        ),
    ] = None,
    conventions: ConventionsOption = None,
    num_classes: Annotated[
        int | None, typer.Option("--num-classes", help="Head size (default: the benchmark's).")
    ] = None,
    preset: Annotated[
        str | None, typer.Option("--preset", help="Preprocessing preset (default: the model's).")
    ] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Extraction batch size.")] = 64,
    bootstrap: Annotated[
        int | None, typer.Option("--bootstrap", help="Bootstrap resamples (0: no CIs).")
    ] = None,
    train_per_class: TrainPerClassOption = None,
    keep_medium: KeepMediumOption = False,
    sample: SampleOption = None,
    c_by_severity: CBySeverityOption = False,
    corrupt: CorruptOption = None,
    force: ForceOption = False,
    wait: WaitOption = True,
    quiet: QuietOption = False,
) -> None:
    """Run a benchmark; writes OUT/config.json (re-run it with semshift run) and benchmark.json."""
    import json

    from semshift.catalog.benchmarks import DEFAULT_DETECTORS, benchmark_config, benchmark_record
    from semshift.run import load_config, run

    m: dict[str, object] = {"name": model, "weights": weights, "batch_size": batch_size}
    if num_classes is not None:
        m["num_classes"] = num_classes
    if preset is not None:
        m["preset"] = preset
    if weights and not Path(weights).is_absolute() and Path(weights).is_file():
        m["weights"] = str(Path(weights).resolve())  # config.json lives in OUT, not here
    options = _benchmark_options(name, train_per_class, keep_medium, sample, c_by_severity, corrupt)
    cfg = benchmark_config(
        name,
        roots=_roots_option(root),
        model=m,
        out=out,
        detectors=[detector_spec(d) for d in detector] if detector else DEFAULT_DETECTORS,
        conventions=conventions or "exact",
        **options,
    )
    if bootstrap is not None:
        cfg["bootstrap"] = {"n_resamples": bootstrap}
    where = f"semshift benchmark run {name}"
    loaded = load_config(cfg, source=where)  # validated before anything is written
    record = benchmark_record(name, cfg["conventions"], sample)
    files = {  # committed with the results: a killed run leaves the previous ones intact
        "config.json": json.dumps(cfg, indent=2) + "\n",
        "benchmark.json": json.dumps(record, indent=2) + "\n",
    }
    result = run(loaded, progress=not quiet, force=force, wait=wait, files=files)
    print_run(result)
