"""`semshift extract`: logits, features and head weights into a feature store."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from semshift.cli import _choices
from semshift.cli._app import app
from semshift.cli._options import (
    DeviceOption,
    ProgressOption,
    WaitOption,
    console,
    memory,
)

if TYPE_CHECKING:
    from semshift.features.model_detectors import ModelLevelDetector


def _groups(items: list[str] | None) -> dict[str, str]:
    """``--group KEY=VALUE`` options -> the group columns of every row."""
    from semshift.errors import InputError

    groups: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--group {item!r}: expected KEY=VALUE")
        groups[key.strip()] = value
    return groups


def _score_detectors(
    score: list[str] | None, fit_images: Path | None
) -> tuple[list[ModelLevelDetector], list[str]]:
    """The ``--score`` detectors, and the names of those fitted on ``--fit-images``."""
    from semshift.errors import InputError
    from semshift.features.model_detectors import get_model_detector

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
    return dets, fitting


_CLASS_LISTS = _choices.listed(_choices.CLASS_LISTS)
_CORRUPTIONS = _choices.listed(_choices.CORRUPTIONS)


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
        str | None,
        typer.Option(help=f"Class list: shipped name ({_CLASS_LISTS}) or file of ids."),
    ] = None,
    num_classes: Annotated[
        int | None, typer.Option(help="Head size (default: the class list's length, else 1000).")
    ] = None,
    batch_size: Annotated[int, typer.Option(help="Images per forward pass.")] = 64,
    shard_size: Annotated[int, typer.Option(help="Rows per shard.")] = 10_000,
    workers: Annotated[
        int | None,
        typer.Option(
            help="DataLoader worker processes (default: the CPUs this process may use, at most 4)."
        ),
    ] = None,
    preset: Annotated[
        str | None,
        typer.Option(
            help="imagenet (256/224), imagenet-224 or resize<R>-crop<C> (default: what named "
            "weights were trained with, else imagenet)."
        ),
    ] = None,
    device: DeviceOption = "auto",
    unknown: Annotated[
        str, typer.Option(help="Class folder not in the class list: error, skip or ood (-1).")
    ] = "error",
    group: Annotated[
        list[str] | None, typer.Option(help="Group column for every row, KEY=VALUE (repeatable).")
    ] = None,
    corruption: Annotated[
        str | None,
        typer.Option(help=f"ImageNet-C corruption applied after the crop: {_CORRUPTIONS}."),
    ] = None,
    severity: Annotated[int, typer.Option(help="Corruption severity, 1-5.")] = 3,
    score: Annotated[
        list[str] | None,
        typer.Option(
            help="Model-level detector stored as a score column (repeatable): "
            + _choices.detectors(level="model")
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
    progress: ProgressOption = True,
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
    groups = _groups(group)
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
    from semshift.features.model_detectors import fit_model_detectors

    dets, fitting = _score_detectors(score, fit_images)
    if workers is None:
        from semshift.features.data import default_workers

        workers = default_workers()
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
        with memory(f"fitting --score {', '.join(fitting)}{doing.removeprefix('extracting')}",
                     "lower it with a smaller --batch-size or --fit-max-images"):  # fmt: skip
            fit_model_detectors(
                dets, adapter, train, preset=preset, batch_size=batch_size, workers=workers,
                device=device, max_images=fit_max_images,
            )  # fmt: skip
    if executor == "ray":
        from semshift.features.ray_executor import connect

        connect(ray_address)
    with memory(doing, lower):
        summary = extract(
            adapter, source, out, preset=preset, batch_size=batch_size, shard_size=shard_size,
            workers=workers, device=device, groups=groups, corruption=corrupt, scores=dets,
            executor=executor, progress=progress, wait=wait,
        )  # fmt: skip
    _print_summary(summary, workers)


def _print_summary(summary: Any, workers: int) -> None:
    """The extraction's one line: stored, skipped (why), speed, device and workers."""
    reasons = ", ".join(f"{r}: {c}" for r, c in sorted(summary.skip_reasons.items()))
    console.print(
        f"{summary.out}: {summary.n_stored} of {summary.n_images} images stored in "
        f"{summary.n_shards} shards ({summary.n_resumed} resumed), {summary.n_skipped} skipped"
        + (f" ({reasons})" if reasons else "")
        + f"; {summary.images_per_s:,.1f} images/s on {summary.device} with {workers} decoding "
        f"worker(s), {summary.seconds:.1f} s"
    )
