"""The training loop: one device (CUDA with float16 autocast when present, else the CPU).

:func:`train` trains a registry model with a registered method (:mod:`.methods`) and the
recipe (:class:`.recipe.Recipe`) on an image source, writing into the output folder:

- ``train.json``: the resolved configuration (defaults filled in) and the library versions,
  written before the first step; a later call on the same folder must give the same
  configuration;
- ``checkpoint.safetensors`` and ``checkpoint.json`` after every epoch (:mod:`.checkpoint`),
  the checkpoint it replaces kept as ``checkpoint.prev.safetensors``;
- ``metrics.csv``: one row per epoch (loss, accuracy, learning rate, images/s, seconds);
- ``model.safetensors`` at the end: the model's weights, for ``semshift extract --weights``.

A run killed at any point and started again with ``resume=True`` continues from its last
checkpoint and ends with the same weights, bit for bit on the CPU, as an uninterrupted run: the
batch order and each image's augmentation are functions of ``(seed, epoch, index)``
(:mod:`.images`), and the checkpoint holds the model, the optimiser, the schedule, the gradient
scaler and the global RNG state. On the CPU, ``torch.use_deterministic_algorithms`` is on while
training. Every checksum of the checkpoint is verified before it is resumed: a damaged one stops
the run with :class:`~.checkpoint.CheckpointDamagedError` (what to do in one line), and one of
an older semshift, without checksums, is resumed with a warning on stderr.

Data parallelism (:mod:`.distributed`): under ``torchrun`` (``WORLD_SIZE`` > 1 in the
environment), or with ``nproc`` > 1 (the processes are started here), each process takes its
slice of every global batch, DistributedDataParallel averages the gradients and BatchNorm
normalises over the global batch; only rank 0 writes the output folder. The files are those of
a one-process run, whose per-epoch losses the run matches within floating-point tolerance.
"""

from __future__ import annotations

import csv
import itertools
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from semshift.errors import InputError
from semshift.features.data import ImageSource, open_source
from semshift.features.device import resolve_device
from semshift.features.models import BackboneLoad, ModelAdapter, load_backbone, load_model
from semshift.training.checkpoint import (
    CHECKPOINT,
    MODEL_FILE,
    Checkpoint,
    read_checkpoint,
    save_model,
    versions,
    write_checkpoint,
    write_json,
)
from semshift.training.distributed import DistEnv, convert_batchnorm, dist_env, launch, shard
from semshift.training.images import (
    DEFAULT_CACHE_BYTES,
    EpochBatches,
    TrainImages,
    derived_seed,
    epoch_order,
)
from semshift.training.methods import TrainingMethod, check_method_params, get_method
from semshift.training.outliers import check_outlier_classes
from semshift.training.recipe import Recipe, TrainConfig

__all__ = [
    "CONFIG_FILE",
    "METRICS_FILE",
    "Prepared",
    "TrainResult",
    "busy_threads_note",
    "check_checkpoint_optimizer",
    "make_optimizer",
    "resolve_config",
    "train",
]

CONFIG_FILE = "train.json"
METRICS_FILE = "metrics.csv"
METRIC_COLUMNS = ("epoch", "loss", "accuracy", "lr", "images_per_s", "seconds")


@dataclass
class TrainResult:
    """What :func:`train` did.

    Attributes
    ----------
    out : Path
        The output folder.
    model_file : Path
        ``out/model.safetensors``.
    config : TrainConfig
        The resolved configuration.
    history : list of dict
        One row per epoch (the columns of ``metrics.csv``), resumed epochs included.
    start_epoch : int
        Epochs already done when this call started (0 unless resumed).
    device : str
    seconds : float
        Wall time of this call.
    backbone : BackboneLoad or None
        What ``config.init_backbone`` loaded and re-initialised (also in ``train.json``).
    """

    out: Path
    model_file: Path
    config: TrainConfig
    history: list[dict[str, float]]
    start_epoch: int
    device: str
    seconds: float
    backbone: BackboneLoad | None = None


def _as_path_text(value: str | None) -> str | None:
    """An existing path as an absolute path (a run is then independent of the cwd)."""
    if value is None:
        return None
    p = Path(value)
    return str(p.resolve()) if p.exists() else value


