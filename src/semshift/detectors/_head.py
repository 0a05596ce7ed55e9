"""Base for detectors scoring ``Energy(W h' + b)`` of transformed features h' (react, ash, ...)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ._base import Detector, Float64Array, Inputs
from ._common import F32, F64, f32, logsumexp, prepare_head, row_blocks

__all__ = ["HeadEnergyDetector"]


class HeadEnergyDetector(Detector):
    """Stores the head at fit; scores ``logsumexp(W transform(h) + b)`` in float32 blocks.

    Subclasses override :meth:`_transform` (per block, float32 (n, D) -> float32 (n, D)) and may
    extend ``_fit``; :meth:`_logits` may be overridden when the logits have a cheaper form.
    """

    fit_requires: ClassVar[frozenset[str]] = frozenset({"head"})
    score_requires: ClassVar[frozenset[str]] = frozenset({"features"})

    def _fit(self, inputs: Inputs) -> None:
        self.weight_, self.bias_ = prepare_head(*inputs.head)

    def _transform(self, h: F32) -> F32:
        return h

    def _logits(self, h: F32) -> F64:
        z = (self._transform(h) @ self.weight_.T).astype(np.float64)
        z += self.bias_
        return z

    def _score(self, inputs: Inputs) -> Float64Array:
        h = inputs.get("features")
        out = np.empty(h.shape[0], dtype=np.float64)
        row_bytes = 24 * h.shape[1] + 16 * self.weight_.shape[0]
        for sl in row_blocks(h.shape[0], row_bytes):
            out[sl] = logsumexp(self._logits(f32(h[sl])))
        return out
