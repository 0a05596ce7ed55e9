"""Multi-layer Mahalanobis: the class-Gaussian scores of several blocks' outputs, weighted and
summed (Lee et al., 2018, without input pre-processing; pytorch-ood's ``MultiMahalanobis``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ._params import ParamConstraints
from ._registry import register_detector
from .class_gaussians import LayerGaussianDetector, LayerWeights
from .model_level import ModelView

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["MultiMahalanobis"]


@register_detector
class MultiMahalanobis(LayerGaussianDetector):
    """Weighted multi-layer Mahalanobis ``sum_l alpha_l max_c -0.5 MD_lc(x)``; higher = more ID.

    For each block l of the network (the adapter's ``block_names``) with weight alpha_l != 0,
    g_l(x) is the block's output averaged over its positions, mu_lc the class means of g_l on
    the labelled ID training images and Sigma_l their tied covariance (maximum likelihood,
    divided by N); ``MD_lc(x) = (g_l(x) - mu_lc)^T Sigma_l^+ (g_l(x) - mu_lc)``. No input
    pre-processing (see ``mds_ensemble`` for the paper's). Fitted in one streaming pass
    (per-class sums and a pooled scatter per block). Model-level: reads the block outputs.

    Defaults are pytorch-ood 0.4.0's ``MultiMahalanobis``: every layer, weight 1 each; its
    layers (consecutive modules) are the adapter's blocks.

    Departures from pytorch-ood: its covariance is the scatter matrix not divided by N, plus
    1e-6 I, inverted (``torch.linalg.inv``); here the maximum-likelihood covariance (divided by
    N, as sklearn's ``EmpiricalCovariance`` in OpenOOD and the authors' code) and its
    pseudo-inverse, so its per-layer distances are these divided by N (the same ranking up to
    the ridge) and its scores are minus these divided by N. Distances are computed in float64
    (float32 on MPS); the forward pass runs in float32 even under mixed precision; token
    outputs (n, L, D) are averaged over the tokens (pytorch-ood takes 4-D feature maps only);
    classes without training images are left out of the closest class (pytorch-ood refuses to
    fit).

    Parameters
    ----------
    alphas : list of float or None, default None
        Weight of each block's score, shallow to deep; blocks past the end of the list get
        weight 0 and are not computed. None: weight 1 on every block (pytorch-ood's uniform
        default).

    Attributes
    ----------
    classes_ : ndarray (K',), int64
        The labels with training images.
    means_ : list of ndarray (K', D_l), float64
        Class means of each scored block's pooled output.
    projections_ : list of ndarray (D_l, r_l), float64
        Whitening projection P_l with ``P_l P_l^T = pinvh(Sigma_l)``.

    References
    ----------
    .. [1] K. Lee, K. Lee, H. Lee and J. Shin, "A Simple Unified Framework for Detecting
       Out-of-Distribution Samples and Adversarial Attacks", NeurIPS 2018.
    """

    name = "multi_mahalanobis"
    model_requires = frozenset({"layers"})
    all_blocks_by_default = True
    _parameter_constraints: ClassVar[ParamConstraints] = {"alphas": [LayerWeights(), None]}

    def __init__(self, *, alphas: list[float] | tuple[float, ...] | None = None) -> None:
        self.alphas = alphas

    def _score_batch(self, model: ModelView, x: Tensor) -> Tensor:
        import torch

        total = self.weighted_scores(model, x)
        return total.to(torch.float64 if x.dtype == torch.float64 else torch.float32)
