"""The synthetic detector-benchmark data every detector speed script draws (one copy).

Sparse class means against unit noise, ReLU'd: about 98% top-1 accuracy with 1,000 classes and
D = 2,048, so a validation set has errors and every class has correct samples. The head is the
LDA classifier of the pre-ReLU Gaussians (unit covariance). Everything is float32 and generated
in blocks of 8,192 rows.
"""

from __future__ import annotations

import numpy as np

Array = np.ndarray
BLOCK = 8192


def sparse_means(rng: np.random.Generator, classes: int, dim: int) -> Array:
    """``2 * classes`` class means (known, then new), float64: 5% of units at 0.4-0.9."""
    return (rng.random((2 * classes, dim)) < 0.05) * rng.uniform(0.4, 0.9, (2 * classes, dim))


def lda_head(mu: Array) -> tuple[Array, Array]:
    """``(W, b)`` of the known class means ``mu``: ``W = mu``, ``b = -|mu|^2 / 2``, float32."""
    w = np.asarray(mu, np.float32).copy()
    b = (-0.5 * (np.asarray(mu, np.float64) ** 2).sum(1)).astype(np.float32)
    return w, b


def draw(rng: np.random.Generator, centres: Array, labels: Array) -> Array:
    """``relu(N(centres[labels], I) + 0.3)`` as float32, in blocks."""
    out = np.empty((labels.size, centres.shape[1]), dtype=np.float32)
    for s in range(0, labels.size, BLOCK):
        blk = rng.standard_normal((min(BLOCK, labels.size - s), centres.shape[1]), np.float32)
        blk += centres[labels[s : s + BLOCK]].astype(np.float32, copy=False) + np.float32(0.3)
        out[s : s + BLOCK] = np.maximum(blk, 0, out=blk)
    return out


def logits(h: Array, w: Array, b: Array) -> Array:
    """``h @ W.T + b`` in float32, in blocks."""
    out = np.empty((h.shape[0], w.shape[0]), dtype=np.float32)
    for s in range(0, h.shape[0], BLOCK):
        out[s : s + BLOCK] = h[s : s + BLOCK] @ w.T + b
    return out
