"""The ``semshift`` command.

User mistakes (bad names, files, options) print one line to stderr and exit with status 2; nothing
already written is removed.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from typer.exceptions import Abort, Exit, TyperException

from semshift import __version__
from semshift.detectors import list_detectors
from semshift.errors import SemshiftError

if TYPE_CHECKING:
    from semshift.run import RunResult
    from semshift.splits.ssb import SSBResult

app = typer.Typer(
    name="semshift",
    help="Measure classifiers and OOD detectors under semantic vs covariate shift.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
splits_app = typer.Typer(help="Build and inspect class splits.", no_args_is_help=True)
taxonomy_app = typer.Typer(help="Query WordNet or a custom hierarchy.", no_args_is_help=True)
app.add_typer(splits_app, name="splits")
app.add_typer(taxonomy_app, name="taxonomy")
benchmark_app = typer.Typer(
    help="The seed papers' benchmarks: list, check the files, run.", no_args_is_help=True
)
app.add_typer(benchmark_app, name="benchmark")
zsl_app = typer.Typer(
    help="Zero-shot learning: the proposed-splits paper's eight methods.", no_args_is_help=True
)
app.add_typer(zsl_app, name="zsl")
store_app = typer.Typer(help="Check and repair feature stores.", no_args_is_help=True)
app.add_typer(store_app, name="store")

console = Console(soft_wrap=True)  # paths and messages are never broken across lines

#: the --taxonomy option every taxonomy-aware command takes
TaxonomyOption = Annotated[str, typer.Option(help="'wordnet' or a .csv/.json hierarchy.")]
#: the --force and --quiet options of the commands that drive the runner
ForceOption = Annotated[
    bool, typer.Option("--force", help="Recompute every stage, ignoring the cache.")
]
QuietOption = Annotated[
    bool, typer.Option("--quiet", help="No progress bars or stage timing lines.")
]
#: --wait/--no-wait of the commands that write an output folder or a store
WaitOption = Annotated[
    bool,
    typer.Option(
        "--wait/--no-wait",
        help="While another process writes the same output folder: wait for it, or exit 2.",
    ),
]


def _version(value: bool) -> None:
    if value:
        console.print(f"semshift {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """semshift: semantic-shift benchmarks for image classifiers and OOD detectors."""


@contextmanager
def _memory(doing: str, lower: str) -> Iterator[None]:
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


def _fmt(x: object) -> str:
    if isinstance(x, float):
        return f"{x:.3f}" if abs(x) < 100 else f"{x:.1f}"
    return str(x)


@splits_app.command("ssb")
def splits_ssb(
    out: Annotated[
        Path, typer.Option(help="Output directory (split.json, audit.csv, summary.csv).")
    ],
    preset: Annotated[str, typer.Option(help="ssb, nearest, lch-mean or hierarchy.")] = "ssb",
    known: Annotated[str, typer.Option(help="Known classes: shipped list name or file of ids.")] = (
        "imagenet1k"
    ),
    pool: Annotated[
        str | None,
        typer.Option(
            help="Candidates: shipped list or file (custom taxonomy: default all leaves)."
        ),
    ] = None,
    taxonomy: TaxonomyOption = "wordnet",
    graph: Annotated[str | None, typer.Option(help="induced-tree or dag.")] = None,
    measure: Annotated[str | None, typer.Option(help="path, lch, wup or gap.")] = None,
    aggregation: Annotated[str | None, typer.Option(help="sum, mean, median or nearest.")] = None,
    easy_first: Annotated[
        str | None, typer.Option(help="Which score end is Easy: low/high.")
    ] = None,
    bin_size: Annotated[int | None, typer.Option(help="Classes per bin (default 1000).")] = None,
    quantiles: Annotated[
        str | None, typer.Option(help="Two rank fractions instead of sizes, e.g. 0.333,0.667.")
    ] = None,
    winter21: Annotated[
        bool, typer.Option("--winter21", help="Keep only ImageNet-21K-P winter21 classes.")
    ] = False,
    restrict_to: Annotated[
        str | None, typer.Option(help="Keep only these classes (list name or file).")
    ] = None,
) -> None:
    """Build Easy/Medium/Hard open-set splits by semantic distance (Semantic Shift Benchmark)."""
    from semshift.splits.ssb import build_ssb_split

    if winter21 and restrict_to:
        raise SemshiftError("--winter21 and --restrict-to are exclusive")
    q = None
    if quantiles:
        try:
            q = [float(x) for x in quantiles.split(",")]
        except ValueError:
            raise SemshiftError(
                f"--quantiles: expected two numbers like 0.333,0.667, got {quantiles!r}"
            ) from None
    if pool is None and taxonomy in ("wordnet", "wordnet-3.0"):
        pool = "imagenet21k-p"
    t0 = time.perf_counter()
    result = build_ssb_split(
        known,
        pool,
        taxonomy=taxonomy,
        preset=preset,
        graph=graph,  # type: ignore[arg-type]
        measure=measure,  # type: ignore[arg-type]
        aggregation=aggregation,  # type: ignore[arg-type]
        easy_first=easy_first,  # type: ignore[arg-type]
        bin_size=bin_size,
        quantiles=q,
        restrict_to="imagenet21k-p-winter21" if winter21 else restrict_to,
    )
    result.write(out)
    _print_split(result, out, time.perf_counter() - t0)


def _print_split(result: SSBResult, out: Path, seconds: float) -> None:
    counts = result.manifest.extra["counts"]
    s = result.summary
    table = Table(
        title=f"{result.manifest.method} split ({result.manifest.params['measure']}, "
        f"{result.manifest.params['aggregation']})"
    )
    for col, justify in (
        ("bin", "left"),
        ("classes", "right"),
        ("score min / mean / max", "right"),
        ("depth", "right"),
        ("nearest", "right"),
        ("examples", "left"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in s.itertuples(index=False):
        table.add_row(
            r.bin,
            str(r.classes),
            f"{_fmt(r.score_min)} / {_fmt(r.score_mean)} / {_fmt(r.score_max)}",
            f"{r.mean_depth:.1f}",
            f"{r.mean_nearest_distance:.1f}",
            r.examples,
        )
    console.print(table)
    console.print(
        f"known {counts['known_used']} of {counts['known_given']} | candidates "
        f"{counts['candidates']} (overlap removed: {counts['overlap_removed']}) | "
        f"wrote {out}/split.json, audit.csv, summary.csv in {seconds:.1f} s"
    )
    dropped = result.manifest.extra["dropped"]["not_in_restrict_to"]
    if dropped:
        console.print(
            "dropped by restriction: " + ", ".join(f"{k} {v}" for k, v in dropped.items())
        )


@splits_app.command("cleaning")
def splits_cleaning(
    out: Annotated[Path, typer.Option(help="Output directory (split.json, audit.csv).")],
    id_classes: Annotated[
        str, typer.Option("--id", help="ID classes: shipped list name or file of ids.")
    ] = "imagenet1k",
    pool: Annotated[str, typer.Option(help="Candidates: shipped list or file.")] = "imagenet21k-p",
    taxonomy: TaxonomyOption = "wordnet",
    exclude_subtree: Annotated[
        list[str] | None,
        typer.Option(help="Subtree to drop (repeatable; default organism.n.01)."),
    ] = None,
    no_exclude: Annotated[
        bool, typer.Option("--no-exclude", help="Drop no subtree (skip rule 2).")
    ] = False,
    all_candidates: Annotated[
        bool, typer.Option("--all-candidates", help="Skip rule 4 (keep non-sisters too).")
    ] = False,
) -> None:
    """Clean a candidate pool for semantic-shift OOD (ImageNet-OOD rules 1-4)."""
    from semshift.splits.cleaning import RULES, build_cleaning_split

    if no_exclude and exclude_subtree:
        raise SemshiftError("--no-exclude and --exclude-subtree are exclusive")
    subtrees: list[str] = [] if no_exclude else (exclude_subtree or ["organism.n.01"])
    t0 = time.perf_counter()
    result = build_cleaning_split(
        id_classes,
        pool,
        taxonomy=taxonomy,
        exclude_subtrees=subtrees,
        sisters_only=not all_candidates,
    )
    result.write(out)
    c = result.counts
    table = Table(title=f"cleaning {pool} against {id_classes}")
    table.add_column("rule")
    table.add_column("dropped", justify="right")
    table.add_column("example")
    audit = result.audit
    for number, code in RULES.items():
        ex = audit.loc[audit["rule"] == code].head(1)
        example = f"{ex['name'].iloc[0]}: {ex['reason'].iloc[0]}" if len(ex) else ""
        table.add_row(f"{number} {code}", str(c[code]), example)
    table.add_row("kept", str(c["kept"]), ", ".join(audit.loc[audit["kept"], "name"].head(4)))
    console.print(table)
    console.print(
        f"candidates {c['candidates']} | after rules 1-2: {c['after_rules_1_2']} "
        f"(sisters among them: {c['sisters_after_rules_1_2']}) | kept {c['kept']} | wrote "
        f"{out}/split.json, audit.csv in {time.perf_counter() - t0:.1f} s"
    )


@splits_app.command("zsl")
def splits_zsl(
    classes: Annotated[str, typer.Option(help="The dataset's classes: list name or file.")],
    images: Annotated[Path, typer.Option(help="Image list: 'path label' lines or a CSV.")],
    out: Annotated[Path, typer.Option(help="Output directory (split.json, images.csv).")],
    taxonomy: TaxonomyOption = "wordnet",
    unseen: Annotated[str | None, typer.Option(help="Explicit unseen classes (file).")] = None,
    unseen_fraction: Annotated[float, typer.Option(help="Fraction of classes unseen.")] = 0.2,
    val_fraction: Annotated[float, typer.Option(help="Fraction of seen classes for val.")] = 0.2,
    test_seen_fraction: Annotated[
        float, typer.Option(help="Fraction of seen images held out as test_seen.")
    ] = 0.2,
    not_unseen: Annotated[
        str | None, typer.Option(help="Classes that must stay seen (e.g. imagenet1k).")
    ] = None,
    max_hops: Annotated[
        int | None, typer.Option(help="Unseen within this many edges of a --not-unseen class.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
) -> None:
    """Build a zero-shot split (seen/unseen classes; train/val/test_seen/test_unseen images)."""
    from semshift.splits.zsl import build_zsl_split

    result = build_zsl_split(
        classes,
        images,
        taxonomy=taxonomy,
        unseen=unseen,
        unseen_fraction=unseen_fraction,
        val_fraction=val_fraction,
        test_seen_fraction=test_seen_fraction,
        not_unseen=not_unseen,
        max_hops=max_hops,
        seed=seed,
    )
    result.write(out)
    m = result.manifest
    table = Table(title="zero-shot split")
    table.add_column("set")
    table.add_column("classes", justify="right")
    table.add_column("images", justify="right")
    counts = m.extra["counts"]
    for name, n_cls in (
        ("trainval", len(m.known)),
        ("train", len(m.bins["train"])),
        ("val", len(m.bins["val"])),
        ("test_seen", len(m.known)),
        ("test_unseen", len(m.bins["unseen"])),
    ):
        table.add_row(name, str(n_cls), str(counts["images_" + name]))
    console.print(table)
    console.print(f"wrote {out}/split.json, images.csv")


@splits_app.command("check")
def splits_check(
    manifest: Annotated[Path, typer.Argument(help="A split.json or a directory holding one.")],
    images: Annotated[
        Path | None, typer.Option(help="Image table (path, set[, class]); default: manifest's.")
    ] = None,
    root: Annotated[Path | None, typer.Option(help="Resolve relative image paths here.")] = None,
    no_hash: Annotated[bool, typer.Option("--no-hash", help="Skip content hashing.")] = False,
    report: Annotated[Path | None, typer.Option(help="Write every violation to this CSV.")] = None,
) -> None:
    """Check a split for class and image leaks; exit 1 when any is found."""
    from semshift.splits.check import check_split

    result = check_split(manifest, images, root=root, hash_content=not no_hash)
    if report is not None:
        result.violations.to_csv(report, index=False)
    checked = ", ".join(f"{k} {v}" for k, v in result.checked.items())
    if result.ok:
        console.print(f"no leaks found ({checked})")
        return
    table = Table(title=f"{len(result.violations)} violation(s) in {manifest}")
    for col in ("kind", "set_a", "set_b", "count", "first"):
        table.add_column(col)
    for r in result.summary().itertuples(index=False):
        table.add_row(r.kind, r.set_a, r.set_b, str(r.count), str(r.first))
    console.print(table)
    console.print(f"checked: {checked}")
    raise typer.Exit(1)


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
            help="With --scores: a sub-class's score averages 'all' its images (the paper's "
            "released code; default) or the 'kept' ones inside 1.5 IQR."
        ),
    ] = None,
) -> None:
    """SOOD super-classes: match names to nodes, gather sub-classes (no images needed); with
    --scores, the IID / Easy / Hard split of the sub-classes."""
    from semshift.errors import InputError
    from semshift.splits.superclass import SCORE_OVER, build_score_split, build_superclasses

    if score_over is not None and score_over not in SCORE_OVER:
        raise InputError(f"--score-over must be 'all' or 'kept', got {score_over!r}")
    if score_over is not None and scores is None:
        raise InputError("--score-over applies only with --scores (the image-score stage)")
    t0 = time.perf_counter()
    result = build_superclasses(
        names,
        pool,
        taxonomy=taxonomy,
        levels=levels,
        min_subclasses=min_subclasses,
        threshold=threshold,
        sense=sense,
        allow_empty=True,
    )
    result.write(out)
    t = result.superclasses
    table = Table(title=f"super-classes over {pool}")
    for col in ("super-class", "node", "matched by", "sub-classes", "kept"):
        table.add_column(col)
    for r in t.itertuples(index=False):
        table.add_row(
            r.superclass, r.node_name, r.matched_by, str(r.subclasses), "yes" if r.kept else "no"
        )
    console.print(table)
    written = "split.json, audit.csv, superclasses.csv"
    if scores is not None:
        stage2 = build_score_split(result, scores, score_over=score_over or "all")
        stage2.write(out)  # its split.json (IID / Easy / Hard bins) replaces stage 1's
        counts = stage2.manifest.extra["counts"]
        split_table = Table(title=f"sub-class splits (score over {score_over or 'all'} images)")
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


def _load_npy(path: Path, what: str):
    import numpy as np

    try:
        return np.load(path, allow_pickle=False, mmap_mode="r")
    except (OSError, ValueError) as err:
        raise SemshiftError(f"{what} {path}: cannot read a .npy array ({err})") from None


@splits_app.command("graded")
def splits_graded(
    id_features: Annotated[Path, typer.Option(help="ID image embeddings, (N_id, l) .npy.")],
    test_features: Annotated[Path, typer.Option(help="Test image embeddings, (N, l) .npy.")],
    laid: Annotated[Path, typer.Option(help="A trained LAID matrix (.npz).")],
    out: Annotated[Path, typer.Option(help="Output directory (levels.csv, cells.csv).")],
    levels: Annotated[int, typer.Option(help="Levels per axis.")] = 8,
    policy: Annotated[str, typer.Option(help="equal-width, quantile or fixed.")] = "equal-width",
    min_count: Annotated[int, typer.Option(help="Cells with fewer images are N/A.")] = 10,
    method: Annotated[
        str,
        typer.Option(help="Nearest-ID search: exact, ivf (approximate) or auto (ivf if large)."),
    ] = "auto",
    nprobe: Annotated[
        int | None, typer.Option(help="ivf: cells probed per test image (more: more exact).")
    ] = None,
) -> None:
    """IS-OOD graded shift levels: D_sem / D_cov to the nearest ID image, binned n x n."""
    from semshift.splits.graded import LAID, graded_grid

    model = LAID.load(laid)
    samples, cells = graded_grid(
        _load_npy(id_features, "--id-features"),
        _load_npy(test_features, "--test-features"),
        model,
        n_levels=levels,
        policy=policy,
        min_count=min_count,
        method=method,
        nprobe=nprobe,
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
        table.add_row(str(lvl), *(str(v) if v >= min_count else f"({v})" for v in row))
    console.print(table)
    search = cells.attrs["search"]
    how = search["method"]
    if how == "ivf":
        how += f" (approximate: {search['nprobe']} of {search['nlist']} cells probed)"
    console.print(
        f"{len(samples)} test images, {how} nearest-ID search | wrote {out}/levels.csv, cells.csv"
    )


def _group_filter(items: list[str] | None, option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SemshiftError(f"{option}: expected KEY=VALUE, got {item!r}")
        out[key] = value
    return out


@splits_app.command("ambiguity")
def splits_ambiguity(
    id_store: Annotated[Path, typer.Option(help="Feature store of ID images.")],
    candidates: Annotated[Path, typer.Option(help="Feature store of candidate OOD images.")],
    threshold: Annotated[float, typer.Option(help="Drop images nearer than this to an ID image.")],
    out: Annotated[Path, typer.Option(help="Output directory (images.csv, classes.csv).")],
    id_select: Annotated[
        list[str] | None, typer.Option(help="Group filter on the ID store, KEY=VALUE.")
    ] = None,
    max_fraction: Annotated[
        float, typer.Option(help="Drop classes with more than this fraction of dropped images.")
    ] = 0.5,
    metric: Annotated[str, typer.Option(help="euclidean or cosine.")] = "euclidean",
) -> None:
    """ImageNet-OOD rule 5: drop candidate images (and classes) visually close to ID images."""
    import numpy as np

    from semshift.features.store import open_verified
    from semshift.splits.cleaning import visual_ambiguity

    # both verified, and of one model: distances between two models' features mean nothing
    opened = open_verified({"--id-store": id_store, "--candidates": candidates})
    ids, cand = opened["--id-store"], opened["--candidates"]
    sel = ids.select(**_group_filter(id_select, "--id-select")) if id_select else ids.all()
    (id_feats,) = sel.arrays("features")
    (cand_feats,) = cand.all().arrays("features")
    classes_meta = cand.meta.get("classes") or {}
    class_ids = classes_meta.get("ids") if isinstance(classes_meta, dict) else classes_meta
    labels = cand.labels
    if class_ids:
        names = np.asarray(list(class_ids), dtype=object)
        cls = np.where(labels >= 0, names[np.maximum(labels, 0)], "unknown")
    else:
        cls = labels.astype(str)
    images, per_class = visual_ambiguity(
        id_feats, cand_feats, cls, threshold=threshold, max_fraction=max_fraction, metric=metric
    )
    images.insert(0, "path", cand.index["path"].to_numpy())
    out.mkdir(parents=True, exist_ok=True)
    images.to_csv(out / "images.csv", index=False)
    per_class.to_csv(out / "classes.csv", index=False)
    console.print(
        f"{int(images['dropped'].sum())} of {len(images)} candidate images within {threshold} "
        f"of an ID image ({len(id_feats)} ID images); {int(per_class['dropped'].sum())} of "
        f"{len(per_class)} classes dropped (> {max_fraction:.0%} of their images) | wrote "
        f"{out}/images.csv, classes.csv"
    )


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
    triplets: Annotated[int, typer.Option(help="Training triplets.")] = 20_000,
    epochs: Annotated[int, typer.Option(help="Training epochs.")] = 50,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
) -> None:
    """Train the IS-OOD LAID decomposition on CLIP text embeddings of template x label texts."""
    from semshift.features.models import load_model
    from semshift.splits.graded import (
        COVARIATE_TEMPLATES,
        check_laid_options,
        fit_laid_from_text,
    )
    from semshift.splits.ssb import resolve_classes
    from semshift.taxonomy import load_taxonomy

    if not model.startswith("open_clip/"):
        raise SemshiftError(f"--model {model!r}: LAID needs an image-text model, open_clip/<name>")
    # every option checked before the model is built (seconds, and its library's log lines)
    options = {"epochs": "--epochs", "n_triplets": "--triplets"}
    check_laid_options(epochs=epochs, n_triplets=triplets, names=options)
    tax = load_taxonomy(taxonomy)
    ids, _ = resolve_classes(tax, labels, "labels")
    names = tax.labels(ids)
    check_laid_options(n_labels=len(names))
    encoder = load_model(model, weights=weights, random_init=random_init, seed=seed)
    laid = fit_laid_from_text(encoder, names, n_triplets=triplets, seed=seed, epochs=epochs)
    path = laid.save(out)
    console.print(
        f"LAID {laid.dim} x {laid.dim} from {triplets} triplets ({len(names)} labels x "
        f"{len(COVARIATE_TEMPLATES)} templates); orthogonality error "
        f"{laid.orthogonality_error():.3g} | wrote {path}"
    )


@splits_app.command("show")
def splits_show(
    manifest: Annotated[Path, typer.Argument(help="A split.json or a directory holding one.")],
) -> None:
    """Print a split manifest's method, known classes and bin sizes."""
    from semshift.splits.manifest import SplitManifest

    m = SplitManifest.read(manifest)
    table = Table(title=f"{m.method} ({m.taxonomy}, semshift {m.semshift_version})")
    table.add_column("set")
    table.add_column("classes", justify="right")
    table.add_column("first classes")
    table.add_row("known", str(len(m.known)), ", ".join(m.known[:4]))
    for name, ids in m.bins.items():
        table.add_row(name, str(len(ids)), ", ".join(ids[:4]))
    console.print(table)