def _open_training_source(config: TrainConfig) -> ImageSource:
    source = open_source(config.data, config.classes)
    unlabelled = np.flatnonzero(np.asarray(source.labels) < 0)
    if len(unlabelled):
        raise InputError(
            f"training images {config.data}: {len(unlabelled)} images have no class (e.g. "
            f"{source.names[int(unlabelled[0])]}); put each image in a class folder or give it "
            "a label"
        )
    return source


def _check_head(source: ImageSource, num_classes: int, data: str) -> None:
    labels = np.asarray(source.labels)
    if len(labels) and int(labels.max()) >= num_classes:
        k = int(labels.max())
        cls = source.classes
        name = f" ({cls.ids[k]})" if cls is not None and k < len(cls.ids) else ""
        raise InputError(
            f"training images {data}: class {k}{name} does not fit a head of {num_classes} "
            f"classes; give num_classes >= {k + 1} or train on fewer classes"
        )


@dataclass
class Prepared:
    """A run ready to start: the resolved configuration, the images and the model.

    Attributes
    ----------
    config : TrainConfig
        Every default filled in, paths absolute.
    source : ImageSource
        The training images.
    outliers : ImageSource or None
        The auxiliary outlier images (checked against the test splits).
    adapter : ModelAdapter
        The model, initialised (seeded) or loaded from ``config.weights``, or its backbone
        loaded from ``config.init_backbone`` and its head initialised (seeded).
    backbone : BackboneLoad or None
        What ``config.init_backbone`` loaded, re-initialised and ignored.
    """

    config: TrainConfig
    source: ImageSource
    outliers: ImageSource | None
    adapter: ModelAdapter
    backbone: BackboneLoad | None = None


def resolve_config(config: TrainConfig) -> Prepared:
    """The configuration with every default filled in, the training images and the model.

    Everything a user can get wrong is checked here, before the output folder is touched.

    Raises
    ------
    UnknownNameError
        Unknown method, method hyperparameter or model.
    InputError
        Bad hyperparameters, unlabelled images, a class outside the head, unusable weights,
        outliers given to a method that takes none (or missing for one that needs them), an
        outlier class that is in a test split.
    """
    params = check_method_params(config.method, config.method_params)
    uses_outliers = get_method(config.method, **params).uses_outliers
    if uses_outliers and config.outliers is None:
        raise InputError(f"training method {config.method} needs auxiliary outlier images")
    if not uses_outliers and config.outliers is not None:
        raise InputError(f"training method {config.method} takes no outlier images")
    source = _open_training_source(config)
    if config.test_splits and config.outliers is None:
        raise InputError("test splits are checked only against outlier images; give them too")
    outliers = None
    if config.outliers is not None:
        outliers = open_source(config.outliers)
        check_outlier_classes(outliers, config.test_splits, config.outliers)
    if config.num_classes is not None:
        num_classes = int(config.num_classes)
    elif source.classes is not None:
        num_classes = len(source.classes)
    else:
        num_classes = int(np.asarray(source.labels).max()) + 1
    _check_head(source, num_classes, config.data)
    if config.weights is not None and config.init_backbone is not None:
        raise InputError(
            "weights and init_backbone (--weights, --init-backbone) exclude each other: the "
            "first loads the whole model strictly, the second all but the head"
        )
    adapter = load_model(
        config.model,
        weights=config.weights,
        random_init=config.weights is None,
        seed=config.seed,
        num_classes=num_classes,
        **config.model_kwargs,
    )
    backbone = None
    if config.init_backbone is not None:
        backbone = load_backbone(
            adapter.module, config.init_backbone, head=adapter.head_module(), seed=config.seed
        )
        adapter.weights_desc = backbone.summary()
    size = int(adapter.input_size)
    preset = config.preset or ("imagenet" if size == 224 else f"resize{size}-crop{size}")
    resolved = replace(
        config,
        data=str(Path(config.data).resolve()),
        classes=_as_path_text(config.classes),
        method_params=params,
        num_classes=num_classes,
        preset=preset,
        weights=_as_path_text(config.weights),
        init_backbone=_as_path_text(config.init_backbone),
        outliers=_as_path_text(config.outliers),
        test_splits=[str(_as_path_text(p)) for p in config.test_splits],
        data_fingerprint=source.fingerprint(),
    )
    return Prepared(resolved, source, outliers, adapter, backbone)


