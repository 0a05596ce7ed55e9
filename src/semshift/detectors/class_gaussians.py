"""Class-conditional Gaussians with a tied covariance on network features, fitted by streaming:
the shared core of the model-level Mahalanobis detectors (mds_ensemble, multi_mahalanobis,
mahalanobis_odin).

Each Gaussian is fitted on one kind of vector per image (a block's output pooled over its
positions, or the penultimate features) in one pass over the labelled ID training images,
keeping only sufficient statistics (:class:`ClassMoments`): per-class counts and sums and the
scatter about a fixed shift. The tied covariance is the maximum-likelihood estimate
``Sigma = (1/N) sum_i (g_i - mu_{y_i})(g_i - mu_{y_i})^T`` (divided by N, as sklearn's
``EmpiricalCovariance`` on class-centred features, which OpenOOD v1.5 fits), and distances use
its pseudo-inverse through a whitening projection P with ``P P^T = pinvh(Sigma)``
(:func:`semshift.detectors._common.pinv_sqrt`, the cut-off of ``scipy.linalg.pinvh``), so that
``MD_c(g) = ||g P - mu_c P||^2``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from numbers import Real
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from semshift.errors import InputError

from ._common import pinv_sqrt
from ._params import Constraint
from .model_level import Batches, ModelLevelDetector, ModelView, float32, pool_layer

if TYPE_CHECKING:
    from torch import Tensor

__all__ = [
    "ClassGaussianDetector",
    "ClassMoments",
    "LayerGaussianDetector",
    "LayerWeights",
    "closest_class",
    "input_step",
    "squared_distances",
]


class LayerWeights(Constraint):
    """A non-empty list (or tuple) of finite numbers, not all 0: one weight per block.

    Examples
    --------
    >>> c = LayerWeights()
    >>> c.is_satisfied_by([1.0, 0, 2]), c.is_satisfied_by([]), c.is_satisfied_by([0.0])
    (True, False, False)
    >>> str(c)
    'a non-empty list of finite numbers, one weight per block, not all 0'
    """

    def is_satisfied_by(self, value: object) -> bool:
        if not isinstance(value, list | tuple) or not value:
            return False
        for v in value:
            if isinstance(v, bool | np.bool_) or not isinstance(v, Real):
                return False
            if not math.isfinite(float(v)):
                return False
        return any(float(v) != 0.0 for v in value)

    def __str__(self) -> str:
        return "a non-empty list of finite numbers, one weight per block, not all 0"

    def examples_outside(self) -> list[object]:
        return [[], [0.0, 0], [1.0, math.nan], [1, "2"], [True], 1.0, "1,2"]


def work_dtype(device: Any) -> Any:
    """The dtype of the distance computations: float64, float32 on Apple's MPS (no float64)."""
    import torch

    return torch.float32 if torch.device(device).type == "mps" else torch.float64


