"""AdaSCALE: Energy of activations (or logits) scaled with a per-sample adaptive percentile,
set from how much the top activations shift under a small input perturbation (Regmi, 2025)."""

from __future__ import annotations

from numbers import Integral, Real
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from semshift.errors import InputError

from ._params import Interval, ParamConstraints
from ._registry import register_detector
from .model_level import Batches, ModelLevelDetector, ModelView, float32

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["AdaScaleA", "AdaScaleL", "adaptive_scale", "perturbation_shift", "top_fraction"]

#: Step of the perturbation on the normalised input (OpenOOD v1.5's ``perturb``: 0.5 added to
#: the normalised pixels; not a hyperparameter there).
STEP = 0.5


def top_fraction(d: int, percent: float) -> int:
    """``int(d percent / 100)``: how many of d activations ``percent`` % of them are (OpenOOD's
    ``k1_`` and ``k2_``; 0 when d is small)."""
    return int(d * float(percent) / 100)


def adaptive_scale(h: Tensor, percentiles: Tensor) -> Tensor:
    """Per-sample scaling ratio ``r = sum relu(h) / sum of its k largest values``.

    ``k = d - round(d p / 100)`` with p the sample's percentile (round half to even, as
    OpenOOD's ``torch.round``), at least 1 (a percentile that rounds to d would divide by an
    empty sum); ``r = 1`` for a sample with no positive activation (0 / 0 in OpenOOD).

    Parameters
    ----------
    h : Tensor (n, d)
        Penultimate features.
    percentiles : Tensor (n,)
        Each sample's percentile in (0, 100).

    Returns
    -------
    Tensor (n,)
        r >= 1.

    Examples
    --------
    >>> import torch
    >>> h = torch.tensor([[4.0, 3.0, 2.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    >>> adaptive_scale(h, torch.tensor([50.0, 75.0])).tolist()  # 10 / 7, 4 / 1
    [1.4285714626312256, 4.0]
    """
    import torch

    z = torch.relu(h)
    d = int(z.shape[1])
    k = d - torch.round(d * percentiles.to(z.dtype) / 100.0).to(torch.int64)
    k = k.clamp(min=1, max=d)
    top = z.topk(int(k.max()), dim=1).values
    keep = torch.arange(top.shape[1], device=z.device)[None, :] < k[:, None]
    s_top = (top * keep).sum(dim=1)
    s_all = z.sum(dim=1)
    return torch.where(s_top > 0, s_all / torch.where(s_top > 0, s_top, 1.0), 1.0)


def perturbation_shift(
    h: Tensor, h_pert: Tensor, k1: int, k2: int, lmbda: float
) -> Tensor:  # fmt: skip
    """AdaSCALE's OODness ``Q' = C_o + lambda Q`` of each sample.

    With ``T_k`` the indices of the k largest activations of the unperturbed features h,
    ``C_o = sum_{j in T_k1} relu(h'_j)`` and ``Q = sum_{j in T_k2} |h_j - h'_j|`` (h' the
    features of the perturbed input).

    Parameters
    ----------
    h, h_pert : Tensor (n, d)
        Features of the input and of the perturbed input.
    k1, k2 : int
        Numbers of top activations, 0 <= k <= d (0 gives an empty sum).
    lmbda : float
        Weight of the shift term.

    Returns
    -------
    Tensor (n,)
    """
    import torch

    c_o = torch.relu(h_pert).gather(1, h.topk(k1, dim=1).indices).sum(dim=1)
    q = (h - h_pert).abs().gather(1, h.topk(k2, dim=1).indices).sum(dim=1)
    return c_o + lmbda * q