def _prepare_out(
    out: Path, config: TrainConfig, resume: bool, backbone: BackboneLoad | None = None
) -> bool:
    """Check the output folder against ``config``; True when a checkpoint is to be resumed.

    A new run's ``train.json`` records the configuration, the versions and ``backbone``'s
    report (``init_backbone``).

    Raises
    ------
    InputError
        The folder holds another run's configuration, or a run of this one and ``resume`` is
        off, or files that are not a training run's.
    """
    cfg_file = out / CONFIG_FILE
    if cfg_file.is_file():
        import json

        stored = json.loads(cfg_file.read_text(encoding="utf-8")).get("config", {})
        now = config.to_dict()
        diff = sorted(k for k in set(stored) | set(now) if stored.get(k) != now.get(k))
        if diff:
            raise InputError(
                f"output folder {out} holds a training run of another configuration (differs "
                f"in {', '.join(diff)}); choose another --out"
            )
        if (out / CHECKPOINT).is_file() and not resume:
            raise InputError(
                f"output folder {out} holds this run's checkpoint; pass --resume to continue "
                "it, or choose another --out"
            )
        return (out / CHECKPOINT).is_file()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"output folder {out} exists and is not a training run; choose another")
    out.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {"config": config.to_dict(), "versions": versions()}
    if backbone is not None:
        meta["init_backbone"] = backbone.to_dict()
    write_json(cfg_file, meta)
    return False


def _batches(order: list[int], size: int) -> list[list[int]]:
    return [order[i : i + size] for i in range(0, len(order), size)]


def _loader(ds: TrainImages, batches: Any, workers: int, pin: bool, **kwargs: Any) -> Any:
    from torch.utils.data import DataLoader

    dataset: Any = ds  # a map-style dataset (__getitem__, __len__)
    return DataLoader(dataset, batch_sampler=batches, num_workers=workers, pin_memory=pin, **kwargs)


def _run_batches(
    ds: TrainImages, config: TrainConfig, start: int, workers: int, pin: bool, env: DistEnv
) -> tuple[Iterator, Any]:
    """One loader for epochs ``start`` on (its workers, and their decoded images, live for the
    whole run); each process's slice of every batch. Also the function that gives an epoch's
    global batches.

    The loader draws its workers' base seed from a generator of its own; the loop makes, at
    each epoch's start, the one draw of the global generator that a loader made per epoch
    before, so every method's random stream is what it was.
    """
    bs, n = config.recipe.batch_size, len(ds)

    def global_batches(epoch: int) -> list[list[int]]:
        return _batches(epoch_order(n, config.seed, epoch), bs)

    def mine(epoch: int) -> list[list[int]]:
        return [shard(b, env.rank, env.world) for b in global_batches(epoch)]

    if start >= config.recipe.epochs:  # a finished run: no loader, no workers
        return iter(()), global_batches
    if workers > 0:  # each worker keeps a cache of its own
        ds.set_cache_bytes(ds.cache_bytes // workers)
    sampler = EpochBatches(mine, start, config.recipe.epochs, per_epoch=-(-n // bs))
    gen = torch.Generator().manual_seed(derived_seed(config.seed, 3))
    loader = _loader(ds, sampler, workers, pin, generator=gen)
    return iter(loader), global_batches


def _cycle(
    ds: TrainImages, size: int, seed: int, epoch: int, workers: int, pin: bool, env: DistEnv
) -> Iterator:
    """Outlier batches without end: a new shuffled pass (``epoch`` salted) when one runs out;
    each process takes its slice of every batch."""
    k = 0
    while True:
        ds.set_epoch(epoch * 1000 + k)
        order = epoch_order(len(ds), seed + 7919, epoch * 1000 + k)
        batches = [shard(b, env.rank, env.world) for b in _batches(order, size)]
        yield from _loader(ds, batches, workers, pin)
        k += 1


def _write_metrics(path: Path, history: list[dict[str, float]]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=METRIC_COLUMNS)
        writer.writeheader()
        writer.writerows(history)
    tmp.replace(path)


def _progress(enabled: bool) -> Any:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from semshift.progress import bar_console, progress_wanted

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]:.4f}  acc {task.fields[acc]:.3f}"),
        TextColumn("{task.fields[rate]:,.1f} img/s", style="cyan"),
        TimeRemainingColumn(),
        TimeElapsedColumn(),
        console=bar_console(),
        disable=not progress_wanted(enabled),
        transient=False,
    )