class ClassMoments:
    """Streaming sufficient statistics of labelled vectors for a tied-covariance Gaussian fit.

    Per class the count and the sum of ``g - s``, and the scatter ``sum_i (g_i - s)(g_i - s)^T``
    about a fixed shift s (the first batch's mean, which keeps the cancellation in
    ``scatter - sum_c n_c m_c m_c^T`` to the between-class spread), accumulated in the dtype of
    the vectors given (float64 for the detectors) on their device. Classes are the labels seen,
    the arrays growing to the largest.

    Examples
    --------
    >>> import torch
    >>> m = ClassMoments()
    >>> m.update(torch.tensor([[0.0], [2.0], [10.0]], dtype=torch.float64), torch.tensor([0, 0, 1]))
    >>> classes, means, cov = m.finish()
    >>> classes.tolist(), means.ravel().tolist(), cov.tolist()  # (1 + 1 + 0) / 3
    ([0, 1], [1.0, 10.0], [[0.6666666666666666]])
    """

    def __init__(self) -> None:
        self.shift: Tensor | None = None
        self.sums: Tensor | None = None
        self.counts: Tensor | None = None
        self.scatter: Tensor | None = None

    def update(self, g: Tensor, y: Tensor) -> None:
        """Add vectors ``g`` (n, D) with class labels ``y`` (n,) int64 >= 0."""
        import torch

        if g.shape[0] == 0:
            return
        y = y.to(device=g.device, dtype=torch.int64)
        k = int(y.max()) + 1
        if self.shift is None:
            self.shift = g.mean(dim=0)
            self.sums = g.new_zeros((k, g.shape[1]))
            self.counts = torch.zeros(k, dtype=torch.int64, device=g.device)
            self.scatter = g.new_zeros((g.shape[1], g.shape[1]))
        assert self.sums is not None and self.counts is not None and self.scatter is not None
        if k > self.sums.shape[0]:
            grow = k - self.sums.shape[0]
            self.sums = torch.cat([self.sums, self.sums.new_zeros((grow, g.shape[1]))])
            self.counts = torch.cat([self.counts, self.counts.new_zeros(grow)])
        c = g - self.shift
        self.scatter += c.T @ c
        self.sums.index_add_(0, y, c)
        self.counts += torch.bincount(y, minlength=self.counts.shape[0])

    def finish(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(classes (K',) int64, means (K', D), covariance (D, D))``, float64 NumPy.

        The classes with at least one vector, their means and the tied maximum-likelihood
        covariance of the class-centred vectors (divided by N).
        """
        if self.counts is None or self.shift is None or self.sums is None:
            raise ValueError("no vector was added")
        assert self.scatter is not None
        counts = self.counts.cpu().numpy()
        seen = np.flatnonzero(counts > 0)
        n = counts[seen].astype(np.float64)
        centred = self.sums.double().cpu().numpy()[seen] / n[:, None]  # class means minus s
        scatter = self.scatter.double().cpu().numpy()
        within = scatter - (centred.T * n) @ centred
        within = (within + within.T) / (2.0 * n.sum())
        means = centred + self.shift.double().cpu().numpy()
        return seen.astype(np.int64), means, within


def squared_distances(a: Tensor, whitened_means: Tensor) -> Tensor:
    """``||a_i - m_c||^2`` (n, K) of whitened vectors a (n, r) to whitened class means (K, r)."""
    sq = (a * a).sum(dim=1, keepdim=True) - 2.0 * (a @ whitened_means.T)
    return (sq + (whitened_means * whitened_means).sum(dim=1)).clamp_min(0.0)


def closest_class(a: Tensor, whitened_means: Tensor) -> Tensor:
    """Index (n,) of the class mean closest to each whitened vector (no gradient)."""
    return squared_distances(a.detach(), whitened_means).argmin(dim=1)


def input_step(grad: Tensor, std: Sequence[float], *, zero: str) -> Tensor:
    """The signed step ``sign(grad) / std_c`` of an input perturbation (pixel units).

    Parameters
    ----------
    grad : Tensor (n, channels, H, W)
        Gradient of the loss with respect to the normalised input.
    std : sequence of float
        Per-channel standard deviation of the input normalisation.
    zero : {"plus", "zero"}
        The sign of a zero gradient: +1 as the authors' code and OpenOOD
        (``(grad >= 0) * 2 - 1``), or 0 as ``torch.sign`` (pytorch-ood).
    """
    import torch

    if zero == "plus":
        step = torch.where(grad >= 0, 1.0, -1.0).to(grad.dtype)
    else:
        step = torch.sign(grad)
    s = torch.tensor(tuple(std), dtype=step.dtype, device=step.device).view(1, -1, 1, 1)
    return step / s


class ClassGaussianDetector(ModelLevelDetector):
    """Base of the model-level detectors that fit class Gaussians with a tied covariance.

    A subclass says which vectors it fits a Gaussian on (:meth:`_vectors`: one list entry per
    Gaussian) and scores with the helpers below. The fit is one streaming pass over the
    labelled ID training images (:class:`ClassMoments` per Gaussian); classes without a
    training image have no Gaussian (the closest class is taken among the others).

    Attributes
    ----------
    classes_ : ndarray (K',), int64
        The labels with training images.
    means_ : list of ndarray (K', D_l), float64
        Class means of each Gaussian's vectors.
    projections_ : list of ndarray (D_l, r_l), float64
        Whitening projection P_l with ``P_l P_l^T = pinvh(Sigma_l)``, Sigma_l the tied MLE
        covariance.
    """

    fits = True
    state_names: ClassVar[tuple[str, ...]] = ("classes_", "means_", "projections_")

    def describe(self) -> dict[str, Any]:
        """Name, hyperparameters and, once fitted, the fit; ``epsilon`` as a float and
        ``alphas`` as a list of floats, so that a config's ``1`` and ``1.0`` and a JSON round
        trip of a tuple compare equal (the fitted state's file is checked against them)."""
        out = super().describe()
        eps = out.get("epsilon")
        if isinstance(eps, Real) and not isinstance(eps, bool | np.bool_):
            out["epsilon"] = float(eps)
        if LayerWeights().is_satisfied_by(out.get("alphas")):
            out["alphas"] = [float(a) for a in out["alphas"]]
        return out

    def _vectors(self, model: ModelView, x: Tensor) -> tuple[Tensor, list[Tensor]]:
        """Logits (n, K) and each Gaussian's vectors (n, D_l) of images x (in the graph)."""
        raise NotImplementedError  # pragma: no cover

    def _check_labels(self, y: Tensor, num_classes: int) -> None:
        lo, hi = int(y.min()), int(y.max())
        if lo < 0 or hi >= num_classes:
            bad = lo if lo < 0 else hi
            raise InputError(
                f"{self.name}.fit_model: label {bad} outside the head's {num_classes} classes"
            )

    def _fit_model(self, model: ModelView, batches: Batches) -> None:
        import torch

        moments: list[ClassMoments] = []
        with torch.no_grad():
            for x, y in batches():
                if len(y) == 0:
                    continue
                with torch.autocast(x.device.type, enabled=False):
                    logits, vecs = self._vectors(model, float32(x))
                self._check_labels(y, int(logits.shape[1]))
                work = work_dtype(x.device)
                if not moments:
                    moments = [ClassMoments() for _ in vecs]
                for m, v in zip(moments, vecs, strict=True):
                    m.update(v.to(work), y)
        if not moments:
            raise InputError(f"{self.name}.fit_model: no training image to fit on")
        means, projections = [], []
        for m in moments:
            classes, mu, cov = m.finish()
            means.append(mu)
            projections.append(pinv_sqrt(cov))
        self.classes_ = classes
        self.means_ = means
        self.projections_ = projections

    def _gaussians(self, like: Tensor) -> list[tuple[Tensor, Tensor]]:
        """Per Gaussian ``(P (D, r), whitened class means M = mu P (K', r))`` on ``like``'s
        device and dtype (the products cached per fitted tensor)."""
        projections = self.fitted_tensor("projections_", like)
        means = self.fitted_tensor("means_", like)
        cache: dict[Any, Any] = self.__dict__.setdefault("_whitened_cache", {})
        key = (str(like.device), like.dtype)
        hit = cache.get(key)
        if hit is None or hit[0] is not projections:  # refitted or reloaded: recompute
            whitened = [mu @ p for mu, p in zip(means, projections, strict=True)]
            hit = cache[key] = (projections, whitened)
        return list(zip(projections, hit[1], strict=True))

    def _check_dims(
        self, vecs: Sequence[Tensor], gaussians: Sequence[tuple[Tensor, Tensor]]
    ) -> None:
        dims = [int(v.shape[1]) for v in vecs]
        fitted = [int(p.shape[0]) for p, _ in gaussians]
        if dims != fitted:
            raise InputError(
                f"{self.name}.score_batch: the model's features have dimensions {dims}, the "
                f"fitted state {fitted} (fitted on another model?)"
            )

    @staticmethod
    def half_min_distance(g: Tensor, gaussian: tuple[Tensor, Tensor]) -> Tensor:
        """``0.5 min_c MD_c(g)`` (n,) of vectors g (n, D) in the Gaussian's dtype."""
        p, wm = gaussian
        return 0.5 * squared_distances(g.to(p.dtype) @ p, wm).min(dim=1).values

    def _perturbation_steps(
        self,
        model: ModelView,
        x: Tensor,
        read: Callable[[Tensor], list[Tensor]],
        gaussians: Sequence[tuple[Tensor, Tensor]],
        zero: str,
    ) -> list[Tensor]:
        """For each Gaussian l, the step ``sign(grad_x L_l) / std`` (pixel units), with
        ``L_l = sum_i 0.5 MD_{c_i}(g_l(x_i))`` and c_i the class closest to g_l(x_i).

        ``read(x)`` gives the vectors g_l (n, D_l) of images x, in the autograd graph. One
        forward pass, one backward pass per Gaussian (the graph kept between them). Runs in
        float32 (float64 for float64 inputs) even under autocast and inference mode.
        """
        import torch

        steps = []
        with (
            torch.autocast(x.device.type, enabled=False),
            torch.inference_mode(False),
            torch.enable_grad(),
        ):
            xg = float32(x).detach().clone().requires_grad_(True)
            vecs = read(xg)
            self._check_dims(vecs, gaussians)
            for i, (g, (p, wm)) in enumerate(zip(vecs, gaussians, strict=True)):
                if torch.is_inference(p):  # cached under inference mode: autograd refuses it
                    p, wm = p.clone(), wm.clone()
                a = g.to(p.dtype) @ p
                c = closest_class(a, wm)
                loss = 0.5 * ((a - wm[c]) ** 2).sum()
                (grad,) = torch.autograd.grad(loss, xg, retain_graph=i < len(vecs) - 1)
                steps.append(input_step(grad.detach(), model.std, zero=zero))
        return steps


class LayerGaussianDetector(ClassGaussianDetector):
    """Base of the detectors with one class Gaussian per block, weighted by ``alphas``.

    ``alphas[l]`` weighs the score of the l-th block of the adapter's ``block_names`` (shallow
    to deep); blocks past the end of the list, or with weight 0, are neither fitted nor
    scored. ``alphas=None`` means the subclass's default (:attr:`all_blocks_by_default`:
    weight 1 on every block, or on the first block only).
    """

    model_requires = frozenset({"layers"})
    #: What ``alphas=None`` means: weight 1 on every block (True) or on the first only (False).
    all_blocks_by_default: ClassVar[bool] = True
    alphas: list[float] | tuple[float, ...] | None

    def weighted_blocks(self, model: ModelView) -> tuple[list[str], list[float]]:
        """The blocks scored (names) and their weights, in block order (nonzero weights)."""
        names = model.block_names()
        if self.alphas is None:
            weights = [1.0] * (len(names) if self.all_blocks_by_default else min(1, len(names)))
        else:
            weights = [float(a) for a in self.alphas]
        used = [(n, w) for n, w in zip(names, weights, strict=False) if w != 0.0]
        return [n for n, _ in used], [w for _, w in used]

    def check(self, model: ModelView) -> None:
        """:meth:`ModelLevelDetector.check`, and ``alphas`` no longer than the model's blocks.

        Raises
        ------
        InputError
            As the base, or more weights in ``alphas`` than the model has blocks.
        """
        super().check(model)
        n_blocks = len(model.block_names())
        if self.alphas is not None and len(self.alphas) > n_blocks:
            raise InputError(
                f"{self.name}: alphas has {len(self.alphas)} weights, model {model.name!r} has "
                f"{n_blocks} blocks ({', '.join(model.block_names())})"
            )

    def read_blocks(
        self, model: ModelView, x: Tensor, names: Sequence[str]
    ) -> tuple[Tensor, list[Tensor]]:
        """Logits and the pooled outputs (n, D_l) of the blocks ``names`` (in the graph)."""
        logits, _, outs = model.layer_outputs(x, names=list(names))
        return logits, [pool_layer(o) for o in outs]

    def _vectors(self, model: ModelView, x: Tensor) -> tuple[Tensor, list[Tensor]]:
        return self.read_blocks(model, x, self.weighted_blocks(model)[0])

    def weighted_scores(self, model: ModelView, x: Tensor) -> Tensor:
        """``sum_l alpha_l max_c -0.5 MD_lc(x)`` without input pre-processing (one forward
        pass, float32 even under mixed precision), in the work dtype."""
        import torch

        names, weights = self.weighted_blocks(model)
        gaussians = self._gaussians(torch.empty(0, dtype=work_dtype(x.device), device=x.device))
        total = torch.zeros(x.shape[0], dtype=work_dtype(x.device), device=x.device)
        with torch.no_grad(), torch.autocast(x.device.type, enabled=False):
            vecs = self.read_blocks(model, float32(x), names)[1]
            self._check_dims(vecs, gaussians)
            for w, g, gauss in zip(weights, vecs, gaussians, strict=True):
                total -= w * self.half_min_distance(g, gauss)
        return total
