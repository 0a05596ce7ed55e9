"""`semshift splits superclass`: SOOD super-classes, and with per-image scores (given, or
computed from images or from a feature store of image embeddings) the IID / Easy / Hard split.

Registered on the ``splits`` group like the commands of :mod:`semshift.cli.splits`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from semshift.cli._app import splits_app
from semshift.cli._options import Table, TaxonomyOption, console
from semshift.cli.splits import builder_params
from semshift.errors import SemshiftError

__all__ = ["splits_superclass"]


@splits_app.command("superclass")
def splits_superclass(
    out: Annotated[Path, typer.Option(help="Output directory (split.json, audit.csv, ...).")],
    names: Annotated[str, typer.Option(help="'sood' (56 names) or a file, one per line.")] = "sood",
    pool: Annotated[str, typer.Option(help="Candidate sub-classes: list or file.")] = (
        "imagenet21k-p"
    ),
    taxonomy: TaxonomyOption = "wordnet",
    levels: Annotated[int, typer.Option(help="Hyponym levels gathered below a node.")] = 2,
    min_subclasses: Annotated[int, typer.Option(help="Drop smaller super-classes.")] = 10,
    threshold: Annotated[float, typer.Option(help="Cosine threshold of the text fallback.")] = 0.5,
    sense: Annotated[str, typer.Option(help="most-subclasses or first.")] = "most-subclasses",
    scores: Annotated[
        Path | None,
        typer.Option(
            help="Per-image scores CSV (class, score[, superclass, path]): also build the "
            "IID / Easy / Hard sub-class split (images.csv, subclasses.csv)."
        ),
    ] = None,
    score_over: Annotated[
        str | None,
        typer.Option(
            help="With scores (--scores, --images or --image-store): a sub-class's score "
            "averages 'all' its images (the paper's released code; default) or the 'kept' ones "
            "inside 1.5 IQR."
        ),
    ] = None,
    iqr_factor: Annotated[
        float | None,
        typer.Option(help="With scores: images outside this many IQRs are outliers (1.5)."),
    ] = None,
    easy: Annotated[
        float | None,
        typer.Option(
            help="With scores: per super-class percentile of the scores below which a "
            "sub-class is Hard, above it Easy (20)."
        ),
    ] = None,
    iid: Annotated[
        float | None,
        typer.Option(help="With scores: percentile above which a sub-class is IID (40)."),
    ] = None,
    images: Annotated[
        Path | None,
        typer.Option(
            help="Instead of --scores: a folder of sub-class folders (<wnid>/*.JPEG) whose "
            "images --score-model scores against their super-class name."
        ),
    ] = None,
    image_store: Annotated[
        Path | None,
        typer.Option(
            help="Instead of --scores: a feature store of the sub-class images' embeddings "
            "(its 'features', e.g. extracted with open_clip/<name>; rows matched to sub-classes "
            "by class id), scored against the super-class names embedded by --score-model's "
            "text tower or given by --text-embeddings."
        ),
    ] = None,
    score_model: Annotated[
        str | None,
        typer.Option(
            help="With --images or --image-store: an image-text model, open_clip/<name> (with "
            "--image-store: the store's model, its text tower only)."
        ),
    ] = None,
    score_weights: Annotated[
        str | None, typer.Option(help="With --score-model: the model's local weights or tag.")
    ] = None,
    score_random_init: Annotated[
        bool, typer.Option(help="With --score-model: random weights (for testing the pipeline).")
    ] = False,
    text_embeddings: Annotated[
        Path | None,
        typer.Option(
            help="With --image-store, instead of --score-model: a .npy of text embeddings, one "
            "row per super-class name in the order of --names."
        ),
    ] = None,
    max_per_class: Annotated[
        int | None,
        typer.Option(
            help="With --images or --image-store: at most this many images per sub-class "
            "(the first by path)."
        ),
    ] = None,
) -> None:
    """SOOD super-classes: match names to nodes, gather sub-classes (no images needed); with
    --scores (or --images scored by --score-model, or --image-store embeddings against the
    super-class names' text embeddings), the IID / Easy / Hard split of the sub-classes."""
    from semshift.splits.superclass import build_score_split, build_superclasses

    check_score_options(
        scores, images, image_store, score_model, score_weights, score_random_init,
        text_embeddings,
    )  # fmt: skip
    # --images computes the scores: its stage-2 options are checked as those of --scores
    given_scores = scores if scores is not None else images
    values: dict[str, Any] = {
        "names": names, "pool": pool, "levels": levels, "min_subclasses": min_subclasses,
        "threshold": threshold, "sense": sense,
        "scores": None if given_scores is None else str(given_scores),
        "score_over": score_over, "iqr_factor": iqr_factor, "easy": easy, "iid": iid,
        "image_store": None if image_store is None else str(image_store),
        "text_embeddings": None if text_embeddings is None else str(text_embeddings),
    }  # fmt: skip
    p = builder_params("superclass", values)
    t0 = time.perf_counter()
    result = build_superclasses(
        p.names,
        p.pool,
        taxonomy=taxonomy,
        levels=p.levels,
        min_subclasses=p.min_subclasses,
        threshold=p.threshold,
        sense=p.sense,
        allow_empty=p.allow_empty,
    )
    result.write(out)
    t = result.superclasses
    _print_superclasses(t, pool)
    written = "split.json, audit.csv, superclasses.csv"
    if images is not None or image_store is not None:
        scores = _computed_scores(
            result, images, image_store, score_model, score_weights, score_random_init,
            text_embeddings, max_per_class, out,
        )  # fmt: skip
        written += ", scores.csv"
    if scores is not None:
        stage2 = build_score_split(
            result, scores, iqr_factor=p.iqr_factor, easy=p.easy, iid=p.iid, score_over=p.score_over
        )
        stage2.write(out)  # its split.json (IID / Easy / Hard bins) replaces stage 1's
        counts = stage2.manifest.extra["counts"]
        split_table = Table(title=f"sub-class splits (score over {p.score_over} images)")
        for col in ("split", "sub-classes"):
            split_table.add_column(col)
        for name in ("iid", "easy", "hard"):
            split_table.add_row(name, str(counts[f"bin_{name}"]))
        console.print(split_table)
        written += ", images.csv, subclasses.csv"
    console.print(
        f"{int(t.kept.sum())} of {len(t)} super-classes kept, "
        f"{int(t.loc[t.kept, 'subclasses'].sum())} sub-classes | wrote {out}/{written} "
        f"in {time.perf_counter() - t0:.1f} s"
    )


def _print_superclasses(t: Any, pool: str) -> None:
    table = Table(title=f"super-classes over {pool}")
    for col in ("super-class", "node", "matched by", "sub-classes", "kept"):
        table.add_column(col)
    for r in t.itertuples(index=False):
        table.add_row(
            r.superclass, r.node_name, r.matched_by, str(r.subclasses), "yes" if r.kept else "no"
        )
    console.print(table)


def check_score_options(
    scores: Path | None,
    images: Path | None,
    image_store: Path | None,
    model: str | None,
    weights: str | None,
    random_init: bool,
    text: Path | None,
) -> None:
    """At most one score source (--scores, --images, --image-store), each with the text side
    it needs, checked before any work."""
    given = [
        name
        for name, value in (("--scores", scores), ("--images", images),
                            ("--image-store", image_store))
        if value is not None
    ]  # fmt: skip
    if len(given) > 1:
        raise SemshiftError(
            f"give one of --scores (a CSV), --images or --image-store, not {' and '.join(given)}"
        )
    if images is not None and model is None:
        raise SemshiftError("--images needs --score-model open_clip/<name>")
    if text is not None and image_store is None:
        raise SemshiftError("--text-embeddings scores --image-store: give the feature store")
    if image_store is not None and (model is None) == (text is None):
        raise SemshiftError(
            "--image-store needs the super-class names' text embeddings: --score-model "
            "open_clip/<name> (the store's model) or --text-embeddings FILE.npy, one of them"
        )
    if model is not None and images is None and image_store is None:
        raise SemshiftError(
            "--score-model scores --images or --image-store: give the folder of sub-class "
            "folders or the feature store"
        )
    if model is not None and not model.startswith("open_clip/"):
        raise SemshiftError(f"--score-model {model!r}: an image-text model, open_clip/<name>")
    if model is not None and (weights is None) == (not random_init):
        raise SemshiftError(
            "give --score-weights or --score-random-init (semshift never downloads)"
        )


def _computed_scores(
    stage1: Any,
    images: Path | None,
    image_store: Path | None,
    model: str | None,
    weights: str | None,
    random_init: bool,
    text: Path | None,
    max_per_class: int | None,
    out: Path,
) -> Path:
    """Score the images (or the stored image embeddings) against their super-class names;
    ``<out>/scores.csv``."""
    from semshift.splits.superclass import score_images, score_store, text_embeddings

    scorer: Any = None
    if model is not None:
        from semshift.features.models import load_model

        scorer = load_model(model, weights=weights, random_init=random_init)
    if images is not None:
        if not callable(getattr(scorer, "score", None)):
            raise SemshiftError(f"--score-model {model!r} cannot score images against text")
        frame = score_images(stage1, images, scorer, max_per_class=max_per_class)
    else:
        assert image_store is not None
        from semshift.features.store import open_verified

        store = open_verified({"--image-store": image_store}, same_model=False)["--image-store"]
        if text is not None:
            vectors = _load_text(text)
        elif callable(getattr(scorer, "encode", None)):
            vectors = text_embeddings(stage1, scorer)
        else:
            raise SemshiftError(f"--score-model {model!r} has no text tower")
        frame = score_store(stage1, store, vectors, max_per_class=max_per_class, text_model=model)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "scores.csv"
    frame.to_csv(path, index=False)
    return path


def _load_text(path: Path) -> Any:
    import numpy as np

    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise SemshiftError(f"--text-embeddings {path}: cannot read a .npy array ({err})") from None