def train(
    config: TrainConfig,
    out: str | Path,
    *,
    resume: bool = False,
    device: str = "auto",
    workers: int = 0,
    amp: bool | None = None,
    threads: int | None = None,
    progress: bool = False,
    nproc: int | None = None,
    cache_bytes: int = DEFAULT_CACHE_BYTES,
) -> TrainResult:
    """Train ``config.model`` with ``config.method`` and write the run into ``out``.

    Parameters
    ----------
    config : TrainConfig
    out : str or Path
        Output folder: new or empty, or one this configuration wrote before (``resume``).
    resume : bool
        Continue from the folder's last checkpoint (a finished run is only re-exported).
    device : str
        ``"auto"`` (CUDA when present), ``"cpu"``, ``"cuda"``, ``"cuda:N"``.
    workers : int
        DataLoader worker processes (0 decodes in this process); the weights do not depend on
        it.
    amp : bool, optional
        float16 autocast with a gradient scaler; default on for CUDA, off on the CPU.
    threads : int, optional
        ``torch.set_num_threads`` while training (restored afterwards). The CPU weights are
        bit-identical for the same seed and thread count.
    progress : bool
        A progress bar with the running loss, accuracy and throughput.
    nproc : int, optional
        Data-parallel processes to start on this machine (gloo on the CPU, NCCL on CUDA with
        one GPU each); ``threads`` is per process. Under ``torchrun`` leave it out (or give
        the world size): the environment says where this process sits.
    cache_bytes : int
        Memory for decoded, resized training images (1 GiB; per process, split between the
        workers; 0: decode every image every epoch): the epochs after the first start from
        them. The weights do not depend on it.

    Returns
    -------
    TrainResult

    Raises
    ------
    InputError, UnknownNameError
        See :func:`resolve_config` and the output folder checks; nothing in ``out`` is changed
        before they pass.
    """
    t_start = time.perf_counter()
    out = Path(out)
    env = dist_env()
    if nproc is not None and int(nproc) < 1:
        raise InputError(f"nproc must be >= 1, got {nproc}")
    if int(cache_bytes) < 0:
        raise InputError(f"cache_bytes (--cache-mb) must be >= 0, got {cache_bytes}")
    if nproc is not None and env.distributed and int(nproc) != env.world:
        raise InputError(
            f"nproc {nproc} given inside a run of {env.world} processes (torchrun); leave it out"
        )
    prep = resolve_config(config)
    resolved = prep.config
    world = env.world if env.distributed else int(nproc or 1)
    _check_parallel(resolved, world)
    if world > 1 and not env.distributed:
        resolve_device(device)
        resuming = _prepare_out(out, resolved, resume, prep.backbone)
        start = read_checkpoint(out / CHECKPOINT).meta["epoch"] if resuming else 0
        launch(world, _spawned, (config, str(out), device, workers, amp, threads, cache_bytes))
        ckpt = read_checkpoint(out / CHECKPOINT)
        dev_text = str(resolve_device(device))
        return TrainResult(
            out, out / MODEL_FILE, resolved, list(ckpt.meta["history"]), int(start),
            f"{world} x {dev_text}", time.perf_counter() - t_start, prep.backbone,
        )  # fmt: skip
    dev = resolve_device(device)
    if env.distributed and dev.type == "cuda":
        dev = torch.device("cuda", env.local_rank)
        torch.cuda.set_device(dev)
    use_amp = dev.type == "cuda" if amp is None else bool(amp)
    owns_group = env.distributed and not torch.distributed.is_initialized()
    if owns_group:
        backend = "nccl" if dev.type == "cuda" else "gloo"
        torch.distributed.init_process_group(backend, rank=env.rank, world_size=env.world)
    try:
        resuming = _prepare_out_everywhere(out, resolved, resume, env, prep.backbone)
        result = _train_here(
            resolved, prep, out, dev, use_amp, resuming, workers, threads, progress, t_start, env,
            cache_bytes,
        )  # fmt: skip
        result.backbone = prep.backbone
        return result
    finally:
        if owns_group:
            torch.distributed.destroy_process_group()