@splits_app.command("compare")
def splits_compare(
    a: Annotated[str, typer.Argument(help="A split.json (or its directory) or published:NAME.")],
    b: Annotated[str, typer.Argument(help="The second split, the same way.")],
) -> None:
    """Class overlap of two splits, known classes and bin by bin (counts and Jaccard index)."""
    from semshift.catalog import resolve_manifest
    from semshift.splits.manifest import compare_manifests

    ma, mb = resolve_manifest(a), resolve_manifest(b)
    t = compare_manifests(ma, mb)
    table = Table(title=f"A = {a} vs B = {b}")
    for col in ("set", "A", "B", "common", "jaccard"):
        table.add_column(col, justify="left" if col == "set" else "right")
    for r in t.itertuples(index=False):
        jac = "-" if r.jaccard != r.jaccard else f"{r.jaccard:.3f}"  # NaN: both empty
        table.add_row(r.bin, str(r.n_a), str(r.n_b), str(r.n_common), jac)
    console.print(table)
    for label, m in (("A", ma), ("B", mb)):
        digest = m.params.get("list_hash") if m.method.startswith("published:") else None
        console.print(f"{label}: {m.method}" + (f" (lists {digest})" if digest else ""))


@taxonomy_app.command("show")
def taxonomy_show(
    node: Annotated[str, typer.Argument(help="wnid, synset name (dog.n.01), lemma or custom id.")],
    taxonomy: TaxonomyOption = "wordnet",
) -> None:
    """Show a node: names, gloss, depth, parents, children and its path to the root."""
    from semshift.taxonomy import load_taxonomy

    tax = load_taxonomy(taxonomy)
    i = tax.index(node)
    console.print(f"[bold]{tax.id(i)}[/bold] {tax.alias(i) or ''}  {', '.join(tax.lemmas(i))}")
    if tax.gloss(i):
        console.print(f"  {tax.gloss(i)}")
    console.print(f"  depth {tax.depth(i)} (longest {tax.depth(i, 'max')})  {tax.lexname(i)}")
    for label, ids in (("parents", tax.parents(i)), ("children", tax.children(i))):
        shown = ", ".join(f"{tax.label(x)} ({x})" for x in ids[:10])
        more = f" ... (+{len(ids) - 10})" if len(ids) > 10 else ""
        console.print(f"  {label}: {shown}{more}" if ids else f"  {label}: none")


