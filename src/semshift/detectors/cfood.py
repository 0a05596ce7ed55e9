"""CF-OOD: the smallest neighbourhood fraction whose reference radii cover the test sample."""

from __future__ import annotations

from numbers import Real
from typing import ClassVar

import numpy as np

from semshift.errors import InputError

from ._base import Detector, Float64Array, Inputs
from ._common import F32, F64, cache_blocks, l2_normalize, l2_normalize32, row_blocks
from ._params import Interval, ParamConstraints, SearchSpace
from ._registry import register_detector

__all__ = ["CFOOD", "KAPPA_GRID", "kappa_positions"]

#: The neighbourhood fractions kappa the released code tries, in increasing order.
KAPPA_GRID: F64 = np.concatenate(
    (np.linspace(0.001, 0.1, 100), np.linspace(0.105, 0.5, 81), np.linspace(0.51, 0.99, 49))
)


def kappa_positions(n_ref: int) -> tuple[F64, np.ndarray]:
    """The grid of fractions and the 0-based neighbour rank of each, for ``n_ref`` references.

    Rank ``int(kappa n_ref - 1)`` (truncated, as the released code); fractions that give the
    same rank as the previous one are dropped.
    """
    kpos = np.array(KAPPA_GRID * n_ref - 1, dtype=np.int64)
    keep = np.concatenate(([True], kpos[:-1] < kpos[1:]))
    return KAPPA_GRID[keep], kpos[keep]


def _distances_from(d: F32, sq_a: F32, sq_b: F32) -> F32:
    """``max(||a||^2 + ||b||^2 - 2 <a, b>, 0)`` from the products ``d`` (overwritten)."""
    d *= np.float32(-2.0)
    d += sq_a[:, None]
    d += sq_b[None, :]
    return np.maximum(d, np.float32(0.0), out=d)


def _sq_norms(x: F32) -> F32:
    return np.einsum("ij,ij->i", x, x, dtype=np.float64).astype(np.float32)