def _check_parallel(config: TrainConfig, world: int) -> None:
    """Refuse a data-parallel run that cannot give every process images of each batch."""
    if world <= 1:
        return
    method = get_method(config.method, **config.method_params)
    if not type(method).supports_ddp:
        raise InputError(
            f"training method {config.method} trains in one process only; leave out --nproc"
        )
    bs = config.recipe.batch_size
    n = len(open_source(config.data, config.classes))
    last = n % bs or bs
    if min(bs, n, last) < world:
        raise InputError(
            f"{world} processes need at least {world} images in every batch (batch size {bs}, "
            f"last batch {last} of {n} images); choose another batch size or fewer processes"
        )


def _spawned(
    config: TrainConfig,
    out: str,
    device: str,
    workers: int,
    amp: bool | None,
    threads: int | None,
    cache_bytes: int = DEFAULT_CACHE_BYTES,
) -> None:
    """One process started by :func:`train` with ``nproc`` (the folder is prepared)."""
    train(
        config, out, resume=True, device=device, workers=workers, amp=amp, threads=threads,
        cache_bytes=cache_bytes,
    )  # fmt: skip


def _prepare_out_everywhere(
    out: Path, config: TrainConfig, resume: bool, env: DistEnv, backbone: BackboneLoad | None
) -> bool:
    """:func:`_prepare_out` on rank 0, its answer (or its error) on every rank."""
    if not env.distributed:
        return _prepare_out(out, config, resume, backbone)
    answer: list[Any] = [None]
    if env.is_main:
        try:
            answer = [_prepare_out(out, config, resume, backbone)]
        except InputError as err:
            answer = [str(err)]
    torch.distributed.broadcast_object_list(answer, src=0)
    if isinstance(answer[0], str):
        raise InputError(answer[0])
    return bool(answer[0])


def busy_threads_note(threads: int, load: float | None = None, cpus: int | None = None) -> str:
    """A line saying that ``threads`` torch threads outnumber the idle CPUs, or ``""``.

    OpenMP threads that share a busy CPU wait for each other at every operation's end: on a
    2-core machine at load 6-7, GlyphNet's training steps ran 19x slower with 2 threads than
    with 1 (benchmarks/RESULTS.md, issue 33). ``load`` is the 1-minute load average and ``cpus`` the
    CPUs this process may use (both read when not given).

    >>> busy_threads_note(2, load=5.0, cpus=2)[:44]
    '2 torch threads, 0 of 2 CPUs idle (load 5.0)'
    >>> busy_threads_note(2, load=0.3, cpus=2)
    ''
    """
    import os

    if load is None:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        cpus = cpus or 1
    idle = max(0, int(cpus - load + 0.5))
    if threads <= 1 or threads <= idle:
        return ""
    return (
        f"{threads} torch threads, {idle} of {cpus} CPUs idle (load {load:.1f}): threads that "
        f"share busy CPUs can train many times slower; --threads {max(1, idle)} is faster here "
        "(and, with --seed, reproduces bit for bit at that count)"
    )


def _train_here(
    resolved: TrainConfig,
    prep: Prepared,
    out: Path,
    dev: torch.device,
    use_amp: bool,
    resuming: bool,
    workers: int,
    threads: int | None,
    progress: bool,
    t_start: float,
    env: DistEnv,
    cache_bytes: int = DEFAULT_CACHE_BYTES,
) -> TrainResult:
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    old_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(int(threads))
    elif dev.type == "cpu" and env.is_main:
        note = busy_threads_note(torch.get_num_threads())
        if note:
            print(f"warning: {note}", file=sys.stderr)
    try:
        with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []):
            torch.use_deterministic_algorithms(True, warn_only=dev.type != "cpu")
            torch.manual_seed(resolved.seed)
            return _train(
                resolved, prep.source, prep.outliers, prep.adapter, out, dev, use_amp, resuming,
                workers, progress and env.is_main, t_start, env, cache_bytes,
            )  # fmt: skip
    finally:
        torch.use_deterministic_algorithms(was_deterministic)
        torch.set_num_threads(old_threads)


