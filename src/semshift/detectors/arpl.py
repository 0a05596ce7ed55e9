"""ARPL's open-set score: the largest distance logit to the reciprocal points."""

from __future__ import annotations

import numpy as np

from ._base import Detector, Float64Array, Inputs
from ._registry import register_detector

__all__ = ["ARPLScore"]


@register_detector
class ARPLScore(Detector):
    """``max_k (||h - P_k||^2 / D - h . P_k)`` of a model trained with ARPL; higher = more ID.

    A model trained by ``semshift train --method arpl`` stores its reciprocal points P in its
    linear head (``W_k = -(1 + 2/D) P_k``, ``b_k = ||P_k||^2 / D``), so its stored logits are
    ``z_k - ||h||^2 / D``; the score adds the feature term back:
    ``max_k logits_k + ||h||^2 / D``, with D the feature dimension. This is the reference code's
    open-set score (the maximum of the distance logits). On a model not trained with ARPL it is
    MLS plus the squared feature norm over D.

    References
    ----------
    .. [1] Chen, Peng, Wang, Tian. "Adversarial Reciprocal Points Learning for Open Set
       Recognition." IEEE TPAMI 2021.

    Examples
    --------
    >>> import numpy as np
    >>> det = ARPLScore().fit()
    >>> det.score(logits=np.array([[1.0, 3.0]]), features=np.array([[2.0, 0.0]])).tolist()
    [5.0]
    """

    name = "arpl"
    score_requires = frozenset({"logits", "features"})

    def __init__(self) -> None:
        pass

    def _fit(self, inputs: Inputs) -> None:
        pass

    def _score(self, inputs: Inputs) -> Float64Array:
        z = np.asarray(inputs.get("logits"), dtype=np.float64)
        h = np.asarray(inputs.get("features"), dtype=np.float64)
        return z.max(axis=1) + np.einsum("ij,ij->i", h, h) / h.shape[1]
