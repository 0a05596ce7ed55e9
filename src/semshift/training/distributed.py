"""Data-parallel training through PyTorch's own engine (``torch.distributed``, DDP).

A run is distributed when ``WORLD_SIZE`` > 1 in the environment (``torchrun`` sets ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``), or when
:func:`semshift.training.loop.train` is given ``nproc`` > 1, which starts the processes itself
(:func:`launch`, ``torch.multiprocessing`` with a free local port). The backend is gloo on the
CPU and NCCL on CUDA (one GPU per process, ``cuda:LOCAL_RANK``).

Every process builds the same global batches (the order and each image's augmentation depend
only on ``(seed, epoch, index)``, :mod:`.images`) and takes a contiguous slice of each
(:func:`shard`). DistributedDataParallel averages the gradients; each process's loss is scaled
by ``n_local * world / n_global`` so the average is the gradient of the global batch's mean
loss, also when a batch does not split evenly.

BatchNorm: each process sees only its slice, so plain BatchNorm would normalise with other
statistics than the one-process run. On the DDP path every BatchNorm layer is replaced by one
that normalises with the statistics of the whole global batch: :class:`GlobalBatchNorm` on the
CPU (gloo; PyTorch's ``SyncBatchNorm`` runs only on accelerators), ``torch.nn.SyncBatchNorm``
on CUDA. Both keep BatchNorm's state-dict keys, so checkpoints and the exported model are the
same files as a one-process run's.

A loss term that is not a mean of per-sample terms (ARPL+CS's confusion, an exponential of a
batch mean) takes its batch means over the global batch with :func:`global_mean`, a
differentiable all-reduce: the backward pass of an all-reduced sum sums the gradients of every
process, so with each process's loss scaled as above the averaged gradient is still that of
the global batch's loss. Parts that a method steps with optimisers of its own (ARPL+CS's
generator and discriminator) stay outside DistributedDataParallel: their losses are global
means (every process computes the same value) and :func:`average_gradients` averages their
gradients before each step. Random draws (the generator's noise) are drawn for the whole global
batch in every process, each taking its slice (:func:`shard_slice`), so the random state stays
that of the one-process run. With all this, the per-epoch loss curve of N processes equals the
one-process curve within floating-point tolerance for every registered method.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

__all__ = [
    "BATCHNORMS",
    "DistEnv",
    "GlobalBatchNorm",
    "average_gradients",
    "convert_batchnorm",
    "dist_env",
    "free_port",
    "global_count",
    "global_mean",
    "launch",
    "shard",
    "shard_slice",
]

_BATCHNORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


@dataclass(frozen=True)
class DistEnv:
    """Where this process sits in a data-parallel run.

    Attributes
    ----------
    rank : int
        Global rank (0 writes checkpoints and metrics).
    world : int
        Number of processes.
    local_rank : int
        Rank on this machine (the CUDA device index).
    """

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def distributed(self) -> bool:
        """More than one process."""
        return self.world > 1

    @property
    def is_main(self) -> bool:
        """Rank 0."""
        return self.rank == 0


def dist_env() -> DistEnv:
    """The :class:`DistEnv` described by ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK``.

    >>> dist_env() if "WORLD_SIZE" not in __import__("os").environ else DistEnv()
    DistEnv(rank=0, world=1, local_rank=0)
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", str(rank)))
    return DistEnv(rank, world, local)


def shard(batch: Sequence[int], rank: int, world: int) -> list[int]:
    """The contiguous slice of a global batch that process ``rank`` of ``world`` takes.

    Slices differ in size by at most one, the first ones being the larger
    (``numpy.array_split``'s rule), and together are the batch in order.

    >>> [shard(list(range(7)), r, 3) for r in range(3)]
    [[0, 1, 2], [3, 4], [5, 6]]
    """
    return list(batch[shard_slice(len(batch), rank, world)])


def shard_slice(n: int, rank: int, world: int) -> slice:
    """The slice of a global batch of ``n`` that process ``rank`` of ``world`` takes
    (:func:`shard`'s rule).

    >>> [shard_slice(7, r, 3) for r in range(3)]
    [slice(0, 3, None), slice(3, 5, None), slice(5, 7, None)]
    """
    base, extra = divmod(n, world)
    start = rank * base + min(rank, extra)
    return slice(start, start + base + (rank < extra))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (for ``MASTER_PORT``)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(local_rank: int, world: int, port: int, fn: Callable[..., Any], args: tuple) -> None:
    os.environ.update(
        RANK=str(local_rank), WORLD_SIZE=str(world), LOCAL_RANK=str(local_rank),
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
    )  # fmt: skip
    fn(*args)


def launch(nproc: int, fn: Callable[..., Any], args: tuple = ()) -> None:
    """Run ``fn(*args)`` in ``nproc`` new processes that form one process group (this machine).

    Each process gets ``RANK`` = ``LOCAL_RANK`` = its index, ``WORLD_SIZE`` = ``nproc`` and a
    free ``MASTER_PORT`` on 127.0.0.1; ``fn`` must be importable (a module-level function).
    An exception in any process is raised here once all have stopped.
    """
    import torch.multiprocessing as mp

    mp.start_processes(
        _worker, args=(nproc, free_port(), fn, args), nprocs=nproc, join=True,
        start_method="spawn",
    )  # fmt: skip