def _train(
    config: TrainConfig,
    source: ImageSource,
    outliers: ImageSource | None,
    adapter: ModelAdapter,
    out: Path,
    dev: torch.device,
    use_amp: bool,
    resuming: bool,
    workers: int,
    progress: bool,
    t_start: float,
    env: DistEnv,
    cache_bytes: int = DEFAULT_CACHE_BYTES,
) -> TrainResult:
    recipe = config.recipe
    assert config.preset is not None and config.num_classes is not None
    method: TrainingMethod = get_method(config.method, **config.method_params)
    method.setup(config.num_classes, adapter.feature_dim)
    adapter.to(dev)
    method.to(dev)
    step_fn: Any = method.batch_loss
    if env.distributed:
        from torch.nn.parallel import DistributedDataParallel

        # the collectives inside forward and backward (BatchNorm statistics, global batch
        # means, the method's own gradients) on a group of their own, apart from DDP's
        bn_group = torch.distributed.new_group(list(range(env.world)))
        adapter.module = convert_batchnorm(adapter.module, dev, bn_group)
        method.data_parallel(bn_group, dev)
        step_fn = DistributedDataParallel(
            _Step(adapter, method), device_ids=[dev.index] if dev.type == "cuda" else None,
            forward_sync_buffers=False, static_graph=True,
        )  # fmt: skip
    params = list(adapter.module.parameters()) + [
        p for p in method.parameters() if not any(p is q for q in _own_optimised(method))
    ]
    opt = make_optimizer(recipe, params)
    sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(
        opt, T_0=recipe.cycle_epochs, eta_min=recipe.lr * 1e-3
    )
    scaler = torch.amp.GradScaler(dev.type, enabled=use_amp)
    history: list[dict[str, float]] = []
    start = 0
    if resuming:
        start, history = _resume(out, adapter, method, opt, sched, scaler, dev, env, recipe)
    ds, out_ds = _datasets(config, source, outliers, adapter, cache_bytes, workers)
    ratio = float(getattr(method, "outlier_batch_ratio", 1.0))
    out_batch = max(1, round(recipe.batch_size * ratio))
    pin = dev.type == "cuda"
    n = len(ds)
    run_batches, global_batches_of = _run_batches(ds, config, start, workers, pin, env)
    bar = _progress(progress)
    with bar:
        for epoch in range(start, recipe.epochs):
            t0 = time.perf_counter()
            task = bar.add_task(
                f"epoch {epoch + 1}/{recipe.epochs}", total=n, loss=0.0, acc=0.0, rate=0.0
            )
            adapter.module.train()
            method.train()
            global_batches = global_batches_of(epoch)
            torch.empty((), dtype=torch.int64).random_()  # a per-epoch loader's seed draw
            outlier_iter = (
                _cycle(out_ds, out_batch, config.seed, epoch, workers, pin, env)
                if out_ds is not None
                else None
            )
            total_loss = torch.zeros((), dtype=torch.float64, device=dev)
            correct = torch.zeros((), dtype=torch.int64, device=dev)
            seen = 0
            loader = itertools.islice(run_batches, len(global_batches))
            for (x, y), whole in zip(loader, global_batches, strict=True):
                x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
                xo = None
                if outlier_iter is not None:
                    xo = next(outlier_iter)[0].to(dev, non_blocking=True)
                with torch.autocast(dev.type, dtype=torch.float16, enabled=use_amp):
                    loss, logits = step_fn(adapter, x, y, xo)
                # each process's share of the global batch's mean (DDP averages over processes)
                share = loss * (len(y) * env.world / len(whole)) if env.distributed else loss
                opt.zero_grad(set_to_none=True)
                scaler.scale(share).backward()
                scaler.step(opt)
                scaler.update()
                total_loss += loss.detach().double() * len(y)
                correct += (logits.detach().argmax(1) == y).sum()
                seen += len(y)
                if progress:
                    rate = seen / max(time.perf_counter() - t0, 1e-9)
                    bar.update(
                        task, advance=len(y), loss=float(total_loss) / seen,
                        acc=int(correct) / seen, rate=rate,
                    )  # fmt: skip
            if env.distributed:
                sums = torch.stack([total_loss, correct.double(), total_loss.new_tensor(seen)])
                torch.distributed.all_reduce(sums)
                total_loss, correct, seen = sums[0], sums[1].long(), int(sums[2])
            lr = float(opt.param_groups[0]["lr"])
            sched.step()
            seconds = time.perf_counter() - t0
            history.append(
                {
                    "epoch": epoch + 1,
                    "loss": float(total_loss) / max(seen, 1),
                    "accuracy": int(correct) / max(seen, 1),
                    "lr": lr,
                    "images_per_s": seen / max(seconds, 1e-9),
                    "seconds": seconds,
                }
            )
            if env.is_main:
                _save(out, config, adapter, method, opt, sched, scaler, dev, epoch + 1, history)
                _write_metrics(out / METRICS_FILE, history)
    for _ in run_batches:  # none left: this ends the loader's workers
        pass
    method.export(adapter)
    adapter.module.eval()
    if env.is_main:
        save_model(out / MODEL_FILE, adapter.module.state_dict())
    if env.distributed:
        torch.distributed.barrier()  # the other ranks return once the files are written
    return TrainResult(
        out, out / MODEL_FILE, config, history, start, str(dev) + (" (amp)" if use_amp else ""),
        time.perf_counter() - t_start,
    )  # fmt: skip


