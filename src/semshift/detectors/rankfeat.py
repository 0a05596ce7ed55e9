"""RankFeat: Energy of the logits after removing the rank-1 part of the last feature map."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._registry import register_detector
from .model_level import ModelLevelDetector, ModelView, float32

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["RankFeat", "rank1_component"]


def rank1_component(flat: Tensor) -> Tensor:
    """The best rank-1 approximation ``s1 u1 v1^T`` of each matrix of a batch.

    Parameters
    ----------
    flat : Tensor (n, C, K)
        A batch of matrices (RankFeat: feature maps with K = H W).

    Returns
    -------
    Tensor (n, C, K), dtype of ``flat``
        ``s1 u1 v1^T`` of every matrix, equal to the truncated SVD's term (it is unique up to
        the sign of ``u1`` and ``v1``, which cancels; when ``s1 = s2`` any top singular pair is a
        valid answer, as with the SVD). Computed as ``M v1 v1^T`` with ``v1`` the top
        eigenvector of ``M^T M`` (or ``u1 u1^T M`` from ``M M^T``, whichever is smaller), in
        float64 so that squaring the matrix costs no precision that matters.
    """
    import torch

    m = flat.double()
    if m.shape[2] <= m.shape[1]:
        _, vecs = torch.linalg.eigh(m.transpose(1, 2) @ m)  # ascending eigenvalues
        v = vecs[:, :, -1:]
        out = (m @ v) @ v.transpose(1, 2)
    else:
        _, vecs = torch.linalg.eigh(m @ m.transpose(1, 2))
        u = vecs[:, :, -1:]
        out = u @ (u.transpose(1, 2) @ m)
    return out.to(flat.dtype)


@register_detector
class RankFeat(ModelLevelDetector):
    """RankFeat score ``logsumexp(logits)`` after rank-1 feature removal; higher = more ID.

    ``s1 u1 v1^T`` of each sample's (C, HW) last feature map is subtracted, the rest pooled
    and passed through the head as in the normal forward pass; score = Energy (T = 1).
    Model-level: needs the last feature map (CNN adapters only).

    The rank-1 term is exact, as the authors' SVD (not their power-iteration approximation),
    but computed from the top eigenvector of the smaller Gram matrix (HW x HW or C x C) in
    float64 (:func:`rank1_component`), an order of magnitude faster than a batched
    ``torch.linalg.svd`` on the CPU. Only the last block is used (the paper also reports a
    variant fusing an earlier block).

    References
    ----------
    .. [1] Y. Song, N. Sebe and W. Wang, "RankFeat: Rank-1 Feature Removal for
       Out-of-distribution Detection", NeurIPS 2022.
    """

    name = "rankfeat"
    model_requires = frozenset({"feature_map"})

    def __init__(self) -> None:
        pass

    def _score_batch(self, model: ModelView, x: Tensor) -> Tensor:
        import torch

        with torch.no_grad():
            fmap = float32(model.feature_map(x))
            n, c, h, w = fmap.shape
            flat = fmap.reshape(n, c, h * w)
            rank1 = rank1_component(flat)
            logits = float32(model.from_feature_map((flat - rank1).reshape(n, c, h, w))[0])
        return torch.logsumexp(logits, dim=1)
