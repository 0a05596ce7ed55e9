"""LTS (logit scaling): Energy of the logits scaled by a sharpness factor of the features."""

from __future__ import annotations

from numbers import Real
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from numpy.typing import ArrayLike

from ._base import Detector, Float64Array, Inputs
from ._common import F64, logsumexp, rowwise_blocks
from ._params import Interval, ParamConstraints
from ._registry import register_detector

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["LTS", "lts_scaling", "lts_scores"]


def lts_scaling(h: Tensor, percentile: float) -> Tensor:
    """LTS's per-sample scaling factor ``S = (s / s_top)^2`` of features h (n, D).

    ``s`` is the sum of ``relu(h)`` and ``s_top`` the sum of its ``k = max(1, D - round(D
    percentile / 100))`` largest values (round half to even, as the public code's
    ``np.round``). ``S = 1`` for a sample with no positive activation (0 / 0 in the public
    code, which gives NaN).
    """
    import torch

    z = torch.relu(h)
    d = int(z.shape[1])
    k = max(1, d - round(d * float(percentile) / 100.0))
    s_all = z.sum(dim=1)
    s_top = z.topk(k, dim=1).values.sum(dim=1)
    ratio = torch.where(s_top > 0, s_all / torch.where(s_top > 0, s_top, 1.0), 1.0)
    return ratio.square()


def lts_scores(logits: ArrayLike, features: ArrayLike, percentile: float = 95.0) -> F64:
    """LTS scores ``logsumexp(S(h) z)`` of stored logits z (n, C) and features h (n, D).

    The same score as :class:`LTS` computes during extraction from the network's own
    ``(logits, features)``, here on arrays (e.g. a feature store's), in float64 row blocks:
    ``S(h)`` is :func:`lts_scaling`'s factor (top-k sum by partition, not sort; S = 1 without
    positive activation). Higher = more in-distribution.

    Examples
    --------
    >>> lts_scores([[3.0, 1.5]], [[3.0, 1.0, 0.0, -2.0]], percentile=75).round(4)
    array([5.4005])
    """
    z_all = np.asarray(logits)
    h_all = np.asarray(features)
    n, d = h_all.shape
    k = max(1, d - round(d * float(percentile) / 100.0))
    out = np.empty(n, dtype=np.float64)
    # cache-sized row blocks (every step is row-wise on C-contiguous rows: the same values as
    # one block); the float64 copy of h is made once, rectified in place
    for sl in rowwise_blocks(n, 16 * (d + int(z_all.shape[1])), h_all, z_all):
        h = np.array(h_all[sl], dtype=np.float64)
        np.maximum(h, 0.0, out=h)
        s_all = h.sum(axis=1)
        s_top = np.partition(h, d - k, axis=1)[:, d - k :].sum(axis=1)
        ratio = np.where(s_top > 0, s_all / np.where(s_top > 0, s_top, 1.0), 1.0)
        zs = np.array(z_all[sl], dtype=np.float64)
        zs *= np.square(ratio)[:, None]
        out[sl] = logsumexp(zs)
    return out


@register_detector
class LTS(Detector):
    """LTS score ``logsumexp(S(h) z)``: Energy of the logits times a feature sharpness factor.

    ``S(h) = (sum relu(h) / sum of the top-k relu(h))^2`` with k the ``100 - percentile`` %
    largest activations of the penultimate features h (:func:`lts_scaling`); z the logits.
    Higher = more in-distribution (pytorch-ood's ``LTS`` returns minus this).

    The scaling factor reads the pooled penultimate features, as the public code and
    pytorch-ood do (``lts(x)`` after ``avgpool`` and ``flatten``), so LTS needs only the stored
    logits and features: it is post-hoc (:func:`lts_scores`, nothing to fit) and runs on any
    existing feature store.

    Departures: the parameter is a ``percentile`` like ASH and SCALE (``percentile = 100 (1 -
    p)`` with pytorch-ood's ``p``, the fraction of activations kept; the public code also
    names it a percentile); ``k`` is at least 1 (pytorch-ood's guard; the public code would
    divide by an empty sum); a sample whose features have no positive activation gets ``S =
    1`` (plain Energy) instead of NaN.

    Parameters
    ----------
    percentile : float, default 95
        Percentage of activations left out of the top-k sum, in [0, 100] (pytorch-ood's default
        p = 0.05).

    References
    ----------
    .. [1] A. Djurisic, R. Liu and M. Nikolic, "Logit Scaling for Out-of-Distribution
       Detection", Machine Vision and Applications, 2025 (arXiv:2409.01175).
    """

    name = "lts"
    score_requires: ClassVar[frozenset[str]] = frozenset({"logits", "features"})
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "percentile": [Interval(Real, 0, 100, closed="both")]
    }

    def __init__(self, *, percentile: float = 95.0) -> None:
        self.percentile = percentile

    def _score(self, inputs: Inputs) -> Float64Array:
        return lts_scores(inputs.get("logits"), inputs.get("features"), float(self.percentile))
