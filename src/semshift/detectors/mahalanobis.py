"""Class-conditional Gaussian detectors: Mahalanobis and relative Mahalanobis (RMD).

Both use one whitening projection P (D, r) with ``P P^T = pinv(Sigma)``, so the squared
Mahalanobis distance to every class mean is ``||a - m_c||^2`` with ``a = (h - mu) P`` and
``m_c = (mu_c - mu) P``; scoring a block costs two matrix products, not a per-class inverse.
"""

from __future__ import annotations

import numpy as np

from ._base import Detector, Float64Array, Inputs, require_class_counts
from ._common import F64, class_sums, f32, pinv_sqrt, row_blocks, scatter_matrix
from ._registry import register_detector
from ._shared import digest

__all__ = ["RMD", "Mahalanobis"]


@register_detector
class Mahalanobis(Detector):
    """Mahalanobis score ``max_c -(h - mu_c)^T Sigma^+ (h - mu_c)``; higher = more ID.

    mu_c are the class means of the training features and Sigma the tied covariance of
    ``h - mu_y`` (divided by n, as sklearn's ``EmpiricalCovariance``); Sigma^+ is its
    pseudo-inverse (eigenvalues below ``max eig * D * eps`` dropped, as ``scipy.linalg.pinvh``).
    No input pre-processing (the paper's noise step needs the network). Covariance in float64,
    projections in float32 blocks.

    Attributes
    ----------
    means_ : float64 array (C, D)
        Class means.
    projection_ : float32 array (D, r)
        Whitening projection P of the tied covariance.

    Raises
    ------
    InputError
        (fit) A class in [0, C) has no training sample (C = largest label + 1).

    References
    ----------
    .. [1] K. Lee, K. Lee, H. Lee and J. Shin, "A Simple Unified Framework for Detecting
       Out-of-Distribution Samples and Adversarial Attacks", NeurIPS 2018.
    """

    name = "mahalanobis"
    fit_requires = frozenset({"features", "labels"})
    score_requires = frozenset({"features"})

    def __init__(self) -> None:
        pass

    def _fit(self, inputs: Inputs) -> None:
        x, y = inputs.get("features"), inputs.get("labels")
        n_classes = int(inputs.n_classes or 0)
        counts = np.bincount(y, minlength=n_classes)
        require_class_counts(f"{self.name}.fit", counts, "training samples")
        self.means_ = class_sums(x, y, n_classes) / counts[:, None]
        self.center_ = counts @ self.means_ / x.shape[0]
        self._within = scatter_matrix(x, self.means_, y) / x.shape[0]
        self.projection_ = f32(pinv_sqrt(self._within))
        self._class_proj = f32((self.means_ - self.center_) @ self.projection_.astype(np.float64))
        self._class_sqnorm = (self._class_proj.astype(np.float64) ** 2).sum(axis=1)
        self._counts = counts
        # mahalanobis and rmd fitted on the same data share min_c MD_c at score time
        self._share_token = digest(self.center_, self.projection_, self._class_proj)

    def _min_distance(self, hb: F64) -> F64:
        """``min_c MD_c(h)`` for a float64 block of features."""
        a = f32(hb - self.center_) @ self.projection_
        cross = (a @ self._class_proj.T).astype(np.float64)
        best = (2.0 * cross - self._class_sqnorm).max(axis=1)
        return (a.astype(np.float64) ** 2).sum(axis=1) - best

    def _block_rows(self, n: int, d: int) -> list[slice]:
        r = self.projection_.shape[1]
        return list(row_blocks(n, 8 * d + 12 * r + 8 * self._class_proj.shape[0]))

    def _min_distances(self, inputs: Inputs) -> F64:
        """``min_c MD_c(h)`` of every score row (n,), shared with rmd fitted alike."""

        def compute() -> F64:
            h = inputs.get("features")
            out = np.empty(h.shape[0], dtype=np.float64)
            for sl in self._block_rows(h.shape[0], h.shape[1]):
                out[sl] = self._min_distance(np.asarray(h[sl], dtype=np.float64))
            return out

        return inputs.share(("mahalanobis_min", self._share_token), compute)

    def _score(self, inputs: Inputs) -> Float64Array:
        return -self._min_distances(inputs)


@register_detector
class RMD(Mahalanobis):
    """Relative Mahalanobis ``max_c -(MD_c(h) - MD_0(h))``; higher = more in-distribution.

    MD_c as in :class:`Mahalanobis`; MD_0 uses the global mean and the global covariance of the
    training features (obtained exactly as the tied within-class covariance plus the
    between-class scatter, saving a pass over the data).

    Attributes
    ----------
    global_projection_ : float32 array (D, r0)
        Whitening projection of the global covariance.

    References
    ----------
    .. [1] J. Ren, S. Fort, J. Liu, A. G. Roy, S. Padhy and B. Lakshminarayanan, "A Simple Fix
       to Mahalanobis Distance for Improving Near-OOD Detection", arXiv:2106.09022, 2021.
    """

    name = "rmd"

    def _fit(self, inputs: Inputs) -> None:
        super()._fit(inputs)
        dev = self.means_ - self.center_
        n = float(self._counts.sum())
        total = self._within + (dev.T * self._counts) @ dev / n
        self.global_projection_ = f32(pinv_sqrt(total))

    def _score(self, inputs: Inputs) -> Float64Array:
        h = inputs.get("features")
        md0 = np.empty(h.shape[0], dtype=np.float64)
        for sl in self._block_rows(h.shape[0], h.shape[1]):
            a0 = f32(np.asarray(h[sl], dtype=np.float64) - self.center_) @ self.global_projection_
            md0[sl] = (a0.astype(np.float64) ** 2).sum(axis=1)
        return md0 - self._min_distances(inputs)
