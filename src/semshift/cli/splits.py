"""`semshift splits ...`: build, check and inspect class splits."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from semshift.errors import SemshiftError

if TYPE_CHECKING:
    from semshift.splits.ssb import SSBResult

from semshift.cli import _choices
from semshift.cli._app import splits_app
from semshift.cli._options import Table, TaxonomyOption, console


def builder_params(builder: str, values: dict[str, Any]) -> Any:
    """The options of ``semshift splits BUILDER`` checked by the builder's params model
    (:func:`semshift.splits.registry.validate_params`); an option left out (None) keeps the
    model's default. A bad value is one line naming the option: ``--measure: ...``."""
    from semshift.errors import InputError
    from semshift.splits.registry import validate_params

    where = f"semshift splits {builder}"
    given = {k: v for k, v in values.items() if v is not None}
    try:
        return validate_params(builder, given, where=where)
    except InputError as err:
        text = str(err)
        head = f"{where}.params."
        if text.startswith(head):
            key, sep, rest = text[len(head) :].partition(": ")
            names = BUILDER_OPTIONS.get(builder, {})

            def option(field: str) -> str:
                return "--" + names.get(field, field.replace("_", "-"))

            for field in values:  # "applies only with 'scores'" -> "... with --scores"
                rest = rest.replace(f"'{field}'", option(field))
            text = f"{option(key)}: {rest}" if sep else text
        raise InputError(text) from None


#: per builder, the params-model field -> its option where the names differ
BUILDER_OPTIONS: dict[str, dict[str, str]] = {
    "cleaning": {"id_classes": "id", "exclude_subtrees": "exclude-subtree"},
}


def _fmt(x: object) -> str:
    if isinstance(x, float):
        return f"{x:.3f}" if abs(x) < 100 else f"{x:.1f}"
    return str(x)


_LISTS = _choices.listed(_choices.CLASS_LISTS)
#: --known and --pool of the builders that rank or draw open-set classes (ssb, sample)
KnownOption = Annotated[
    str, typer.Option(help=f"Known classes: shipped list name ({_LISTS}) or file of ids.")
]
PoolOption = Annotated[
    str | None,
    typer.Option(help="Candidates: shipped list or file (custom taxonomy: default all leaves)."),
]


