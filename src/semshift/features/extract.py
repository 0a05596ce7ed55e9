"""Extraction: run a model adapter over an image source and write a feature store, resumably.

Samples are processed in source order; shard k holds samples ``k * shard_size ..`` and is cut
into batches that never cross a shard boundary, so a restarted run recomputes exactly the shards
that were not committed, with the same batches, and the finished store is identical (same
checksums) to an uninterrupted one on the same device. Unreadable images are recorded in the
store's ``skipped.csv`` with their reason and never stop the run.

Device ``"auto"`` picks CUDA when present (with float16 autocast there) and the CPU otherwise.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from semshift.detectors import ModelLevelDetector
from semshift.errors import InputError
from semshift.features.data import ImageDataset, ImageSource, normalize_batch, parse_preset
from semshift.features.decoded import active_memo
from semshift.features.device import resolve_device
from semshift.features.model_detectors import (
    check_model_detectors,
    get_model_detector,
    score_batch,
)
from semshift.features.models import ModelAdapter
from semshift.features.store import StoreWriter, sha256_file, verify_store
from semshift.locking import folder_lock

__all__ = ["ExtractSummary", "ShardJob", "extract", "extract_many", "resolve_device"]


@dataclass
class ExtractSummary:
    """What an extraction did.

    Attributes
    ----------
    out : Path
        The store.
    n_images : int
        Samples in the source.
    n_stored, n_skipped : int
        Rows written and images skipped (unreadable, or excluded while listing).
    n_shards, n_resumed : int
        Shards in the store, and shards found complete from an earlier run.
    seconds : float
        Wall time of this run.
    images_per_s : float
        Images processed by this run per second.
    device : str
    skip_reasons : dict of str to int
        Reason -> count.
    """

    out: Path
    n_images: int
    n_stored: int
    n_skipped: int
    n_shards: int
    n_resumed: int
    seconds: float
    images_per_s: float
    device: str
    skip_reasons: dict[str, int] = field(default_factory=dict)


def _batches(todo: list[int], n: int, shard_size: int, batch_size: int) -> Iterator[list[int]]:
    for k in todo:
        lo, hi = k * shard_size, min(n, (k + 1) * shard_size)
        for start in range(lo, hi, batch_size):
            yield list(range(start, min(hi, start + batch_size)))


def _weights_id(model: ModelAdapter) -> dict[str, Any]:
    desc = model.weights_desc
    path = Path(desc)
    if path.is_file():
        return {"weights": path.name, "weights_sha256": sha256_file(path)}
    return {"weights": desc, "weights_sha256": None}


def _progress(enabled: bool, total: int, done: int, label: str = "extract") -> Any:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    from semshift.progress import bar_console, progress_wanted

    class _Rate(ProgressColumn):
        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            return Text(f"{speed:,.1f} img/s" if speed else "- img/s", style="cyan")

    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        _Rate(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TimeElapsedColumn(),
        console=bar_console(),
        disable=not progress_wanted(enabled),
        transient=True,  # the command prints a summary line; a run logs each set
    )


def extract(
    model: ModelAdapter,
    source: ImageSource,
    out: str | Path,
    *,
    preset: str = "imagenet",
    batch_size: int = 64,
    shard_size: int = 10_000,
    workers: int = 0,
    device: str | torch.device = "auto",
    amp: bool | None = None,
    groups: Mapping[str, Any] | None = None,
    corruption: Callable[[Any, int], Any] | None = None,
    scores: Sequence[str | ModelLevelDetector] = (),
    executor: str = "local",
    ray_workers: int | None = None,
    progress: bool = True,
    fsync: bool = True,
    wait: bool = True,
) -> ExtractSummary:
    """Extract logits (n, C) and features (n, D) of every readable image into a store.

    Parameters
    ----------
    model : ModelAdapter
        From :func:`semshift.features.models.load_model`.
    source : ImageSource
        From :func:`semshift.features.data.open_source`.
    out : str or Path
        Store directory; an unfinished store from the same settings is resumed.
    preset : str
        ``imagenet`` (resize 256, crop 224), ``imagenet-224`` or ``resize<R>-crop<C>``.
    batch_size, shard_size : int
        Images per forward pass and rows per shard.
    workers : int
        DataLoader worker processes (0 = decode in this process).
    device : str
        ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:1"`` ...
    amp : bool, optional
        float16 autocast; default on for CUDA, off on CPU.
    groups : mapping, optional
        Constant group columns for every row, e.g. ``{"split": "id_test"}``.
    corruption : callable, optional
        ``corruption(pil_image, sample_index) -> pil_image`` applied after the crop (see
        :mod:`semshift.features.corruptions`); its ``name`` and ``severity`` attributes, when
        present, become the group columns ``corruption`` and ``severity``.
    scores : sequence of str or ModelLevelDetector
        Model-level detectors (names from ``semshift.detectors.list_detectors(level="model")``,
        with their declared defaults, or built by ``semshift.detectors.get(name, **params)``)
        computed on each batch and stored as 1-D float32 arrays named after them. Each is
        checked on the model before any image is read (what it declares in
        ``model_requires``: a feature map, dropout layers, ...).
    executor : {"local", "ray"}
        ``"ray"`` spreads the shards over Ray actors (one per GPU where the cluster has GPUs,
        else one per CPU), each writing its own shards into the same store; connect with
        ``ray.init(...)`` first, else a local Ray is started. Needs the ``ray`` extra.
    ray_workers : int, optional
        Number of Ray actors (default: GPUs, else CPUs of the cluster).
    progress : bool
        Show a progress bar (images/s, ETA).
    fsync : bool
        Flush each file to disk before renaming it into place.
    wait : bool
        While another process extracts into ``out`` (the store's lock,
        :func:`semshift.locking.folder_lock`), wait for it (default) or raise at once.

    Raises
    ------
    InputError
        Bad sizes, an output directory holding a finished store or a different run.
    LockedError
        Another process extracts into ``out`` and ``wait`` is False.
    """
    return extract_many(
        [model], source, [out], preset=preset, batch_size=batch_size, shard_size=shard_size,
        workers=workers, device=device, amp=amp, groups=groups, corruption=corruption,
        scores=scores, executor=executor, ray_workers=ray_workers, progress=progress,
        fsync=fsync, wait=wait,
    )[0]  # fmt: skip


@dataclass
class _Target:
    """One model's store in an extraction: its writer, its run record and its shards to do."""

    model: ModelAdapter
    out: Path
    writer: StoreWriter
    spec: dict[str, tuple[int, ...]]
    head: tuple[np.ndarray, np.ndarray]
    todo: list[int]
    n_done: int


