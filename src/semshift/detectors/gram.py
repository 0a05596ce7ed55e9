"""Gram: deviation of an image's higher-order Gram-matrix statistics from its predicted class's
range on the ID training images (Sastry and Oore, 2020)."""

from __future__ import annotations

from numbers import Integral
from typing import TYPE_CHECKING, ClassVar

from semshift.errors import InputError

from ._params import Boolean, Interval, ParamConstraints
from ._registry import register_detector
from .model_level import Batches, ModelLevelDetector, ModelView, float32

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["Gram", "gram_deviation", "gram_row_sums", "holdout_mask"]

#: Every ``HOLDOUT_EVERY``-th training image of a class (the 10th, 20th, ...) is held out of the
#: class ranges to estimate each layer's expected deviation: the 10 % of OpenOOD v1.5 and
#: pytorch-ood, chosen by position instead of at random so that the fit is deterministic.
HOLDOUT_EVERY = 10

#: Largest temporary (elements) of :func:`gram_row_sums`; larger batches run in chunks.
_CHUNK_ELEMENTS = 2**25


def _channels_by_positions(t: Tensor) -> Tensor:
    """A block output as (n, channels, positions): a feature map (n, C, H, W) as (n, C, HW),
    tokens (n, L, D) as (n, D, L), a vector (n, D) as (n, D, 1)."""
    if t.ndim == 4:
        return t.reshape(t.shape[0], t.shape[1], -1)
    if t.ndim == 3:
        return t.transpose(1, 2)
    if t.ndim == 2:
        return t.unsqueeze(2)
    return t.reshape(t.shape[0], t.shape[1], -1)