@taxonomy_app.command("distance")
def taxonomy_distance(
    a: Annotated[str, typer.Argument(help="First node.")],
    b: Annotated[str, typer.Argument(help="Second node.")],
    taxonomy: TaxonomyOption = "wordnet",
) -> None:
    """Path distance, Leacock-Chodorow and Wu-Palmer similarity of two nodes."""
    from semshift.taxonomy import load_taxonomy

    tax = load_taxonomy(taxonomy)
    lca = ", ".join(f"{tax.label(x)} ({x})" for x in tax.lowest_common_ancestors(a, b))
    console.print(
        f"{tax.label(a)} ({tax.id(a)}) - {tax.label(b)} ({tax.id(b)}): path "
        f"{tax.path_distance(a, b)}, lch {tax.lch(a, b):.4f}, wup {tax.wup(a, b):.4f}; "
        f"lowest common: {lca or 'none'}"
    )


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
    force: ForceOption = False,
    quiet: QuietOption = False,
) -> None:
    """Run the offline demo: glyph images, a small CNN, every detector and protocol, a report."""
    from semshift.demo import build_demo_data
    from semshift.demo.presets import get_preset
    from semshift.run import run

    t0 = time.perf_counter()
    preset = get_preset(size)
    if ssb_table1:
        _demo_table1(out, seed, preset.params, config, all_detectors, force, quiet)
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
    _print_run(result)
    console.print(f"demo finished in {time.perf_counter() - t0:.1f} s")


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


