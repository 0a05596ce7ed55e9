"""`semshift splits graded` and `semshift splits laid`: IS-OOD's graded shift (registered on the
``splits`` group beside :mod:`semshift.cli.splits`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from semshift.cli._app import splits_app
from semshift.cli._options import QuietOption, Table, TaxonomyOption, console
from semshift.cli.splits import builder_params
from semshift.errors import SemshiftError

if TYPE_CHECKING:
    from rich.table import Table as RichTable


def _floats(text: str | None, option: str) -> list[float] | None:
    """``"0,0.5,1"`` -> ``[0.0, 0.5, 1.0]``; a bad number is one line naming the option."""
    if text is None:
        return None
    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        raise SemshiftError(
            f"{option}: expected numbers separated by commas, got {text!r}"
        ) from None


def _nth(k: int) -> str:
    """1 -> '1st', 2 -> '2nd', 10 -> '10th'."""
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


@splits_app.command("graded")
def splits_graded(
    id_features: Annotated[
        Path, typer.Option(help="ID image embeddings: (N_id, l) .npy or a feature store.")
    ],
    test_features: Annotated[
        Path, typer.Option(help="Test image embeddings: (N, l) .npy or a feature store.")
    ],
    laid: Annotated[Path, typer.Option(help="A trained LAID matrix (.npz).")],
    out: Annotated[Path, typer.Option(help="Output directory (levels.csv, cells.csv).")],
    levels: Annotated[
        int | None, typer.Option(help="Levels per axis (default 8; not with policy fixed).")
    ] = None,
    policy: Annotated[str, typer.Option(help="equal-width, quantile or fixed.")] = "equal-width",
    min_count: Annotated[int, typer.Option(help="Cells with fewer images are N/A.")] = 10,
    sem_edges: Annotated[
        str | None,
        typer.Option(help="Policy fixed: increasing level edges of D_sem, e.g. 0,0.2,0.4,0.6."),
    ] = None,
    cov_edges: Annotated[
        str | None, typer.Option(help="Policy fixed: increasing level edges of D_cov.")
    ] = None,
    method: Annotated[
        str,
        typer.Option(help="Nearest-ID search: exact, ivf (approximate) or auto (ivf if large)."),
    ] = "auto",
    nlist: Annotated[
        int | None, typer.Option(help="ivf: cells of the inverted file (default: by size).")
    ] = None,
    nprobe: Annotated[
        int | None, typer.Option(help="ivf: cells probed per test image (more: more exact).")
    ] = None,
    k: Annotated[
        int,
        typer.Option(
            "--k",
            help="Distances to the k-th nearest ID image: 10 as IS-OOD's release, 1 as the "
            "paper's formula.",
        ),
    ] = 10,
) -> None:
    """IS-OOD graded shift levels: D_sem / D_cov to the k-th nearest ID image, binned n x n.

    A feature store given for --id-features or --test-features is read whole (its `features`).
    """
    from semshift.splits.graded import LAID, graded_grid, read_features

    values: dict[str, Any] = {
        "id_features": str(id_features), "test_features": str(test_features), "laid": str(laid),
        "levels": levels, "policy": policy, "min_count": min_count, "method": method,
        "sem_edges": _floats(sem_edges, "--sem-edges"),
        "cov_edges": _floats(cov_edges, "--cov-edges"), "nlist": nlist, "nprobe": nprobe,
        "k": k,
    }  # fmt: skip
    p = builder_params("graded", values)
    model = LAID.load(laid)
    x, _ = read_features(id_features, "--id-features")
    y, _ = read_features(test_features, "--test-features")
    samples, cells = graded_grid(
        x,
        y,
        model,
        n_levels=p.levels,
        policy=p.policy,
        min_count=p.min_count,
        sem_edges=p.sem_edges,
        cov_edges=p.cov_edges,
        method=p.method,
        nlist=p.nlist,
        nprobe=p.nprobe,
        k=p.k,
    )
    out.mkdir(parents=True, exist_ok=True)
    samples.to_csv(out / "levels.csv", index_label="row")
    cells.to_csv(out / "cells.csv", index=False)
    grid = cells.pivot(index="sem_level", columns="cov_level", values="count")
    table = Table(title="images per cell (semantic level x covariate level; N/A below min count)")
    table.add_column("sem \\ cov")
    for c in grid.columns:
        table.add_column(str(c), justify="right")
    for lvl, row in grid.iterrows():
        table.add_row(str(lvl), *(str(v) if v >= p.min_count else f"({v})" for v in row))
    console.print(table)
    search = cells.attrs["search"]
    how = search["method"]
    if how == "ivf":
        how += f" (approximate: {search['nprobe']} of {search['nlist']} cells probed)"
    console.print(
        f"{len(samples)} test images, {how} search of the {_nth(p.k)} nearest ID image | wrote "
        f"{out}/levels.csv, cells.csv"
    )


def _store_labels(store: Path, ids: list[str]) -> tuple[Any, Any, int]:
    """The ``features`` of a store's images whose class is one of ``ids``, their indices into
    ``ids``, and how many images were left out (no class, or a class outside ``ids``)."""
    import numpy as np

    from semshift.features import open_store
    from semshift.features.store import row_class_ids

    try:
        st = open_store(store)
        (feats,) = st.all().arrays("features")
        row_ids = row_class_ids(st.meta, st.labels, st.index)
    except SemshiftError as err:
        raise SemshiftError(f"--compare-pca {store}: {err}") from None
    where = {c: i for i, c in enumerate(ids)}
    label = np.array([where.get(c, -1) if c is not None else -1 for c in row_ids], np.int64)
    keep = label >= 0
    if not keep.any():
        raise SemshiftError(f"--compare-pca {store}: no image is of a class of --labels")
    return np.asarray(feats)[keep], label[keep], int((~keep).sum())


def _compare_table(frame: Any, title: str) -> RichTable:
    table = Table(title=title)
    for col in frame.columns:
        table.add_column(col, justify="left" if col in ("part", "method") else "right")
    for row in frame.itertuples(index=False):
        table.add_row(*(f"{v:.2%}" if isinstance(v, float) else str(v) for v in row))
    return table


@splits_app.command("laid")
def splits_laid(
    model: Annotated[str, typer.Option(help="An image-text model, open_clip/<name>.")],
    out: Annotated[Path, typer.Option(help="Where to save the LAID matrix (.npz).")],
    weights: Annotated[Path | None, typer.Option(help="Local weights of the model.")] = None,
    random_init: Annotated[
        bool, typer.Option("--random-init", help="Random weights (for testing the pipeline).")
    ] = False,
    labels: Annotated[
        str, typer.Option(help="Semantic labels: a class list (names of its classes).")
    ] = "imagenet1k",
    taxonomy: TaxonomyOption = "wordnet",
    templates: Annotated[
        str,
        typer.Option(
            help="Prompt templates: covariate-48 (semshift's), clip-imagenet-80 (CLIP's "
            "ImageNet prompts) or a file, one template with one {} per line."
        ),
    ] = "covariate-48",
    triplets: Annotated[int, typer.Option(help="Training triplets.")] = 20_000,
    epochs: Annotated[int, typer.Option(help="Training epochs.")] = 50,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    compare_pca: Annotated[
        Path | None,
        typer.Option(
            help="A feature store of labelled images (of the same model): zero-shot accuracy "
            "of LAID's and PCA's halves (IS-OOD Table 3), written beside --out as "
            "<name>_vs_pca.csv."
        ),
    ] = None,
    quiet: QuietOption = False,
) -> None:
    """Train the IS-OOD LAID decomposition on CLIP text embeddings of template x label texts."""
    from semshift.features.models import load_model
    from semshift.splits.laid import (
        check_laid_options,
        embed_triplets,
        resolve_templates,
        train_laid,
    )
    from semshift.splits.ssb import resolve_classes
    from semshift.taxonomy import load_taxonomy

    if not model.startswith("open_clip/"):
        raise SemshiftError(f"--model {model!r}: LAID needs an image-text model, open_clip/<name>")
    # every option checked before the model is built (seconds, and its library's log lines)
    options = {"epochs": "--epochs", "n_triplets": "--triplets"}
    check_laid_options(epochs=epochs, n_triplets=triplets, names=options)
    try:
        prompts = resolve_templates(templates)
    except SemshiftError as err:
        raise SemshiftError(f"--templates: {err}") from None
    tax = load_taxonomy(taxonomy)
    ids, _ = resolve_classes(tax, labels, "labels")
    names = tax.labels(ids)
    check_laid_options(n_labels=len(names))
    images = None if compare_pca is None else _store_labels(compare_pca, list(ids))
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from semshift.progress import bar_console, progress_wanted

    bars = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]:.4f}"), TimeRemainingColumn(), TimeElapsedColumn(),
        console=bar_console(), disable=not progress_wanted(not quiet), transient=True,
    )  # fmt: skip
    with bars:
        load = bars.add_task(f"loading {model}", total=None, loss=float("nan"))
        encoder = load_model(model, weights=weights, random_init=random_init, seed=seed)
        bars.remove_task(load)
        st, ss, cs = embed_triplets(
            encoder, names, templates=prompts, n_triplets=triplets, seed=seed
        )
        task = bars.add_task("LAID epochs", total=epochs, loss=float("nan"))
        laid = train_laid(
            st, ss, cs, seed=seed, epochs=epochs,
            on_epoch=lambda k, loss: bars.update(task, completed=k, loss=loss),
        )  # fmt: skip
    laid.meta = {
        **(laid.meta or {}),
        "labels": len(names),
        "templates": templates if templates in ("covariate-48", "clip-imagenet-80") else "file",
        "n_templates": len(prompts),
        "triplets": triplets,
    }
    path = laid.save(out)
    console.print(
        f"LAID {laid.dim} x {laid.dim} from {triplets} triplets ({len(names)} labels x "
        f"{len(prompts)} templates); orthogonality error "
        f"{laid.orthogonality_error():.3g} | wrote {path}"
    )
    if images is not None:
        from semshift.splits.laid_pca import (
            class_text_embeddings,
            compare_decompositions,
            fit_pca_decomposition,
        )

        feats, y, dropped = images
        pca = fit_pca_decomposition(st, ss, cs)
        classes = class_text_embeddings(encoder, names, prompts)
        frame = compare_decompositions(laid, pca, feats, y, classes)
        csv = path.with_name(path.name.removesuffix(".npz") + "_vs_pca.csv")
        frame.to_csv(csv, index=False)
        console.print(
            _compare_table(frame, f"zero-shot accuracy over {len(names)} classes (IS-OOD Table 3)")
        )
        skipped = f"; {dropped} image(s) of other classes left out" if dropped else ""
        console.print(f"{len(y)} images of {compare_pca}{skipped} | wrote {csv}")