class _AllReduceSum(torch.autograd.Function):
    """Differentiable sum over processes: the gradient of each input is the sum of the
    gradients of the output over processes."""

    @staticmethod
    def forward(ctx: Any, t: Tensor, group: Any) -> Tensor:
        ctx.group = group
        out = t.clone()
        torch.distributed.all_reduce(out, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        out = grad.clone()
        torch.distributed.all_reduce(out, group=ctx.group)
        return out, None


def global_mean(values: Tensor, group: Any = None) -> Tensor:
    """The mean of ``values`` (n, ...) over the first axis of every process's ``values``.

    Differentiable: the sums and the counts are all-reduced with :class:`_AllReduceSum`, so
    every process gets the same value and the backward pass reaches every process's inputs.
    All processes of ``group`` must call it, in the same order.

    Parameters
    ----------
    values : Tensor (n, ...)
        This process's rows (n may differ between processes, and be 0).
    group : ProcessGroup, optional
        The processes to reduce over (default: the whole world).

    Returns
    -------
    Tensor (...)
    """
    count = values.new_full((1, *values.shape[1:]), float(len(values)))
    total: Tensor = _AllReduceSum.apply(torch.cat([values.sum(0, keepdim=True), count]), group)
    return total[0] / total[1]


def global_count(n: int, group: Any = None, device: torch.device | str = "cpu") -> int:
    """The sum of every process's ``n`` (the global batch size from a slice's); ``device``
    is where the backend reduces (CUDA for NCCL)."""
    t = torch.tensor([int(n)], dtype=torch.int64, device=device)
    torch.distributed.all_reduce(t, group=group)
    return int(t)


def average_gradients(params: Sequence[Tensor], group: Any = None) -> None:
    """Replace each parameter's gradient by its average over the processes (in one all-reduce).

    Parameters with no gradient are left out; every process must have gradients for the same
    parameters (the same graph). Used for parts stepped by their own optimisers, outside
    DistributedDataParallel.
    """
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    torch.distributed.all_reduce(flat, group=group)
    flat /= torch.distributed.get_world_size(group)
    offset = 0
    for g in grads:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()


class GlobalBatchNorm(nn.Module):
    """BatchNorm over the global batch of a data-parallel step, on any device (gloo included).

    In training, the mean and the (biased) variance are sums over every process's slice,
    exchanged with a differentiable all-reduce (so the backward pass carries the gradient of
    the statistics across processes, as ``SyncBatchNorm`` does); the running statistics take
    the unbiased variance, as BatchNorm's.
    In evaluation it is plain BatchNorm. The parameters and buffers carry BatchNorm's names.

    Parameters
    ----------
    bn : BatchNorm1d, BatchNorm2d or BatchNorm3d
        The layer to replace (its parameters and buffers are taken over, not copied).
    group : ProcessGroup, optional
        The group to reduce over (default: the whole world).
    """

    running_mean: Tensor
    running_var: Tensor
    num_batches_tracked: Tensor

    def __init__(
        self, bn: nn.BatchNorm1d | nn.BatchNorm2d | nn.BatchNorm3d, group: Any = None
    ) -> None:
        super().__init__()
        self.num_features, self.eps, self.momentum = bn.num_features, bn.eps, bn.momentum
        self.affine, self.track_running_stats = bn.affine, bn.track_running_stats
        self.weight, self.bias = bn.weight, bn.bias
        self.register_buffer("running_mean", bn.running_mean)
        self.register_buffer("running_var", bn.running_var)
        self.register_buffer("num_batches_tracked", bn.num_batches_tracked)
        self.group = group

    def _reduce(self, t: Tensor) -> Tensor:
        out: Tensor = _AllReduceSum.apply(t, self.group)
        return out

    def forward(self, x: Tensor) -> Tensor:
        shape = [1, -1] + [1] * (x.dim() - 2)
        if not self.training and self.track_running_stats:
            mean, var = self.running_mean, self.running_var
        else:
            dims = [0, *range(2, x.dim())]
            count = torch.full((1,), x.numel() / x.shape[1], dtype=x.dtype, device=x.device)
            total = self._reduce(torch.cat([x.sum(dims), count]))
            n = total[-1]
            mean = total[:-1] / n
            var = self._reduce(((x - mean.view(shape)) ** 2).sum(dims)) / n
            if self.training and self.track_running_stats:
                with torch.no_grad():
                    self.num_batches_tracked.add_(1)
                    m = self.momentum
                    f = 1.0 / float(self.num_batches_tracked) if m is None else float(m)
                    unbiased = var.detach() * n / torch.clamp(n - 1, min=1)
                    self.running_mean.mul_(1 - f).add_(mean.detach(), alpha=f)
                    self.running_var.mul_(1 - f).add_(unbiased, alpha=f)
        y = (x - mean.view(shape)) / torch.sqrt(var.view(shape) + self.eps)
        if self.affine:
            y = y * self.weight.view(shape) + self.bias.view(shape)
        return y


#: Every BatchNorm layer type of a model, the converted ones included.
BATCHNORMS = (*_BATCHNORMS, nn.SyncBatchNorm, GlobalBatchNorm)


def convert_batchnorm(module: nn.Module, device: torch.device, group: Any = None) -> nn.Module:
    """``module`` with every BatchNorm layer normalising over the global batch (in place).

    CUDA: ``torch.nn.SyncBatchNorm``; other devices: :class:`GlobalBatchNorm`. The state-dict
    keys do not change.
    """
    if device.type == "cuda":
        return nn.SyncBatchNorm.convert_sync_batchnorm(module, process_group=group)
    for name, child in list(module.named_children()):
        if isinstance(child, _BATCHNORMS):
            setattr(module, name, GlobalBatchNorm(child, group))
        else:
            convert_batchnorm(child, device, group)
    return module