@app.command("extract")
def extract_features(
    model: Annotated[
        str,
        typer.Option(help="Model: a torchvision name (resnet50), timm/<name> or open_clip/<name>."),
    ],
    data: Annotated[Path, typer.Option(help="Image folder tree (class folders) or file list.")],
    out: Annotated[Path, typer.Option(help="Store directory; an unfinished one is resumed.")],
    weights: Annotated[
        str | None,
        typer.Option(
            help="Local weights (.safetensors or a torch state dict), or weights by their "
            "library's name: a torchvision model's (DEFAULT, IMAGENET1K_V2) from torch's cache, "
            "a timm/<name> model's pretrained tag (resnet50.a1_in1k, a1_in1k, pretrained) or an "
            "open_clip/<name> model's (laion2b_s34b_b79k) from the Hugging Face cache; never "
            "downloaded."
        ),
    ] = None,
    random_init: Annotated[
        bool, typer.Option("--random-init", help="Seeded Kaiming-normal weights (sanity check).")
    ] = False,
    seed: Annotated[int, typer.Option(help="Seed of --random-init and of corruptions.")] = 0,
    classes: Annotated[
        str | None, typer.Option(help="Class list: shipped name (imagenet1k) or file of ids.")
    ] = None,
    num_classes: Annotated[
        int | None, typer.Option(help="Head size (default: the class list's length, else 1000).")
    ] = None,
    batch_size: Annotated[int, typer.Option(help="Images per forward pass.")] = 64,
    shard_size: Annotated[int, typer.Option(help="Rows per shard.")] = 10_000,
    workers: Annotated[int, typer.Option(help="DataLoader worker processes.")] = 4,
    preset: Annotated[
        str | None,
        typer.Option(
            help="imagenet (256/224), imagenet-224 or resize<R>-crop<C> (default: what named "
            "weights were trained with, else imagenet)."
        ),
    ] = None,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")] = "auto",
    unknown: Annotated[
        str, typer.Option(help="Class folder not in the class list: error, skip or ood (-1).")
    ] = "error",
    group: Annotated[
        list[str] | None, typer.Option(help="Group column for every row, KEY=VALUE (repeatable).")
    ] = None,
    corruption: Annotated[
        str | None, typer.Option(help="ImageNet-C corruption applied after the crop.")
    ] = None,
    severity: Annotated[int, typer.Option(help="Corruption severity, 1-5.")] = 3,
    score: Annotated[
        list[str] | None,
        typer.Option(
            help="Model-level detector stored as a score column: "
            + ", ".join(list_detectors(level="model"))
            + "."
        ),
    ] = None,
    fit_images: Annotated[
        Path | None,
        typer.Option(
            help="Labelled ID training images (folder tree or file list) that the --score "
            "detectors which learn from ID images (mds_ensemble, gram, ...) are fitted on."
        ),
    ] = None,
    fit_max_images: Annotated[
        int | None,
        typer.Option(help="Fit on this many --fit-images, evenly spaced (default: all)."),
    ] = None,
    executor: Annotated[
        str, typer.Option(help="local, or ray (one actor per GPU/CPU; needs the ray extra).")
    ] = "local",
    ray_address: Annotated[
        str | None, typer.Option(help="Ray cluster to join: auto or HOST:PORT (default: local).")
    ] = None,
    progress: Annotated[bool, typer.Option(help="Show the progress bar.")] = True,
    wait: WaitOption = True,
) -> None:
    """Extract logits, features and the head of a model over an image set into a feature store."""
    from semshift.errors import InputError
    from semshift.features.data import open_source
    from semshift.features.extract import extract
    from semshift.features.models import load_model, weights_preprocessing
    from semshift.taxonomy.classlists import load_classlist

    if weights is None and not random_init:
        raise InputError("give --weights FILE or --random-init (semshift never downloads weights)")
    pre = weights_preprocessing(model, weights) if weights is not None else None
    preset = preset or (pre["preset"] if pre is not None else "imagenet")
    if weights is not None and random_init:
        raise InputError("give only one of --weights and --random-init")
    groups: dict[str, str] = {}
    for item in group or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--group {item!r}: expected KEY=VALUE")
        groups[key.strip()] = value
    corrupt = None
    if corruption is not None:
        from semshift.features.corruptions import Corruption

        corrupt = Corruption(corruption, severity, seed=seed)
    cl = load_classlist(classes) if classes is not None else None
    source = open_source(data, cl, unknown=unknown)
    n_cls = num_classes or (len(source.classes) if classes is not None and source.classes else 1000)
    names = None
    if model.startswith("open_clip/") and source.classes is not None:
        cls = source.classes
        names = [nm or i for nm, i in zip(cls.names or cls.ids, cls.ids, strict=True)]
    adapter = load_model(
        model, weights=weights, random_init=random_init, seed=seed, num_classes=n_cls,
        classnames=names,
    )  # fmt: skip
    from semshift.features.model_detectors import fit_model_detectors, get_model_detector

    dets = [get_model_detector(name) for name in score or ()]
    fitting = [d.name for d in dets if d.fits]
    if fitting and fit_images is None:
        raise InputError(
            f"--score {', '.join(fitting)}: learns from ID training images; give them with "
            "--fit-images DIR"
        )
    if fit_images is not None and not fitting:
        raise InputError("--fit-images applies only with a --score detector that learns from "
                         "ID training images")  # fmt: skip
    doing = (
        f"extracting {model} (--batch-size {batch_size}, --workers {workers}, --device {device})"
    )
    lower = (
        f"lower it with a smaller --batch-size (e.g. {max(1, batch_size // 2)}) or fewer "
        f"--workers; the shards already written to {out} are kept and the same command resumes"
    )
    if fitting:
        assert fit_images is not None
        train = open_source(fit_images, cl, unknown="skip")
        console.print(f"fit: {', '.join(fitting)} on {fit_images} ({len(train)} images)")
        with _memory(f"fitting --score {', '.join(fitting)}{doing.removeprefix('extracting')}",
                     "lower it with a smaller --batch-size or --fit-max-images"):  # fmt: skip
            fit_model_detectors(
                dets, adapter, train, preset=preset, batch_size=batch_size, workers=workers,
                device=device, max_images=fit_max_images,
            )  # fmt: skip
    if executor == "ray":
        from semshift.features.ray_executor import connect

        connect(ray_address)
    with _memory(doing, lower):
        summary = extract(
            adapter, source, out, preset=preset, batch_size=batch_size, shard_size=shard_size,
            workers=workers, device=device, groups=groups, corruption=corrupt, scores=dets,
            executor=executor, progress=progress, wait=wait,
        )  # fmt: skip
    reasons = ", ".join(f"{r}: {c}" for r, c in sorted(summary.skip_reasons.items()))
    console.print(
        f"{summary.out}: {summary.n_stored} of {summary.n_images} images stored in "
        f"{summary.n_shards} shards ({summary.n_resumed} resumed), {summary.n_skipped} skipped"
        + (f" ({reasons})" if reasons else "")
        + f"; {summary.images_per_s:,.1f} images/s on {summary.device}, {summary.seconds:.1f} s"
    )