def gram_row_sums(t: Tensor, max_power: int) -> Tensor:
    """Row sums of the p-th order Gram matrices of a block's output, for p = 1..P.

    With F the (C, K) matrix of an image's C channels over K positions and ``F^p`` its
    element-wise power, the p-th order Gram matrix is ``G_p = F^p (F^p)^T`` (C x C) and the
    statistic of channel c is ``sign(r_c) |r_c|^(1/p)`` with ``r = G_p 1`` its row sums.
    ``G_p 1 = F^p s`` with ``s = (F^p)^T 1`` the column sums, so the C x C matrix is never
    formed (O(C K) per power instead of O(C^2 K)).

    Parameters
    ----------
    t : Tensor (n, C, H, W), (n, L, D) or (n, D)
        A block's output: a feature map (channels C over H W positions), tokens (channels D
        over L positions) or a vector (D channels, one position each).
    max_power : int
        P >= 1.

    Returns
    -------
    Tensor (n, P, C), float64
        Computed in float64 (the P-th power of an activation of 100 is 1e20 at P = 10).

    Examples
    --------
    >>> import torch
    >>> f = torch.tensor([[[1.0, 2.0], [3.0, 0.0]]])  # one image, 2 channels, 2 positions
    >>> g = gram_row_sums(f.reshape(1, 2, 2, 1), 2)[0]  # p = 1: F F^T 1 = F (4, 2)^T
    >>> g[0].tolist(), (g[1] ** 2).round().tolist()  # p = 2: F^2 (10, 4)^T = (26, 90)
    ([8.0, 12.0], [26.0, 90.0])
    """
    import torch

    f = _channels_by_positions(t.detach()).double()
    n, c, k = f.shape
    p = torch.arange(1, max_power + 1, dtype=torch.float64, device=f.device)
    step = max(1, _CHUNK_ELEMENTS // max(1, max_power * c * k))
    out = []
    for lo in range(0, n, step):
        fp = f[lo : lo + step].unsqueeze(1) ** p.view(1, -1, 1, 1)  # (m, P, C, K)
        r = (fp * fp.sum(dim=2, keepdim=True)).sum(dim=3)  # (m, P, C)
        out.append(r.sign() * r.abs() ** (1.0 / p).view(1, -1, 1))
    return torch.cat(out) if out else f.new_zeros((0, max_power, c))


def gram_deviation(g: Tensor, lo: Tensor, hi: Tensor) -> Tensor:
    """Deviation of statistics from their ranges, summed over powers and channels.

    ``sum relu(lo - g) / |lo + 1e-6| + relu(g - hi) / |hi + 1e-6|`` (the authors' delta, as
    OpenOOD and pytorch-ood): 0 inside the range, the relative excess outside.

    Parameters
    ----------
    g, lo, hi : Tensor (n, P, C)
        Statistics and the lower and upper ends of the range of each.

    Returns
    -------
    Tensor (n,)
    """
    import torch

    below = torch.relu(lo - g) / (lo + 1e-6).abs()
    above = torch.relu(g - hi) / (hi + 1e-6).abs()
    return (below + above).sum(dim=(1, 2))


def holdout_mask(labels: Tensor, seen: Tensor) -> tuple[Tensor, Tensor]:
    """Which images of a batch are held out, and the per-class counts after the batch.

    An image is held out when it is the ``HOLDOUT_EVERY``-th, 2 x ``HOLDOUT_EVERY``-th, ...
    image of its class in stream order, so ``floor(n_c / 10)`` of a class's n_c images are
    held out (pytorch-ood's and OpenOOD's ``int(0.1 n_c)``), none of a class with fewer than
    10 images.

    Parameters
    ----------
    labels : Tensor (n,), int64
        Class indices >= 0.
    seen : Tensor (K,), int64
        Images of each class before this batch (K > the largest label).

    Returns
    -------
    held_out : Tensor (n,), bool
    seen : Tensor (K,), int64
        The counts including this batch.
    """
    import torch

    onehot = torch.nn.functional.one_hot(labels, seen.shape[0])
    rank = onehot.cumsum(dim=0).gather(1, labels[:, None]).squeeze(1) - 1 + seen[labels]
    return (rank % HOLDOUT_EVERY) == HOLDOUT_EVERY - 1, seen + onehot.sum(dim=0)


@register_detector
class Gram(ModelLevelDetector):
    """Gram score: minus the normalised deviation of an image's Gram statistics from the range
    of its predicted class; higher = more ID.

    For every block output of the network (the adapter's ``block_names``) and p = 1..P, the
    statistics are the row sums of the p-th order Gram matrix, ``sign(r) |r|^(1/p)`` with
    ``r = F^p (F^p)^T 1`` (:func:`gram_row_sums`). The fit records, per class of the labelled
    ID training images, the minimum and maximum of each statistic over the class's images
    (streaming, one forward pass); every 10th image of a class is held out of the ranges
    (:func:`holdout_mask`) and a second pass over those gives each layer's expected deviation
    E[delta_l], the mean of :func:`gram_deviation` over the held-out images against their own
    class's ranges (1 where no image is held out or the mean is 0, as pytorch-ood). A test
    image with predicted class yhat (argmax of the logits) scores

        ``-(sum_l delta_l(x; yhat) / E[delta_l]) / msp(x)``

    with ``msp`` the maximum softmax probability (``divide_by_msp=True``, the authors' code and
    OpenOOD v1.5), or without the division (``divide_by_msp=False``, pytorch-ood 0.4.0, whose
    ``Gram`` gives minus these scores). Model-level: needs the outputs of the network's blocks.

    Departures: the layers are the adapter's block outputs (pytorch-ood's ``feature_layers``
    mapped onto them; OpenOOD hooks every ``Conv2d`` and ``ReLU`` module, which no adapter
    lists); the held-out images are chosen by position (every 10th of a class in the order of
    the training images) instead of at random, so a fit is deterministic; an image predicted
    as a class without training images is compared with the range over all classes (OpenOOD
    fails, pytorch-ood refuses to fit); token outputs (n, L, D) take the D features as channels
    over the L tokens (pytorch-ood and OpenOOD's code would take the tokens as channels); the
    forward pass runs in float32 even under mixed precision (as the fit) and the statistics
    are computed in float64.

    Parameters
    ----------
    max_power : int, default 5
        Largest order P of the Gram matrices, >= 1 (OpenOOD v1.5's ``powers: [1, 2, 3, 4, 5]``;
        the paper uses 10, pytorch-ood the number of layers).
    divide_by_msp : bool, default True
        Divide the total deviation by the maximum softmax probability (authors' code, OpenOOD);
        False gives pytorch-ood's score.

    Attributes
    ----------
    mins_, maxs_ : list of ndarray (K, P, C_l), float64
        Per layer, the range of each statistic over each class's training images (K classes of
        the head; a class without training images holds the range over all classes).
    norms_ : ndarray (L,), float64
        E[delta_l] of each layer.
    class_counts_ : ndarray (K,), int64
        Training images of each class in the ranges (held-out images not counted).

    References
    ----------
    .. [1] C. S. Sastry and S. Oore, "Detecting Out-of-Distribution Examples with Gram
       Matrices", ICML 2020.
    """

    name = "gram"
    model_requires = frozenset({"layers"})
    fits = True
    state_names: ClassVar[tuple[str, ...]] = ("mins_", "maxs_", "norms_", "class_counts_")
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "max_power": [Interval(Integral, 1, None, closed="left")],
        "divide_by_msp": [Boolean()],
    }

    def __init__(self, *, max_power: int = 5, divide_by_msp: bool = True) -> None:
        self.max_power = max_power
        self.divide_by_msp = divide_by_msp

    def _stats(self, model: ModelView, x: Tensor) -> tuple[Tensor, list[Tensor]]:
        """Logits (n, K) and each block's statistics (n, P, C_l), float64."""
        logits, _, outs = model.layer_outputs(x)
        return logits, [gram_row_sums(o, int(self.max_power)) for o in outs]

    def _check_labels(self, y: Tensor, num_classes: int) -> None:
        lo, hi = int(y.min()), int(y.max())
        if lo < 0 or hi >= num_classes:
            bad = lo if lo < 0 else hi
            raise InputError(
                f"{self.name}.fit_model: label {bad} outside the head's {num_classes} classes"
            )

    def _fit_model(self, model: ModelView, batches: Batches) -> None:
        import torch

        mins: list[Tensor] = []
        maxs: list[Tensor] = []
        seen = torch.zeros(0, dtype=torch.int64)
        counts: Tensor | None = None
        with torch.no_grad():
            for x, y in batches():
                if len(y) == 0:
                    continue
                y = y.to(torch.int64).cpu()
                top = int(y.max())
                self._check_labels(y, top + 1 if counts is None else counts.shape[0])
                if top >= seen.shape[0]:
                    seen = torch.cat([seen, seen.new_zeros(top + 1 - seen.shape[0])])
                held, seen = holdout_mask(y, seen)
                keep = ~held
                if not bool(keep.any()):
                    continue
                logits, stats = self._stats(model, x[keep.to(x.device)])
                if counts is None:
                    k = int(logits.shape[1])
                    self._check_labels(y, k)
                    counts = torch.zeros(k, dtype=torch.int64, device=logits.device)
                    for s in stats:
                        shape = (k, *s.shape[1:])
                        mins.append(s.new_full(shape, float("inf")))
                        maxs.append(s.new_full(shape, float("-inf")))
                yk = y[keep].to(counts.device)
                counts += torch.bincount(yk, minlength=counts.shape[0])
                for s, lo, hi in zip(stats, mins, maxs, strict=True):
                    index = yk.view(-1, 1, 1).expand_as(s)
                    lo.scatter_reduce_(0, index, s, reduce="amin")
                    hi.scatter_reduce_(0, index, s, reduce="amax")
            if counts is None:
                raise InputError(f"{self.name}.fit_model: no training image to fit on")
            known = counts > 0
            for lo, hi in zip(mins, maxs, strict=True):  # classes without images: all classes
                lo[~known] = lo[known].amin(dim=0)
                hi[~known] = hi[known].amax(dim=0)
            norms = self._expected_deviations(model, batches, mins, maxs)
        self.mins_ = [m.cpu().numpy() for m in mins]
        self.maxs_ = [m.cpu().numpy() for m in maxs]
        self.norms_ = norms.cpu().numpy()
        self.class_counts_ = counts.cpu().numpy()

    def _expected_deviations(
        self, model: ModelView, batches: Batches, mins: list[Tensor], maxs: list[Tensor]
    ) -> Tensor:
        """Mean deviation of the held-out images per layer (second pass; 1 where none)."""
        import torch

        total = torch.zeros(len(mins), dtype=torch.float64, device=mins[0].device)
        n_held = 0
        seen = torch.zeros(mins[0].shape[0], dtype=torch.int64)
        for x, y in batches():
            if len(y) == 0:
                continue
            held, seen = holdout_mask(y.to(torch.int64).cpu(), seen)
            if not bool(held.any()):
                continue
            _, stats = self._stats(model, x[held.to(x.device)])
            yh = y.to(torch.int64)[held.to(y.device)].to(total.device)
            for i, (s, lo, hi) in enumerate(zip(stats, mins, maxs, strict=True)):
                total[i] += gram_deviation(s, lo[yh], hi[yh]).sum()
            n_held += int(held.sum())
        mean = total / max(n_held, 1)
        return torch.where(mean > 0, mean, torch.ones_like(mean))

    def _score_batch(self, model: ModelView, x: Tensor) -> Tensor:
        import torch

        # full precision even under autocast: the ranges are compared to 1e-6 of their ends
        with torch.no_grad(), torch.autocast(x.device.type, enabled=False):
            logits, stats = self._stats(model, float32(x))
            yhat = logits.argmax(dim=1)
            like = stats[0]
            mins, maxs = self.fitted_tensor("mins_", like), self.fitted_tensor("maxs_", like)
            norms = self.fitted_tensor("norms_", like)
            if (
                len(stats) != len(mins)
                or logits.shape[1] != mins[0].shape[0]
                or any(s.shape[1:] != m.shape[1:] for s, m in zip(stats, mins, strict=False))
            ):
                raise InputError(
                    f"{self.name}.score_batch: the model's block outputs do not match the "
                    "fitted state (fitted on another model?)"
                )
            total = torch.zeros(len(x), dtype=torch.float64, device=like.device)
            for i, (s, lo, hi) in enumerate(zip(stats, mins, maxs, strict=True)):
                total += gram_deviation(s, lo[yhat], hi[yhat]) / norms[i]
            if self.divide_by_msp:
                total = total / torch.softmax(logits.double(), dim=1).amax(dim=1)
        out_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        return (-total).to(out_dtype)
