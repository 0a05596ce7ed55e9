"""MDSEns: Mahalanobis scores of block outputs after input pre-processing, combined over blocks
(Lee et al., 2018; OpenOOD v1.5's ``mds_ensemble`` postprocessor)."""

from __future__ import annotations

from numbers import Real
from typing import TYPE_CHECKING, ClassVar

from ._params import Interval, ParamConstraints
from ._registry import register_detector
from .class_gaussians import LayerGaussianDetector, LayerWeights, work_dtype
from .model_level import ModelView, float32

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["MDSEnsemble"]


@register_detector
class MDSEnsemble(LayerGaussianDetector):
    """Mahalanobis ensemble ``sum_l alpha_l max_c -0.5 MD_lc(x'_l)``; higher = more ID.

    For each block l of the network (the adapter's ``block_names``) with weight alpha_l != 0,
    g_l(x) is the block's output averaged over its positions, mu_lc the class means of g_l on
    the labelled ID training images, Sigma_l their tied covariance (maximum likelihood, divided
    by N, as OpenOOD's ``EmpiricalCovariance``) and ``MD_lc(x) = (g_l(x) - mu_lc)^T Sigma_l^+
    (g_l(x) - mu_lc)``. The input is pre-processed per block against the gradient of the
    distance to the closest class c_l(x) = argmin_c MD_lc(x):

        ``x'_l = x - epsilon sign(grad_x 0.5 MD_{l c_l(x)}(x)) / std``

    (a zero gradient counting as positive, as the authors' code and OpenOOD), and the block's
    score is the Gaussian log-density term ``max_c -0.5 MD_lc(x'_l)``. Fitted in one streaming
    pass (per-class sums and a pooled scatter per block). Model-level: reads the block outputs
    and back-propagates to the images (one forward pass, one backward and one forward pass per
    block).

    Defaults are OpenOOD v1.5's ``configs/postprocessors/mds_ensemble.yml``: ``noise: 0.0014``,
    ``feature_type_list: [mean]`` and ``alpha_list: [1]``, i.e. one layer, the shallowest
    feature of OpenOOD's networks (``alphas=None`` here: weight 1 on the first block); the
    paper's ensemble over every block with weights from a logistic regression on validation
    OOD data is ``alphas`` set to those weights (OpenOOD fits them only when ``alpha_list`` is
    empty; semshift fits no weights on OOD data).

    Departures: the blocks are the adapter's (OpenOOD's first feature of a ResNet is the stem's
    ReLU output, which the adapters do not list: the first block here is ``layer1``); the step
    is ``epsilon / std_c`` per channel with the model's own normalisation (OpenOOD divides by
    0.5 whatever the normalisation); the gradient is of the sum over the batch (OpenOOD's mean:
    the same sign but where the mean underflows); distances are computed in float64 (float32 on
    MPS) with the pseudo-inverse through a whitening projection (OpenOOD multiplies by its
    float32 precision matrix); classes without training images are left out of the closest
    class (OpenOOD fails). The gradient and the forward passes run in float32 (float64 for
    float64 inputs) even under mixed precision.

    Parameters
    ----------
    epsilon : float, default 0.0014
        Noise magnitude in [0, 1] pixel units, >= 0 (OpenOOD's ``noise``; 0 gives the weighted
        Mahalanobis scores without pre-processing).
    alphas : list of float or None, default None
        Weight of each block's score, shallow to deep; blocks past the end of the list get
        weight 0 and are not computed. None: OpenOOD's ``alpha_list: [1]`` (the first block
        only).

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
    .. [2] J. Zhang et al., "OpenOOD v1.5: Enhanced Benchmark for Out-of-Distribution
       Detection", arXiv:2306.09301, 2023 (``MDSEnsemblePostprocessor``).
    """

    name = "mds_ensemble"
    model_requires = frozenset({"layers", "grad"})
    all_blocks_by_default = False
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "epsilon": [Interval(Real, 0, None, closed="left")],
        "alphas": [LayerWeights(), None],
    }

    def __init__(
        self, *, epsilon: float = 0.0014, alphas: list[float] | tuple[float, ...] | None = None
    ) -> None:
        self.epsilon = epsilon
        self.alphas = alphas

    def _score_batch(self, model: ModelView, x: Tensor) -> Tensor:
        import torch

        eps = float(self.epsilon)
        if eps == 0.0:  # no pre-processing: multi_mahalanobis's one forward pass
            total = self.weighted_scores(model, x)
            return total.to(torch.float64 if x.dtype == torch.float64 else torch.float32)
        names, weights = self.weighted_blocks(model)
        like = torch.empty(0, dtype=work_dtype(x.device), device=x.device)
        gaussians = self._gaussians(like)
        total = torch.zeros(x.shape[0], dtype=like.dtype, device=x.device)
        steps = self._perturbation_steps(
            model, x, lambda xg: self.read_blocks(model, xg, names)[1], gaussians, "plus"
        )
        with torch.no_grad(), torch.autocast(x.device.type, enabled=False):
            x0 = float32(x).detach()
            for name, w, step, gauss in zip(names, weights, steps, gaussians, strict=True):
                (g,) = self.read_blocks(model, x0 - eps * step, [name])[1]
                total -= w * self.half_min_distance(g, gauss)
        return total.to(torch.float64 if x.dtype == torch.float64 else torch.float32)