def _param_value(text: str) -> object:
    """A ``--param`` value: JSON (numbers, true/false, null, lists), else the plain string."""
    import json

    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _train_config_file(path: Path) -> dict[str, Any]:
    """A ``semshift train --config`` file: read as run configs are (UTF-8, a key given twice
    refused, YAML errors with line and column), checked by ``check_config_file``."""
    from semshift.textio import read_yaml
    from semshift.training.recipe import check_config_file

    data = read_yaml(path, "training config file")
    return check_config_file(data, path)


@app.command("train")
def train_model(
    config: Annotated[
        Path | None,
        typer.Option(
            help="YAML file of the training configuration (TrainConfig's keys as train.json "
            "records them, recipe knobs under recipe:, and out); the options override it."
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Model: demo-glyphnet, a torchvision name, or timm/<name>.")
    ] = None,
    data: Annotated[
        Path | None, typer.Option(help="Training images: class-folder tree or file list.")
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Output folder (checkpoints, metrics, weights).")
    ] = None,
    method: Annotated[
        str | None,
        typer.Option(
            help="Training method: ce (default), logitnorm, oe, arpl or arpl_cs "
            "(semshift.training; tests/test_cli_help.py keeps this list equal to the registry)."
        ),
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(help="Method hyperparameter KEY=VALUE (repeatable), e.g. label_smoothing=0."),
    ] = None,
    classes: Annotated[
        str | None, typer.Option(help="Class list: shipped name or file of ids (default: folders).")
    ] = None,
    num_classes: Annotated[
        int | None, typer.Option(help="Head size (default: the class list's length).")
    ] = None,
    outliers: Annotated[
        Path | None, typer.Option(help="Auxiliary outlier images (method oe): folder or list.")
    ] = None,
    test_split: Annotated[
        list[Path] | None,
        typer.Option(help="split.json of a test set the --outliers classes must not overlap."),
    ] = None,
    epochs: Annotated[int | None, typer.Option(help="Epochs (recipe default 600).")] = None,
    batch_size: Annotated[int | None, typer.Option(help="Images per step (32).")] = None,
    lr: Annotated[float | None, typer.Option(help="Initial SGD learning rate (0.001).")] = None,
    momentum: Annotated[float | None, typer.Option(help="SGD momentum (0.9).")] = None,
    weight_decay: Annotated[float | None, typer.Option(help="SGD weight decay (1e-4).")] = None,
    num_restarts: Annotated[
        int | None, typer.Option(help="Warm restarts of the cosine schedule (2).")
    ] = None,
    randaugment: Annotated[
        tuple[int, int] | None,
        typer.Option(help="RandAugment N M: operations and magnitude 0-30 (2 30; N=0: off)."),
    ] = None,
    flip: Annotated[
        bool | None, typer.Option("--flip/--no-flip", help="Random horizontal flip (on).")
    ] = None,
    crop_padding: Annotated[
        int | None, typer.Option(help="Random-crop padding, pixels (4).")
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            help="Seed of the initialisation, order and augmentation (0). On the CPU the same "
            "seed, --threads and machine give bit-identical weights whatever --workers; "
            "another thread count or CPU type may differ in the last bits, then more."
        ),
    ] = None,
    preset: Annotated[
        str | None, typer.Option(help="resize<R>-crop<C> (default: the model's input size).")
    ] = None,
    weights: Annotated[
        str | None, typer.Option(help="Initial weights, as `extract --weights` (default: random).")
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the run in --out from its last checkpoint.")
    ] = False,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")] = "auto",
    workers: Annotated[int, typer.Option(help="DataLoader worker processes.")] = 0,
    threads: Annotated[
        int | None,
        typer.Option(
            help="CPU threads while training (default: torch's); part of what --seed "
            "reproduces bit for bit."
        ),
    ] = None,
    progress: Annotated[bool, typer.Option(help="Show the progress bar.")] = True,
    nproc: Annotated[
        int | None,
        typer.Option(help="Data-parallel processes (DDP; gloo on CPU). Not under torchrun."),
    ] = None,
) -> None:
    """Train a model (CE, LogitNorm, OE, ...) into a checkpoint that `extract` takes.

    Data parallelism: `--nproc N`, or start the command under `torchrun --nproc-per-node N`.
    """
    from semshift.errors import InputError
    from semshift.training.distributed import dist_env
    from semshift.training.loop import train
    from semshift.training.recipe import TrainConfig

    file: dict[str, Any] = _train_config_file(config) if config is not None else {}
    params: dict[str, object] = dict(file.get("method_params", {}))
    for item in param or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--param {item!r}: expected KEY=VALUE")
        params[key.strip()] = _param_value(value.strip())
    given = {
        "epochs": epochs, "batch_size": batch_size, "lr": lr, "momentum": momentum,
        "weight_decay": weight_decay, "num_restarts": num_restarts, "flip": flip,
        "crop_padding": crop_padding,
    }  # fmt: skip
    if randaugment is not None:
        given["randaugment_n"], given["randaugment_m"] = randaugment
    options = {
        "model": model, "data": None if data is None else str(data), "classes": classes,
        "method": method, "seed": seed, "num_classes": num_classes, "preset": preset,
        "weights": weights, "outliers": None if outliers is None else str(outliers),
        "test_splits": None if not test_split else [str(p) for p in test_split],
        "out": None if out is None else str(out),
    }  # fmt: skip
    values = {**file, **{k: v for k, v in options.items() if v is not None}}
    for key in ("model", "data", "out"):
        if values.get(key) is None:
            raise InputError(f"give --{key} (or {key}: in a --config file)")
    out_dir = Path(values.pop("out"))
    values["method_params"] = params
    values["recipe"] = {**file.get("recipe", {})}
    values["recipe"].update({k: v for k, v in given.items() if v is not None})
    cfg = TrainConfig.from_dict(values)
    size = cfg.recipe.batch_size
    doing = f"training {cfg.model} (--batch-size {size}, --workers {workers}, --device {device})"
    lower = (
        f"lower it with a smaller --batch-size (e.g. {max(1, size // 2)}) or fewer --workers; the "
        f"checkpoints of finished epochs stay in {out_dir} and --resume continues from the last"
    )
    with _memory(doing, lower):
        result = train(
            cfg, out_dir, resume=resume, device=device, workers=workers, threads=threads,
            progress=progress, nproc=nproc,
        )  # fmt: skip
    if not dist_env().is_main:
        return  # under torchrun: rank 0 reports the run
    last = result.history[-1]
    ran = len(result.history) - result.start_epoch
    resumed = f", resumed after epoch {result.start_epoch}" if result.start_epoch else ""
    console.print(
        f"{out_dir}: {ran} epochs of {cfg.method} on {cfg.model}{resumed}; epoch "
        f"{int(last['epoch'])} loss {last['loss']:.4f}, training accuracy "
        f"{100 * last['accuracy']:.1f} %; weights {result.model_file} on {result.device}, "
        f"{result.seconds:.1f} s"
    )


