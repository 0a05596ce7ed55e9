"""Class-conditional Gaussian detectors: Mahalanobis and relative Mahalanobis (RMD).

Both use one whitening projection P (D, r) with ``P P^T = pinv(Sigma)``, so the squared
Mahalanobis distance to every class mean is ``||a - m_c||^2`` with ``a = (h - mu) P`` and
``m_c = (mu_c - mu) P``; scoring a block costs two matrix products, not a per-class inverse.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from ._base import Detector, Float64Array, Inputs, require_class_counts
from ._common import F32, F64, class_sums, f32, pinv_sqrt, row_blocks, scatter_matrix
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
    fit_group = "class_statistics"
    score_requires = frozenset({"features"})

    def __init__(self) -> None:
        pass

    def _fit(self, inputs: Inputs) -> None:
        x, y = inputs.get("features"), inputs.get("labels")
        n_classes = int(inputs.n_classes or 0)
        counts = np.bincount(y, minlength=n_classes)
        require_class_counts(f"{self.name}.fit", counts, "training samples")

        def statistics() -> tuple[F64, F64, F64, F32, F32, F64]:
            means = class_sums(x, y, n_classes) / counts[:, None]
            center = counts @ means / x.shape[0]
            within = scatter_matrix(x, means, y) / x.shape[0]
            projection = f32(pinv_sqrt(within))
            class_proj = f32((means - center) @ projection.astype(np.float64))
            return (
                means,
                center,
                within,
                projection,
                class_proj,
                (class_proj.astype(np.float64) ** 2).sum(axis=1),
            )

        # fitted alongside rmd (fit_many), the statistics are computed once; never written to
        stats = inputs.share(("mahalanobis_statistics", n_classes), statistics)
        self.means_, self.center_, self._within, self.projection_ = stats[:4]
        self._class_proj, self._class_sqnorm = stats[4:]
        self._counts = counts
        # mahalanobis and rmd fitted on the same data share min_c MD_c at score time
        self._share_token = digest(self.center_, self.projection_, self._class_proj)

    def _min_distance(self, hb: F64) -> F64:
        """``min_c MD_c(h)`` for a float64 block of features."""
        asq, cross = self._terms(hb)
        return self._minimum(asq, cross)

    def _terms(self, hb: F64) -> tuple[F64, F32]:
        """For ``a = (h - center) P``: ``||a||^2`` (n,) float64 and ``a M^T`` (n, C) float32,
        M the whitened class means, so ``MD_c = ||a||^2 - 2 (a M^T)_c + ||M_c||^2``."""
        a = f32(hb - self.center_) @ self.projection_
        cross = f32(a @ self._class_proj.T)  # float32 already (no copy)
        return (a.astype(np.float64) ** 2).sum(axis=1), cross

    def _minimum(self, asq: F64, cross: F32) -> F64:
        return asq - (2.0 * cross.astype(np.float64) - self._class_sqnorm).max(axis=1)

    def _block_rows(self, n: int, d: int) -> list[slice]:
        r = self.projection_.shape[1]
        return list(row_blocks(n, 8 * d + 12 * r + 8 * self._class_proj.shape[0]))

    def _shared_terms(self, inputs: Inputs) -> tuple[F64, F32]:
        """:meth:`_terms` of every score row, shared with rmd fitted on the same data."""

        def compute() -> tuple[F64, F32]:
            h = inputs.get("features")
            return self._terms(np.asarray(h, dtype=np.float64))

        return inputs.share(("mahalanobis_terms", self._share_token), compute)

    def _min_distances(self, inputs: Inputs) -> F64:
        """``min_c MD_c(h)`` of every score row (n,)."""
        return self._minimum(*self._shared_terms(inputs))

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
    global_projection_ : float32 array (D, r0) or None
        Whitening projection of the global covariance; None when the within-class covariance
        has full rank, where MD_0 follows from the Mahalanobis terms by the Woodbury identity
        (a (C, C) form instead of a second (D, D) product per sample).

    References
    ----------
    .. [1] J. Ren, S. Fort, J. Liu, A. G. Roy, S. Padhy and B. Lakshminarayanan, "A Simple Fix
       to Mahalanobis Distance for Improving Near-OOD Detection", arXiv:2106.09022, 2021.
    """

    name = "rmd"

    def _fit(self, inputs: Inputs) -> None:
        super()._fit(inputs)
        n = float(self._counts.sum())
        d, r = self.projection_.shape
        self._woodbury: F64 | None = None
        self.global_projection_: F32 | None = None
        if r == d:
            # Full-rank within-class covariance S_w = (P P^T)^-1. The global covariance is
            # S_0 = S_w + sum_c pi_c d_c d_c^T (pi_c = n_c / n, d_c = mu_c - center), so in
            # whitened coordinates a = P^T (h - center), with M = the whitened d_c (rows),
            #   MD_0 = a^T (I + M^T Pi M)^-1 a = ||a||^2 - (M a)^T (Pi^-1 + M M^T)^-1 (M a)
            # (Woodbury): M a is the cross term Mahalanobis computes anyway, and the (C, C)
            # form replaces a second (D, D) product.
            m = self._class_proj.astype(np.float64)
            core = m @ m.T
            core[np.diag_indices_from(core)] += n / self._counts
            self._woodbury = scipy.linalg.cho_solve(
                scipy.linalg.cho_factor(core), np.eye(core.shape[0])
            )
        else:
            dev = self.means_ - self.center_
            total = self._within + (dev.T * self._counts) @ dev / n
            self.global_projection_ = f32(pinv_sqrt(total))

    def _score(self, inputs: Inputs) -> Float64Array:
        if self._woodbury is not None:
            asq, cross = self._shared_terms(inputs)
            c = cross.astype(np.float64)
            md0 = asq - np.einsum("ij,ij->i", c @ self._woodbury, c)
            return md0 - self._minimum(asq, cross)
        h = inputs.get("features")
        md0 = np.empty(h.shape[0], dtype=np.float64)
        assert self.global_projection_ is not None
        for sl in self._block_rows(h.shape[0], h.shape[1]):
            a0 = f32(np.asarray(h[sl], dtype=np.float64) - self.center_) @ self.global_projection_
            md0[sl] = (a0.astype(np.float64) ** 2).sum(axis=1)
        return md0 - self._min_distances(inputs)
