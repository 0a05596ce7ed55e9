"""KL matching: distance of the softmax to per-class mean softmax templates."""

from __future__ import annotations

import numpy as np

from ._base import Float64Array, Inputs
from ._common import class_sums, row_blocks, softmax
from ._registry import register_detector
from .logit import LogitDetector, shared_neg_entropy, shared_softmax

__all__ = ["KLMatching"]


@register_detector
class KLMatching(LogitDetector):
    """KL matching: ``-min_c KL(p || d_c)``, p = softmax(z); higher = more in-distribution.

    The template d_c is the mean softmax of the ID validation samples *predicted* as class c
    (labels are not used). Classes that no validation sample is predicted as have no template
    and are left out of the minimum (documented fallback); template entries are floored at the
    smallest positive float64 before the logarithm.

    Attributes
    ----------
    templates_ : float64 array (K, C)
        Templates of the K classes that have one.
    template_classes_ : int array (K,)
        Their class ids.

    References
    ----------
    .. [1] D. Hendrycks, S. Basart, M. Mazeika, A. Zou, J. Kwon, M. Mostajabi, J. Steinhardt and
       D. Song, "Scaling Out-of-Distribution Detection for Real-World Settings", ICML 2022.
    """

    name = "klm"
    fit_requires = frozenset({"val_logits"})

    def __init__(self) -> None:
        pass

    def _fit(self, inputs: Inputs) -> None:
        z = inputs.get("val_logits")
        n_classes = int(z.shape[1])
        pred = np.argmax(z, axis=1)
        sums = np.zeros((n_classes, n_classes), dtype=np.float64)
        for sl in row_blocks(z.shape[0], 24 * n_classes):
            sums += class_sums(softmax(np.asarray(z[sl], dtype=np.float64)), pred[sl], n_classes)
        counts = np.bincount(pred, minlength=n_classes)
        self.template_classes_ = np.flatnonzero(counts)
        self.templates_ = sums[self.template_classes_] / counts[self.template_classes_, None]
        self._log_templates = np.log(np.maximum(self.templates_, np.finfo(np.float64).tiny))

    def _score(self, inputs: Inputs) -> Float64Array:
        p = shared_softmax(inputs)
        kl = p @ self._log_templates.T
        np.subtract(shared_neg_entropy(inputs)[:, None], kl, out=kl)  # in place, same values
        return -kl.min(axis=1)
