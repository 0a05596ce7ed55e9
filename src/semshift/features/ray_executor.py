"""Run an extraction on a Ray cluster: one actor per GPU (or per CPU), shards as the work unit.

The driver opens the store (checks the run settings, cleans temporary files, finds the shards
already done), then hands each missing shard to an actor. Every actor holds a copy of the model
and writes its shards straight into the store with the same atomic writes as the local executor;
the driver re-reads and verifies the commit records and writes the index and ``meta.json``. A
shard is computed with the same batches wherever it runs, so the store equals the local
executor's on the same kind of device. With several models (``extract_many``) every actor holds
all of them and computes each shard once for every model whose store still needs it.

Multi-node: the store directory must be on a file system every node mounts at the same path
(NFS, Lustre, a cloud file store), and the images too. Start Ray on the nodes (``ray start
--head`` on one, ``ray start --address HEAD:6379`` on the others), then run
``semshift extract ... --executor ray --ray-address auto`` on the head node (or call
``ray.init(address="auto")`` before :func:`semshift.features.extract.extract`).

Needs the ``ray`` package (an optional extra).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from semshift.errors import InputError

if TYPE_CHECKING:
    from semshift.features.extract import ShardJob
    from semshift.features.store import StoreWriter

__all__ = ["connect", "ray_device", "run_on_ray"]


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InputError(
            "--executor ray needs Ray: pip install 'ray==2.60.0' (the ray extra)"
        ) from None
    return ray


def connect(address: str | None = None) -> Any:
    """Start or join Ray (``address``: ``"auto"``, ``"HOST:PORT"`` or None for a local one)."""
    return _ensure_init(address)


def _ensure_init(address: str | None = None) -> Any:
    ray = _ray()
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    return ray


def ray_device(device: str | torch.device = "auto", address: str | None = None) -> torch.device:
    """The device type the actors will use: CUDA when the cluster has GPUs (for ``auto``)."""
    ray = _ensure_init(address)
    has_gpu = float(ray.cluster_resources().get("GPU", 0)) > 0
    if str(device) == "auto":
        return torch.device("cuda" if has_gpu else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not has_gpu:
        raise InputError(f"device {device!r} asked for, but the Ray cluster has no GPUs")
    return dev


class _Worker:
    """A Ray actor: computes shards of one job and writes them into its stores."""

    def __init__(
        self,
        job: ShardJob,
        outs: list[str],
        needs: list[set[int]],
        device_type: str,
        fsync: bool,
    ) -> None:
        from semshift.features.store import StoreWriter

        torch.set_num_threads(1 if device_type == "cpu" else torch.get_num_threads())
        self.job = job
        self.needs = needs
        self.dev = torch.device("cuda" if device_type == "cuda" else "cpu")
        self.writers = [
            StoreWriter.attach(out, arrays=spec, fsync=fsync)
            for out, spec in zip(outs, job.specs, strict=True)
        ]

    def run(self, shard: int) -> int:
        self.job.run([shard], self.writers, self.dev, needs=self.needs)
        for writer in self.writers:
            writer.flush()  # committed before the driver counts it
        return shard


def run_on_ray(
    job: ShardJob,
    shards: Sequence[int],
    writers: Sequence[StoreWriter],
    dev: torch.device,
    advance: Callable[[int], Any] = lambda m: None,
    n_workers: int | None = None,
    needs: Sequence[set[int]] | None = None,
) -> None:
    """Compute ``shards`` on Ray actors; returns once every shard is written.

    Parameters
    ----------
    job : ShardJob
        What to compute (models, images, preprocessing, sizes).
    shards : sequence of int
        Shard numbers still to do.
    writers : sequence of StoreWriter
        The driver's writers, one per model of ``job`` (their paths are where the actors write).
    dev : torch.device
        ``cuda`` (one GPU per actor) or ``cpu`` (one CPU per actor).
    advance : callable
        Called with the number of images of each finished shard (progress).
    n_workers : int, optional
        Actors to start (default: the cluster's GPUs for CUDA, else its CPUs).
    needs : sequence of set of int, optional
        The shards each model still needs (default: all of ``shards``); a shard is decoded
        once and given to every model that needs it.
    """
    ray = _ensure_init()
    if not shards:
        return
    wanted = [set(shards)] * len(writers) if needs is None else [set(n) for n in needs]
    res = ray.cluster_resources()
    use_gpu = dev.type == "cuda"
    cap = int(res.get("GPU", 0)) if use_gpu else int(res.get("CPU", 1))
    k = max(1, min(n_workers or cap, len(shards)))
    actor_cls = ray.remote(num_gpus=1 if use_gpu else 0, num_cpus=0 if use_gpu else 1)(_Worker)
    job_ref = ray.put(job)
    outs = [str(w.path) for w in writers]
    fsync = writers[0].fsync
    actors = [actor_cls.remote(job_ref, outs, wanted, dev.type, fsync) for _ in range(k)]
    pending = {actors[i % k].run.remote(s): s for i, s in enumerate(shards)}
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                shard = pending.pop(ref)
                ray.get(ref)  # re-raises a worker's error
                advance(job.shard_rows(shard))
    finally:
        for actor in actors:
            ray.kill(actor)