@splits_app.command("ssb")
def splits_ssb(
    out: Annotated[
        Path, typer.Option(help="Output directory (split.json, audit.csv, summary.csv).")
    ],
    preset: Annotated[str, typer.Option(help="ssb, nearest, lch-mean or hierarchy.")] = "ssb",
    known: KnownOption = "imagenet1k",
    pool: PoolOption = None,
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
        str | None, typer.Option(help=f"Keep only these classes: list name ({_LISTS}) or file.")
    ] = None,
) -> None:
    """Build Easy/Medium/Hard open-set splits by semantic distance (Semantic Shift Benchmark)."""
    from semshift.splits.ssb import SSBParams, build_ssb_split

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
    values: dict[str, Any] = {
        "known": known, "pool": pool, "preset": preset, "graph": graph, "measure": measure,
        "aggregation": aggregation, "easy_first": easy_first, "quantiles": q,
        "restrict_to": "imagenet21k-p-winter21" if winter21 else restrict_to,
    }  # fmt: skip
    if bin_size is not None and bin_size > 0:  # the builder words a bad size itself
        values["bin_size"] = bin_size
    p: SSBParams = builder_params("ssb", values)
    candidates = p.pool
    if candidates is None and taxonomy in ("wordnet", "wordnet-3.0"):
        candidates = "imagenet21k-p"
    t0 = time.perf_counter()
    result = build_ssb_split(
        p.known,
        candidates,
        taxonomy=taxonomy,
        preset=p.preset,
        graph=p.graph,
        measure=p.measure,
        aggregation=p.aggregation,
        easy_first=p.easy_first,
        bin_size=bin_size if bin_size is not None and bin_size < 1 else p.bin_size,
        quantiles=p.quantiles,
        restrict_to=p.restrict_to,
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


@splits_app.command("sample")
def splits_sample(
    out: Annotated[Path, typer.Option(help="Output directory (split.json).")],
    sizes: Annotated[
        str, typer.Option(help="Classes per sample, comma-separated (nested samples).")
    ] = "1000,10000",
    seed: Annotated[int, typer.Option(help="Seed of the draw.")] = 0,
    known: KnownOption = "imagenet1k",
    pool: PoolOption = None,
    taxonomy: TaxonomyOption = "wordnet",
) -> None:
    """Random open-set class samples (bins random_<n>), nested and seeded: the SSB's
    more-classes ablation (1K vs 10K classes)."""
    from semshift.splits.sample import build_sample_split

    try:
        n = [int(x) for x in sizes.split(",") if x.strip()]
    except ValueError:
        raise SemshiftError(
            f"--sizes: expected class counts like 1000,10000, got {sizes!r}"
        ) from None
    p = builder_params("sample", {"known": known, "pool": pool, "sizes": n, "seed": seed})
    candidates = p.pool
    if candidates is None and taxonomy in ("wordnet", "wordnet-3.0"):
        candidates = "imagenet21k-p"
    manifest = build_sample_split(
        p.known, candidates, sizes=p.sizes, seed=p.seed, taxonomy=taxonomy
    )
    path = manifest.write(out)
    counts = ", ".join(f"{name} {len(v)}" for name, v in manifest.bins.items())
    console.print(
        f"{manifest.extra['counts']['candidates']} candidate classes outside the "
        f"{len(manifest.known)} known, seed {seed}: {counts} | wrote {path}"
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
    values: dict[str, Any] = {"id_classes": id_classes, "pool": pool,
                              "sisters_only": not all_candidates}  # fmt: skip
    if no_exclude or exclude_subtree:  # else the model's default, organism.n.01
        values["exclude_subtrees"] = [] if no_exclude else exclude_subtree
    p = builder_params("cleaning", values)
    t0 = time.perf_counter()
    result = build_cleaning_split(
        p.id_classes,
        p.pool,
        taxonomy=taxonomy,
        exclude_subtrees=list(p.exclude_subtrees),
        sisters_only=p.sisters_only,
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

    values: dict[str, Any] = {
        "classes": classes, "images": images, "unseen": unseen, "not_unseen": not_unseen,
        "max_hops": max_hops, "seed": seed, "val_fraction": val_fraction,
        "test_seen_fraction": test_seen_fraction,
        # with 'unseen' the model refuses a fraction (it would be ignored): the default is left out
        "unseen_fraction": unseen_fraction if unseen is None else None,
    }  # fmt: skip
    p = builder_params("zsl", values)
    result = build_zsl_split(
        p.classes,
        images,
        taxonomy=taxonomy,
        unseen=p.unseen,
        unseen_fraction=p.unseen_fraction,
        val_fraction=p.val_fraction,
        test_seen_fraction=p.test_seen_fraction,
        not_unseen=p.not_unseen,
        max_hops=p.max_hops,
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
    from semshift.splits.check import COLUMNS, LeakReport, check_split_rows

    # check_split's rows: a split without leaks is checked and reported without pandas
    rows, done = check_split_rows(manifest, images, root=root, hash_content=not no_hash)
    checked = ", ".join(f"{k} {v}" for k, v in done.items())
    if report is None and not rows:
        console.print(f"no leaks found ({checked})")
        return
    import pandas as pd

    result = LeakReport(violations=pd.DataFrame(rows, columns=COLUMNS), checked=done)
    if report is not None:
        result.violations.to_csv(report, index=False)
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

    from semshift.features.store import open_verified, row_class_ids
    from semshift.splits.cleaning import visual_ambiguity

    # both verified, and of one model: distances between two models' features mean nothing
    opened = open_verified({"--id-store": id_store, "--candidates": candidates})
    ids, cand = opened["--id-store"], opened["--candidates"]
    sel = ids.select(**_group_filter(id_select, "--id-select")) if id_select else ids.all()
    (id_feats,) = sel.arrays("features")
    (cand_feats,) = cand.all().arrays("features")
    # each candidate's class: a class_id column, its label's class, or its class folder
    row_ids = row_class_ids(cand.meta, cand.labels, cand.index)
    n_none = sum(c is None for c in row_ids)
    cls = np.asarray([c if c is not None else "unknown" for c in row_ids], dtype=object)
    if n_none:
        console.print(
            f"[yellow]warning[/yellow]: {n_none} of {len(row_ids)} candidate image(s) have no "
            "class (no class_id column, not in the class list, not in a class folder): "
            "classes.csv counts them as one class 'unknown'"
        )
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
    from semshift.splits.manifest import overlap_rows

    ma, mb = resolve_manifest(a), resolve_manifest(b)
    table = Table(title=f"A = {a} vs B = {b}")
    for col in ("set", "A", "B", "common", "jaccard"):
        table.add_column(col, justify="left" if col == "set" else "right")
    for name, n_a, n_b, n_common, jaccard in overlap_rows(ma, mb):  # compare_manifests' rows
        jac = "-" if jaccard != jaccard else f"{jaccard:.3f}"  # NaN: both empty
        table.add_row(name, str(n_a), str(n_b), str(n_common), jac)
    console.print(table)
    for label, m in (("A", ma), ("B", mb)):
        digest = m.params.get("list_hash") if m.method.startswith("published:") else None
        console.print(f"{label}: {m.method}" + (f" (lists {digest})" if digest else ""))
