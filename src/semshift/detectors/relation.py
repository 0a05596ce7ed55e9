"""Neural relation graph: summed edge weights between a sample and every training sample."""

from __future__ import annotations

from numbers import Real
from typing import ClassVar

import numpy as np

from ._base import Detector, Float64Array, Inputs
from ._common import F32, row_blocks, softmax
from ._params import Interval, ParamConstraints, SearchSpace
from ._registry import register_detector

__all__ = ["Relation"]

#: Training rows compared with a block of test rows at once.
BANK_CHUNK = 8192
#: Test rows of one class-agreement product.
TEST_ROWS = 512
#: Test rows (consecutive after sorting) sharing one skip decision per tile.
GROUP_ROWS = 64
#: Training rows per tile: the feature product of a tile whose class agreements with a group
#: of test rows are all below the threshold is not computed.
TILE = 128
#: When more than this fraction of the (group, tile) cells of a block is needed, the block is
#: computed as one product over the needed tiles (larger products run faster).
DENSE_ABOVE = 0.3


def skip_margin(n_features: int) -> float:
    """Relative margin of the skip test: ``<f, f_j> <= 1 + margin`` for unit vectors in float32.

    1e-3 plus twice the worst-case relative error of a float32 dot product of length D,
    ``D 2^-24``, so a tile whose agreements are all ``<= threshold / (1 + margin)`` holds no
    edge above the threshold, whatever the rounding.
    """
    return 1e-3 + 2.0 * n_features * 2.0**-24


