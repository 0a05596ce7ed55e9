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
#: Test rows per sparse product of the shared scan's first pass (``GMM._reduce``): the
#: product's operands, 4 (n_train + C + sum r_c) bytes a row, stay in cache.
_SCAN_ROWS = 64


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
    rows (docs/methods.md#shared-scans; the product knn and grood use too): two float32 sparse
    products with the class means and the SVD coefficients of each class, with their own
    error bound (``_fit_scan``), and the float64 recomputation pair by pair: the scores are the
    same float64 ones.

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
        self._offsets = np.concatenate(offsets)
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
        # float32 Q for the first pass of scoring, the norms of its columns for the error bound
        # (the shared scan's first pass has its own, from _fit_scan)
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
            # const - ||s_c||^2 / (2 reg): the first pass's per-class term, in float32
            self._scan_const = (self._constant - (0.5 / reg) * self._shifted_sq).astype(np.float32)
            # the largest of each over the classes, for the first screening (``_scan_slack``)
            self._scan_max = (
                float(self._scan_k.max()),
                float(self._scan_g.max()),
                float(self._scan_a.max()),
                float((self._shifted_norm + self._scan_a).max()),
                float(np.abs(self._scan_const.astype(np.float64)).max()),
            )

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
        From the shared scan, the first pass and its bound are ``_fit_scan``'s, and the sum
        takes the recomputed classes only (the others together under C e^-50 of it).
        """
        if self._rows is not None:
            return scan_scores(inputs, self.requests()[0])
        h = inputs.get("features")
        n, d = (int(s) for s in h.shape)
        out = np.empty(n, dtype=np.float64)
        for sl in row_blocks(n, 16 * d + 48 * self.means_.shape[0]):
            hb = np.asarray(h[sl], dtype=np.float64) - self._center
            out[sl] = self._score_block(hb)
        return out

    def requests(self) -> tuple[Request, ...]:
        if getattr(self, "_rows", None) is None:
            return ()
        assert self._rows is not None
        return (scan_request(self._rows, self._token, self._reduce),)

    def _reduce(self, hc: F64, prod: F32) -> Float64Array:
        """Scores of one block of the shared scan: the first pass (``_scan_first_pass``),
        then in float64 every class that may come within ``_MARGIN`` of a row's best; the
        score is the log-sum-exp of these (each class left out lies more than ``_MARGIN``
        below the best: together they would add under C e^-50 of the sum)."""
        rows, n_classes = int(prod.shape[0]), self.means_.shape[0]
        with np.errstate(over="ignore", invalid="ignore"):  # beyond float32: checked below
            log_density, dot, proj_sq, hb_sq, hb_norm = self._scan_first_pass(hc, prod)
        if not np.isfinite(log_density).all():  # beyond float32 (reg ~1e-30): all in float64
            every_pair = np.ones((rows, n_classes), dtype=np.bool_)
            return self._recompute_and_sum(hc, hb_sq, np.zeros(every_pair.shape), every_pair)
        # the classes within reach of a row's best under the largest bound of any class, then
        # of these the pairs within reach under their own bound (those of the full comparison)
        at = np.arange(rows)
        best = log_density.argmax(axis=0)
        top = log_density[best, at].astype(np.float64)
        reach = top - 2.0 * self._scan_slack(hb_sq, hb_norm, proj_sq.max(axis=0), None, None)
        reach -= _MARGIN
        reach -= 2 * _U32 * np.abs(reach)  # rounded to float32 below, never above
        classes, members = np.nonzero(log_density >= reach.astype(np.float32))
        slack = self._scan_slack(
            hb_sq[members], hb_norm[members], proj_sq[classes, members], dot[classes, members],
            classes,
        )  # fmt: skip
        at_best = self._scan_slack(hb_sq, hb_norm, proj_sq[best, at], dot[best, at], best)
        first = log_density[classes, members].astype(np.float64)
        keep = first + slack >= top[members] - at_best[members] - _MARGIN
        classes, members = classes[keep], members[keep]
        del dot, proj_sq, slack, first
        if classes.size > _DENSE_SHARE * log_density.size:
            recompute = np.zeros((rows, n_classes), dtype=np.bool_)
            recompute[members, classes] = True
            everyone = log_density.T.astype(np.float64)
            return self._recompute_and_sum(hc, hb_sq, everyone, recompute)
        values = self._recompute_pairs(hc, hb_sq, classes, members)
        top = np.full(rows, -np.inf)
        np.maximum.at(top, members, values)
        total = np.bincount(members, weights=np.exp(values - top[members]), minlength=rows)
        return np.log(total) + top

    def _scan_first_pass(self, hc: F64, prod: F32) -> tuple[F32, F32, F32, F64, F64]:
        """The first pass of a block of the shared scan (``_fit_scan``): the log densities
        (C, rows) in a class-major layout, in float32, the float32 hb.s_c and sum_j p_j^2
        (C, rows) they come from, ||hb||^2 and ||hb|| (rows,). Two float32 sparse products on
        sub-blocks of ``_SCAN_ROWS`` rows (their operands stay in cache)."""
        rows, n_train = (int(v) for v in prod.shape)
        n_classes = self.means_.shape[0]
        dot = np.empty((n_classes, rows), dtype=np.float32)  # hb.s_c
        proj_sq = np.empty((n_classes, rows), dtype=np.float32)  # sum_j p_j^2
        buffer = np.empty((n_train + 1) * min(rows, _SCAN_ROWS), dtype=np.float32)
        for r0 in range(0, rows, _SCAN_ROWS):
            r1 = min(rows, r0 + _SCAN_ROWS)
            # [P^T; 1]: the products with the training rows, a row of ones for the offsets
            x = buffer[: (n_train + 1) * (r1 - r0)].reshape(n_train + 1, r1 - r0)
            x[:n_train] = prod[r0:r1].T
            x[n_train] = 1.0
            y = np.asarray(self._scan_w @ x)  # (C + sum r_c, r1 - r0): hb.s_c, then p_j
            dot[:, r0:r1] = y[:n_classes]
            proj = y[n_classes:]
            np.multiply(proj, proj, out=proj)
            proj_sq[:, r0:r1] = self._scan_sum @ proj
        reg = float(self.reg)
        hb_sq = np.einsum("ij,ij->i", hc, hc)
        # -MD / 2 + const, MD = (||hb||^2 - 2 hb.s_c + ||s_c||^2) / reg - sum_j p_j^2
        log_density = np.multiply(dot, np.float32(1.0 / reg))
        log_density += self._scan_const[:, None]
        log_density -= ((0.5 / reg) * hb_sq).astype(np.float32)
        log_density += np.float32(0.5) * proj_sq
        return log_density, dot, proj_sq, hb_sq, np.sqrt(hb_sq)

    def _scan_slack(self, hb_sq: F64, hb_norm: F64, proj_sq: Any, dot: Any, classes: Any) -> F64:
        """The bound on the first pass's error in the log density (``_fit_scan``) of the pairs
        (rows, ``classes``): ``proj_sq`` and ``dot`` the first pass's sum_j p_j^2 and hb.s_c.
        With ``classes`` None, the largest over the classes (``proj_sq`` the largest over the
        classes, ``dot`` bounded by ``||hb|| (||s_c|| + a_c)``)."""
        reg = float(self.reg)
        proj_sq = np.asarray(proj_sq, dtype=np.float64)
        if classes is None:
            k, g, a, reach, const = self._scan_max
            terms = 2.0 * hb_norm * reach / reg + 2.0 * const
        else:
            k, g, a = self._scan_k[classes], self._scan_g[classes], self._scan_a[classes]
            terms = np.abs(dot, dtype=np.float64) * (2.0 / reg)
            terms += 2.0 * np.abs(self._scan_const[classes], dtype=np.float64)
        terms += hb_sq / reg + proj_sq
        err = k * hb_norm + g
        out = err * (2.0 * np.sqrt(proj_sq * (1.0 + self._scan_h)) + err)
        out += self._scan_h * proj_sq
        out += self._scan_r32 * terms
        out += (2.0 / reg) * a * hb_norm
        return 0.5 * out

    def _fit_scan(
        self, coefs: tuple[F64 | None, ...], order: NDArray[np.intp], counts: Any
    ) -> None:
        """The first pass from the shared scan's product P of the rows centred at c.

        With A_c = U S V^T the centred rows of class c (n_c < D), its eigenvectors are
        ``V = A_c^T U S^-1``, so ``(h - c).q_j = sum_i (h - c).(x_i - mu_c) B_ij`` (B = U S^-1
        times the scale of q_j, rows i of class c), and ``(h - c).(x_i - mu_c) = P_i - (h -
        c).(mu_c - c)``, whose second part vanishes in the sum (the columns of U sum to zero
        over the centred rows); and ``(h - c).(mu_c - c)`` is the mean of P_i over the class.
        So the whole first pass is one float32 sparse product of [P, 1] with a matrix W of
        C + sum r_c rows: class c's row holds 1 / n_c at its training rows (hb.s_c, s_c =
        mu_c - c), column j of Q's row holds B_ij at the rows of its class and -s_c.q_j in the
        last column (the projection p_j = hb.q_j - s_c.q_j); then one float32 sparse product
        with the class indicator sums p_j^2 per class. No product with the D x (C + sum r_c)
        matrix [S, Q], no pass over a float64 (rows x sum r_c) matrix.

        The error bound, u the float32 unit roundoff, hb = h - c, each P_i off by at most
        ``(D + 3) u ||hb|| ||x_i - c||`` (inputs rounded to float32, D terms summed):

        - ``|hb.s_c - est| <= g ||hb|| mean_i ||x_i - c||``, g = 1.01 (D + n_max + 6) u
          (P_i's error, 1 / n_c rounded to float32, n_c products summed in float32);
        - the vector of p_j's errors over class c has norm at most E = ||hb|| K_c + G_c, with
          ``K_c = || g kappa_j + ||s_c|| (|sum_i b_ij| + 2 u sum_i |b_ij|) ||_2`` over j,
          ``kappa_j = sum_i |b_ij| ||x_i - c||`` (b the float32 coefficients: B's rounding
          and the column sums that no longer vanish exactly) and ``G_c = 1.01 (n_max + 3) u
          ||(s_c.q_j)_j||`` (the offsets rounded and summed in float32);
        - so ``|S - sum_j p_j^2| <= E (2 sqrt(S (1 + h)) + E) + h S`` for S the float32 sum of
          squares, h = 1.01 (r_max + 1) u (squares and r_c terms in float32);
        - the log density ``hb.s_c / reg + k_c - ||hb||^2 / (2 reg) + S / 2`` (k_c = const -
          ||s_c||^2 / (2 reg)) evaluated in float32: seven roundings (three inputs, four
          operations), at most ``8 u`` (one more for ||hb||^2's float64 one) times ``|hb.s_c| /
          reg + |k_c| + ||hb||^2 / (2 reg) + S / 2``.

        MD's bound is the sum of the first three (the first doubled and divided by reg), the
        log density's bound half of it plus the last (``_scan_slack``). The 1 % on top of each
        coefficient covers the second-order terms while D u < 0.005 (D < 80,000). Scoring
        first screens every class against a row's best with the largest of each term over
        the classes (``_scan_max``), then takes the screened pairs' own bounds: the pairs
        recomputed are those of the full comparison, at the cost of a few.
        """
        assert self._rows is not None
        n_classes = counts.size
        n_train, d = (int(v) for v in self._rows.rows32.shape)
        n_cols = int(self._col_bounds[-1])
        starts = np.concatenate([[0], np.cumsum(counts)])
        w_rows, w_cols, w_vals = [], [], []
        for c, coef in enumerate(coefs):
            assert coef is not None
            members, r = order[starts[c] : starts[c + 1]], coef.shape[1]
            w_rows.append(np.full(members.size, c))
            w_cols.append(members)
            w_vals.append(np.full(members.size, 1.0 / members.size))
            w_rows.append(n_classes + np.repeat(self._col_bounds[c] + np.arange(r), members.size))
            w_cols.append(np.tile(members, r))
            w_vals.append(coef.T.ravel())
        w_rows.append(n_classes + np.arange(n_cols))
        w_cols.append(np.full(n_cols, n_train))
        w_vals.append(-self._offsets)
        self._scan_w = scipy.sparse.csr_matrix(
            (
                np.concatenate(w_vals).astype(np.float32),
                (np.concatenate(w_rows), np.concatenate(w_cols)),
            ),
            shape=(n_classes + n_cols, n_train + 1),
        )
        col_class = np.repeat(np.arange(n_classes), self.ranks_)
        self._scan_sum = scipy.sparse.csr_matrix(
            (np.ones(n_cols, dtype=np.float32), (col_class, np.arange(n_cols))),
            shape=(n_classes, n_cols),
        )
        # the error bound's constants, from the float32 coefficients as stored
        x_norms = np.empty(n_train, dtype=np.float64)
        for sl in row_blocks(n_train, 8 * d):
            x_norms[sl] = np.linalg.norm(self._rows.rows32[sl].astype(np.float64), axis=1)
        g = 1.01 * (d + int(counts.max()) + 6) * _U32
        labels = np.repeat(np.arange(n_classes), counts)
        self._scan_a = g * np.bincount(labels, x_norms[order], minlength=n_classes) / counts
        b = self._scan_w[n_classes:, :n_train].astype(np.float64)
        b_abs, ones = abs(b), np.ones(n_train)
        leftover = np.abs(b @ ones) + 2 * _U32 * (b_abs @ ones)
        per_col = g * (b_abs @ x_norms) + self._shifted_norm[col_class] * leftover
        self._scan_k = np.sqrt(np.bincount(col_class, per_col**2, minlength=n_classes))
        g_o = 1.01 * (int(counts.max()) + 3) * _U32
        self._scan_g = g_o * np.sqrt(np.bincount(col_class, self._offsets**2, minlength=n_classes))
        self._scan_h = 1.01 * (int(self.ranks_.max(initial=0)) + 1) * _U32
        # seven float32 roundings in the log density's terms; ||hb||^2's float64 one, (D + 16)
        # eps, is below one float32 rounding while D < 5e8
        self._scan_r32 = 1.01 * 8 * _U32

    def _score_block(self, hb: F64) -> Float64Array:
        """Scores of the rows ``hb`` (h minus the centre), the first pass from float32
        products with the class means and Q."""
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
        buf32 = np.empty(rows * budget, dtype=np.float32)
        buf64 = np.empty(rows * budget, dtype=np.float64)
        abs64 = np.empty(rows * budget, dtype=np.float64)
        for start, stop in self._groups(budget):
            c0, c1 = int(self._col_bounds[start]), int(self._col_bounds[stop])
            if c1 == c0:
                continue
            shape, size = (rows, c1 - c0), rows * (c1 - c0)
            first = np.matmul(hb32, self._qt32[c0:c1].T, out=buf32[:size].reshape(shape))
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
        return self._recompute_and_sum(hb, hb_sq, log_density, recompute)

    def _recompute_and_sum(
        self, hb: F64, hb_sq: F64, log_density: F64, recompute: NDArray[np.bool_]
    ) -> Float64Array:
        """The log-sum-exp over the classes of ``log_density`` (rows, C) once the pairs that
        ``recompute`` marks are recomputed in float64."""
        budget = max(1, _common.BLOCK_BYTES // (8 * hb.shape[0]))
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
        if classes.size:
            classes += start
            log_density[members, classes] = self._recompute_pairs(hb, hb_sq, classes, members)

    def _recompute_pairs(
        self, hb: F64, hb_sq: F64, classes: NDArray[np.intp], members: NDArray[np.intp]
    ) -> F64:
        """The float64 log densities of the pairs (``members``, ``classes``), sorted by class:
        one product per class with its rows."""
        if classes.size == 0:
            return np.empty(0, dtype=np.float64)
        reg = float(self.reg)
        picked = hb[members]  # the pairs' rows, grouped by class
        dots = np.empty(classes.size, dtype=np.float64)
        proj_sq = np.zeros(classes.size, dtype=np.float64)
        starts = np.flatnonzero(np.r_[True, np.diff(classes) != 0])
        first = classes[starts]
        segments = zip(
            starts.tolist(),
            np.r_[starts[1:], classes.size].tolist(),
            first.tolist(),
            self._col_bounds[first].tolist(),
            self._col_bounds[first + 1].tolist(),
            strict=True,
        )
        for lo, hi, c, k0, k1 in segments:
            if hi == lo + 1:  # most classes: one row, matrix-vector products
                row = picked[lo]
                dots[lo] = self._shifted[c] @ row
                if k1 > k0:
                    one = self._qt[k0:k1] @ row
                    one -= self._offsets[k0:k1]
                    proj_sq[lo] = one @ one
                continue
            rows = picked[lo:hi]
            dots[lo:hi] = rows @ self._shifted[c]
            if k1 > k0:
                proj = rows @ self._qt[k0:k1].T
                proj -= self._offsets[k0:k1]
                proj_sq[lo:hi] = np.einsum("ij,ij->i", proj, proj)
        md = (hb_sq[members] - 2.0 * dots + self._shifted_sq[classes]) / reg
        md -= proj_sq
        return self._constant[classes] - 0.5 * md
