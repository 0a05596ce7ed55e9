"""GMM: log-likelihood of the feature under one full-covariance Gaussian per class."""

from __future__ import annotations

import math
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from numbers import Real
from typing import Any, ClassVar

import numpy as np
import scipy.linalg
from numpy.typing import NDArray
from threadpoolctl import threadpool_limits

from . import _common
from ._base import Detector, Float64Array, Inputs, require_class_counts
from ._common import F64, class_sums, logsumexp, row_blocks
from ._many import default_threads
from ._params import Interval, ParamConstraints, SearchSpace
from ._registry import register_detector

__all__ = ["GMM"]

_EPS64 = float(np.finfo(np.float64).eps)


def _class_spectrum(x: Any, rows: NDArray[np.intp], mean: F64) -> tuple[F64, F64]:
    """Non-zero eigenvalues (r,) and eigenvectors (D, r) of the covariance of ``x[rows]``.

    The covariance is ``A^T A / n_c`` with A the rows centred on ``mean``. With fewer rows than
    dimensions, from the thin SVD of A (rank at most n_c - 1: O(n_c^2 D) instead of a D x D
    eigenproblem); otherwise from ``eigh`` of the scatter matrix, accumulated in row blocks.
    Eigenvalues at or below ``max eig * max(n_c, D) * eps`` count as zero, as
    ``numpy.linalg.matrix_rank`` does; the eigenvectors are orthonormal to working precision.
    """
    n_c, d = rows.size, int(x.shape[1])
    if n_c < d:
        a = np.asarray(x[rows], dtype=np.float64) - mean
        _, s, vt = scipy.linalg.svd(a, full_matrices=False, check_finite=False)
        keep = s > (s[0] if s.size else 0.0) * max(n_c, d) * _EPS64
        return s[keep] ** 2 / n_c, np.ascontiguousarray(vt[keep].T)
    acc = np.zeros((d, d), dtype=np.float64, order="F")
    for sl in row_blocks(n_c, 16 * d):
        a = np.asarray(x[rows[sl]], dtype=np.float64) - mean
        acc = scipy.linalg.blas.dsyrk(1.0, a.T, beta=1.0, c=acc, overwrite_c=1)
    lam, vecs = scipy.linalg.eigh(np.triu(acc) + np.triu(acc, 1).T, check_finite=False)
    lam /= n_c
    keep = lam > np.abs(lam).max() * d * _EPS64
    return lam[keep], vecs[:, keep]