class _AdaScale(ModelLevelDetector):
    """Shared computation of AdaSCALE-A and AdaSCALE-L (see :class:`AdaScaleA`)."""

    model_requires = frozenset({"grad"})
    fits = True
    state_names: ClassVar[tuple[str, ...]] = ("ecdf_", "feature_dim_")
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "min_percentile": [Interval(Real, 0, 100, closed="neither")],
        "max_percentile": [Interval(Real, 0, 100, closed="neither")],
        "k1": [Interval(Real, 0, 100, closed="right")],
        "k2": [Interval(Real, 0, 100, closed="right")],
        "lmbda": [Interval(Real, 0, None, closed="left")],
        "o": [Interval(Real, 0, 1, closed="right")],
        "num_samples": [Interval(Integral, 1, None, closed="left")],
        "seed": [Interval(Integral, 0, 2**32 - 1, closed="both")],
    }
    #: Whether the scaling multiplies the logits by r^2 (L) or the features by exp(r) (A).
    logit_scaling: ClassVar[bool] = False

    def __init__(
        self,
        *,
        min_percentile: float = 75.0,
        max_percentile: float = 85.0,
        k1: float = 5.0,
        k2: float = 1.0,
        lmbda: float = 10.0,
        o: float = 0.05,
        num_samples: int = 5000,
        seed: int = 0,
    ) -> None:
        self.min_percentile = min_percentile
        self.max_percentile = max_percentile
        self.k1 = k1
        self.k2 = k2
        self.lmbda = lmbda
        self.o = o
        self.num_samples = num_samples
        self.seed = seed

    def _check_params(self) -> None:
        super()._check_params()
        if self.min_percentile > self.max_percentile:
            raise InputError(
                f"{self.name}: min_percentile ({self.min_percentile}) must not exceed "
                f"max_percentile ({self.max_percentile})"
            )

    # -- the computation ------------------------------------------------------------------------
    def _features_and_shift(self, model: ModelView, x: Tensor) -> tuple[Tensor, Tensor]:
        """Features h (n, d) of x and the OODness Q' (n,) of each image, in full precision."""
        import torch

        with (
            torch.autocast(x.device.type, enabled=False),
            torch.inference_mode(False),
            torch.enable_grad(),
        ):
            x = float32(x).detach().clone()
            xg = x.clone().requires_grad_(True)
            logits, h = model(xg)
            top = float32(logits).max(dim=1).values  # the predicted class's logit
            (grad,) = torch.autograd.grad(top.sum(), xg)
        n = x.shape[0]
        flat = grad.detach().reshape(n, -1)
        n_pix = int(flat.shape[1] * float(self.o))
        smallest = flat.abs().topk(n_pix, dim=1, largest=False).indices
        mask = torch.zeros_like(flat).scatter_(1, smallest, 1.0)
        x_pert = x + (STEP * flat.sign() * mask).view_as(x)
        with torch.no_grad(), torch.autocast(x.device.type, enabled=False):
            h = float32(h.detach())
            h_pert = float32(model.features(x_pert))
        d = int(h.shape[1])
        q = perturbation_shift(
            h, h_pert, top_fraction(d, self.k1), top_fraction(d, self.k2), float(self.lmbda)
        )
        return h, q

    def _fit_model(self, model: ModelView, batches: Batches) -> None:
        import torch

        parts: list[np.ndarray] = []
        dim = 0
        for x, _ in batches():
            if len(x) == 0:
                continue
            h, q = self._features_and_shift(model, x)
            dim = int(h.shape[1])
            parts.append(q.detach().to(torch.float64).cpu().numpy())
        if not parts:
            raise InputError(f"{self.name}.fit_model: no training image to fit on")
        q_all = np.concatenate(parts)
        if q_all.size > int(self.num_samples):  # OpenOOD: a random subset of num_samples
            rng = np.random.default_rng(int(self.seed))
            q_all = q_all[rng.permutation(q_all.size)[: int(self.num_samples)]]
        self.ecdf_ = np.sort(q_all)
        self.feature_dim_ = np.array(dim, dtype=np.int64)

    def _score_batch(self, model: ModelView, x: Tensor) -> Tensor:
        import torch

        h, q = self._features_and_shift(model, x)
        if h.shape[1] != int(self.feature_dim_):
            raise InputError(
                f"{self.name}.score_batch: the model's features have {h.shape[1]} dimensions, "
                f"the fitted state {int(self.feature_dim_)} (fitted on another model?)"
            )
        ecdf = self.fitted_tensor("ecdf_", h)
        below = torch.searchsorted(ecdf, q.to(ecdf.dtype).contiguous(), right=True)
        frac = below.to(h.dtype) / ecdf.shape[0]
        lo, hi = float(self.min_percentile), float(self.max_percentile)
        percentiles = lo + (1.0 - frac) * (hi - lo)
        r = adaptive_scale(h, percentiles)
        with torch.no_grad(), torch.autocast(x.device.type, enabled=False):
            if self.logit_scaling:
                logits = float32(model.head(h)) * r[:, None] ** 2
            else:
                logits = float32(model.head(h * torch.exp(r)[:, None]))
            return torch.logsumexp(logits, dim=1)


