"""Neural relation graph: summed edge weights between a sample and every training sample."""

from __future__ import annotations

from collections.abc import Iterator
from numbers import Real
from typing import ClassVar

import numpy as np

from ._base import Detector, Float64Array, Inputs
from ._common import F32, softmax
from ._params import Interval, ParamConstraints, SearchSpace
from ._registry import register_detector

__all__ = ["Relation"]

#: Training rows whose agreement bounds with the test rows are computed at once.
BANK_CHUNK = 8192
#: Training rows per tile (the last tile takes the remainder when it is under half a tile): the
#: products of a test row with a tile's rows are computed only when a bound of its class
#: agreements with them exceeds the threshold.
TILE = 128
#: The products of a tile are padded with further test rows (whose edges are all cut: they add
#: nothing) to more than this many multiply-adds and at least 2 rows: BLAS libraries compute
#: small products with other kernels (OpenBLAS: the small-matrix kernels of AVX-512 machines up
#: to ``10^6``, gemv for one row) whose float32 sums round differently, and then an edge would
#: depend on the rows scored with it.
MIN_MULADDS = 10**6
#: Bytes of one float64 block of rows in :func:`unit_rows` and :func:`probabilities`: row-wise
#: operations, the same results whatever the block, twice as fast on blocks that stay in cache
#: as on 64 MiB ones.
PREP_BYTES = 2**21


def skip_margin(n_features: int) -> float:
    """Relative margin of the skip test: ``<f, f_j> <= 1 + margin`` for unit vectors in float32.

    1e-3 plus twice the worst-case relative error of a float32 dot product of length D,
    ``D 2^-24``, so a tile whose agreements are all ``<= threshold / (1 + margin)`` holds no
    edge above the threshold, whatever the rounding.
    """
    return 1e-3 + 2.0 * n_features * 2.0**-24


