"""NAC-UE: neuron activation coverage of an image's neuron states, from histograms of the
states on the ID training images (Liu et al., 2024)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from numbers import Integral, Real
from typing import TYPE_CHECKING, Any, ClassVar

from semshift.errors import InputError

from ._params import Interval, ParamConstraints
from ._registry import register_detector
from .model_level import Batches, ModelLevelDetector, ModelView, float32, pool_layer

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["NAC", "geometric_bin_edges", "layer_gradients", "neuron_states"]

#: States are clamped to [EPS, 1 - EPS] before binning (pytorch-ood's ``eps``).
EPS = 1e-6


def geometric_bin_edges(bins: int, *, device: Any = None) -> Tensor:
    """Edges (bins + 1,) float64 of geometric bins on [EPS, 1 - EPS], dense near 0 and 1.

    ``bins // 2`` bins between EPS and 0.5 with log-spaced edges, the other ``bins - bins // 2``
    between 0.5 and 1 - EPS mirrored (``1 - e`` for log-spaced e). The edges are computed in
    float32 as pytorch-ood 0.4.0 does (its middle edge is 0.49999997, so a state of exactly 0.5,
    a neuron with no activation, falls in the upper half): for an even number of bins they are
    its edges, and states are binned as it bins them. For an odd number its mirror
    construction gives one bin fewer; here the upper half takes the extra bin.

    Examples
    --------
    >>> [round(e, 8) for e in geometric_bin_edges(4).tolist()]  # float32 values
    [1e-06, 0.00070711, 0.49999997, 0.99929291, 0.99999899]
    """
    import torch

    def half(m: int) -> Tensor:
        lo, hi = torch.log10(torch.tensor(EPS)), torch.log10(torch.tensor(0.5))
        return torch.logspace(lo, hi, steps=m + 1, device=device)

    m1 = bins // 2
    left, right = half(m1), 1.0 - half(bins - m1).flip(0)
    return torch.cat([left, right[1:]]).double()


def layer_gradients(model: ModelView, x: Tensor) -> tuple[Tensor, list[Tensor], list[Tensor]]:
    """Logits, the block outputs z_l and the gradients of NAC's loss with respect to them.

    The loss is ``sum_i -(1/C) sum_c log(softmax(f(x_i))_c + 1e-12)``, the KL divergence of the
    softmax from the uniform distribution up to a constant (pytorch-ood's form); samples do not
    interact (one sum over the batch of an evaluation-mode network).

    The gradient with respect to a block's output is read through a zero tensor added to the
    output by a forward hook on the block's module (``ModelView.layer_outputs`` returns copies
    beside the computation, through which no gradient of the logits flows); the hooks are
    removed afterwards. Call with gradients enabled.

    Returns
    -------
    logits : Tensor (n, K)
    outputs : list of Tensor
        Each block's output, detached.
    grads : list of Tensor
        d loss / d output, same shapes.

    Raises
    ------
    InputError
        A block name that is not a module of the network, or a block that gave no tensor.
    """
    import torch

    names = model.block_names()
    modules = dict(model.module.named_modules())
    missing = [n for n in names if n not in modules]
    if missing:
        raise InputError(f"model {model.name!r}: no module named {missing[0]!r} (block_names)")
    grabbed: dict[str, tuple[Tensor, Tensor]] = {}

    def probe(key: str) -> Any:
        def hook(_m: Any, _args: Any, out: Any) -> Any:
            if not isinstance(out, torch.Tensor):
                return None
            zero = torch.zeros_like(out, requires_grad=True)
            grabbed[key] = (out.detach().clone(), zero)
            return out + zero

        return hook

    handles = [modules[n].register_forward_hook(probe(n)) for n in names]
    try:
        logits = float32(model(x)[0])
    finally:
        for handle in handles:
            handle.remove()
    absent = [n for n in names if n not in grabbed]
    if absent:
        raise InputError(
            f"model {model.name!r}: blocks {absent} gave no tensor in the forward pass"
        )
    p = torch.softmax(logits, dim=1)
    loss = -(torch.log(p + 1e-12)).mean(dim=1).sum()
    zeros = [grabbed[n][1] for n in names]
    grads = torch.autograd.grad(loss, zeros, allow_unused=True)
    outs = [grabbed[n][0] for n in names]
    grads_ = [torch.zeros_like(z) if g is None else g for z, g in zip(outs, grads, strict=True)]
    return logits.detach(), outs, grads_


def neuron_states(z: Tensor, grad: Tensor, alpha: float) -> Tensor:
    """NAC's neuron states ``sigmoid(alpha * reduce(z * dKL/dz))`` (n, N) of one block.

    ``reduce`` averages a feature map (n, C, H, W) over its positions and tokens (n, L, D)
    over the tokens (:func:`~semshift.detectors.model_level.pool_layer`); a vector (n, D) is
    kept. One neuron per channel.
    """
    import torch

    return torch.sigmoid(alpha * pool_layer(z * grad))


def _bin_index(states: Tensor, edges: Tensor) -> Tensor:
    """Bin (n, N) int64 of each state: ``i`` for ``edges[i] < s <= edges[i + 1]``, states
    clamped to [EPS, 1 - EPS] (the lowest bin also takes ``s = EPS``)."""
    import torch

    s = states.double().clamp(EPS, 1 - EPS).contiguous()
    return (torch.bucketize(s, edges, right=False) - 1).clamp(0, edges.shape[0] - 2)


@contextlib.contextmanager
def _gradients_on(x: Tensor) -> Iterator[None]:
    """Gradients on, in full precision, even under inference mode and autocast."""
    import torch

    with (
        torch.autocast(x.device.type, enabled=False),
        torch.inference_mode(False),
        torch.enable_grad(),
    ):
        yield


@register_detector
class NAC(ModelLevelDetector):
    """NAC-UE score: the coverage of an image's neuron states by the ID training images'
    histograms, summed over the blocks; higher = more ID.

    For each block output z_l of the network (the adapter's ``block_names``), the state of
    neuron j (a channel) is ``s_j = sigmoid(alpha * mean_positions(z_l * dKL/dz_l)_j)`` with KL
    the divergence of the softmax from the uniform distribution (:func:`layer_gradients`,
    :func:`neuron_states`). The fit counts, per neuron, how many labelled ID training images
    put its state in each of ``bins`` geometric bins on (0, 1) (:func:`geometric_bin_edges`;
    streaming, one forward and backward pass; the labels are not used). A test image scores

        ``sum_l mean_j min(count_l[j, bin(s_j)] / o_star, 1)``.

    Model-level: needs the outputs of the network's blocks and back-propagates to them (not to
    the images). This is pytorch-ood 0.4.0's ``NACUE`` with its defaults (``m_bins=50``,
    ``alpha=100``, ``o_star=50``, its spatial-mean ``feature_reduce``), whose scores are minus
    these, with its ``layers`` the adapter's blocks.

    Departures: from pytorch-ood, token outputs (n, L, D) are averaged over the tokens (one
    neuron per feature, as channels of a feature map; pytorch-ood flattens them to L x D
    neurons); an odd number of bins gets all its bins (:func:`geometric_bin_edges`); the
    gradients are taken in float32 even under mixed precision. From the paper and its OpenOOD
    code: the bins are pytorch-ood's geometric ones (the paper's are uniform on [0, 1]) and the
    hyperparameters are shared by all blocks (the paper tunes bins, alpha and O* per layer and
    uses ResNet-50's avgpool, layer3, layer2 and layer1 outputs).

    Parameters
    ----------
    bins : int, default 50
        Number M of histogram bins per neuron, >= 2.
    alpha : float, default 100
        Steepness of the sigmoid, > 0.
    o_star : int, default 50
        O*, the count at which a bin is fully covered, >= 1.

    Attributes
    ----------
    counts_ : list of ndarray (N_l, bins), int64
        Per block, the training images in each bin of each neuron.

    References
    ----------
    .. [1] Y. Liu, C. X. Tian, H. Li, L. Ma and S. Wang, "Neuron Activation Coverage:
       Rethinking Out-of-distribution Detection and Generalization", ICLR 2024.
    """

    name = "nac"
    model_requires = frozenset({"layers", "grad"})
    fits = True
    state_names: ClassVar[tuple[str, ...]] = ("counts_",)
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "bins": [Interval(Integral, 2, None, closed="left")],
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "o_star": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(self, *, bins: int = 50, alpha: float = 100.0, o_star: int = 50) -> None:
        self.bins = bins
        self.alpha = alpha
        self.o_star = o_star

    def _bins_of(self, model: ModelView, x: Tensor) -> list[Tensor]:
        """Each block's bin indices (n, N_l) of the images x."""
        with _gradients_on(x):
            xg = float32(x).detach().clone()
            _, outs, grads = layer_gradients(model, xg)
        edges = geometric_bin_edges(int(self.bins), device=xg.device)
        alpha = float(self.alpha)
        return [
            _bin_index(neuron_states(z, g, alpha), edges) for z, g in zip(outs, grads, strict=True)
        ]

    def _fit_model(self, model: ModelView, batches: Batches) -> None:
        import torch

        m = int(self.bins)
        counts: list[Tensor] = []
        for x, _ in batches():
            if len(x) == 0:
                continue
            idx = self._bins_of(model, x)
            if not counts:
                counts = [torch.zeros(i.shape[1] * m, dtype=torch.int64, device=i.device)
                          for i in idx]  # fmt: skip
            for c, i in zip(counts, idx, strict=True):
                flat = (i + m * torch.arange(i.shape[1], device=i.device)).reshape(-1)
                c += torch.bincount(flat, minlength=c.shape[0])
        if not counts:
            raise InputError(f"{self.name}.fit_model: no training image to fit on")
        self.counts_ = [c.reshape(-1, m).cpu().numpy() for c in counts]

    def _score_batch(self, model: ModelView, x: Tensor) -> Tensor:
        import torch

        idx = self._bins_of(model, x)
        counts = self.fitted_tensor("counts_", x)
        if len(idx) != len(counts) or any(
            i.shape[1] != c.shape[0] or c.shape[1] != int(self.bins)
            for i, c in zip(idx, counts, strict=False)
        ):
            raise InputError(
                f"{self.name}.score_batch: the model's block outputs do not match the fitted "
                "state (fitted on another model?)"
            )
        dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        total = torch.zeros(len(x), dtype=torch.float64, device=x.device)
        for i, c in zip(idx, counts, strict=True):
            hits = c.gather(1, i.t()).t().double()  # (n, N) training images in each state's bin
            total += (hits / int(self.o_star)).clamp(max=1.0).mean(dim=1)
        return total.to(dtype)
