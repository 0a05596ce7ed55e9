"""NCI: alignment of the centred feature with the predicted class's head row, plus its L1 norm."""

from __future__ import annotations

from numbers import Real
from typing import ClassVar

import numpy as np

from ._base import Detector, Float64Array, Inputs
from ._common import column_mean, rowwise_blocks
from ._params import Interval, ParamConstraints, SearchSpace
from ._registry import register_detector

__all__ = ["NCI"]

_EPS = 1e-12


@register_detector
class NCI(Detector):
    """Neural-collapse-inspired score; higher = more in-distribution.

    ``<W_yhat, h - mu_G> / ||h - mu_G|| + alpha ||h||_1``, with mu_G the mean training feature,
    yhat = argmax z and W_yhat its head row (not normalised: by neural collapse the class rows
    have equal norms, so the paper's cosine drops ||W_yhat||, as pytorch-ood and OpenOOD do).
    The first term is the proximity to the predicted class's weight vector, the second
    penalises features near the origin. The prediction is taken from the test logits (equal to
    pytorch-ood's ``head(features)`` when logits = h W^T + b). A feature exactly at mu_G has its
    norm floored at 1e-12 (pytorch-ood returns NaN there). pytorch-ood returns minus this value.

    Parameters
    ----------
    alpha : float, default 0.0
        Weight of the feature-norm term (pytorch-ood's default; OpenOOD starts from 0.0001 and
        both tune it on held-out OOD data over a grid such as 0.0001 to 1).

    Attributes
    ----------
    mean_feature_ : float64 array (D,)
        mu_G.

    Examples
    --------
    >>> import numpy as np
    >>> from semshift import detectors
    >>> w, b = np.array([[1.0, 0.0], [0.0, 1.0]]), np.zeros(2)
    >>> det = detectors.get("nci").fit(features=np.zeros((2, 2)), head=(w, b))
    >>> h = np.array([[3.0, 4.0], [1.0, 0.0]])
    >>> det.score(features=h, logits=h @ w.T + b).round(4)
    array([0.8, 1. ])

    References
    ----------
    .. [1] L. Liu and Y. Qin, "Detecting Out-of-Distribution Through the Lens of Neural
       Collapse", CVPR 2025 (arXiv:2311.01479).
    """

    name = "nci"
    fit_requires = frozenset({"features", "head"})
    score_requires = frozenset({"features", "logits"})
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "alpha": [Interval(Real, 0, None, closed="left")]
    }
    #: OpenOOD v1.5's sweep (configs/postprocessors/nci.yml) after pytorch-ood's default 0
    search_space: ClassVar[SearchSpace] = {"alpha": (0.0, 0.0001, 0.001, 0.01, 0.1)}

    def __init__(self, *, alpha: float = 0.0) -> None:
        self.alpha = alpha

    def _fit(self, inputs: Inputs) -> None:
        self.mean_feature_ = column_mean(inputs.get("features"))
        self._weight = np.array(inputs.head[0], dtype=np.float64, order="C")

    def _score(self, inputs: Inputs) -> Float64Array:
        h, z = inputs.get("features"), inputs.get("logits")
        out = np.empty(h.shape[0], dtype=np.float64)
        # every step is row-wise
        for sl in rowwise_blocks(h.shape[0], 24 * h.shape[1], h, z):
            hb = np.asarray(h[sl], dtype=np.float64)
            centred = hb - self.mean_feature_
            rows = self._weight[np.asarray(z[sl]).argmax(axis=1)]
            align = np.einsum("ij,ij->i", rows, centred)
            out[sl] = align / np.maximum(np.linalg.norm(centred, axis=1), _EPS)
            if self.alpha > 0:
                out[sl] += float(self.alpha) * np.abs(hb).sum(axis=1)
        return out
