"""`semshift demo`: the offline demo."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from semshift.errors import SemshiftError

if TYPE_CHECKING:
    pass

from semshift.cli._app import app
from semshift.cli._options import ForceOption, QuietOption, console, print_run


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="Folder of the demo's data, caches and report.")] = Path(
        "semshift-demo"
    ),
    seed: Annotated[int, typer.Option(help="Seed of the data, the training and the run.")] = 0,
    size: Annotated[
        str, typer.Option(help="'full' (48 ID characters), or 'small': a quick smoke test.")
    ] = "full",
    all_detectors: Annotated[
        bool,
        typer.Option(
            "--all-detectors",
            help="Every model-level detector too (those fitted on the training images and "
            "the per-image gradient ones): about 5.5 minutes instead of 75 s on two cores.",
        ),
    ] = False,
    ssb_table1: Annotated[
        bool,
        typer.Option(
            "--ssb-table1",
            help="Instead of the default run: train CE, ARPL+CS, LogitNorm and OE over 3 seeds "
            "and write SSB Table 1 (Acc, AUROC and OSCR Easy / Hard, bootstrap CIs, DeLong "
            "tests against CE + MLS) under OUT/ssb_table1 (about 8 minutes on two cores).",
        ),
    ] = False,
    config: Annotated[
        Path | None,
        typer.Option(
            help="--ssb-table1 only: a YAML file (examples/configs/demo/ssb_table1.yaml)."
        ),
    ] = None,
    study: Annotated[
        bool,
        typer.Option(
            "--study",
            help="Instead of the default run: a study of four GlyphNet widths on the open-set "
            "bins (mean over models, ranks, accuracy vs AUROC across models) under OUT/study.",
        ),
    ] = False,
    force: ForceOption = False,
    quiet: QuietOption = False,
) -> None:
    """Run the offline demo: glyph images, a small CNN, every detector and protocol, a report."""
    from semshift.demo import build_demo_data
    from semshift.demo.presets import get_preset
    from semshift.run import run

    t0 = time.perf_counter()
    preset = get_preset(size)
    if ssb_table1 and study:
        raise SemshiftError("--ssb-table1 and --study are exclusive")
    if ssb_table1:
        _demo_table1(out, seed, preset.params, config, all_detectors, force, quiet)
        return
    if study:
        _demo_study(out, seed, preset, config, all_detectors, force, quiet)
        return
    if config is not None:
        raise SemshiftError("--config applies only with --ssb-table1")
    data = build_demo_data(out, seed=seed, params=preset.params, progress=not quiet)
    state = "reused" if data.cached else "built"
    console.print(
        f"demo data {state} in {time.perf_counter() - t0:.1f} s: {data.num_classes} ID characters, "
        f"{len(data.homoglyphs)} cross-script homoglyphs excluded from the open set, "
        f"{data.model_name} closed-set accuracy {100 * data.test_accuracy:.1f} % on the ID test set"
    )
    settings = {**preset.run, **({"detectors": "all"} if all_detectors else {})}
    result = run(data.config(out / "run", **settings), progress=not quiet, force=force)
    print_run(result)
    index = _write_store_index(out, result.stores())
    console.print(
        f"feature stores of the {index['n']} sets by name: {index['path']} (e.g. "
        f"{index['example']}); `semshift evaluate` takes them: README, 'The demo's feature stores'"
    )
    console.print(f"demo finished in {time.perf_counter() - t0:.1f} s")


def _write_store_index(out: Path, stores: dict[str, Path]) -> dict[str, Any]:
    """``<out>/stores.json``: set name -> feature store (relative to ``out`` when inside it)."""
    import json

    from semshift.features.store import atomic_write

    def rel(p: Path) -> str:
        try:
            return str(p.resolve().relative_to(out.resolve()))
        except ValueError:
            return str(p)

    index = {name: rel(path) for name, path in stores.items()}
    text = (json.dumps(index, indent=1) + "\n").encode()
    path = out / "stores.json"
    atomic_write(path, lambda f: f.write(text))
    first = next(iter(index.items()), ("", ""))
    return {"n": len(index), "path": path, "example": f"{first[0]}: {out / first[1]}"}


def _demo_study(
    out: Path,
    seed: int,
    preset: Any,
    config: Path | None,
    all_detectors: bool,
    force: bool,
    quiet: bool,
) -> None:
    """``semshift demo --study``: :func:`semshift.demo.study.demo_study`."""
    from semshift.demo.study import demo_study

    if config is not None or all_detectors:
        raise SemshiftError("--config and --all-detectors do not apply with --study")
    t0 = time.perf_counter()
    result = demo_study(
        out, seed=seed, params=preset.params, n_resamples=preset.run.get("n_resamples", 1000),
        force=force, progress=not quiet, log=None if quiet else console.print,
    )  # fmt: skip
    from semshift.report.study import over_models_table

    table = over_models_table(result.summary, "glyphs", "osr", ("auroc", "oscr"))
    if table is not None:
        console.print(table.to_rich())
    rel = result.relation[result.relation["metric"] == "auroc"]
    for split in dict.fromkeys(rel["split"]):
        r = rel[rel["split"] == split]["spearman"].dropna()
        console.print(
            f"accuracy vs AUROC across {result.relation['n_models'].max()} models, {split}: "
            f"Spearman > 0 for {int((r > 0).sum())} of {len(r)} detectors (median "
            f"{r.median():.2f}); the table and figure per detector are in report.html"
        )
    failed = result.failed
    console.print(
        f"demo study finished in {time.perf_counter() - t0:.1f} s: "
        f"{len(result.outcomes) - len(failed)} of {len(result.outcomes)} cells | wrote "
        f"{result.study.output}/report.html, summary.csv, relation.csv"
    )
    if failed:
        for o in failed:
            console.print(f"  {o.cell.name}: {o.reason}", markup=False)
        raise typer.Exit(1)


def _demo_table1(
    out: Path,
    seed: int,
    params: Any,
    config: Path | None,
    all_detectors: bool,
    force: bool,
    quiet: bool,
) -> None:
    """``semshift demo --ssb-table1``: :func:`semshift.demo.table1.ssb_table1`."""
    from semshift.demo.table1 import Table1Config, read_table1_config, ssb_table1

    if all_detectors or force:
        raise SemshiftError("--all-detectors and --force do not apply with --ssb-table1")
    t0 = time.perf_counter()
    cfg = read_table1_config(config) if config is not None else Table1Config()
    result = ssb_table1(
        out, config=cfg, seed=seed, params=params, progress=not quiet, log=console.print
    )
    console.print(result.table.to_rich())
    console.print(f"wrote {', '.join(str(p) for p in result.files.values())}")
    console.print(f"SSB Table 1 finished in {time.perf_counter() - t0:.1f} s")
