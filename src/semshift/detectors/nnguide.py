"""NNGuide: energy guided by similarity to an energy-weighted bank of training features."""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import ClassVar

import numpy as np

from semshift.errors import InputError

from ._base import Float64Array, Inputs
from ._common import energy, f32, l2_normalize, l2_normalize32, row_blocks
from ._params import Interval, ParamConstraints, SearchSpace, StrOptions
from ._registry import register_detector
from ._search import BACKENDS, InnerProductIndex, SearchDetector, resolve_backend
from .logit import shared_energy

__all__ = ["NNGuide"]


@register_detector
class NNGuide(SearchDetector):
    """NNGuide score ``Energy(z) * mean of the k largest <h / ||h||, g_j>``; higher = more ID.

    The guide bank g holds the first ``ceil(alpha * n)`` training features, L2-normalised and
    each scaled by its logits' energy. We take the *first* rows (docs/methods.md#nnguide; OpenOOD
    takes the first batches of a shuffled loader): if the training features are stored sorted
    by class, shuffle them before ``fit`` or the bank covers only the first classes. The top-k
    search is exact (faiss ``IndexFlatIP`` when installed, blocked NumPy otherwise).

    Parameters
    ----------
    k : int, default 100
        Number of largest inner products averaged.
    alpha : float, default 0.01
        Fraction of the training set in the bank.
    backend : {"auto", "numpy", "faiss"}, default "auto"
        Search backend; ``"auto"`` uses faiss when importable.

    Attributes
    ----------
    bank_size_ : int
        Number of bank rows, ``ceil(alpha * n_train)``.
    backend_ : str
        The backend used.

    References
    ----------
    .. [1] J. Park, Y. G. Jung and A. B. J. Teoh, "Nearest Neighbor Guidance for
       Out-of-Distribution Detection", ICCV 2023.
    """

    name = "nnguide"
    fit_requires = frozenset({"features", "logits"})
    score_requires = frozenset({"features", "logits"})
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "k": [Interval(Integral, 1, None, closed="left")],  # k <= bank size is checked in fit
        "alpha": [Interval(Real, 0, 1, closed="right")],
        "backend": [StrOptions(BACKENDS)],  # "faiss" without faiss installed: fit refuses
    }
    #: neighbours as in knn's sweep (k above the bank size fails in fit); alpha (the bank
    #: fraction kept) by decades from the released default
    search_space: ClassVar[SearchSpace] = {
        "k": (1, 10, 20, 50, 100, 200, 500, 1000),
        "alpha": (0.01, 0.1, 1.0),
    }

    def __init__(self, *, k: int = 100, alpha: float = 0.01, backend: str = "auto") -> None:
        self.k = k
        self.alpha = alpha
        self.backend = backend

    def _fit(self, inputs: Inputs) -> None:
        x, z = inputs.get("features"), inputs.get("logits")
        m = min(x.shape[0], math.ceil(float(self.alpha) * x.shape[0]))
        if m < self.k:
            raise InputError(
                f"nnguide.fit: the bank holds ceil(alpha * n) = {m} training features "
                f"(alpha = {self.alpha}, n = {x.shape[0]}), fewer than k = {self.k}; give more "
                "training features, a larger alpha or a smaller k"
            )
        bank = f32(l2_normalize(x[:m]) * energy(z[:m])[:, None])
        self.bank_size_ = m
        self.backend_ = resolve_backend("nnguide", self.backend)
        self._index = InnerProductIndex(bank, self.backend_)

    def _score(self, inputs: Inputs) -> Float64Array:
        h = inputs.get("features")
        out = np.empty(h.shape[0], dtype=np.float64)
        for sl in row_blocks(h.shape[0], 32 * h.shape[1]):
            vals, _ = self._index.search(l2_normalize32(h[sl]), int(self.k))
            out[sl] = vals.astype(np.float64).mean(axis=1)
        return out * shared_energy(inputs)
