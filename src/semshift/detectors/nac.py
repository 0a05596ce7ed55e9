"""NAC-UE: neuron activation coverage of an image's neuron states, from histograms of the
states on the ID training images (Liu et al., 2024), computed as pytorch-ood 0.4.0 does or as
the authors' released code does (``variant``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from numbers import Integral, Real
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from semshift.errors import InputError

from ._params import Interval, ParamConstraints, StrOptions
from ._registry import register_detector
from .model_level import Batches, ModelLevelDetector, ModelView, float32, pool_layer

if TYPE_CHECKING:
    from torch import Tensor

__all__ = [
    "NAC",
    "VARIANTS",
    "geometric_bin_edges",
    "layer_gradients",
    "neuron_states",
    "released_bin_edges",
]

#: The two ways of computing NAC (:class:`NAC`'s ``variant``).
VARIANTS = ("pytorch-ood", "released")
#: States are clamped to [EPS, 1 - EPS] before binning (pytorch-ood's ``eps``).
EPS = 1e-6
#: Base of the released code's ``logspace(1e3, M)`` edges.
RELEASED_BASE = 1e3


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


def released_bin_edges(bins: int, *, device: Any = None) -> Tensor:
    """Edges (bins,) float64 of the ``bins - 1`` intervals ``[t_k, t_k+1)`` of the authors'
    released code (its ``logspace(1e3, M)``, BierOne/ood_coverage,
    ``openood/postprocessors/nac/coverage.py``), ``bins`` even and >= 4.

    With m = bins // 2 and ``x = log_1000(linspace(1, sqrt(1000), m))`` (0 to 0.5, in steps
    that shrink towards 0.5), the edges are x without its last point, then ``1 - x`` reversed
    (0.5 to 1) with its last point raised to 1.01, then 1.2. So m - 1 bins lie in [0, 0.5) and
    m - 1 in [0.5, 1.01), dense near 0.5 and wide near 0 and 1 (the opposite of
    :func:`geometric_bin_edges`), and the last bin, [1.01, 1.2), no sigmoid state reaches.
    Computed in float64 as the released code computes them (NumPy), bit for bit.

    Examples
    --------
    >>> [round(e, 6) for e in released_bin_edges(6).tolist()]
    [0.0, 0.404164, 0.5, 0.595836, 1.01, 1.2]
    """
    import torch

    x = np.log(np.linspace(1.0, np.sqrt(RELEASED_BASE), num=bins // 2)) / np.log(RELEASED_BASE)
    edges = np.concatenate([x[:-1], (1.0 - x)[::-1]])
    edges[-1] += 1e-2
    return torch.as_tensor(np.append(edges, 1.2), dtype=torch.float64, device=device)


def layer_gradients(
    model: ModelView, x: Tensor, *, eps: float = 1e-12
) -> tuple[Tensor, list[Tensor], list[Tensor]]:
    """Logits, the block outputs z_l and the gradients of NAC's loss with respect to them.

    The loss is ``sum_i -(1/C) sum_c log(softmax(f(x_i))_c + eps)``, the KL divergence of the
    softmax from the uniform distribution up to a constant: pytorch-ood's form with its
    ``eps = 1e-12``; ``eps = 0`` takes ``log_softmax`` instead, as the released code's
    ``kl_grad`` does. The two differ where a class probability is near or below ``eps`` (the
    term of such a class hardly depends on the logits in the first form), which a confident
    network with many classes has. Samples do not interact (one sum over the batch of an
    evaluation-mode network).

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
    if eps > 0:
        logp = torch.log(torch.softmax(logits, dim=1) + eps)
    else:
        logp = torch.log_softmax(logits, dim=1)
    loss = -logp.mean(dim=1).sum()
    zeros = [grabbed[n][1] for n in names]
    grads = torch.autograd.grad(loss, zeros, allow_unused=True)
    outs = [grabbed[n][0] for n in names]
    grads_ = [torch.zeros_like(z) if g is None else g for z, g in zip(outs, grads, strict=True)]
    return logits.detach(), outs, grads_


def neuron_states(z: Tensor, grad: Tensor, alpha: float, *, variant: str = "pytorch-ood") -> Tensor:
    """NAC's neuron states (n, N) of one block, in [0, 1]: one neuron per channel of a feature
    map (n, C, H, W), per feature of tokens (n, L, D) or of a vector (n, D).

    ``variant="pytorch-ood"``: ``sigmoid(alpha * reduce(z * dKL/dz))``, ``reduce`` averaging
    over the positions (tokens) (:func:`~semshift.detectors.model_level.pool_layer`).
    ``"released"``: ``sigmoid(alpha * sum(z) * sum(dKL/dz))``, the output and the gradient each
    summed over the positions (tokens) first, as the released code pools them apart (its
    ``avg_pooling`` sums) and multiplies the pooled values. A vector is kept by both, so there
    the two agree.
    """
    import torch

    if variant == "released":
        return torch.sigmoid(alpha * _sum_positions(z) * _sum_positions(grad))
    return torch.sigmoid(alpha * pool_layer(z * grad))