@register_detector
class AdaScaleA(_AdaScale):
    """AdaSCALE-A: Energy of the logits of features scaled by ``exp(r)``, with r set by a
    per-sample adaptive percentile; higher = more in-distribution.

    For an image x with penultimate features h and logits f(x):

    1. Perturbation: g = grad_x of the predicted class's logit ``max_c f_c(x)``; the
       ``int(o C H W)`` input elements with the *smallest* ``|g|`` are moved by ``0.5 sign(g)``
       (on the normalised input, as OpenOOD), giving x' and its features h'.
    2. OODness ``Q' = sum_{j in top-k1(h)} relu(h'_j) + lambda sum_{j in top-k2(h)} |h_j -
       h'_j|`` (:func:`perturbation_shift`), with ``k1 = int(d k1 / 100)`` and ``k2 = int(d k2
       / 100)`` of the d features (k1, k2 in percent).
    3. Percentile ``p = p_min + (1 - F(Q')) (p_max - p_min)`` with F the empirical CDF of Q'
       over (a random subset of ``num_samples``) ID training images: an image that shifts
       more than the ID images gets a lower percentile, so a milder scaling.
    4. ``r = sum relu(h) / sum of the (100 - p) % largest relu(h)`` (:func:`adaptive_scale`)
       and the score ``logsumexp(W (h exp(r)) + b)`` (AdaSCALE-A, activations) or
       ``logsumexp(r^2 (W h + b))`` (AdaSCALE-L, logits; :class:`AdaScaleL`).

    Model-level: it back-propagates to the images. The gradient and the forward passes run in
    float32 even under autocast; float64 models and inputs stay float64.

    Departures from OpenOOD v1.5: the empirical CDF is fitted on the ID training images (the
    run's ``id_train``) instead of OpenOOD's ID validation split, and its random subset is
    drawn with ``seed`` (OpenOOD: torch's global generator); the top-k count of r is at least
    1 and a sample without positive activation gets r = 1 (OpenOOD divides by zero); with few
    features ``int(d k / 100)`` may be 0, which leaves the term out, as in OpenOOD.

    Parameters
    ----------
    min_percentile, max_percentile : float, default 75, 85
        ``p_min <= p_max``, each in (0, 100) (OpenOOD's ``percentile: [75, 85]``).
    k1 : float, default 5
        Percent of the features whose perturbed activations form ``C_o``, in (0, 100].
    k2 : float, default 1
        Percent of the features whose shifts form ``Q``, in (0, 100].
    lmbda : float, default 10
        Weight lambda of the shift term, >= 0.
    o : float, default 0.05
        Fraction of the input elements perturbed, in (0, 1].
    num_samples : int, default 5000
        At most this many training images' Q' form the empirical CDF, >= 1.
    seed : int, default 0
        Seed of the random subset when there are more training images.

    Attributes
    ----------
    ecdf_ : ndarray (m,), float64
        The sorted Q' of the training images (m <= num_samples).
    feature_dim_ : ndarray (), int64
        d, checked when scoring.

    References
    ----------
    .. [1] S. Regmi, "AdaSCALE: Adaptive Scaling for OOD Detection", arXiv:2503.08023, 2025.
    """

    name = "adascale_a"
    logit_scaling = False


@register_detector
class AdaScaleL(_AdaScale):
    """AdaSCALE-L: Energy of the logits scaled by ``r^2``, with r set by a per-sample adaptive
    percentile; higher = more in-distribution.

    Score ``logsumexp(r^2 (W h + b))``; the perturbation, the OODness Q', the percentile and r
    are those of :class:`AdaScaleA` (see it for the steps, departures and parameters), with
    the same OpenOOD v1.5 defaults (``adascale_l.yml`` equals ``adascale_a.yml``).
    Parameters and fitted attributes: those of :class:`AdaScaleA`.

    References
    ----------
    .. [1] S. Regmi, "AdaSCALE: Adaptive Scaling for OOD Detection", arXiv:2503.08023, 2025.
    """

    name = "adascale_l"
    logit_scaling = True
