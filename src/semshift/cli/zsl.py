"""`semshift zsl run`: the zero-shot methods."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

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
        list[str],
        typer.Option(
            help="A folder with res101.mat + att_splits.mat, or with zsl.json (a semshift "
            "split, feature store and class embeddings), or 'demo' (glyphs, offline); "
            "repeatable: the datasets side by side (the paper's SUN, CUB, AWA1, AWA2, aPY)."
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
    (ZSL top-1, V1 vs V2) and Table 2 (GZSL ts / tr / H) layouts, the paper's numbers beside."""
    import pandas as pd

    from semshift.protocols import zsl_results
    from semshift.report.study_tables import zsl_table1, zsl_table2
    from semshift.study.published import published_numbers
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
    datasets: list[Any] = []
    for where in data:  # every dataset read and checked before any training
        if where == "demo":
            from semshift.demo.zsl import glyph_zsl_data

            dataset = glyph_zsl_data(embedding=embedding, seed=seed)
        else:
            dataset = read_zsl_data(where)
        if any(d.name == dataset.name for d in datasets):
            raise SemshiftError(
                f"--data {where}: a second dataset named {dataset.name!r}; the datasets of one "
                "run need distinct names (the folder name, or 'name' in zsl.json)"
            )
        for v in versions:
            dataset.split(v)  # a V2 request on V1 sets fails here, before any training
        datasets.append(dataset)
    outcomes = []
    for dataset in datasets:
        console.print(
            f"{dataset.name}: {dataset.features.shape[0]} images x {dataset.features.shape[1]} "
            f"features, {dataset.n_classes} classes ({dataset.seen_classes.size} seen, "
            f"{dataset.unseen_classes.size} unseen), embeddings of {dataset.embeddings.shape[1]}"
        )
        for v in versions:
            for m in methods:
                o = evaluate_zsl(dataset, m, split=v)
                outcomes.append(o)
                chosen = ", ".join(f"{k}={x:g}" if isinstance(x, float) else f"{k}={x}"
                                   for k, x in o.params.items())  # fmt: skip
                console.print(f"  {v} {m}: {o.seconds:.1f} s ({chosen})")
    results = zsl_results(outcomes, calibration=calibration)
    published = published_numbers("zsl-v2")
    tables = [
        t
        for t in (
            zsl_table1(results, published=published),
            zsl_table2(results, published=published),
        )
        if t is not None
    ]
    for table in tables:
        console.print(table.to_rich())
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
        texts = {"results.csv": results.to_csv(index=False), "grid.csv": grid.to_csv(index=False),
                 "tables.md": "\n\n".join(t.to_markdown() for t in tables) + "\n"}  # fmt: skip
        for name, text in texts.items():
            raw = text.encode()
            atomic_write(out / name, lambda f, raw=raw: f.write(raw))  # none left partial
        console.print(f"wrote {out}/results.csv, grid.csv, tables.md")
    console.print(f"zero-shot run finished in {time.perf_counter() - t0:.1f} s")