def make_optimizer(recipe: Recipe, params: Sequence[Tensor]) -> torch.optim.Optimizer:
    """The recipe's optimiser over ``params``: SGD with momentum, or AdamW (torch's betas).

    >>> from semshift.training.recipe import Recipe
    >>> w = [torch.zeros(2, requires_grad=True)]
    >>> type(make_optimizer(Recipe(optimizer="adamw", lr=0.5), w)).__name__
    'AdamW'
    """
    if recipe.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=recipe.lr, weight_decay=recipe.weight_decay)
    return torch.optim.SGD(
        params, lr=recipe.lr, momentum=recipe.momentum, weight_decay=recipe.weight_decay
    )


def check_checkpoint_optimizer(ckpt: Checkpoint, recipe: Recipe, path: Path) -> None:
    """Refuse to resume a checkpoint whose optimiser state is another optimiser's.

    The checkpoint's configuration names its optimiser (``recipe.optimizer``; SGD when absent,
    as in every checkpoint of an older semshift).

    Raises
    ------
    InputError
        One line: the checkpoint, both optimisers and what to do.
    """
    stored = ckpt.meta.get("config", {}).get("recipe", {}).get("optimizer", "sgd")
    if stored != recipe.optimizer:
        raise InputError(
            f"checkpoint {path} holds the state of optimizer {stored}, but this run uses "
            f"{recipe.optimizer}; resume it with optimizer {stored} or train into another --out"
        )


def _datasets(
    config: TrainConfig,
    source: ImageSource,
    outliers: ImageSource | None,
    adapter: ModelAdapter,
    cache_bytes: int,
    workers: int,
) -> tuple[TrainImages, TrainImages | None]:
    """The training images and the outlier images (or None), with the recipe's augmentation.

    The outlier images keep decoded images only without workers (their loader, and its
    workers, are made anew for each pass over them)."""
    recipe = config.recipe
    assert config.preset is not None
    kw: dict[str, Any] = {
        "randaugment": (recipe.randaugment_n, recipe.randaugment_m),
        "flip": recipe.flip,
        "padding": recipe.crop_padding,
    }
    mean, std = adapter.mean, adapter.std
    ds = TrainImages(
        source, config.preset, mean, std, seed=config.seed, cache_bytes=cache_bytes, **kw
    )
    out_ds = None
    if outliers is not None:
        out_ds = TrainImages(
            outliers, config.preset, mean, std, seed=config.seed + 1,
            cache_bytes=cache_bytes if workers == 0 else 0, **kw,
        )  # fmt: skip
    return ds, out_ds


