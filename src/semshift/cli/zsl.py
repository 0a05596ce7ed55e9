"""`semshift zsl run`: the zero-shot methods."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from semshift.errors import SemshiftError

if TYPE_CHECKING:
    pass

from semshift.cli import _choices
from semshift.cli._app import zsl_app
from semshift.cli._options import console


# --------------------------------------------------------------------------- zsl
@zsl_app.command("run")
def zsl_run(
    data: Annotated[
        str,
        typer.Option(
            help="A folder with res101.mat + att_splits.mat, or with zsl.json (a semshift "
            "split, feature store and class embeddings), or 'demo' (glyphs, offline)."
        ),
    ],
    method: Annotated[
        list[str] | None,
        typer.Option(
            "--method",
            help="A zero-shot method (repeatable; default all): "
            + _choices.listed_names("zsl_methods")
            + ".",
        ),
    ] = None,
    split: Annotated[
        str, typer.Option(help="Proposed split version: v1, v2 or both (Table 1's V1 vs V2).")
    ] = "v2",
    calibration: Annotated[
        float, typer.Option(help="Calibrated stacking: subtracted from seen-class scores.")
    ] = 0.0,
    embedding: Annotated[
        str, typer.Option(help="--data demo only: 'attributes' or 'text' (MiniLM).")
    ] = "attributes",
    seed: Annotated[int, typer.Option(help="--data demo only: random seed.")] = 0,
    out: Annotated[
        Path | None,
        typer.Option(help="Write results.csv (tidy rows) and grid.csv (val scores) here."),
    ] = None,
) -> None:
    """Train zero-shot methods (hyperparameters on val classes) and print the paper's Table 1
    (ZSL top-1, V1 vs V2) and Table 2 (GZSL ts / tr / H) layouts."""
    import pandas as pd

    from semshift.protocols import zsl_results
    from semshift.report import gzsl_table, zsl_table
    from semshift.training.zsl import (
        SPLIT_VERSIONS,
        evaluate_zsl,
        get_zsl_method,
        list_zsl_methods,
        read_zsl_data,
    )

    versions = list(SPLIT_VERSIONS) if split == "both" else [split]
    if any(v not in SPLIT_VERSIONS for v in versions):
        raise SemshiftError(f"--split must be v1, v2 or both, got {split!r}")
    methods = [get_zsl_method(m).name for m in method] if method else list_zsl_methods()
    t0 = time.perf_counter()
    if data == "demo":
        from semshift.demo.zsl import glyph_zsl_data

        dataset = glyph_zsl_data(embedding=embedding, seed=seed)
    else:
        dataset = read_zsl_data(data)
    for v in versions:
        dataset.split(v)  # a V2 request on V1 sets fails here, before any training
    console.print(
        f"{dataset.name}: {dataset.features.shape[0]} images x {dataset.features.shape[1]} "
        f"features, {dataset.n_classes} classes ({dataset.seen_classes.size} seen, "
        f"{dataset.unseen_classes.size} unseen), embeddings of {dataset.embeddings.shape[1]}"
    )
    outcomes = []
    for v in versions:
        for m in methods:
            o = evaluate_zsl(dataset, m, split=v)
            outcomes.append(o)
            chosen = ", ".join(f"{k}={x:g}" if isinstance(x, float) else f"{k}={x}"
                               for k, x in o.params.items())  # fmt: skip
            console.print(f"  {v} {m}: {o.seconds:.1f} s ({chosen})")
    results = zsl_results(outcomes, calibration=calibration)
    console.print(zsl_table(results).to_rich())
    console.print(gzsl_table(results).to_rich())
    if out is not None:
        from semshift.features.store import atomic_write

        out.mkdir(parents=True, exist_ok=True)
        grid = pd.DataFrame(
            [
                {"split": o.split, "method": o.method, **p.params, "val_top1": p.val_top1}
                for o in outcomes
                for p in o.grid
            ]
        )
        for name, table in (("results.csv", results), ("grid.csv", grid)):
            text = table.to_csv(index=False).encode()
            atomic_write(out / name, lambda f, text=text: f.write(text))  # none left partial
        console.print(f"wrote {out}/results.csv, grid.csv")
    console.print(f"zero-shot run finished in {time.perf_counter() - t0:.1f} s")