def unit_rows(x: np.ndarray) -> F32:
    """``x / sqrt(||x||^2 + 1e-10)`` row-wise (the released code's ``normalize``), float32."""
    out = np.empty(x.shape, dtype=np.float32)
    for sl in row_blocks(x.shape[0], 16 * x.shape[1]):
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
    for sl in row_blocks(z.shape[0], 24 * z.shape[1]):
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
    ``h / sqrt(||h||^2 + 1e-10)``, as the released code. Blocked float32 products (test rows
    against chunks of training rows), sums in float64; the (n_test, n_train) matrix is never
    materialised. Since ``<f, f_j> <= 1``, an edge needs ``<p, p_j> > threshold``: training
    and test rows are sorted by predicted class (rows with more than ``threshold`` of
    probability elsewhere last), and the agreements and feature products are computed only
    for the (group of test rows, tile of training rows) cells where an upper bound of the
    agreement (``p_ja + sum_(c != a) p_c``, a the predicted class, ``p_ja`` at most the tile's
    largest probability of class a) exceeds ``threshold / (1 + margin)``, the margin
    (:func:`skip_margin`) covering float32 rounding; for a confident classifier few cells
    remain, and the scores are those of the full computation (to the float64 summation order).
    The fitted state holds the normalised training features and
    probabilities in float32, ``4 n_train (D + C)`` bytes: subsample the training set to bound
    it.

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
        # per tile of TILE training rows, the largest probability of each class (tiles, C)
        self._tile_max = np.maximum.reduceat(self._probs, np.arange(0, self.n_train_, TILE))

    def _score(self, inputs: Inputs) -> Float64Array:
        p = probabilities(inputs.get("logits"))
        order = self._order(p)
        f, p = unit_rows(inputs.get("features"))[order], p[order]
        n, n_train = f.shape[0], self.n_train_
        chunk = min(n_train, BANK_CHUNK)
        thr = np.float32(self.threshold)
        skip_at = float(self.threshold) / (1.0 + skip_margin(f.shape[1]))
        # a float32 agreement of C non-negative terms exceeds the exact one by at most C u
        need_above = skip_at / (1.0 + 2.0 * p.shape[1] * 2.0**-24)
        power = np.float32(self.power)
        sums = np.zeros(n, dtype=np.float64)
        # per test row: the agreements and the edges of a chunk (float32), a mask
        for block in row_blocks(n, 10 * chunk):
            for r0 in range(block.start, block.stop, TEST_ROWS):
                r1 = min(r0 + TEST_ROWS, block.stop)
                top = p[r0:r1].argmax(axis=1)
                rest = p[r0:r1].sum(axis=1, dtype=np.float64) - p[r0:r1].max(axis=1)
                for c0 in range(0, n_train, chunk):
                    c1 = min(c0 + chunk, n_train)
                    tiles = self._tile_max[c0 // TILE : -(-c1 // TILE)]
                    # <p, p_j> <= p_j[top] + sum_(c != top) p_c for every j of a tile
                    bound = tiles[:, top].T.astype(np.float64) + rest[:, None]
                    for g0, g1, a, b in self._products(bound, need_above, c1 - c0):
                        sim = p[r0 + g0 : r0 + g1] @ self._probs[c0 + a : c0 + b].T
                        rel = f[r0 + g0 : r0 + g1] @ self._features[c0 + a : c0 + b].T
                        # threshold >= 0 and <p, p_j> >= 0: a negative <f, f_j> gives
                        # r_j <= 0, cut anyway, so clamping it at 0 first changes nothing
                        rel *= sim
                        kept = rel > thr
                        if power != 1:
                            rel **= power
                        sums[r0 + g0 : r0 + g1] += np.add.reduce(
                            rel, axis=1, where=kept, dtype=np.float64
                        )
        out = np.empty(n, dtype=np.float64)
        out[order] = sums
        return out

    def _order(self, p: F32) -> np.ndarray:
        """Rows sorted by predicted class, those with more than ``threshold`` of probability
        outside their predicted class after the others: rows of different classes then agree
        above the threshold only in a few tiles (the order changes no score)."""
        top = p.argmax(axis=1)
        spread = 1.0 - p.max(axis=1) > float(self.threshold)
        return np.argsort(np.where(spread, top + p.shape[1], top), kind="stable")

    @staticmethod
    def _products(
        bound: np.ndarray, need_above: float, cols: int
    ) -> list[tuple[int, int, int, int]]:
        """The products a block needs: ``(g0, g1, a, b)`` for test rows ``[g0, g1)`` and
        training columns ``[a, b)`` of the chunk (``cols`` columns).

        ``bound`` (rows, tiles) bounds every class agreement of a row with a tile's rows: with
        a the row's predicted class, ``<p, p_j> = p_a p_ja + sum_(c != a) p_c p_jc <= p_ja +
        sum_(c != a) p_c``, and ``p_ja`` is at most the tile's largest probability of class a.
        A tile is needed by a group of rows when the bound of one of them exceeds
        ``need_above`` (the skip threshold lowered by the float32 rounding of the agreement
        product); consecutive needed tiles make one product. The agreements and the feature products
        are computed for the needed cells only: for a confident classifier a test row meets
        the few tiles holding its predicted class.
        """
        rows = bound.shape[0]
        row_starts = np.arange(0, rows, GROUP_ROWS)
        need = np.maximum.reduceat(bound, row_starts, axis=0) > need_above  # (groups, tiles)
        if need.mean() > DENSE_ABOVE:
            return [(0, rows, a, b) for a, b in _runs(np.asarray(need.any(axis=0)), cols)]
        return [
            (int(g0), min(int(g0) + GROUP_ROWS, rows), a, b)
            for g0, tiles in zip(row_starts, need, strict=True)
            for a, b in _runs(tiles, cols)
        ]


def _runs(tiles: np.ndarray, cols: int) -> list[tuple[int, int]]:
    """Column ranges ``[a, b)`` of the runs of consecutive ``True`` tiles (of ``TILE`` columns,
    the last one cut at ``cols``)."""
    edges = np.flatnonzero(np.diff(np.r_[0, tiles.astype(np.int8), 0]))
    return [
        (int(s) * TILE, min(int(e) * TILE, cols))
        for s, e in zip(edges[::2], edges[1::2], strict=True)
    ]