def _resume(
    out: Path,
    adapter: ModelAdapter,
    method: TrainingMethod,
    opt: torch.optim.Optimizer,
    sched: Any,
    scaler: Any,
    dev: torch.device,
    env: DistEnv,
    recipe: Recipe,
) -> tuple[int, list[dict[str, float]]]:
    """Load the last checkpoint of ``out`` into the model, the method, the optimisers, the
    schedule, the scaler and the random state; return ``(epochs done, history)``."""
    ckpt = read_checkpoint(out / CHECKPOINT)
    check_checkpoint_optimizer(ckpt, recipe, out / CHECKPOINT)
    if not ckpt.verified and env.is_main:
        print(
            f"warning: checkpoint {out / CHECKPOINT} carries no checksums (written by an older "
            "semshift): resumed without verifying it; the checkpoints written from now on "
            "carry them",
            file=sys.stderr,
        )
    adapter.module.load_state_dict(ckpt.model, strict=True)
    method.load_state_dict(ckpt.method, strict=True)
    opt.load_state_dict(ckpt.optimizer)
    _load_method_optimizers(method, ckpt)
    sched.load_state_dict(ckpt.meta["scheduler"])
    scaler.load_state_dict(ckpt.meta["scaler"])
    torch.set_rng_state(ckpt.rng["cpu"])
    if "cuda" in ckpt.rng and dev.type == "cuda":
        torch.cuda.set_rng_state(ckpt.rng["cuda"], dev)
    return int(ckpt.meta["epoch"]), list(ckpt.meta["history"])


def _save(
    out: Path,
    config: TrainConfig,
    adapter: ModelAdapter,
    method: TrainingMethod,
    opt: torch.optim.Optimizer,
    sched: Any,
    scaler: Any,
    dev: torch.device,
    epoch: int,
    history: list[dict[str, float]],
) -> None:
    rng: dict[str, Tensor] = {"cpu": torch.get_rng_state()}
    extra = {name: o.state_dict() for name, o in method.optimizers().items()}
    if dev.type == "cuda":
        rng["cuda"] = torch.cuda.get_rng_state(dev)
    meta = {
        "config": config.to_dict(),
        "seed": config.seed,
        "epoch": epoch,
        "epochs": config.recipe.epochs,
        "history": history,
        "scheduler": sched.state_dict(),
        "scaler": scaler.state_dict(),
        "versions": versions(),
    }
    write_checkpoint(
        out, model=adapter.module.state_dict(), method=method.state_dict(),
        optimizer=opt.state_dict(), rng=rng, meta=meta, extra_optimizers=extra,
    )  # fmt: skip


class _Step(torch.nn.Module):
    """The model and the method as one module, so DistributedDataParallel sees one forward.

    The parameters that the method's own optimisers step (ARPL+CS's generator and
    discriminator) are not registered here, so DDP neither hooks nor reduces them: the method
    averages their gradients itself (:meth:`TrainingMethod.data_parallel`).
    """

    def __init__(self, adapter: ModelAdapter, method: TrainingMethod) -> None:
        super().__init__()
        self.model = adapter.module
        own = _own_optimised(method)
        self.shared = torch.nn.ParameterList(
            [p for p in method.parameters() if not any(p is q for q in own)]
        )
        self._method = (method,)  # a tuple: not a submodule

    def forward(
        self, adapter: ModelAdapter, x: Tensor, y: Tensor, xo: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        return self._method[0].batch_loss(adapter, x, y, xo)


def _own_optimised(method: TrainingMethod) -> list[Tensor]:
    """Parameters that the method's own optimisers step (kept out of the model's SGD)."""
    return [p for o in method.optimizers().values() for g in o.param_groups for p in g["params"]]


def _load_method_optimizers(method: TrainingMethod, ckpt: Checkpoint) -> None:
    own = method.optimizers()
    if sorted(own) != sorted(ckpt.extra_optimizers):
        raise InputError(
            f"checkpoint: optimisers {sorted(ckpt.extra_optimizers)} do not match the method's "
            f"{sorted(own)}; choose another --out"
        )
    for name, o in own.items():
        o.load_state_dict(ckpt.extra_optimizers[name])