def extract_many(
    models: Sequence[ModelAdapter],
    source: ImageSource,
    outs: Sequence[str | Path],
    *,
    preset: str = "imagenet",
    batch_size: int = 64,
    shard_size: int = 10_000,
    workers: int = 0,
    device: str | torch.device = "auto",
    amp: bool | None = None,
    groups: Mapping[str, Any] | None = None,
    corruption: Callable[[Any, int], Any] | None = None,
    scores: Sequence[str | ModelLevelDetector] = (),
    executor: str = "local",
    ray_workers: int | None = None,
    progress: bool = True,
    fsync: bool = True,
    wait: bool = True,
    label: str = "extract",
) -> list[ExtractSummary]:
    """Extract several models over the same images in one pass: ``models[i]`` -> ``outs[i]``.

    Each image is decoded, preprocessed (and corrupted) once and given to every model whose
    store still needs its shard; each store is exactly what :func:`extract` writes for that
    model alone (same batches, same checksums), and each is resumed on its own. The models
    may differ in architecture and normalisation (``mean``/``std``, applied per model to the
    shared uint8 batch), not in the resize and crop (``preset``). Parameters as
    :func:`extract`; with the ``ray`` executor every actor holds all the models and computes a
    shard for each model that still needs it. ``label`` names the progress bar (a run names
    the set).

    Returns
    -------
    list of ExtractSummary
        One per model, in order (``seconds`` is the whole pass's wall time).
    """
    if len(models) != len(outs) or not models:
        raise InputError(f"give one output store per model: {len(models)} model(s), {len(outs)}")
    paths = [Path(o) for o in outs]
    if len({p.resolve() for p in paths}) != len(paths):
        raise InputError(f"every model needs its own output store, got {[str(p) for p in paths]}")
    if batch_size < 1 or shard_size < 1:
        raise InputError(f"batch size and shard size must be >= 1, got {batch_size}, {shard_size}")
    if workers < 0:
        raise InputError(f"workers must be >= 0, got {workers}")
    if executor not in ("local", "ray"):
        raise InputError(f"executor {executor!r}: use 'local' or 'ray'")
    # one extraction per store at a time (a second one waits, or exits with wait=False)
    with contextlib.ExitStack() as locks:
        for p in paths:
            locks.enter_context(folder_lock(p, what="feature store", wait=wait))
        return _extract_many(
            models, source, paths, preset=preset, batch_size=batch_size, shard_size=shard_size,
            workers=workers, device=device, amp=amp, groups=groups, corruption=corruption,
            scores=scores, executor=executor, ray_workers=ray_workers, progress=progress,
            fsync=fsync, label=label,
        )  # fmt: skip


