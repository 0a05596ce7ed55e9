"""`semshift train`: train a model with an open-set method; `semshift splits superclass-list`:
a super-class split as a labelled image list for it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    pass

from semshift.cli import _choices
from semshift.cli._app import app, splits_app
from semshift.cli._options import (
    DeviceOption,
    ProgressOption,
    WorkersOption,
    console,
    memory,
)


def _param_value(text: str) -> object:
    """A ``--param`` value: JSON (numbers, true/false, null, lists), else the plain string."""
    import json

    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _method_params(file: dict[str, Any], items: list[str] | None) -> dict[str, object]:
    """The method's hyperparameters: the --config file's, then each ``--param KEY=VALUE``."""
    from semshift.errors import InputError

    params: dict[str, object] = dict(file.get("method_params", {}))
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--param {item!r}: expected KEY=VALUE")
        params[key.strip()] = _param_value(value.strip())
    return params


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
            help="Training method (default ce): " + _choices.listed_names("training_methods") + "."
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
    recipe: Annotated[
        str | None,
        typer.Option(help="Named recipe under the recipe options: ssb (SGD) or sood (AdamW)."),
    ] = None,
    optimizer: Annotated[
        str | None, typer.Option(help="sgd (momentum) or adamw (default: the recipe's, sgd).")
    ] = None,
    epochs: Annotated[int | None, typer.Option(help="Epochs (recipe default 600).")] = None,
    batch_size: Annotated[int | None, typer.Option(help="Images per step (32).")] = None,
    lr: Annotated[float | None, typer.Option(help="Initial learning rate (0.001).")] = None,
    momentum: Annotated[float | None, typer.Option(help="SGD momentum (0.9).")] = None,
    weight_decay: Annotated[
        float | None, typer.Option(help="Weight decay (1e-4; decoupled under adamw).")
    ] = None,
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
    init_backbone: Annotated[
        Path | None,
        typer.Option(
            help="Start from this checkpoint's backbone with a fresh head (seeded): every "
            "tensor but the head's must be in it with the model's shape; MoCo, DINO, SimCLR "
            "key layouts are mapped, the rest is ignored and reported. Not with --weights."
        ),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the run in --out from its last checkpoint.")
    ] = False,
    device: DeviceOption = "auto",
    workers: WorkersOption = 0,
    threads: Annotated[
        int | None,
        typer.Option(
            help="CPU threads while training (default: torch's); part of what --seed "
            "reproduces bit for bit."
        ),
    ] = None,
    progress: ProgressOption = True,
    cache_mb: Annotated[
        int, typer.Option(help="MiB of decoded training images kept for later epochs.")
    ] = 1024,
    nproc: Annotated[
        int | None,
        typer.Option(help="Data-parallel processes (DDP; gloo on CPU). Not under torchrun."),
    ] = None,
) -> None:
    """Train a model (CE, LogitNorm, OE, ...) into a checkpoint that `extract` takes.

    Data parallelism: `--nproc N`, or start the command under `torchrun --nproc-per-node N`.
    """
    from semshift.training.distributed import dist_env
    from semshift.training.loop import train

    file: dict[str, Any] = _train_config_file(config) if config is not None else {}
    given = {
        "epochs": epochs, "batch_size": batch_size, "lr": lr, "momentum": momentum,
        "weight_decay": weight_decay, "num_restarts": num_restarts, "flip": flip,
        "crop_padding": crop_padding, "optimizer": optimizer,
    }  # fmt: skip
    if randaugment is not None:
        given["randaugment_n"], given["randaugment_m"] = randaugment
    options = {
        "model": model, "data": None if data is None else str(data), "classes": classes,
        "method": method, "seed": seed, "num_classes": num_classes, "preset": preset,
        "weights": weights, "outliers": None if outliers is None else str(outliers),
        "init_backbone": None if init_backbone is None else str(init_backbone),
        "test_splits": None if not test_split else [str(p) for p in test_split],
        "out": None if out is None else str(out),
    }  # fmt: skip
    cfg, out_dir = _config(file, _method_params(file, param), options, given, recipe)
    size = cfg.recipe.batch_size
    with memory(
        f"training {cfg.model} (--batch-size {size}, --workers {workers}, --device {device})",
        f"lower it with a smaller --batch-size (e.g. {max(1, size // 2)}) or fewer --workers; the "
        f"checkpoints of finished epochs stay in {out_dir} and --resume continues from the last",
    ):
        result = train(
            cfg, out_dir, resume=resume, device=device, workers=workers, threads=threads,
            progress=progress, nproc=nproc, cache_bytes=cache_mb << 20,
        )  # fmt: skip
    if not dist_env().is_main:
        return  # under torchrun: rank 0 reports the run
    _print_result(result, cfg, out_dir)


def _config(
    file: dict[str, Any],
    params: dict[str, object],
    options: dict[str, Any],
    given: dict[str, Any],
    recipe: str | None,
) -> tuple[Any, Path]:
    """The run's ``TrainConfig`` and output folder: the --config file's values, the options
    over them; the recipe knobs over the named ``recipe`` (--recipe), if any."""
    from semshift.errors import InputError
    from semshift.training.recipe import TrainConfig

    values = {**file, **{k: v for k, v in options.items() if v is not None}}
    for key in ("model", "data", "out"):
        if values.get(key) is None:
            raise InputError(f"give --{key} (or {key}: in a --config file)")
    out_dir = Path(values.pop("out"))
    values["method_params"] = params
    values["recipe"] = {**file.get("recipe", {})}
    if recipe is not None:  # the named recipe: the file's and the options' knobs override it
        values["recipe"]["name"] = recipe
    values["recipe"].update({k: v for k, v in given.items() if v is not None})
    return TrainConfig.from_dict(values), out_dir


def _print_result(result: Any, cfg: Any, out_dir: Path) -> None:
    """What the training did: the backbone report, then one line (epochs, loss, weights)."""
    if result.backbone is not None:
        console.print(result.backbone.summary(), markup=False)
    last = result.history[-1]
    ran = len(result.history) - result.start_epoch
    resumed = f", resumed after epoch {result.start_epoch}" if result.start_epoch else ""
    console.print(
        f"{out_dir}: {ran} epochs of {cfg.method} on {cfg.model}{resumed}; epoch "
        f"{int(last['epoch'])} loss {last['loss']:.4f}, training accuracy "
        f"{100 * last['accuracy']:.1f} %; weights {result.model_file} on {result.device}, "
        f"{result.seconds:.1f} s"
    )


@splits_app.command("superclass-list")
def superclass_list(
    split: Annotated[
        Path, typer.Option(help="split.json of `semshift splits superclass` (or its folder).")
    ],
    images: Annotated[
        Path, typer.Option(help="Class-folder tree of the sub-classes: IMAGES/<wnid>/<image>.")
    ],
    out: Annotated[Path, typer.Option(help="Folder of images.txt and classes.txt.")],
    part: Annotated[
        str, typer.Option(help="iid (the training part), easy, hard, or all sub-classes.")
    ] = "iid",
    allow_missing: Annotated[
        bool, typer.Option("--allow-missing", help="List the sub-classes that have a folder.")
    ] = False,
) -> None:
    """A super-class split as a labelled image list: each image of the part's sub-classes with
    its super-class, for `semshift train --data OUT/images.txt --classes OUT/classes.txt`."""
    from semshift.training.superclass_list import write_superclass_list

    res = write_superclass_list(split, images, out, part=part, allow_missing=allow_missing)
    empty = [s for s, k in res.counts.items() if k == 0]
    console.print(
        f"{res.images}: {res.n_images} images of {res.subclasses} sub-classes ({part}) labelled "
        f"with {len(res.superclasses)} super-classes ({res.classes})"
        + (f"; {len(empty)} super-classes without images (e.g. {empty[0]})" if empty else "")
        + (f"; {len(res.missing)} sub-classes without a folder skipped" if res.missing else ""),
        markup=False,
    )
