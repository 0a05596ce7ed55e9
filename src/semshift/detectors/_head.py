"""Base for detectors scoring ``Energy(W h' + b)`` of transformed features h' (react, ash, ...)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from ._base import Detector, Float64Array, Inputs
from ._common import F32, F64, cache_blocks, f32, logsumexp, prepare_head, topk_mask
from ._shared import digest

__all__ = [
    "HeadEnergyDetector",
    "scaled_energy",
    "shared_head_product",
    "shared_kept_sums",
    "shared_topk",
    "sharpening_factor",
]


def shared_head_product(inputs: Inputs, weight: F32, token: str) -> F32:
    """``h @ W.T`` (n, C) float32 of the score features (no bias); shared per chunk by the
    detectors whose head digests to ``token`` (scale, max_cosine)."""
    return inputs.share(("head_product", token), lambda: f32(inputs.get("features")) @ weight.T)


def shared_topk(inputs: Inputs, k: int) -> NDArray[np.bool_]:
    """:func:`topk_mask` of the score features for ``k`` (n, D); shared per chunk."""
    return inputs.share(("topk_mask", int(k)), lambda: topk_mask(f32(inputs.get("features")), k))


def shared_kept_sums(
    inputs: Inputs, k: int, mask: NDArray[np.bool_] | None = None
) -> tuple[F64, F64]:
    """Per row, the sum ``s`` of the features and ``s_kept`` of the ``k`` largest (float64).

    ``mask``: :func:`shared_topk` of the same inputs and k when the caller has it already (a
    detector scored without a :class:`SharedResults` would otherwise select the top k twice).
    """

    def compute() -> tuple[F64, F64]:
        h = f32(inputs.get("features"))
        top = shared_topk(inputs, k) if mask is None else mask
        kept = np.where(top, h, np.float32(0))
        return h.sum(axis=1, dtype=np.float64), kept.sum(axis=1, dtype=np.float64)

    return inputs.share(("kept_sums", int(k)), compute)


def scaled_energy(product: F32, factor: F64, bias: F64) -> F64:
    """``logsumexp(factor * product + bias)`` per row, the float64 logits formed one
    cache-sized row block at a time (the same operations as on the whole array: equal values).
    """
    n, c = product.shape
    out = np.empty(n, dtype=np.float64)
    for sl in cache_blocks(n, 16 * int(c)):
        z = product[sl].astype(np.float64)
        z *= factor[sl, None]
        z += bias
        out[sl] = logsumexp(z)
    return out


def sharpening_factor(inputs: Inputs, k: int, mask: NDArray[np.bool_] | None = None) -> F64:
    """``exp(s / s_kept)`` per row (factor 1 where s_kept = 0), as ASH-S and SCALE."""
    s, s_kept = shared_kept_sums(inputs, k, mask)
    safe = np.where(s_kept != 0, s_kept, 1.0)
    return np.exp(np.where(s_kept != 0, s / safe, 0.0))


class HeadEnergyDetector(Detector):
    """Stores the head at fit; scores ``logsumexp(W transform(h) + b)`` per chunk.

    Subclasses override :meth:`_transform` (per chunk, float32 (n, D) -> float32 (n, D)) and
    may extend ``_fit``; :meth:`_logits` may be overridden when the logits have a cheaper or
    shared form. Logits are float32 (the product's precision) unless a subclass scales them
    (ash_s, scale: float64); the energy sums in float64 (:func:`logsumexp`).
    """

    fit_requires: ClassVar[frozenset[str]] = frozenset({"head"})
    score_requires: ClassVar[frozenset[str]] = frozenset({"features"})

    def _fit(self, inputs: Inputs) -> None:
        self.weight_, self.bias_ = prepare_head(*inputs.head)
        self._head_token = digest(self.weight_)

    def _transform(self, h: F32) -> F32:
        return h

    def _logits(self, inputs: Inputs) -> F32 | F64:
        h = f32(inputs.get("features"))
        z = self._transform(h) @ self.weight_.T
        z += self.bias_.astype(np.float32)
        return z

    def _score(self, inputs: Inputs) -> Float64Array:
        return logsumexp(self._logits(inputs))