def _sum_positions(t: Tensor) -> Tensor:
    """A block output summed over its positions (n, C, H, W) or tokens (n, L, D): (n, N)."""
    if t.ndim == 4:
        return t.sum(dim=(2, 3))
    if t.ndim == 3:
        return t.sum(dim=1)
    return t.reshape(t.shape[0], -1)


def _bin_index(states: Tensor, edges: Tensor, variant: str) -> Tensor:
    """Bin (n, N) int64 of each state.

    ``pytorch-ood``: ``i`` for ``edges[i] < s <= edges[i + 1]``, states clamped to
    [EPS, 1 - EPS] (the lowest bin also takes ``s = EPS``). ``released``: ``i`` for
    ``edges[i] <= s < edges[i + 1]``, states not clamped, and -1 for a state in no bin (outside
    [edges[0], edges[-1]), or NaN), which the released code counts nowhere and scores 0.
    """
    import torch

    s = states.double().contiguous()
    last = edges.shape[0] - 2
    if variant == "released":
        idx = torch.bucketize(s, edges, right=True) - 1
        return idx.masked_fill((idx < 0) | (idx > last) | s.isnan(), -1)
    return (torch.bucketize(s.clamp(EPS, 1 - EPS), edges, right=False) - 1).clamp(0, last)


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
    histograms of them, over the network's blocks; higher = more ID.

    For each block output z_l of the network (the adapter's ``block_names``), neuron j (a
    channel) has a state s_j in [0, 1] made of z_l and dKL/dz_l, KL the divergence of the
    softmax from the uniform distribution (:func:`layer_gradients`, :func:`neuron_states`). The
    fit counts, per neuron, how many labelled ID training images put its state in each bin
    (streaming, one forward and backward pass; the labels are not used). A test image covers
    block l by ``cov_l = mean_j min(count_l[j, bin(s_j)] / o_star, 1)`` (0 for a state in no
    bin). ``variant`` says how the states, the bins and the blocks are made and combined:

    ``"pytorch-ood"`` (default) is pytorch-ood 0.4.0's ``NACUE`` with its defaults
    (``m_bins=50``, ``alpha=100``, ``o_star=50``, its spatial-mean ``feature_reduce``), its
    ``layers`` being the adapter's blocks; its scores are minus these:

    - ``s_j = sigmoid(alpha * mean_positions(z_l * dKL/dz_l)_j)``, the loss with
      ``log(p + 1e-12)``;
    - ``bins`` geometric bins on [1e-6, 1 - 1e-6], dense near 0 and 1, states clamped there
      (:func:`geometric_bin_edges`);
    - score = ``sum_l cov_l``.

    ``"released"`` is the authors' code (github.com/BierOne/ood_coverage, an OpenOOD fork:
    ``openood/postprocessors/nac_postprocessor.py`` and ``nac/coverage.py``, ``nac/utils.py``,
    ``nac/instr_state.py``, method ``sigmoid(o*g_kl)``, ``test_method: avg``):

    - ``s_j = sigmoid(alpha * sum_positions(z_l)_j * sum_positions(dKL/dz_l)_j)``: the output
      and the gradient are each summed over the positions (tokens) before their product (its
      ``avg_pooling`` sums, its ``pooling_vit_mlp`` sums the tokens), where pytorch-ood
      averages their product; the loss takes ``log_softmax`` (no 1e-12, which in the other
      form takes the classes of probability below ~1e-12 out of the gradient);
    - the ``bins - 1`` intervals of its ``logspace(1e3, M)``, ``M = bins`` even: dense near
      0.5, wide near 0 and 1, the last one ([1.01, 1.2)) unreachable
      (:func:`released_bin_edges`); states not clamped;
    - score = ``mean_l cov_l`` (its ``single_ood_test`` divides each layer's by their number).

    The states and the bins differ, so the variants rank the same images differently; the
    mean over the blocks alone would only rescale the sum.

    Model-level: needs the outputs of the network's blocks and back-propagates to them (not to
    the images). Both variants take the gradients in float32 even under mixed precision.

    Departures: from pytorch-ood, token outputs (n, L, D) are averaged over the tokens (one
    neuron per feature, as channels of a feature map; pytorch-ood flattens them to L x D
    neurons) and an odd number of bins gets all its bins (:func:`geometric_bin_edges`). From
    the released code: one ``bins``, ``alpha``, ``o_star`` serve every block (it sets them per
    layer; these defaults are its CIFAR-10 ResNet-18 ``avgpool`` ones, its ImageNet ResNet-50
    ``avgpool`` takes M=50, alpha=3000, O*=10 and its ``layer1`` M=1000, alpha=1, O*=5000);
    the blocks are the adapter's (its ResNet runs use avgpool, layer3, layer2, layer1; its ViT
    runs the final layer norm and the ``ln_2`` of the last three blocks); every token block is
    summed over all tokens (it reads the final layer norm of a ViT at the class token only);
    it fits on a class-balanced subset of the training set (``valid_num``, 1000 images in its
    ResNet runs), this detector on whatever images the caller gives.

    Parameters
    ----------
    bins : int, default 50
        Number M of histogram bins per neuron, >= 2; even and >= 4 for ``"released"``, which
        then has M - 1 bins (M - 2 reachable).
    alpha : float, default 100
        Steepness of the sigmoid, > 0.
    o_star : int, default 50
        O*, the count at which a bin is fully covered, >= 1.
    variant : {"pytorch-ood", "released"}, default "pytorch-ood"
        Whose computation (above).

    Attributes
    ----------
    counts_ : list of ndarray (N_l, n_bins), int64
        Per block, the training images in each bin of each neuron (``n_bins`` = ``bins``, or
        ``bins - 1`` for ``"released"``).

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
        "variant": [StrOptions(VARIANTS)],
    }

    def __init__(
        self,
        *,
        bins: int = 50,
        alpha: float = 100.0,
        o_star: int = 50,
        variant: str = "pytorch-ood",
    ) -> None:
        self.bins = bins
        self.alpha = alpha
        self.o_star = o_star
        self.variant = variant

    def _check_params(self) -> None:
        super()._check_params()
        if self.variant == "released" and (int(self.bins) < 4 or int(self.bins) % 2):
            raise InputError(
                f"{self.name}: variant='released' needs an even number of bins >= 4 (its edges "
                f"come in mirrored pairs), got bins={self.bins}"
            )

    def _n_bins(self) -> int:
        """Bins per neuron: ``bins``, or ``bins - 1`` for the released variant."""
        return int(self.bins) - 1 if self.variant == "released" else int(self.bins)

    def _edges(self, device: Any) -> Tensor:
        if self.variant == "released":
            return released_bin_edges(int(self.bins), device=device)
        return geometric_bin_edges(int(self.bins), device=device)

    def _bins_of(self, model: ModelView, x: Tensor) -> list[Tensor]:
        """Each block's bin indices (n, N_l) of the images x (-1: in no bin)."""
        released = self.variant == "released"
        with _gradients_on(x):
            xg = float32(x).detach().clone()
            _, outs, grads = layer_gradients(model, xg, eps=0.0 if released else 1e-12)
        edges = self._edges(xg.device)
        alpha, variant = float(self.alpha), str(self.variant)
        return [
            _bin_index(neuron_states(z, g, alpha, variant=variant), edges, variant)
            for z, g in zip(outs, grads, strict=True)
        ]

    def _fit_model(self, model: ModelView, batches: Batches) -> None:
        import torch

        m = self._n_bins()
        counts: list[Tensor] = []
        for x, _ in batches():
            if len(x) == 0:
                continue
            idx = self._bins_of(model, x)
            if not counts:
                counts = [torch.zeros(i.shape[1] * m, dtype=torch.int64, device=i.device)
                          for i in idx]  # fmt: skip
            for c, i in zip(counts, idx, strict=True):
                flat = i + m * torch.arange(i.shape[1], device=i.device)
                c += torch.bincount(flat[i >= 0], minlength=c.shape[0])
        if not counts:
            raise InputError(f"{self.name}.fit_model: no training image to fit on")
        self.counts_ = [c.reshape(-1, m).cpu().numpy() for c in counts]

    def _score_batch(self, model: ModelView, x: Tensor) -> Tensor:
        import torch

        idx = self._bins_of(model, x)
        counts = self.fitted_tensor("counts_", x)
        m = self._n_bins()
        if len(idx) != len(counts) or any(
            i.shape[1] != c.shape[0] or c.shape[1] != m for i, c in zip(idx, counts, strict=False)
        ):
            raise InputError(
                f"{self.name}.score_batch: the model's block outputs do not match the fitted "
                "state (fitted on another model, or with other bins?)"
            )
        dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        total = torch.zeros(len(x), dtype=torch.float64, device=x.device)
        for i, c in zip(idx, counts, strict=True):
            # training images in each state's bin (n, N); none for a state in no bin
            hits = c.gather(1, i.clamp(min=0).t()).t().double() * (i >= 0)
            total += (hits / int(self.o_star)).clamp(max=1.0).mean(dim=1)
        if self.variant == "released":
            total /= len(idx)
        return total.to(dtype)