def _small_blocks(n_rows: int, width: int) -> Iterator[slice]:
    """Slices of consecutive rows of about :data:`PREP_BYTES` as float64 (at least one row)."""
    step = max(1, PREP_BYTES // (8 * max(width, 1)))
    for start in range(0, n_rows, step):
        yield slice(start, min(start + step, n_rows))


def unit_rows(x: np.ndarray) -> F32:
    """``x / sqrt(||x||^2 + 1e-10)`` row-wise (the released code's ``normalize``), float32."""
    out = np.empty(x.shape, dtype=np.float32)
    for sl in _small_blocks(x.shape[0], x.shape[1]):
        xb = np.asarray(x[sl], dtype=np.float64)
        out[sl] = xb / np.sqrt(np.einsum("ij,ij->i", xb, xb) + 1e-10)[:, None]
    return out


def probabilities(z: np.ndarray) -> F32:
    """Row-wise softmax of logits (n, C), computed in float64 blocks, stored as float32.

    Probabilities below ``2^-63`` (1.1e-19) are stored as 0, so that no product of two is a
    subnormal float32: a confident classifier has many tiny probabilities, and products with
    subnormal results ran the class agreements twenty times slower. An agreement changes by
    less than ``C 2^-63``, far below the float32 rounding of one that can reach the threshold.
    """
    out = np.empty(z.shape, dtype=np.float32)
    tiny = 2.0**-63  # its square is 2^-126, the smallest normal float32
    for sl in _small_blocks(z.shape[0], z.shape[1]):
        prob = softmax(np.asarray(z[sl], dtype=np.float64))
        prob[prob < tiny] = 0.0
        out[sl] = prob
    return out


@register_detector
class Relation(Detector):
    """Relation score ``sum_j r_j^power [r_j > threshold]``; higher = more in-distribution.

    For a test sample with L2-normalised feature f and softmax p, the edge to training sample
    j is ``r_j = max(<f, f_j>, 0) <p, p_j>`` (feature similarity times agreement of the
    predicted class distributions); edges at or below ``threshold`` are cut and the others
    summed, each raised to ``power``. Every training sample given to ``fit`` is a node (the
    released code uses the whole training set). Features are normalised as
    ``h / sqrt(||h||^2 + 1e-10)``, as the released code. Float32 products of test rows with
    tiles of training rows, sums in float64; the (n_test, n_train) matrix is never
    materialised. Since ``<f, f_j> <= 1``, an edge needs ``<p, p_j> > threshold``: the
    training rows are sorted by predicted class (rows with more than ``threshold`` of
    probability elsewhere last) and cut into tiles of 128, and the agreements and feature
    products of a test row are computed only for the tiles where a bound of its agreements
    exceeds ``threshold / (1 + margin)`` (:func:`skip_margin`; the margins cover float32
    rounding): with T_t the tile's largest probability of each class and a the row's predicted
    class, ``<p, p_j> <= T_ta + sum_(c != a) p_c``, or, when that bound exceeds the threshold
    for every tile (a row with more than the threshold of probability outside class a), the
    tighter ``<p, p_j> <= <p, T_t>`` (a float32 product with the tiles). The rows of a tile
    whose agreements are then all below the threshold skip the feature product. For a
    confident classifier a test row meets a few tiles; every computed edge is the full
    computation's, bit for bit, whatever rows are scored together (the products are padded to
    stay on the BLAS kernels of large products, :data:`MIN_MULADDS`), and only the order of
    the float64 sums differs (no difference while they are exact: power 1 with the default
    threshold up to 8 million training rows). The fitted state holds the normalised training
    features and probabilities in float32, ``4 n_train (D + C)`` bytes: subsample the training
    set to bound it.

    Parameters
    ----------
    power : float, default 1
        Exponent of the kept edges (the kernel temperature ``pow`` of the released code).
    threshold : float, default 0.03
        Edges ``r_j <= threshold`` are cut (the released code's ``thres``).

    Attributes
    ----------
    n_train_ : int
        Number of training samples (nodes).

    Examples
    --------
    >>> import numpy as np
    >>> from semshift import detectors
    >>> h = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> z = np.array([[10.0, -10.0], [-10.0, 10.0]])  # confident: p close to one-hot
    >>> det = detectors.get("relation").fit(features=h, logits=z)
    >>> det.score(features=np.array([[3.0, 0.0], [1.0, 1.0]]), logits=z).round(4)
    array([1.    , 0.7071])

    References
    ----------
    .. [1] J.-H. Kim, S. Yun and H. O. Song, "Neural Relation Graph: A Unified Framework for
       Identifying Label Noise and Outlier Data", NeurIPS 2023.
    """

    name = "relation"
    fit_requires = frozenset({"features", "logits"})
    score_requires = frozenset({"features", "logits"})
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "power": [Interval(Real, 0, None, closed="neither")],
        "threshold": [Interval(Real, 0, None, closed="left")],
    }
    #: OpenOOD v1.5's sweep (configs/postprocessors/relation.yml)
    search_space: ClassVar[SearchSpace] = {"power": (1, 2, 4, 6, 8)}

    def __init__(self, *, power: float = 1, threshold: float = 0.03) -> None:
        self.power = power
        self.threshold = threshold

    def _fit(self, inputs: Inputs) -> None:
        p = probabilities(inputs.get("logits"))
        order = self._order(p)
        self._probs = p[order]
        self._features = unit_rows(inputs.get("features"))[order]
        self.n_train_ = int(self._features.shape[0])
        starts = np.arange(0, self.n_train_, TILE)
        if starts.size > 1 and self.n_train_ - starts[-1] < TILE // 2:
            starts = starts[:-1]  # no narrow last tile (a product of few columns)
        self._tile_bounds = np.append(starts, self.n_train_)
        # per tile, the largest probability of each class (tiles, C)
        self._tile_max = np.maximum.reduceat(self._probs, starts)

    def _score(self, inputs: Inputs) -> Float64Array:
        p, f = probabilities(inputs.get("logits")), unit_rows(inputs.get("features"))
        n, n_classes = f.shape[0], p.shape[1]
        thr, power = np.float32(self.threshold), np.float32(self.power)
        # an edge needs a computed agreement above skip_at, since <f, f_j> <= 1 + margin
        skip_at = float(self.threshold) / (1.0 + skip_margin(f.shape[1]))
        # float32 sums of C non-negative terms: a computed agreement exceeds the exact one by at
        # most a factor 1 + 2 C u (u = 2^-24), a bound computed as a float32 product falls
        # short of the exact one by at most a factor 1 - C u / (1 - C u)
        cu = n_classes * 2.0**-24
        need_above = skip_at / (1.0 + 2.0 * cu)
        need_above32 = need_above * (1.0 - cu / (1.0 - cu))
        sim_above = _f32_below(skip_at)
        top = p.argmax(axis=1)
        rest = p.sum(axis=1, dtype=np.float64) - p.max(axis=1)  # mass outside the top class
        # rows whose first bound exceeds need_above for every tile: the product bound
        spread = np.flatnonzero(rest > need_above)
        p_spread = p[spread]
        sums = np.zeros(n, dtype=np.float64)
        tiles_per_chunk = max(1, BANK_CHUNK // TILE)
        for t0 in range(0, self._tile_max.shape[0], tiles_per_chunk):
            tile_max = self._tile_max[t0 : t0 + tiles_per_chunk]  # (tiles, C)
            # (n, tiles): <p, p_j> <= p_ja + sum_(c != a) p_c (a the top class) <= T_ta + rest,
            # and <p, p_j> <= <p, T_t>, for every row j of tile t (T_t its largest
            # probability of each class)
            need = tile_max[:, top].T.astype(np.float64) + rest[:, None] > need_above
            if spread.size:
                need[spread] = p_spread @ tile_max.T > need_above32
            for k in np.flatnonzero(need.any(axis=0)):
                a, b = (int(i) for i in self._tile_bounds[t0 + k : t0 + k + 2])
                m_min = max(2, MIN_MULADDS // ((b - a) * min(n_classes, f.shape[1])) + 1)
                rows = _padded(np.flatnonzero(need[:, k]), m_min, n)
                sim = _take(p, rows) @ self._probs[a:b].T
                # the feature products of rows with no agreement above skip_at are not needed
                hit = _padded(np.flatnonzero((sim > sim_above).any(axis=1)), m_min, len(rows))
                if hit.size == 0:
                    continue
                if hit.size < len(rows):
                    rows, sim = _take(rows, hit), _take(sim, hit)
                rel = _take(f, rows) @ self._features[a:b].T
                # threshold >= 0 and <p, p_j> >= 0: a negative <f, f_j> gives r_j <= 0, cut
                # anyway, so clamping it at 0 first changes nothing
                rel *= sim
                kept = rel > thr
                if power != 1:
                    rel **= power
                sums[rows] += np.add.reduce(rel, axis=1, where=kept, dtype=np.float64)
        return sums

    def _order(self, p: F32) -> np.ndarray:
        """Training rows sorted by predicted class, those with more than ``threshold`` of
        probability outside their predicted class after the others: a tile then holds few
        classes, and its largest probabilities bound the agreements tightly."""
        top = p.argmax(axis=1)
        spread = 1.0 - p.max(axis=1) > float(self.threshold)
        return np.argsort(np.where(spread, top + p.shape[1], top), kind="stable")


def _f32_below(x: float) -> np.float32:
    """The largest float32 ``<= x``."""
    y = np.float32(x)
    return y if float(y) <= x else np.nextafter(y, np.float32(-np.inf))


def _padded(rows: np.ndarray, m_min: int, n: int) -> np.ndarray:
    """``rows`` (sorted indices below ``n``), with the first other indices added up to
    ``m_min`` (all ``n`` when fewer), sorted; empty stays empty. An added row holds no edge
    above the threshold, so computing its products adds nothing to its score."""
    if rows.size == 0 or rows.size >= m_min:
        return rows
    if n <= m_min:
        return np.arange(n)
    others = np.flatnonzero(~np.isin(np.arange(min(n, rows[-1] + m_min + 1)), rows))
    return np.sort(np.concatenate([rows, others[: m_min - rows.size]]))


def _take(x: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``x[rows]``: a view when ``rows`` are consecutive, else a copy."""
    if rows.size and rows[-1] - rows[0] + 1 == rows.size:
        return x[rows[0] : rows[-1] + 1]
    return x[rows]