@register_detector
class GMM(Detector):
    """Log-likelihood ``log sum_c pi_c N(h | mu_c, Sigma_c + reg I)``; higher = more ID.

    One Gaussian per class of the training labels on the penultimate features: mean mu_c,
    covariance Sigma_c (divided by n_c) plus ``reg`` on the diagonal, mixing weight
    pi_c = n_c / n; the score is the mixture's log density, normalising constants included. This
    is pytorch-ood's ``GMM`` (which returns minus this value). Every class in [0, C) needs a
    training sample (one sample gives the covariance reg I).

    Computed without a D x D inverse per class: with Sigma_c = U diag(lambda) U^T (its r_c
    non-zero eigenpairs),
    ``(Sigma_c + reg I)^-1 = I / reg - Q_c Q_c^T``, ``Q_c = U diag(sqrt(1 / reg - 1 /
    (lambda + reg)))``, so the squared Mahalanobis distance is ``||h - mu_c||^2 / reg -
    ||(h - mu_c) Q_c||^2`` and the log-determinant ``sum log(lambda + reg) + (D - r_c) log
    reg``. With fewer samples per class than dimensions, r_c < n_c and scoring costs
    ``n D sum_c r_c`` instead of ``n C D^2`` (pytorch-ood's batched precision product), with
    ``D sum_c r_c`` stored instead of C D x D precision matrices. The two terms cancel to
    within ``reg`` of each other's scale, so both are computed in float64.

    OpenOOD's ``gmm`` postprocessor is a different model: an unsupervised
    ``sklearn.mixture.GaussianMixture`` (EM, a configured number of components, one *tied*
    covariance) fitted on features first reduced by a per-layer transform (PCA, LDA or none),
    possibly over several layers combined with weights; its score is
    ``log(sum_k pi_k exp(-MD_k / 2) + 1e-40)`` without the normalising constants. semshift
    follows pytorch-ood: supervised components (the classes), per-class covariances,
    penultimate features.

    Parameters
    ----------
    reg : float, default 1e-6
        Added to the diagonal of each class covariance (pytorch-ood's default), so it is
        invertible with fewer samples than dimensions.

    Attributes
    ----------
    means_ : float64 array (C, D)
        Class means mu_c.
    log_weights_ : float64 array (C,)
        log pi_c.
    log_dets_ : float64 array (C,)
        log det(Sigma_c + reg I).
    ranks_ : int array (C,)
        r_c, the rank of each class covariance.

    Raises
    ------
    InputError
        (fit) A class in [0, C) has no training sample (C = largest label + 1).

    Examples
    --------
    >>> import numpy as np
    >>> from semshift import detectors
    >>> h = np.array([[-1.0, 0.0], [1.0, 0.0], [9.0, 10.0], [11.0, 10.0]])
    >>> det = detectors.get("gmm", reg=1.0).fit(features=h, labels=np.array([0, 0, 1, 1]))
    >>> det.ranks_, det.log_dets_.round(4)  # Sigma_c = diag(1, 0): det(Sigma_c + I) = 2
    (array([1, 1]), array([0.6931, 0.6931]))
    >>> det.score(features=np.array([[0.0, 0.0]])).round(4)  # log(N(0 | 0, diag(2, 1)) / 2)
    array([-2.8776])

    References
    ----------
    .. [1] K. Lee, K. Lee, H. Lee and J. Shin, "A Simple Unified Framework for Detecting
       Out-of-Distribution Samples and Adversarial Attacks", NeurIPS 2018 (class-conditional
       Gaussians on deep features; GMM generalises their tied covariance to one per class).
    """

    name = "gmm"
    fit_requires = frozenset({"features", "labels"})
    score_requires = frozenset({"features"})
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "reg": [Interval(Real, 0, None, closed="neither")]
    }
    #: covariance shrinkage by decades from pytorch-ood's default
    search_space: ClassVar[SearchSpace] = {"reg": (1e-6, 1e-4, 1e-2, 1.0)}

    def __init__(self, *, reg: float = 1e-6) -> None:
        self.reg = reg

    def _fit(self, inputs: Inputs) -> None:
        x, y = inputs.get("features"), inputs.get("labels")
        n, d = (int(s) for s in x.shape)
        n_classes = int(inputs.n_classes or 0)
        counts = np.bincount(y, minlength=n_classes)
        require_class_counts(f"{self.name}.fit", counts, "training samples")
        reg = float(self.reg)
        self.means_ = class_sums(x, y, n_classes) / counts[:, None]
        # distances are taken from the global mean (smaller numbers, less cancellation)
        self._center = counts @ self.means_ / n
        self._shifted = self.means_ - self._center
        self._shifted_sq = (self._shifted**2).sum(axis=1)
        order = np.argsort(y, kind="stable")
        starts = np.concatenate([[0], np.cumsum(counts)])

        def whitening(c: int) -> tuple[F64, F64, float]:
            lam, vecs = _class_spectrum(x, order[starts[c] : starts[c + 1]], self.means_[c])
            q = vecs * np.sqrt(1.0 / reg - 1.0 / (lam + reg))
            log_det = float(np.log(lam + reg).sum()) + (d - lam.size) * math.log(reg)
            return q, self._shifted[c] @ q, log_det

        # Classes in parallel threads, each decomposition on one BLAS thread: small LAPACK
        # calls gain nothing from threads and stall on a busy machine (as splits/_ann.py).
        with (
            threadpool_limits(limits=1, user_api="blas"),
            ThreadPoolExecutor(default_threads()) as pool,
        ):
            blocks, offsets, log_dets = zip(*pool.map(whitening, range(n_classes)), strict=True)
        ranks = [q.shape[1] for q in blocks]
        self._q = np.ascontiguousarray(np.concatenate(blocks, axis=1))  # (D, sum r_c)
        del blocks
        self._offsets = np.concatenate(offsets)
        self.ranks_ = np.array(ranks, dtype=np.int64)
        self._col_bounds = np.concatenate([[0], np.cumsum(self.ranks_)])
        self.log_dets_ = np.array(log_dets, dtype=np.float64)
        self.log_weights_ = np.log(counts / n)
        # log pi_c - (log det + D log 2 pi) / 2: the part of the log density that is not MD
        self._constant = self.log_weights_ - 0.5 * (self.log_dets_ + d * math.log(2 * math.pi))

    def _groups(self, budget: int) -> Iterator[tuple[int, int]]:
        """Consecutive class ranges whose columns of Q number at most ``budget`` (or one class)."""
        bounds, n_classes, start = self._col_bounds, self.means_.shape[0], 0
        while start < n_classes:
            stop = int(np.searchsorted(bounds, bounds[start] + budget, side="right")) - 1
            stop = min(max(stop, start + 1), n_classes)
            yield start, stop
            start = stop

    def _score(self, inputs: Inputs) -> Float64Array:
        h = inputs.get("features")
        n, d = (int(s) for s in h.shape)
        n_classes = self.means_.shape[0]
        reg = float(self.reg)
        out = np.empty(n, dtype=np.float64)
        for sl in row_blocks(n, 16 * d + 24 * n_classes):
            hb = np.asarray(h[sl], dtype=np.float64) - self._center
            rows = hb.shape[0]
            # ||h - mu_c||^2 / reg, every class at once
            md = (hb**2).sum(axis=1)[:, None] - 2.0 * (hb @ self._shifted.T)
            md += self._shifted_sq
            md /= reg
            budget = max(1, _common.BLOCK_BYTES // (8 * rows))
            for start, stop in self._groups(budget):
                c0, c1 = int(self._col_bounds[start]), int(self._col_bounds[stop])
                if c1 == c0:
                    continue
                proj = hb @ self._q[:, c0:c1]
                proj -= self._offsets[c0:c1]
                proj *= proj
                classes = np.arange(start, stop)
                classes = classes[self.ranks_[classes] > 0]
                md[:, classes] -= np.add.reduceat(proj, self._col_bounds[classes] - c0, axis=1)
            out[sl] = logsumexp(self._constant - 0.5 * md)
        return out
