"""Mahalanobis with ODIN-style input pre-processing on the penultimate features (Lee et al.,
2018; pytorch-ood's ``MahalanobisODIN``)."""

from __future__ import annotations

from numbers import Real
from typing import TYPE_CHECKING, ClassVar

from ._params import Interval, ParamConstraints
from ._registry import register_detector
from .class_gaussians import ClassGaussianDetector, work_dtype
from .model_level import ModelView, float32

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["MahalanobisODIN"]


@register_detector
class MahalanobisODIN(ClassGaussianDetector):
    """Mahalanobis score of a pre-processed input, ``max_c -0.5 MD_c(h(x'))``; higher = more ID.

    h(x) are the penultimate features, mu_c their class means on the labelled ID training
    images, Sigma their tied covariance (maximum likelihood, divided by N) and ``MD_c(h) =
    (h - mu_c)^T Sigma^+ (h - mu_c)``. The input is moved against the gradient of the distance
    to the closest class c(x) = argmin_c MD_c(h(x)), in the style of ODIN:

        ``x' = x - epsilon sign(grad_x 0.5 MD_{c(x)}(h(x))) / std``

    (``torch.sign``: a zero gradient gives no step). No temperature (pytorch-ood has none: the
    score is the distance, not a softmax). Fitted in one streaming pass (per-class sums and a
    pooled scatter). Model-level: back-propagates to the images (two forward passes, one
    backward pass).

    Defaults are pytorch-ood 0.4.0's ``MahalanobisODIN`` (``eps=0.002``) with its ``norm_std``
    set to the model's normalisation, so that epsilon is in pixel units as semshift's ``odin``
    and the paper's code.

    Departures from pytorch-ood: with ``norm_std=None`` (its default) its step is epsilon in
    units of the normalised input; its covariance is the scatter matrix not divided by N, plus
    1e-6 I, inverted; here the maximum-likelihood covariance and its pseudo-inverse, so its
    scores are minus these divided by N (the pre-processing direction is the same up to the
    ridge); the gradient is of the sum over the batch (its mean: the same sign but where the
    mean underflows); distances in float64 (float32 on MPS); the gradient and forward passes
    in float32 (float64 for float64 inputs) even under mixed precision; classes without
    training images are left out of the closest class (pytorch-ood refuses to fit).

    Parameters
    ----------
    epsilon : float, default 0.002
        Step size in [0, 1] pixel units, >= 0 (0 gives the plain Mahalanobis score of the
        penultimate features).

    Attributes
    ----------
    classes_ : ndarray (K',), int64
        The labels with training images.
    means_ : list of one ndarray (K', D), float64
        Class means of the penultimate features.
    projections_ : list of one ndarray (D, r), float64
        Whitening projection P with ``P P^T = pinvh(Sigma)``.

    References
    ----------
    .. [1] K. Lee, K. Lee, H. Lee and J. Shin, "A Simple Unified Framework for Detecting
       Out-of-Distribution Samples and Adversarial Attacks", NeurIPS 2018.
    """

    name = "mahalanobis_odin"
    model_requires = frozenset({"grad"})
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "epsilon": [Interval(Real, 0, None, closed="left")],
    }

    def __init__(self, *, epsilon: float = 0.002) -> None:
        self.epsilon = epsilon

    def _vectors(self, model: ModelView, x: Tensor) -> tuple[Tensor, list[Tensor]]:
        logits, h = model(x)
        return logits, [h]

    def _score_batch(self, model: ModelView, x: Tensor) -> Tensor:
        import torch

        like = torch.empty(0, dtype=work_dtype(x.device), device=x.device)
        (gauss,) = self._gaussians(like)
        eps = float(self.epsilon)
        x0 = float32(x).detach()
        if eps != 0.0:
            (step,) = self._perturbation_steps(
                model, x, lambda xg: self._vectors(model, xg)[1], [gauss], "zero"
            )
            x0 = x0 - eps * step
        with torch.no_grad(), torch.autocast(x.device.type, enabled=False):
            (h,) = self._vectors(model, x0)[1]
            self._check_dims([h], [gauss])
            score = -self.half_min_distance(h, gauss)
        return score.to(torch.float64 if x.dtype == torch.float64 else torch.float32)
