"""NECO: share of the standardised feature inside the principal subspace of the training set."""

from __future__ import annotations

from numbers import Integral
from typing import ClassVar

import numpy as np
import scipy.linalg

from semshift.errors import InputError

from ._base import Detector, Float64Array, Inputs
from ._common import F32, F64, cache_blocks, column_mean, f32, row_blocks
from ._params import Boolean, Interval, ParamConstraints, SearchSpace
from ._registry import register_detector

__all__ = ["NECO", "standard_scale"]

_EPS = 1e-12


def standard_scale(x: np.ndarray, mean: F64) -> F64:
    """Per-column standard deviations of ``x`` (n, D), as scikit-learn's ``StandardScaler``.

    The variance divides by n; a column whose variance is within rounding of zero (scikit-learn's
    ``_is_constant_feature`` bound ``n eps var + (n mean eps)^2``) gets the scale 1.
    """
    n = x.shape[0]
    var = np.zeros(x.shape[1], dtype=np.float64)
    for sl in row_blocks(n, 16 * x.shape[1]):
        var += ((np.asarray(x[sl], dtype=np.float64) - mean) ** 2).sum(axis=0)
    var /= n
    eps = np.finfo(np.float64).eps
    constant = var <= n * eps * var + (n * mean * eps) ** 2
    return np.where(constant, 1.0, np.sqrt(var))


@register_detector
class NECO(Detector):
    """NECO score ``||P u|| / ||u||`` (times max logit); higher = more in-distribution.

    u = (h - m) / s is the feature standardised with the training mean m and standard deviation
    s (``StandardScaler``); P projects onto the top ``dim`` principal axes of the standardised
    training features (the eigenvectors of their correlation matrix, which is what the released
    code's ``PCA`` of the standardised features spans). With ``max_logit=True`` the ratio is
    multiplied by max_c z_c of the test logits z, as the released code does for every
    architecture except ResNets (set ``max_logit=False`` there).

    Departures (docs/methods.md#neco): the principal axes come from the eigendecomposition of
    the correlation matrix (float32 products of row blocks of standardised features, summed in
    float64) instead of an SVD of the standardised data (the same subspace; PCA's re-centring
    by the mean of the standardised training set, zero up to rounding, is omitted); ``||u||``
    is floored at 1e-12. For DeiT and Swin the released code divides by the norm of the *raw*
    feature instead of ``||u||``; semshift always uses ``||u||``.

    Parameters
    ----------
    dim : int, default 100
        Number of principal axes kept (the released code's ``neco_dim`` default); must be
        smaller than the feature dimension.
    max_logit : bool, default True
        Multiply the ratio by the maximum logit.

    Attributes
    ----------
    mean_ : float64 array (D,)
        Training mean m.
    scale_ : float64 array (D,)
        Training standard deviations s (1 for constant features).
    components_ : float32 array (D, dim)
        The top ``dim`` principal axes of the standardised training features.

    Examples
    --------
    >>> import numpy as np
    >>> from semshift import detectors
    >>> h = np.array([[2.0, 2.0], [-2.0, -2.0], [1.0, -1.0], [-1.0, 1.0]])
    >>> det = detectors.get("neco", dim=1, max_logit=False).fit(features=h)
    >>> h_test = np.array([[3.0, 3.0], [1.0, -1.0]])  # along / across the main axis
    >>> det.score(features=h_test, logits=np.zeros((2, 3))).round(6)
    array([1., 0.])

    References
    ----------
    .. [1] M. Ben Ammar, N. Belkhir, S. Popescu, A. Manzanera and G. Franchi, "NECO: NEural
       Collapse Based Out-of-distribution detection", ICLR 2024.
    """

    name = "neco"
    fit_requires = frozenset({"features"})
    score_requires = frozenset({"features", "logits"})
    # dim < D is checked in fit, where D is known
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "dim": [Interval(Integral, 1, None, closed="left")],
        "max_logit": [Boolean()],
    }
    #: principal dimensions around the released default 100; dim >= D fails in fit
    search_space: ClassVar[SearchSpace] = {"dim": (10, 50, 100, 200, 500, 1000)}

    def __init__(self, *, dim: int = 100, max_logit: bool = True) -> None:
        self.dim = dim
        self.max_logit = max_logit

    def _fit(self, inputs: Inputs) -> None:
        x = inputs.get("features")
        d = int(x.shape[1])
        if not 0 < int(self.dim) < d:
            raise InputError(
                f"neco.fit: dim = {self.dim} principal axes must lie in [1, D) with feature "
                f"dimension D = {d}; lower dim"
            )
        self.mean_ = column_mean(x)
        self.scale_ = standard_scale(x, self.mean_)
        gram = np.zeros((d, d), dtype=np.float64, order="F")
        for sl in row_blocks(x.shape[0], 12 * d):
            z = f32((np.asarray(x[sl], dtype=np.float64) - self.mean_) / self.scale_)
            # float32 rank-k update of the block (upper triangle), accumulated in float64
            gram += scipy.linalg.blas.ssyrk(1.0, z.T)
        # the correlation matrix up to the factor n, which does not change the eigenvectors
        gram = np.triu(gram) + np.triu(gram, 1).T
        top = [d - int(self.dim), d - 1]
        _, vecs = scipy.linalg.eigh(gram, subset_by_index=top, driver="evx")
        self.components_: F32 = f32(vecs[:, ::-1])  # descending eigenvalues

    def _standardized(self, h: np.ndarray) -> tuple[F32, F64]:
        """u = (h - m) / s rounded to float32 and ``max(||u||, 1e-12)`` (float64) per row.

        Row-wise: on C-contiguous rows computed in cache-sized blocks (the same values as one
        block, without the (n, D) float64 temporaries).
        """
        n = h.shape[0]
        z32 = np.empty(h.shape, dtype=np.float32)
        norm = np.empty(n, dtype=np.float64)
        blocks = cache_blocks(n, 24 * int(h.shape[1])) if h.flags.c_contiguous else [slice(0, n)]
        for b in blocks:
            z = (np.asarray(h[b], dtype=np.float64) - self.mean_) / self.scale_
            z32[b] = z
            norm[b] = np.maximum(np.sqrt(np.einsum("ij,ij->i", z, z)), _EPS)
        return z32, norm

    def _score(self, inputs: Inputs) -> Float64Array:
        h = inputs.get("features")
        out = np.empty(h.shape[0], dtype=np.float64)
        for sl in row_blocks(h.shape[0], 20 * h.shape[1]):
            z32, norm = self._standardized(h[sl])
            proj = (z32 @ self.components_).astype(np.float64)  # on the whole block, as before
            out[sl] = np.sqrt(np.einsum("ij,ij->i", proj, proj)) / norm
        if self.max_logit:
            out *= np.asarray(inputs.get("logits").max(axis=1), dtype=np.float64)
        return out