def _extract_many(
    models: Sequence[ModelAdapter],
    source: ImageSource,
    paths: list[Path],
    *,
    preset: str,
    batch_size: int,
    shard_size: int,
    workers: int,
    device: str | torch.device,
    amp: bool | None,
    groups: Mapping[str, Any] | None,
    corruption: Callable[[Any, int], Any] | None,
    scores: Sequence[str | ModelLevelDetector],
    executor: str,
    ray_workers: int | None,
    progress: bool,
    fsync: bool,
    label: str = "extract",
) -> list[ExtractSummary]:
    """:func:`extract_many` with every store locked."""
    if batch_size < 1 or shard_size < 1:
        raise InputError(f"batch size and shard size must be >= 1, got {batch_size}, {shard_size}")
    if workers < 0:
        raise InputError(f"workers must be >= 0, got {workers}")
    if executor not in ("local", "ray"):
        raise InputError(f"executor {executor!r}: use 'local' or 'ray'")
    resize, crop = parse_preset(preset)
    if executor == "ray":
        from semshift.features.ray_executor import ray_device

        dev = ray_device(device)
    else:
        dev = resolve_device(device)
    use_amp = dev.type == "cuda" if amp is None else bool(amp)
    const_groups = _const_groups(groups, corruption, source)
    detectors = [get_model_detector(d) for d in scores]
    check_model_detectors(detectors, models)
    det_names = [d.name for d in detectors]
    n = len(source)
    n_shards = max(1, -(-n // shard_size))
    corr_desc = getattr(corruption, "describe", lambda: None)() if corruption else None
    fingerprint = source.fingerprint()

    def rows(shards: Sequence[int]) -> int:
        return sum(min(n, (k + 1) * shard_size) - k * shard_size for k in shards)

    def preprocessing(model: ModelAdapter) -> dict[str, Any]:
        return {
            "preset": preset, "resize": resize, "crop": crop, "interpolation": "bilinear",
            "mean": list(model.mean), "std": list(model.std),
        }  # fmt: skip

    for out in paths:  # before any model is moved or any image read
        _refuse_finished(out)
    targets: list[_Target] = []
    for model, out in zip(models, paths, strict=True):
        model.to(dev)
        model.module.eval()
        w, b = model.head_weights()
        run = {
            "model": model.name,
            "layer": model.layer,
            **_weights_id(model),
            "head_sha256": hashlib.sha256(w.tobytes() + b.tobytes()).hexdigest(),
            "preprocessing": preprocessing(model),
            "dataset_fingerprint": fingerprint,
            "n_samples": n,
            "shard_size": shard_size,
            "batch_size": batch_size,
            "device_type": dev.type,
            "amp": use_amp,
            "groups": {k: str(v) for k, v in const_groups.items()},
            "corruption": corr_desc,
            "scores": [d.describe() for d in detectors],
        }
        spec: dict[str, tuple[int, ...]] = {"logits": (w.shape[0],), "features": (w.shape[1],)}
        spec.update({name: () for name in det_names})
        writer = StoreWriter(out, arrays=spec, run=run, fsync=fsync)
        done = writer.done
        todo = [k for k in range(n_shards) if k not in done]
        targets.append(_Target(model, out, writer, spec, (w, b), todo, len(done)))

    job = ShardJob(
        models=[t.model for t in targets], source=source, preset=preset, corruption=corruption,
        detectors=detectors, specs=[t.spec for t in targets], const_groups=const_groups, n=n,
        shard_size=shard_size, batch_size=batch_size, workers=workers, amp=use_amp,
        decoded_key=None if corruption is not None and corr_desc is None else (
            str(source.root), fingerprint, preset, json.dumps(corr_desc, sort_keys=True)),
    )  # fmt: skip

    t0 = time.perf_counter()
    union = sorted({k for t in targets for k in t.todo})
    needs = [set(t.todo) for t in targets]
    writers = [t.writer for t in targets]
    with _progress(progress, n, n - rows(union), label) as bar:
        task = bar.add_task("extract", total=n, completed=n - rows(union))
        advance = functools.partial(bar.advance, task)
        if executor == "local":
            job.run(union, writers, dev, advance, needs=needs)
        else:
            from semshift.features.ray_executor import run_on_ray

            run_on_ray(job, union, writers, dev, advance, ray_workers, needs=needs)
            for writer in writers:
                writer.reload()
    seconds = time.perf_counter() - t0
    extraction = {"shard_size": shard_size, "batch_size": batch_size, "amp": use_amp}
    summaries = [
        _finalize(t, source, preprocessing(t.model), corr_desc, detectors, n_shards, seconds,
                  rows(t.todo), dev, extraction)
        for t in targets
    ]  # fmt: skip
    return summaries


def _const_groups(
    groups: Mapping[str, Any] | None, corruption: Any, source: ImageSource
) -> dict[str, Any]:
    """The index columns every row of the store gets (``groups``, the corruption's name and
    severity); a name the index reserves is refused."""
    const_groups: dict[str, Any] = dict(groups or {})
    if corruption is not None:
        for attr in ("name", "severity"):
            if hasattr(corruption, attr):
                const_groups.setdefault(
                    "corruption" if attr == "name" else attr, getattr(corruption, attr)
                )
    reserved = {"sample_id", "path", "label", "shard", "row"} & (
        set(const_groups) | set(source.groups)
    )
    if reserved:
        raise InputError(f"group names {sorted(reserved)} are reserved for the store's index")
    return const_groups


def _finalize(
    t: _Target,
    source: ImageSource,
    preprocessing: dict[str, Any],
    corr_desc: Any,
    detectors: Sequence[ModelLevelDetector],
    n_shards: int,
    seconds: float,
    n_computed: int,
    dev: torch.device,
    extraction: dict[str, Any],
) -> ExtractSummary:
    """Write the finished store's ``meta.json`` and head, and summarise what was done."""
    n = len(source)
    w, b = t.head
    store = t.writer.finalize(
        {
            "model": t.model.name,
            "layer": t.model.layer,
            "model_info": t.model.describe(),
            "weights": t.writer.run["weights"],
            "weights_sha256": t.writer.run["weights_sha256"],
            "preprocessing": preprocessing,
            "classes": _classes_meta(source),
            "dataset": {
                "root": str(source.root),
                "kind": source.kind,
                "fingerprint": source.fingerprint(),  # computed once, cached by the source
                "n_samples": n,
            },
            "corruption": corr_desc,
            "scores": {d.name: d.describe() for d in detectors},
            "extraction": extraction,
        },
        head=(w, b),
        n_shards=n_shards,
        extra_skipped=[
            {"sample_id": -1, "path": name, "reason": reason} for name, reason in source.skipped
        ],
    )
    reasons = Counter(_reason_kind(r) for r in store.skipped["reason"].astype(str))
    return ExtractSummary(
        out=t.out,
        n_images=n,
        n_stored=len(store),
        n_skipped=len(store.skipped),
        n_shards=n_shards,
        n_resumed=t.n_done,
        seconds=seconds,
        images_per_s=n_computed / seconds if seconds > 0 else 0.0,
        device=str(dev) + (" (float16 autocast)" if extraction["amp"] else ""),
        skip_reasons=dict(reasons),
    )


@dataclass
class ShardJob:
    """Everything needed to compute and write shards; the same for every executor.

    Shard k covers samples ``k * shard_size ..``; its batches never cross the shard boundary,
    so any process computing shard k produces the same arrays. Several models share each
    decoded batch (``models[i]`` fills the arrays ``specs[i]`` of its own store).
    """

    models: list[ModelAdapter]
    source: ImageSource
    preset: str
    corruption: Callable[[Any, int], Any] | None
    detectors: list[ModelLevelDetector]
    specs: list[dict[str, tuple[int, ...]]]
    const_groups: dict[str, Any]
    n: int
    shard_size: int
    batch_size: int
    workers: int
    amp: bool
    #: names the decoded images (source, preprocessing, corruption) for
    #: :func:`semshift.features.decoded.shared_decoding`; None: never shared
    decoded_key: Hashable | None = None

    def shard_rows(self, k: int) -> int:
        return min(self.n, (k + 1) * self.shard_size) - k * self.shard_size

    def run(
        self,
        shards: Sequence[int],
        writers: Sequence[StoreWriter],
        dev: torch.device,
        advance: Callable[[int], Any] = lambda m: None,
        needs: Sequence[set[int]] | None = None,
    ) -> None:
        """Compute ``shards`` on ``dev`` and write each one as soon as it is complete.

        ``writers[i]`` receives model i's shards; ``needs[i]``, when given, limits model i to
        those shards (default: every shard in ``shards``).
        """
        for model in self.models:
            model.to(dev)
            model.module.eval()
        # uint8 through the loader (and onto the device); each model normalises a batch at once
        dataset = ImageDataset(
            self.source, self.preset, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), self.corruption,
            normalize=False,
        )  # fmt: skip
        plan = list(_batches(list(shards), self.n, self.shard_size, self.batch_size))
        memo = active_memo() if self.decoded_key is not None else None
        key = (self.decoded_key, tuple(map(tuple, plan)))
        loader: Iterable[Any] | None = None if memo is None else memo.get(key)
        if loader is None:
            loader = torch.utils.data.DataLoader(
                dataset,  # type: ignore[arg-type]
                batch_sampler=plan,
                num_workers=self.workers,
                pin_memory=dev.type == "cuda",
            )
            if memo is not None:
                loader = _recording(loader, memo.recorder(key))
        wanted = [set(shards) if needs is None else set(needs[i]) for i in range(len(writers))]
        try:
            self._loop(loader, writers, wanted, dev, advance)
        except BaseException:
            with contextlib.suppress(Exception):  # keep the shards written before the error
                for writer in writers:
                    writer.flush()
            raise
        for writer in writers:
            writer.flush()

    def _loop(
        self,
        loader: Any,
        writers: Sequence[StoreWriter],
        wanted: Sequence[set[int]],
        dev: torch.device,
        advance: Callable[[int], Any],
    ) -> None:
        source = self.source
        accs = [_empty(spec) for spec in self.specs]
        seen = 0
        with torch.inference_mode():
            for x, idx, errs in loader:
                idx_list = [int(i) for i in idx]
                k = idx_list[0] // self.shard_size
                active = [m for m in range(len(self.models)) if k in wanted[m]]
                ok = [j for j, e in enumerate(errs) if not e]
                skips = [
                    {"sample_id": idx_list[j], "path": source.names[idx_list[j]], "reason": e}
                    for j, e in enumerate(errs)
                    if e
                ]
                if ok:
                    x8 = x[ok].to(dev, non_blocking=True)
                for m in active:
                    acc, model = accs[m], self.models[m]
                    acc["skip"].extend(dict(r) for r in skips)
                    if not ok:
                        continue
                    xb = normalize_batch(x8, model.mean, model.std)
                    with torch.autocast(dev.type, dtype=torch.float16, enabled=self.amp):
                        logits, feats = model(xb)
                        for name, col in score_batch(self.detectors, model, xb).items():
                            acc[name].append(col)
                    acc["logits"].append(logits.float().cpu().numpy())
                    acc["features"].append(feats.float().cpu().numpy())
                    acc["ok"].extend(idx_list[j] for j in ok)
                seen += len(idx_list)
                advance(len(idx_list))
                if seen == self.shard_rows(k):
                    for m in active:
                        _flush(writers[m], k, accs[m], source, self.const_groups, self.specs[m])
                        accs[m] = _empty(self.specs[m])
                    seen = 0


def _recording(loader: Iterable[Any], recorder: Any) -> Iterator[Any]:
    """``loader``'s batches, kept by ``recorder`` once the last one has been read."""
    for batch in loader:
        recorder.add(batch)
        yield batch
    recorder.commit()


def _refuse_finished(out: Path) -> None:
    """Refuse an output folder that holds a finished store: an intact one is another
    extraction's result; a damaged one (a file that differs from ``meta.json``, or a
    ``meta.json`` that cannot be read) is pointed to ``semshift store repair``, after which
    this extraction recomputes only what was lost."""
    if not (out / "meta.json").exists():
        return
    repair = (
        f"run `semshift store repair {out}`, then this extraction again: it recomputes only "
        "what was damaged"
    )
    try:
        damages = verify_store(out)
    except InputError as err:  # meta.json unreadable: the repair rebuilds it from the shards
        raise InputError(f"{out} holds a damaged feature store ({err}); {repair}") from None
    if damages:
        shown = ", ".join(str(d) for d in damages[:3])
        more = f" and {len(damages) - 3} more" if len(damages) > 3 else ""
        raise InputError(f"{out} holds a damaged feature store ({shown}{more}); {repair}")
    raise InputError(
        f"{out} already holds a finished store (intact); choose another output directory, or "
        "delete it to extract it again"
    )


def _reason_kind(reason: str) -> str:
    """A reason without its file-specific detail, for the summary counts."""
    return reason.split(" (", 1)[0]


def _classes_meta(source: ImageSource) -> dict[str, Any] | None:
    cl = source.classes
    if cl is None:
        return None
    return {
        "name": cl.name,
        "source": cl.source,
        "ids": list(cl.ids),
        "names": list(cl.names) if cl.names is not None else None,
    }


def _empty(spec: Mapping[str, tuple[int, ...]]) -> dict[str, list[Any]]:
    return {"ok": [], "skip": [], **{name: [] for name in spec}}


def _flush(
    writer: StoreWriter,
    k: int,
    acc: dict[str, list[Any]],
    source: ImageSource,
    const_groups: Mapping[str, Any],
    spec: Mapping[str, tuple[int, ...]],
) -> None:
    rows = acc["ok"]
    arrays = {
        name: np.concatenate(acc[name]) if acc[name] else np.zeros((0, *tail), np.float32)
        for name, tail in spec.items()
    }
    index = pd.DataFrame(
        {
            "sample_id": np.asarray(rows, np.int64),
            "path": [source.names[i] for i in rows],
            "label": source.labels[rows] if rows else np.zeros(0, np.int64),
        }
    )
    for key, value in const_groups.items():
        index[key] = [value] * len(rows)
    for key, values in source.groups.items():
        index[key] = [values[i] for i in rows]
    writer.write_shard(k, arrays, index, acc["skip"])
