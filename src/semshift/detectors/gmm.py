"""GMM: log-likelihood of the feature under one full-covariance Gaussian per class."""

from __future__ import annotations

import math
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from numbers import Real
from typing import Any, ClassVar

import numpy as np
import scipy.linalg
import scipy.sparse
from numpy.typing import NDArray
from threadpoolctl import threadpool_limits

from . import _common
from ._base import Detector, Float64Array, Inputs, require_class_counts
from ._common import F32, F64, class_sums, logsumexp, row_blocks
from ._many import default_threads
from ._params import Interval, ParamConstraints, SearchSpace
from ._registry import register_detector
from ._scan import TrainRows, scan_request, scan_scores, train_rows
from ._shared import Request, digest

__all__ = ["GMM"]

_EPS64 = float(np.finfo(np.float64).eps)
#: Unit roundoff of float32.
_U32 = float(np.finfo(np.float32).eps) / 2
#: Classes whose log density may lie within this many nats of a row's best are recomputed in
#: float64 (exp(-50) ~ 2e-22 per class left out).
_MARGIN = 50.0
#: A class group where more than this share of (row, class) pairs needs recomputing is
#: recomputed whole, one float64 product instead of one per class.
_DENSE_SHARE = 0.05


def _class_spectrum(x: Any, rows: NDArray[np.intp], mean: F64) -> tuple[F64, F64, F64 | None]:
    """Non-zero eigenvalues (r,) and eigenvectors (D, r) of the covariance of ``x[rows]``, and
    (with fewer rows than dimensions) the coefficients B (n_c, r) with ``vecs = A^T B``.

    The covariance is ``A^T A / n_c`` with A the rows centred on ``mean``. With fewer rows than
    dimensions, from the thin SVD of A (rank at most n_c - 1: O(n_c^2 D) instead of a D x D
    eigenproblem); otherwise from ``eigh`` of the scatter matrix, accumulated in row blocks.
    Eigenvalues at or below ``max eig * max(n_c, D) * eps`` count as zero, as
    ``numpy.linalg.matrix_rank`` does; the eigenvectors are orthonormal to working precision.
    """
    n_c, d = rows.size, int(x.shape[1])
    if n_c < d:
        a = np.asarray(x[rows], dtype=np.float64) - mean
        u, s, vt = scipy.linalg.svd(a, full_matrices=False, check_finite=False)
        keep = s > (s[0] if s.size else 0.0) * max(n_c, d) * _EPS64
        coef = u[:, keep] / s[keep]  # vt = diag(1 / s) u^T a
        return s[keep] ** 2 / n_c, np.ascontiguousarray(vt[keep].T), coef
    acc = np.zeros((d, d), dtype=np.float64, order="F")
    for sl in row_blocks(n_c, 16 * d):
        a = np.asarray(x[rows[sl]], dtype=np.float64) - mean
        acc = scipy.linalg.blas.dsyrk(1.0, a.T, beta=1.0, c=acc, overwrite_c=1)
    lam, vecs = scipy.linalg.eigh(np.triu(acc) + np.triu(acc, 1).T, check_finite=False)
    lam /= n_c
    keep = lam > np.abs(lam).max() * d * _EPS64
    return lam[keep], vecs[:, keep], None


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
    within ``reg`` of each other's scale, so the float32 products of a first pass only select,
    with a bound on their error, the classes that matter to each row (within 50 nats of its
    best); those are recomputed in float64 (see ``_score``). When every class has fewer
    training rows than dimensions, the first pass comes from the shared scan of the training
    rows (docs/methods.md#shared-scans; the product knn and grood use too) by a sparse product
    with the SVD coefficients of each class, with its own error bound (``_fit_scan``): the
    scores are the same float64 ones.

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
        # every class with fewer rows than dimensions: the shared scan (docs/methods.md#gmm)
        self._rows: TrainRows | None = train_rows(inputs) if counts.max() < d else None
        # distances are taken from the global mean (smaller numbers, less cancellation)
        self._center = counts @ self.means_ / n if self._rows is None else self._rows.center
        self._shifted = self.means_ - self._center
        self._shifted_sq = (self._shifted**2).sum(axis=1)
        self._shifted_norm = np.sqrt(self._shifted_sq)
        self._shifted32 = self._shifted.astype(np.float32)
        order = np.argsort(y, kind="stable")
        starts = np.concatenate([[0], np.cumsum(counts)])

        def whitening(c: int) -> tuple[F64, F64, float, F64 | None]:
            lam, vecs, coef = _class_spectrum(x, order[starts[c] : starts[c + 1]], self.means_[c])
            scale = np.sqrt(1.0 / reg - 1.0 / (lam + reg))
            q = vecs * scale
            log_det = float(np.log(lam + reg).sum()) + (d - lam.size) * math.log(reg)
            return q, self._shifted[c] @ q, log_det, None if coef is None else coef * scale

        # Classes in parallel threads, each decomposition on one BLAS thread: small LAPACK
        # calls gain nothing from threads and stall on a busy machine (as splits/_ann.py).
        with (
            threadpool_limits(limits=1, user_api="blas"),
            ThreadPoolExecutor(default_threads()) as pool,
        ):
            parts, offsets, log_dets, coefs = zip(
                *pool.map(whitening, range(n_classes)), strict=True
            )
        blocks = list(parts)
        del parts
        self.ranks_ = np.array([q.shape[1] for q in blocks], dtype=np.int64)
        self._col_bounds = np.concatenate([[0], np.cumsum(self.ranks_)])
        if self._rows is not None:
            self._fit_scan(coefs, order, counts)
        del coefs
        # Q^T (sum r_c, D): a class's columns of Q are contiguous rows here; each block is
        # released once copied, so Q is held about once, not twice
        self._qt = np.empty((int(self._col_bounds[-1]), d), dtype=np.float64)
        for c in range(n_classes):
            self._qt[self._col_bounds[c] : self._col_bounds[c + 1]] = blocks[c].T
            blocks[c] = None
        del blocks
        self._offsets = np.concatenate(offsets)
        # float32 Q for the first pass of scoring, the norms of its columns for the error bound
        if self._rows is None:
            self._qt32 = self._qt.astype(np.float32)
            self._q_norms = np.sqrt(np.einsum("ij,ij->i", self._qt, self._qt))
        self._q_sq_norms = np.zeros(n_classes, dtype=np.float64)
        nz = self.ranks_ > 0
        if nz.any():
            self._q_sq_norms[nz] = np.add.reduceat(self._q_norms**2, self._col_bounds[:-1][nz])
        self.log_dets_ = np.array(log_dets, dtype=np.float64)
        self.log_weights_ = np.log(counts / n)
        # log pi_c - (log det + D log 2 pi) / 2: the part of the log density that is not MD
        self._constant = self.log_weights_ - 0.5 * (self.log_dets_ + d * math.log(2 * math.pi))
        if self._rows is not None:
            self._token = digest("gmm", self.reg, self._qt, self._constant, self._rows.token)

    def _groups(self, budget: int) -> Iterator[tuple[int, int]]:
        """Consecutive class ranges whose columns of Q number at most ``budget`` (or one class)."""
        bounds, n_classes, start = self._col_bounds, self.means_.shape[0], 0
        while start < n_classes:
            stop = int(np.searchsorted(bounds, bounds[start] + budget, side="right")) - 1
            stop = min(max(stop, start + 1), n_classes)
            yield start, stop
            start = stop

    def _score(self, inputs: Inputs) -> Float64Array:
        """Two passes per row block. First, every (row, class) log density from float32
        products, with a bound on its error (below); then, in float64, every class that may
        come within ``_MARGIN`` nats of the row's best. The classes left as approximated lie more
        than ``_MARGIN`` below the best, so each changes the sum by under exp(-50) of it: the
        score is the float64 one (the tests check it against a float64 computation).

        With hb = h - centre and u the float32 unit roundoff, a float32 product hb . v (inputs
        rounded, D terms summed) is off by at most beta ||v||, beta = (D + 3) u ||hb||. The
        log density -MD/2 + const, MD = (||hb||^2 - 2 hb . s_c + ||s_c||^2) / reg -
        sum_j p_j^2, p_j = hb . q_j - s_c . q_j, is then off by at most
        beta ||s_c|| / reg + beta sum_j |p_j| ||q_j|| + beta^2 sum_j ||q_j||^2 / 2.
        """
        if self._rows is not None:
            return scan_scores(inputs, self.requests()[0])
        h = inputs.get("features")
        n, d = (int(s) for s in h.shape)
        out = np.empty(n, dtype=np.float64)
        for sl in row_blocks(n, 16 * d + 48 * self.means_.shape[0]):
            hb = np.asarray(h[sl], dtype=np.float64) - self._center
            out[sl] = self._score_block(hb, None)
        return out

    def requests(self) -> tuple[Request, ...]:
        if getattr(self, "_rows", None) is None:
            return ()
        assert self._rows is not None
        return (scan_request(self._rows, self._token, self._reduce),)

    def _reduce(self, hc: F64, prod: F32) -> Float64Array:
        """Scores of one block of the shared scan: the first-pass projections ``(h - c).q_j``
        from the product P with the training rows, ``sum_i P_i B_ij`` (see ``_fit_scan``)."""
        proj = np.asarray((self._coef_t @ prod.T).T)
        return self._score_block(hc, proj)

    def _fit_scan(
        self, coefs: tuple[F64 | None, ...], order: NDArray[np.intp], counts: Any
    ) -> None:
        """The first pass from the shared scan's product P of the rows centred at c.

        With A_c = U S V^T the centred rows of class c (n_c < D), its eigenvectors are
        ``V = A_c^T U S^-1``, so ``(h - c).q_j = sum_i (h - c).(x_i - mu_c) B_ij`` (B = U S^-1
        times the scale of q_j, rows i of class c), and ``(h - c).(x_i - mu_c) = P_i - (h -
        c).(mu_c - c)``, whose second part vanishes in the sum (the columns of U sum to zero
        over the centred rows): the first pass costs one sparse product with B instead of a
        product with the D x sum r_c matrix Q. Each P_i is off by at most ``beta ||x_i - c||``
        (beta as in ``_score``), so ``kappa_j = sum_i |B_ij| ||x_i - c||`` replaces ``||q_j||``
        in the error bound, plus the rounding of the column sums of B that the vanishing term
        leaves (``|sum_i B_ij| ||mu_c - c|| / ((D + 3) u)``).
        """
        assert self._rows is not None
        starts = np.concatenate([[0], np.cumsum(counts)])
        qcols, trows, vals = [], [], []
        for c, coef in enumerate(coefs):
            assert coef is not None
            r = coef.shape[1]
            qcols.append(np.repeat(self._col_bounds[c] + np.arange(r), coef.shape[0]))
            trows.append(np.tile(order[starts[c] : starts[c + 1]], r))
            vals.append(coef.T.ravel())
        n_train, d = (int(v) for v in self._rows.rows32.shape)
        shape = (int(self._col_bounds[-1]), n_train)
        b_t = scipy.sparse.csr_matrix(
            (np.concatenate(vals), (np.concatenate(qcols), np.concatenate(trows))), shape=shape
        )
        self._coef_t = b_t
        x_norms = np.empty(n_train, dtype=np.float64)
        for sl in row_blocks(n_train, 8 * d):
            x_norms[sl] = np.linalg.norm(self._rows.rows32[sl].astype(np.float64), axis=1)
        col_class = np.repeat(np.arange(counts.size), self.ranks_)
        leftover = np.abs(b_t @ np.ones(n_train)) * self._shifted_norm[col_class]
        self._q_norms = abs(b_t) @ x_norms + leftover / ((d + 3) * _U32)

    def _score_block(self, hb: F64, proj_all: F64 | None) -> Float64Array:
        """Log densities of the rows ``hb`` (h minus the centre); ``proj_all`` the first-pass
        projections ``hb.q_j`` of every column of Q (the shared scan), or None (float32
        products with Q here)."""
        d = int(hb.shape[1])
        reg = float(self.reg)
        beta_unit = 1.01 * (d + 3) * _U32  # 1 % on top for the float64 steps
        hb32 = hb.astype(np.float32)
        rows = hb.shape[0]
        hb_sq = np.einsum("ij,ij->i", hb, hb)
        beta = beta_unit * np.sqrt(hb_sq)
        # ||h - mu_c||^2 / reg for every class, from float32 products
        md = (hb32 @ self._shifted32.T).astype(np.float64)
        md *= -2.0
        md += hb_sq[:, None]
        md += self._shifted_sq
        md /= reg
        # minus the projected part ||(h - mu_c) Q_c||^2; slack collects sum_j |p_j| ||q_j||
        slack = np.zeros_like(md)
        budget = max(1, _common.BLOCK_BYTES // (8 * rows))
        buf32 = np.empty(rows * budget if proj_all is None else 0, dtype=np.float32)
        buf64 = np.empty(rows * budget, dtype=np.float64)
        abs64 = np.empty(rows * budget, dtype=np.float64)
        for start, stop in self._groups(budget):
            c0, c1 = int(self._col_bounds[start]), int(self._col_bounds[stop])
            if c1 == c0:
                continue
            shape, size = (rows, c1 - c0), rows * (c1 - c0)
            if proj_all is None:
                first = np.matmul(hb32, self._qt32[c0:c1].T, out=buf32[:size].reshape(shape))
            else:
                first = proj_all[:, c0:c1]
            proj = np.subtract(first, self._offsets[c0:c1], out=buf64[:size].reshape(shape))
            classes = np.arange(start, stop)
            classes = classes[self.ranks_[classes] > 0]
            at = self._col_bounds[classes] - c0
            weighted = np.abs(proj, out=abs64[:size].reshape(shape))
            weighted *= self._q_norms[c0:c1]
            slack[:, classes] = np.add.reduceat(weighted, at, axis=1)
            proj *= proj
            md[:, classes] -= np.add.reduceat(proj, at, axis=1)
        slack += self._shifted_norm / reg
        slack *= beta[:, None]
        slack += 0.5 * beta[:, None] ** 2 * self._q_sq_norms
        slack += 1e-12 * (np.abs(md) + 1.0)  # float64 rounding of the terms of MD
        log_density = self._constant - 0.5 * md
        del md
        best = log_density.argmax(axis=1)
        at_best = np.arange(rows), best
        floor = log_density[at_best] - slack[at_best]
        recompute = log_density + slack >= floor[:, None] - _MARGIN
        del slack
        for start, stop in self._groups(budget):
            self._recompute(hb, hb_sq, log_density, recompute, start, stop)
        return logsumexp(log_density)

    def _recompute(
        self,
        hb: F64,
        hb_sq: F64,
        log_density: F64,
        recompute: NDArray[np.bool_],
        start: int,
        stop: int,
    ) -> None:
        """Overwrite ``log_density[:, start:stop]`` where ``recompute`` says, in float64.

        A group where more than ``_DENSE_SHARE`` of the pairs need it is recomputed whole (one
        product); otherwise each class takes its own rows.
        """
        reg = float(self.reg)
        c0, c1 = int(self._col_bounds[start]), int(self._col_bounds[stop])
        sub = recompute[:, start:stop]
        if sub.mean() > _DENSE_SHARE:
            md = hb @ self._shifted[start:stop].T
            md *= -2.0
            md += hb_sq[:, None]
            md += self._shifted_sq[start:stop]
            md /= reg
            if c1 > c0:
                proj = hb @ self._qt[c0:c1].T
                proj -= self._offsets[c0:c1]
                proj *= proj
                classes = np.arange(start, stop)
                classes = classes[self.ranks_[classes] > 0]
                at = self._col_bounds[classes] - c0
                md[:, classes - start] -= np.add.reduceat(proj, at, axis=1)
            log_density[:, start:stop] = self._constant[start:stop] - 0.5 * md
            return
        classes, members = np.nonzero(sub.T)
        if classes.size == 0:
            return
        classes += start
        cuts = np.flatnonzero(np.diff(classes)) + 1
        for c, r in zip(classes[np.r_[0, cuts]], np.split(members, cuts), strict=True):
            k0, k1 = int(self._col_bounds[c]), int(self._col_bounds[c + 1])
            rows = hb[r]
            md = (hb_sq[r] - 2.0 * (rows @ self._shifted[c]) + self._shifted_sq[c]) / reg
            if k1 > k0:
                proj = rows @ self._qt[k0:k1].T
                proj -= self._offsets[k0:k1]
                md -= np.einsum("ij,ij->i", proj, proj)
            log_density[r, c] = self._constant[c] - 0.5 * md
