"""Deep nearest neighbours: distance to the k-th nearest normalised training feature."""

from __future__ import annotations

from numbers import Integral
from typing import ClassVar

import numpy as np

from semshift.errors import InputError

from ._base import Float64Array, Inputs
from ._common import F32, F64, f32, l2_normalize, row_blocks
from ._params import Interval, ParamConstraints, SearchSpace, StrOptions
from ._registry import register_detector
from ._scan import TrainRows, kth_largest, scan_request, scan_scores, train_rows
from ._search import BACKENDS, InnerProductIndex, SearchDetector, resolve_backend
from ._shared import Request, digest

__all__ = ["KNN"]


@register_detector
class KNN(SearchDetector):
    """Deep k-nearest-neighbour score ``-||h* - b*_(k)||``; higher = more in-distribution.

    Training and test features are L2-normalised (``x / (||x|| + 1e-10)``, as the public code);
    the score is minus the Euclidean distance from the normalised test feature to its k-th
    nearest normalised training feature. The search is exact. With ``backend="auto"`` it is
    the shared scan of the training rows (docs/methods.md#shared-scans): one float32 product
    of the centred test and training rows serves knn, grood and gmm scored together
    (:func:`score_many`), the cosine similarities are derived from it by per-row and
    per-column terms, and the scores are the same with or without the others. ``"faiss"``
    (``IndexFlatIP``) and ``"numpy"`` (blocked products of the normalised rows) search an
    index of their own. Neighbours are ranked by float32 similarities; the k-th distance is
    then recomputed in float64, so every backend returns the same value up to float32
    rounding of the stored bank (about 1e-7) and the choice between near-tied neighbours.
    (The public code returns the *squared* distance from faiss ``IndexFlatL2``; the ranking
    is identical.)

    Parameters
    ----------
    k : int, default 50
        Which neighbour (the paper's ImageNet setting, 1% sampling aside).
    backend : {"auto", "numpy", "faiss"}, default "auto"
        Search backend; ``"auto"`` is the shared scan.

    Attributes
    ----------
    backend_ : str
        The backend used ("scan", "numpy" or "faiss").
    n_train_ : int
        Number of training features in the bank.

    References
    ----------
    .. [1] Y. Sun, Y. Ming, X. Zhu and Y. Li, "Out-of-Distribution Detection with Deep Nearest
       Neighbors", ICML 2022.
    """

    name = "knn"
    fit_requires = frozenset({"features"})
    score_requires = frozenset({"features"})
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "k": [Interval(Integral, 1, None, closed="left")],  # k <= n_train is checked in fit
        "backend": [StrOptions(BACKENDS)],  # "faiss" without faiss installed: fit refuses
    }
    #: OpenOOD v1.5's sweep (configs/postprocessors/knn.yml); k above n_train fails in fit
    search_space: ClassVar[SearchSpace] = {"k": (1, 10, 20, 50, 100, 200, 500, 1000)}

    def __init__(self, *, k: int = 50, backend: str = "auto") -> None:
        self.k = k
        self.backend = backend

    def _fit(self, inputs: Inputs) -> None:
        x = inputs.get("features")
        if x.shape[0] < self.k:
            raise InputError(
                f"knn.fit: k = {self.k} neighbours requested but only {x.shape[0]} training "
                "features were given; lower k or give more features"
            )
        self.n_train_ = int(x.shape[0])
        if self.backend == "auto":
            self.backend_ = "scan"
            self._rows: TrainRows = train_rows(inputs)
            c = self._rows.center
            norms = np.empty(x.shape[0], dtype=np.float64)
            for sl in row_blocks(x.shape[0], 8 * x.shape[1]):
                norms[sl] = np.linalg.norm(np.asarray(x[sl], dtype=np.float64), axis=1)
            self._scale: F64 = 1.0 / (norms + 1e-10)
            # c.(x_j - c) v_j, the column term of the cosine (v_j = 1 / (||x_j|| + 1e-10))
            self._col32: F32 = f32((self._rows.rows32 @ c.astype(np.float32)) * self._scale)
            self._scale32: F32 = f32(self._scale)
            self._token = digest("knn", self.k, self._rows.token)
            return
        bank = np.empty(x.shape, dtype=np.float32)
        for sl in row_blocks(x.shape[0], 16 * x.shape[1]):
            bank[sl] = l2_normalize(x[sl])
        self.backend_ = resolve_backend("knn", self.backend)
        self._index = InnerProductIndex(bank, self.backend_)

    def requests(self) -> tuple[Request, ...]:
        if getattr(self, "backend_", None) != "scan":
            return ()
        return (scan_request(self._rows, self._token, self._reduce),)

    def _reduce(self, hc: F64, prod: F32) -> Float64Array:
        """Scores of one block of the scan: the cosines ``h.x_j v_j`` up to the row factor
        ``1 / ||h||`` (which ranks nothing), ``h.x_j = P + (h - c).c + c.(x_j - c) + c.c``."""
        c = self._rows.center
        row = hc @ c + c @ c
        sim = np.add(prod, row.astype(np.float32)[:, None])
        sim *= self._scale32
        sim += self._col32
        j = kth_largest(sim, int(self.k))
        del sim
        h = hc + c
        q = h / (np.linalg.norm(h, axis=1, keepdims=True) + 1e-10)
        nearest = self._rows.rows(j) * self._scale[j, None]
        return -np.linalg.norm(q - nearest, axis=1)

    def _score(self, inputs: Inputs) -> Float64Array:
        if self.backend_ == "scan":
            return scan_scores(inputs, self.requests()[0])
        h = inputs.get("features")
        k = int(self.k)
        out = np.empty(h.shape[0], dtype=np.float64)
        for sl in row_blocks(h.shape[0], 32 * h.shape[1]):
            q = l2_normalize(h[sl])
            _, idx = self._index.search(f32(q), k)
            nearest_k = self._index.rows(idx[:, k - 1]).astype(np.float64)
            out[sl] = -np.linalg.norm(q - nearest_k, axis=1)
        return out
