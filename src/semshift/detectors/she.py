"""SHE: inner product with the stored mean pattern of the predicted class."""

from __future__ import annotations

import numpy as np

from ._base import Detector, Float64Array, Inputs, require_class_counts
from ._common import class_sums, row_blocks
from ._registry import register_detector

__all__ = ["SHE"]


@register_detector
class SHE(Detector):
    """Simplified Hopfield energy ``<h, pattern_argmax z>``; higher = more in-distribution.

    pattern_c is the mean training feature of the correctly classified training samples of
    class c (prediction = argmax of the training logits).

    Attributes
    ----------
    patterns_ : float64 array (C, D)
        Stored patterns.

    Raises
    ------
    InputError
        (fit) A class has no correctly classified training sample.

    References
    ----------
    .. [1] J. Zhang, Q. Fu, X. Chen, L. Du, Z. Li, G. Wang, X. Liu, S. Han and D. Zhang,
       "Out-of-Distribution Detection based on In-Distribution Data Patterns Memorization with
       Modern Hopfield Energy", ICLR 2023.
    """

    name = "she"
    fit_requires = frozenset({"features", "logits", "labels"})
    score_requires = frozenset({"features", "logits"})

    def __init__(self) -> None:
        pass

    def _fit(self, inputs: Inputs) -> None:
        x, z, y = inputs.get("features"), inputs.get("logits"), inputs.get("labels")
        n_classes = int(z.shape[1])
        correct = np.argmax(z, axis=1) == y
        counts = np.bincount(y[correct], minlength=n_classes)
        require_class_counts("she.fit", counts, "correctly classified training samples")
        self.patterns_ = class_sums(x, np.where(correct, y, -1), n_classes) / counts[:, None]

    def _score(self, inputs: Inputs) -> Float64Array:
        h, z = inputs.get("features"), inputs.get("logits")
        pred = np.argmax(z, axis=1)
        out = np.empty(h.shape[0], dtype=np.float64)
        for sl in row_blocks(h.shape[0], 24 * h.shape[1]):
            hb = np.asarray(h[sl], dtype=np.float64)
            out[sl] = np.einsum("ij,ij->i", hb, self.patterns_[pred[sl]])
        return out