@register_detector
class CFOOD(Detector):
    """CF-OOD score ``-kappa(h)``; higher = more in-distribution.

    A reference set R of L2-normalised training features (``x / (||x|| + 1e-10)``) is fixed at
    fit, and for each reference r and each fraction kappa of a fixed grid (230 values from
    0.001 to 0.99, those giving the same neighbour rank dropped) the squared distance
    rho_kappa(r) to its ``int(kappa |R| - 1) + 1``-th nearest other reference. For a test
    feature with normalised h*, ``c(kappa)`` is the fraction of references r with
    ``rho_kappa(r) >= ||h* - r||^2`` (the test sample lies within their kappa-neighbourhood);
    kappa(h) is the smallest grid value with ``c(kappa) >= k`` (1 when none). A sample inside
    the neighbourhoods of many references at small kappa is dense, hence ID.

    Distances come from float32 inner products (``||a||^2 + ||b||^2 - 2 <a, b>``, clipped at
    0; a reference's distance to itself is 0), the fit sorts each reference's distances to
    every reference in row blocks, and since c(kappa) grows with kappa each test sample
    finds kappa(h) by bisection over the grid; ``c`` is compared as the released code does,
    in float32.

    Departure (docs/methods.md#cfood): with ``alpha < 1`` the released code takes a random
    subset of ``int(alpha n)`` training features; semshift takes the evenly spaced rows
    ``floor(i n / int(alpha n))``, deterministic and, for features stored sorted by class,
    spread over every class.

    Parameters
    ----------
    alpha : float, default 0.1
        Fraction of the training features used as references.
    k : float, default 0.01
        Fraction of the references whose neighbourhood must contain the test sample.

    Attributes
    ----------
    n_ref_ : int
        Number of references.
    kappas_ : float64 array (K,)
        The grid of fractions used (K <= 230).
    radii_ : float32 array (K, n_ref)
        rho_kappa(r), one row per grid value.

    Raises
    ------
    InputError
        (fit) Fewer than 2 references (``int(alpha n) < 2``).

    Examples
    --------
    >>> import numpy as np
    >>> from semshift import detectors
    >>> angles = np.linspace(0.0, 1.0, 200)
    >>> h = np.stack([np.cos(angles), np.sin(angles)], axis=1)  # an arc of unit vectors
    >>> det = detectors.get("cfood", alpha=1.0, k=0.1).fit(features=h)
    >>> det.score(features=np.array([[1.0, 0.5], [-1.0, 0.0]]))  # on the arc, far from it
    array([-0.095, -1.   ])

    References
    ----------
    .. [1] F. Angiulli, F. Fassetti and M. P. Zupi, "CF-OOD: Concentration-Free Density
       Estimation for Reliable Out-of-Distribution Detection", SISAP 2025.
    """

    name = "cfood"
    fit_requires = frozenset({"features"})
    score_requires = frozenset({"features"})
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "alpha": [Interval(Real, 0, 1, closed="right")],
        "k": [Interval(Real, 0, 1, closed="right")],
    }
    #: OpenOOD v1.5's sweep (configs/postprocessors/cfood.yml)
    search_space: ClassVar[SearchSpace] = {
        "alpha": (0.1, 0.5, 1.0),
        "k": (0.001, 0.005, 0.01, 0.05),
    }

    def __init__(self, *, alpha: float = 0.1, k: float = 0.01) -> None:
        self.alpha = alpha
        self.k = k

    def _fit(self, inputs: Inputs) -> None:
        x = inputs.get("features")
        n = int(x.shape[0])
        n_ref = int(float(self.alpha) * n) if float(self.alpha) < 1.0 else n
        if n_ref < 2:
            raise InputError(
                f"cfood.fit: alpha = {self.alpha} of n = {n} training features gives "
                f"int(alpha * n) = {n_ref} references, fewer than 2; give more training "
                "features or a larger alpha"
            )
        rows = (np.arange(n_ref, dtype=np.int64) * n) // n_ref
        ref = np.empty((n_ref, x.shape[1]), dtype=np.float32)
        for sl in row_blocks(n_ref, 16 * x.shape[1]):
            ref[sl] = l2_normalize(x[rows[sl]])
        self.kappas_, kpos = kappa_positions(n_ref)
        radii = np.empty((n_ref, kpos.size), dtype=np.float32)
        sq = _sq_norms(ref)
        for sl in row_blocks(n_ref, 12 * n_ref):
            d = self._sq_distances(ref[sl], sq[sl], ref, sq)
            d[np.arange(d.shape[0]), np.arange(sl.start, sl.stop)] = 0.0  # self: exactly 0
            radii[sl] = np.sort(d, axis=1)[:, kpos + 1]  # + 1 skips the self distance
        self._ref, self._sq = ref, sq
        self.radii_: F32 = np.ascontiguousarray(radii.T)
        self.n_ref_ = n_ref
        # smallest count c with float32(c) / float32(n_ref) >= float32(k), as the released
        # code's float32 comparison ``count / n >= k``
        frac = np.arange(n_ref + 1, dtype=np.float32) / np.float32(n_ref)
        self._min_count = int(np.argmax(frac >= np.float32(self.k)))

    @staticmethod
    def _sq_distances(a: F32, sq_a: F32, b: F32, sq_b: F32) -> F32:
        """``||a_i - b_j||^2`` (float32, clipped at 0) from the inner products."""
        return _distances_from(a @ b.T, sq_a, sq_b)

    def _score(self, inputs: Inputs) -> Float64Array:
        h = inputs.get("features")
        kappas = np.append(self.kappas_, 1.0)  # index K: no fraction qualifies
        out = np.empty(h.shape[0], dtype=np.float64)
        for sl in row_blocks(h.shape[0], 14 * self.n_ref_):
            q = l2_normalize32(h[sl])
            sq_q = _sq_norms(q)
            prod = q @ self._ref.T  # the product on the whole block, as _sq_distances
            # the rest of _sq_distances and the bisection per cache-sized block of rows (the
            # same element-wise steps; counts are exact: any block gives the same indices)
            for b in cache_blocks(prod.shape[0], 8 * self.n_ref_):
                d = _distances_from(prod[b], sq_q[b], self._sq)
                out[sl.start + b.start : sl.start + b.stop] = -kappas[self._first_index(d)]
        return out

    def _first_index(self, d: F32) -> np.ndarray:
        """Per row of ``d`` (m, n_ref), the first grid index j with ``#{r: radii[j, r] >=
        d[r]} >= min_count`` (``K`` when none), by bisection."""
        lo = np.zeros(d.shape[0], dtype=np.int64)
        hi = np.full(d.shape[0], self.kappas_.size, dtype=np.int64)
        while True:
            active = np.flatnonzero(lo < hi)
            if active.size == 0:
                return lo
            mid = (lo[active] + hi[active]) // 2
            count = np.count_nonzero(self.radii_[mid] >= d[active], axis=1)
            ok = count >= self._min_count
            hi[active[ok]] = mid[ok]
            lo[active[~ok]] = mid[~ok] + 1
