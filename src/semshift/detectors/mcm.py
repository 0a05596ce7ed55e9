"""MCM: maximum softmax of the temperature-scaled cosine similarities to the class embeddings."""

from __future__ import annotations

from numbers import Real
from typing import ClassVar

import numpy as np

from ._base import Detector, Float64Array, Inputs
from ._common import f32, prepare_head, row_blocks
from ._head import shared_head_product
from ._params import Interval, ParamConstraints, SearchSpace
from ._registry import register_detector
from ._shared import digest

__all__ = ["MCM"]


@register_detector
class MCM(Detector):
    """Maximum concept matching ``max_c softmax(cos(h, W_c) / tau)``; higher = more ID.

    For a CLIP zero-shot head (semshift's open_clip adapter) the features h are the image
    embeddings and the head rows are the class text embeddings scaled by CLIP's logit scale
    (W = s T, b = 0): the cosine removes the scale, so the score equals the paper's, computed
    from the image embedding and the normalised text embeddings T, and pytorch-ood's ``MCM``
    given the same embeddings (which returns minus this value). The stored logits (s cos) are
    not used: the scale s is not stored, and the softmax needs the cosines divided by tau. The
    bias b is ignored (zero for CLIP heads). For another linear head, the score is the same
    formula on its rows. A zero feature or head row has cosine 0, as pytorch-ood's
    ``F.normalize`` gives.

    Parameters
    ----------
    temperature : float, default 1.0
        tau: the cosine similarities are divided by it before the softmax (the paper's default,
        as pytorch-ood and OpenOOD).

    Examples
    --------
    >>> import numpy as np
    >>> from semshift import detectors
    >>> text = np.array([[2.0, 0.0], [0.0, 3.0]])  # scaled text embeddings, W = s T
    >>> det = detectors.get("mcm").fit(head=(text, np.zeros(2)))
    >>> det.score(features=np.array([[1.0, 0.0], [1.0, 1.0]])).round(4)
    array([0.7311, 0.5   ])

    References
    ----------
    .. [1] Y. Ming, Z. Cai, J. Gu, Y. Sun, W. Li and Y. Li, "Delving into Out-of-Distribution
       Detection with Vision-Language Representations", NeurIPS 2022.
    """

    name = "mcm"
    fit_requires = frozenset({"head"})
    score_requires = frozenset({"features"})
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "temperature": [Interval(Real, 0, None, closed="neither")]
    }
    #: OpenOOD v1.5's sweep (configs/postprocessors/mcm.yml)
    search_space: ClassVar[SearchSpace] = {"temperature": (0.01, 1.0, 10.0)}

    def __init__(self, *, temperature: float = 1.0) -> None:
        self.temperature = temperature

    def _fit(self, inputs: Inputs) -> None:
        self._weight, _ = prepare_head(*inputs.head)
        self._head_token = digest(self._weight)
        norms = np.linalg.norm(self._weight.astype(np.float64), axis=1)
        self._inv_norms = (1.0 / np.where(norms > 0, norms, 1.0)).astype(np.float32)

    def _score(self, inputs: Inputs) -> Float64Array:
        # cos(h, W_c) = (W h)_c / (||W_c|| ||h||): the product W h is shared with max_cosine
        h = inputs.get("features")
        prod = shared_head_product(inputs, self._weight, self._head_token)
        out = np.empty(h.shape[0], dtype=np.float64)
        for sl in row_blocks(h.shape[0], 4 * h.shape[1] + 16 * prod.shape[1]):
            hb = f32(h[sl])
            norms = np.sqrt(np.einsum("ij,ij->i", hb, hb, dtype=np.float64))
            scale = 1.0 / (np.where(norms > 0, norms, 1.0) * float(self.temperature))
            s = prod[sl] * self._inv_norms
            s *= scale.astype(np.float32)[:, None]
            # max softmax = exp(max s - logsumexp s) = 1 / sum_c exp(s_c - max s): each term
            # exponentiated in float32 (as the block, like _common.logsumexp), summed in float64
            s -= s.max(axis=1, keepdims=True)
            out[sl] = 1.0 / np.exp(s, out=s).sum(axis=1, dtype=np.float64)
        return out