#: the --conventions option of the commands that compute ranking metrics
ConventionsOption = Annotated[
    str | None,
    typer.Option(
        "--conventions",
        help="exact (default) or openood: FPR@95 and AUPR-In/Out exactly as OpenOOD v1.5's "
        "evaluator computes them (they differ on tied scores); recorded in the results.",
    ),
]


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
    _print_run(result)


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


def _selections(items: list[str] | None, sets: set[str]) -> dict[str, dict[str, list[object]]]:
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


def _detector_spec(item: str) -> dict[str, object]:
    """``knn`` or ``knn:k=50,backend=numpy`` -> a detector entry of the config.

    Values are read as YAML scalars: ``k=50`` is an integer, ``p=0.9`` a float, ``x=true`` a
    boolean.
    """
    import yaml

    name, colon, rest = item.partition(":")
    params: dict[str, object] = {}
    for pair in rest.split(",") if colon else []:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise SemshiftError(f"--detector {item!r}: expected NAME or NAME:KEY=VALUE,KEY=VALUE")
        try:
            params[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError:
            params[key.strip()] = value
    return {"name": name.strip(), "params": params}


def _search_spec(item: str) -> str | dict[str, object]:
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
    sel = _selections(select, sets - ({"val"} if val is None else set()))

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
        "detectors": [_detector_spec(d) for d in dict.fromkeys(detector)] if detector else "all",
        "protocols": protocols_cfg,
        "bootstrap": {"n_resamples": bootstrap, "seed": seed},
        "report": {"formats": ["html", "md"]} if report else None,
    }
    if metric:
        cfg["metrics"] = list(dict.fromkeys(metric))
    if val_name is not None:
        cfg["search"] = {
            "val_ood": val_name,
            "detectors": [_search_spec(s) for s in dict.fromkeys(search_space)]
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
        with _memory("evaluating", lower):
            result = run(
                load_config(cfg, source=where), progress=not quiet, force=force, wait=wait,
                files=files,
            )  # fmt: skip
    except SemshiftError as err:  # name the option, not the config key it became
        raise SemshiftError(_option_words(str(err), where, set(oods), val_name)) from None
    _print_run(result)


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
    cond = _selections([f"members:{s}" for s in select or []], {"members"}).get("members", {})
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
        spec = _detector_spec(detector)
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


def _print_run(result: RunResult) -> None:
    """The headline table, the errors the run went on after, and where everything is."""
    from semshift.report import headline_table

    if len(result.results):
        try:
            console.print(headline_table(result.results).to_rich())
        except SemshiftError as exc:  # no protocol with a table: the rows are in results.csv
            console.print(f"no headline table: {exc}")
    search = (result.provenance.get("notes") or {}).get("search") or {}
    for det, chosen in (search.get("chosen") or {}).items():
        values = ", ".join(f"{k}={v}" for k, v in chosen.items())
        value = (search.get("value") or {}).get(det)
        on = f" ({search.get('objective')} {value:.4f} on validation)" if value is not None else ""
        console.print(f"search: {det} {values}{on}")
    for err in result.errors:
        console.print(f"[yellow]warning[/yellow]: {err}")
    total = result.provenance.get("total_seconds", 0.0)
    console.print(f"{result.output} ({len(result.results)} result rows, {total:.1f} s)")
    report = result.report
    for kind in ("html", "md"):
        path = getattr(report, kind, None)
        if path is not None:
            console.print(f"report: {path}")


# --------------------------------------------------------------------------- benchmark
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
        "covariate set (repeatable).",
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
def benchmark_list() -> None:
    """The benchmarks: sets and sizes, roots needed, list source and list hash."""
    from semshift.catalog.benchmarks import get_benchmark, list_benchmarks

    table = Table(title="benchmarks")
    table.add_column("name", no_wrap=True)
    table.add_column("sets (images / classes)")
    table.add_column("roots")
    table.add_column("lists", overflow="fold")
    table.add_column("list hash", no_wrap=True)
    for name in list_benchmarks():
        b = get_benchmark(name)
        sets = b.sets()
        shown = []
        for s in sets[:6]:
            size = "/".join("?" if v is None else f"{v:,}" for v in (s.images, s.classes))
            shown.append(f"{s.name} {size}" + (" (optional)" if s.optional else ""))
        if len(sets) > 6:
            shown.append(f"... {len(sets) - 6} more")
        roots = ", ".join(b.roots) + (
            f" (optional {', '.join(b.optional_roots)})" if b.optional_roots else ""
        )
        info = b.info
        table.add_row(
            name, "\n".join(shown), roots, f"{info.repository}@{info.commit}", b.list_hash
        )
    console.print(table)


@benchmark_app.command("check")
def benchmark_check(
    name: Annotated[str, typer.Argument(help="Benchmark name (semshift benchmark list).")],
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
    name: Annotated[str, typer.Argument(help="Benchmark name (semshift benchmark list).")],
    model: Annotated[str, typer.Option("--model", help="Model name (semshift.features).")],
    weights: Annotated[
        str, typer.Option("--weights", help="Weights file or torchvision name (IMAGENET1K_V2).")
    ],
    out: Annotated[Path, typer.Option("--out", help="Output folder (config.json goes here).")],
    root: RootOption = None,
    detector: Annotated[
        list[str] | None,
        typer.Option("--detector", "-d", help="NAME or NAME:KEY=VALUE,... (default msp, mls)."),
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
        detectors=[_detector_spec(d) for d in detector] if detector else DEFAULT_DETECTORS,
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
    _print_run(result)


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
            help="A zero-shot method (repeatable; default all eight): conse, latem, ale, devise, "
            "sje, eszsl, sync or sae.",
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


@store_app.command("verify")
def store_verify(
    store: Annotated[Path, typer.Argument(help="A feature store folder.")],
) -> None:
    """Recompute every checksum of a store (shards, head, index, skipped.csv); exit 2 naming
    each damaged shard or file."""
    from semshift.errors import InputError
    from semshift.features.store import read_meta, verify_store

    damages = verify_store(store)
    if damages:
        raise InputError(
            f"store {store} is damaged: {', '.join(str(d) for d in damages)}; run `semshift "
            f"store repair {store}`, then the extraction again"
        )
    meta = read_meta(store)
    console.print(
        f"{store}: intact ({len(meta.get('shards', []))} shards, {meta.get('n_rows', '?')} rows; "
        "every checksum, commit record, the index and skipped.csv match meta.json)"
    )


@store_app.command("repair")
def store_repair(
    store: Annotated[Path, typer.Argument(help="A feature store folder.")],
) -> None:
    """Remove a store's damaged shards so that the next extraction recomputes only them."""
    from semshift.features.store import repair_store

    result = repair_store(store)
    if not result.damages:
        console.print(f"{store}: intact, nothing to repair")
        return
    removed = ", ".join(str(k) for k in result.removed_shards) or "none"
    meta = next((d for d in result.damages if d.file == "meta.json"), None)
    rebuilt = f"meta.json {meta.problem}: removed; " if meta else ""
    console.print(
        f"{store}: {rebuilt}removed damaged shard(s) {removed}; {result.kept_shards} intact "
        "shard(s) kept. Run the same extraction again (the `semshift extract` command, or the "
        "`semshift run` whose cache holds the store): it recomputes only the removed shards"
        + (" and writes meta.json again." if meta else ".")
    )


#: errno values of a write that found no room: the file is named, and what to do
_NO_ROOM = {"ENOSPC", "EDQUOT", "EFBIG"}


def _os_error(exc: OSError) -> str:
    """An OSError as one line that names its file, even when the failing call named none: a
    ``write()`` that finds the disk full raises ``OSError(ENOSPC)`` without a file name, so the
    file being written is taken from the traceback (:func:`_file_being_written`)."""
    import errno
    import re

    reason = exc.strerror or str(exc) or type(exc).__name__
    # numpy's tofile says "<n> requested and <k> written", without an errno
    no_room = errno.errorcode.get(exc.errno or 0, "") in _NO_ROOM or bool(
        re.fullmatch(r"\d+ requested and \d+ written", reason)
    )
    name = exc.filename
    if name is None and no_room:  # a write() names no file: the one it was writing
        name = _file_being_written(exc, guess=True)
    if name is not None and exc.filename2 is not None:
        name = f"{name} -> {exc.filename2}"
    advice = "; free space there or write elsewhere" if no_room else ""
    if name is None:
        return f"{reason} (writing a file semshift could not name){advice}" if no_room else reason
    return f"cannot write {name}: {reason}{advice}" if no_room else f"{name}: {reason}"


def _native_write_error(exc: BaseException) -> str | None:
    """A write that found no room in a library's native code, as one line naming the file
    (Rust's ``... (os error 28)``, as safetensors raises it; torch's ``PytorchStreamWriter
    failed writing file``), or None for any other error."""
    import errno
    import os
    import re

    text = str(exc)
    code = re.search(r"\(os error (\d+)\)", text)
    if code is not None and errno.errorcode.get(int(code.group(1)), "") in _NO_ROOM:
        reason = os.strerror(int(code.group(1)))
    elif "PytorchStreamWriter failed writing" in text:
        reason = "the write failed (is the disk full?)"
    else:
        return None
    name = _file_being_written(exc, guess=True) or "a file semshift could not name"
    return f"cannot write {name}: {reason}; free space there or write elsewhere"


def _file_being_written(exc: BaseException, *, guess: bool = False) -> str | None:
    """The innermost file open for writing in the traceback's frames (a file object, or a
    writer holding one as ``handle``, as pandas' does); a temporary ``.NAME.tmp...`` that is
    renamed into place when complete is named as ``NAME``.

    With ``guess`` (a write that found no room), a file written by a library's own code (Arrow
    writes Parquet files without a Python file object) is the path the innermost semshift
    function holds as ``tmp``, ``path`` or ``out``."""
    import io
    import os
    import re

    def named(name: str) -> str:
        head, tail = os.path.split(name)
        aside = re.fullmatch(r"\.(.+?)\.tmp(?:-[0-9A-Za-z]+)?", tail)
        return os.path.join(head, aside.group(1)) if aside else name

    def written(obj: object) -> str | None:
        for f in (obj, getattr(obj, "handle", None)):
            if not isinstance(f, io.IOBase):
                continue
            mode, name = getattr(f, "mode", ""), getattr(f, "name", None)
            if isinstance(mode, str) and set(mode) & set("wax+") and isinstance(name, str):
                return name
        return None

    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        for value in list(frame.f_locals.values()):
            name = written(value)
            if name is not None:
                return named(name)
    for frame in reversed(frames) if guess else ():
        if str(frame.f_globals.get("__name__", "")).startswith("semshift."):
            for key in ("tmp", "path", "out"):
                value = frame.f_locals.get(key)
                if isinstance(value, str | os.PathLike):
                    return named(os.fspath(value))
    return None


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app, turning user errors into one line and exit status 2."""
    command = typer.main.get_command(app)
    try:
        code = command.main(args=argv, prog_name="semshift", standalone_mode=False)
    except Exit as exc:
        sys.exit(exc.exit_code)
    except Abort:
        print("aborted", file=sys.stderr)
        sys.exit(130)
    except TyperException as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # bare group: show its help
            print(exc.format_message())
            sys.exit(0)
        ctx = getattr(exc, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        print(f"error: {exc.format_message()}{hint}".replace("\n", " "), file=sys.stderr)
        sys.exit(2)
    except SemshiftError as exc:
        print(f"error: {exc}".replace("\n", " "), file=sys.stderr)
        sys.exit(2)
    except OSError as exc:  # unreadable or unwritable user paths, a full disk
        print(f"error: {_os_error(exc)}".replace("\n", " "), file=sys.stderr)
        sys.exit(2)
    except Exception as exc:  # out of memory, or a native library's write that found no room
        from semshift.errors import out_of_memory

        what = out_of_memory(exc)
        if what is not None:  # what was computed before stays written
            what += (
                "; lower it with SEMSHIFT_THREADS=1, SEMSHIFT_BLOCK_ROWS=4096, a smaller "
                "--batch-size or fewer rows"
            )
        else:
            what = _native_write_error(exc)
        if what is None:
            raise
        print(f"error: {what}".replace("\n", " "), file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
