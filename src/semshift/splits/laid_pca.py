"""IS-OOD's check of LAID against PCA (its Appendix B, Table 3): zero-shot accuracy of images'
semantic and covariate halves against the classes' text embeddings decomposed the same way.

Method reference: docs/methods.md#is-ood-graded-shift.

A good decomposition keeps the label in the semantic part (zero-shot accuracy near that of the
full embedding) and leaves little of it in the covariate part (accuracy near chance). The PCA
decomposition is fitted on the same text triplets as LAID: the semantic basis from the
differences ``standard - semantic_shift`` (a label change under one template), the covariate
basis from ``standard - covariate_shift`` (a template change under one label), each the leading
principal directions up to ``variance`` (0.9, as the paper) of cumulative explained variance.

References
----------
Long, X., Zhang, J., Shan, S. and Chen, X. (2025). Rethinking the evaluation of
out-of-distribution detection: a sorites paradox. (IS-OOD.) Appendix B, Table 3.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from semshift.errors import InputError
from semshift.splits.laid import LAID

__all__ = [
    "PCADecomposition",
    "class_text_embeddings",
    "compare_decompositions",
    "fit_pca_decomposition",
    "pca_basis",
    "topk_accuracy",
]


def pca_basis(x: ArrayLike, variance: float = 0.9) -> NDArray[np.float64]:
    """Leading principal directions of the rows of ``x`` (n, l), (l, k) orthonormal columns:
    the fewest whose cumulative explained variance reaches ``variance``. Each column's largest
    entry (by magnitude) is positive, so the basis is one for given data."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 2 or len(a) < 2:
        raise InputError(f"PCA needs an (n >= 2, l) array, got shape {a.shape}")
    if not 0 < variance <= 1:
        raise InputError(f"PCA: the explained variance must be in (0, 1], got {variance}")
    c = a - a.mean(axis=0)
    vals, vecs = np.linalg.eigh(c.T @ c / (len(a) - 1))
    vals, vecs = np.clip(vals[::-1], 0.0, None), vecs[:, ::-1]
    total = vals.sum()
    if not total > 0:
        raise InputError("PCA: the differences have no variance (every text embeds alike)")
    ratio = np.cumsum(vals) / total
    k = min(int(np.searchsorted(ratio, variance - 1e-12, side="left")) + 1, len(vals))
    basis = vecs[:, :k]
    flip = np.sign(basis[np.abs(basis).argmax(axis=0), np.arange(k)])
    return np.asarray(basis * np.where(flip == 0, 1.0, flip), dtype=np.float64)


@dataclass
class PCADecomposition:
    """PCA bases of the semantic (``sem``, (l, k_sem)) and covariate (``cov``, (l, k_cov))
    directions; a feature's parts are its coordinates in each basis."""

    sem: NDArray[np.float64]
    cov: NDArray[np.float64]
    variance: float = 0.9

    def transform(self, features: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """``(f_sem, f_cov)``: (n, k_sem) and (n, k_cov), from features (n, l)."""
        f = np.asarray(features, dtype=np.float64)
        if f.ndim != 2 or f.shape[1] != self.sem.shape[0]:
            raise InputError(
                f"the PCA decomposition expects features of dimension {self.sem.shape[0]}, got "
                f"shape {f.shape}"
            )
        return f @ self.sem, f @ self.cov


def fit_pca_decomposition(
    standard: ArrayLike,
    semantic_shift: ArrayLike,
    covariate_shift: ArrayLike,
    *,
    variance: float = 0.9,
) -> PCADecomposition:
    """The PCA decomposition of LAID's text triplets (each (n, l)): the semantic basis from
    ``standard - semantic_shift``, the covariate basis from ``standard - covariate_shift``
    (:func:`pca_basis`)."""
    st = np.asarray(standard, dtype=np.float64)
    ss = np.asarray(semantic_shift, dtype=np.float64)
    cs = np.asarray(covariate_shift, dtype=np.float64)
    if not (st.shape == ss.shape == cs.shape) or st.ndim != 2:
        raise InputError(
            f"triplet embeddings must share one (n, l) shape, got {st.shape}, {ss.shape}, "
            f"{cs.shape}"
        )
    return PCADecomposition(
        sem=pca_basis(st - ss, variance), cov=pca_basis(st - cs, variance), variance=variance
    )


def _unit(x: NDArray[np.float64]) -> NDArray[np.float64]:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def topk_accuracy(
    image_features: ArrayLike,
    labels: ArrayLike,
    class_embeddings: ArrayLike,
    ks: Sequence[int] = (1, 5),
    *,
    block: int = 4096,
) -> dict[int, float]:
    """Zero-shot top-k accuracy: image i is right at k when its class (``labels[i]``, a row of
    ``class_embeddings``) is among the k classes of highest cosine similarity, ties going to
    the lower class index (as ``argmax``); a zero vector has similarity 0 to everything."""
    f = np.asarray(image_features, dtype=np.float64)
    t = np.asarray(class_embeddings, dtype=np.float64)
    y = np.asarray(labels)
    if f.ndim != 2 or t.ndim != 2 or f.shape[1] != t.shape[1]:
        raise InputError(
            f"image features {f.shape} and class embeddings {t.shape} must be 2-d of one width"
        )
    if y.shape != (len(f),) or not np.issubdtype(y.dtype, np.integer):
        raise InputError(f"labels must be {len(f)} integers, got shape {y.shape} ({y.dtype})")
    if len(y) and (y.min() < 0 or y.max() >= len(t)):
        raise InputError(f"labels must index the {len(t)} class embeddings")
    tu = _unit(t).T
    ranks = np.empty(len(f), dtype=np.int64)
    cols = np.arange(len(t))
    for lo in range(0, len(f), block):
        sim = _unit(f[lo : lo + block]) @ tu
        yy = y[lo : lo + block]
        true = sim[np.arange(len(yy)), yy][:, None]
        ahead = (sim > true) | ((sim == true) & (cols[None, :] < yy[:, None]))
        ranks[lo : lo + block] = ahead.sum(axis=1)
    return {int(k): float(np.mean(ranks < k)) if len(ranks) else float("nan") for k in ks}


def class_text_embeddings(
    encoder: Any, names: Sequence[str], templates: Sequence[str]
) -> NDArray[np.float32]:
    """(C, l) zero-shot class embeddings: the L2-normalised mean over ``templates`` of each
    name's L2-normalised text embeddings (CLIP's prompt ensemble)."""
    texts = [t.format(n) for n in names for t in templates]
    emb = np.asarray(encoder.encode(texts), dtype=np.float32)
    if emb.ndim != 2 or len(emb) != len(texts):
        raise InputError(f"the text encoder returned shape {emb.shape} for {len(texts)} texts")
    emb = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
    mean = emb.reshape(len(names), len(templates), -1).mean(axis=1)
    return np.asarray(mean / np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12))


def compare_decompositions(
    laid: LAID,
    pca: PCADecomposition,
    image_features: ArrayLike,
    labels: ArrayLike,
    class_embeddings: ArrayLike,
    ks: Sequence[int] = (1, 5),
) -> pd.DataFrame:
    """IS-OOD Table 3: zero-shot top-k accuracy of the full embeddings (``CLIP``), then of the
    semantic and the covariate parts by ``PCA`` and by ``LAID``; images and class embeddings
    are decomposed alike.

    Returns
    -------
    DataFrame
        One row per (part, method): ``part`` (full, semantic, covariate), ``method``, ``dims``
        (the part's dimension) and ``acc@k`` per k (fractions).
    """
    f = np.asarray(image_features, dtype=np.float32)
    t = np.asarray(class_embeddings, dtype=np.float32)
    f_sem, f_cov = laid.transform(f)
    t_sem, t_cov = laid.transform(t)
    p_sem, p_cov = pca.transform(f)
    q_sem, q_cov = pca.transform(t)
    parts: list[tuple[str, str, NDArray[Any], NDArray[Any]]] = [
        ("full", "CLIP", f, t),
        ("semantic", "PCA", p_sem, q_sem),
        ("semantic", "LAID", f_sem, t_sem),
        ("covariate", "PCA", p_cov, q_cov),
        ("covariate", "LAID", f_cov, t_cov),
    ]
    rows = []
    for part, method, img, txt in parts:
        acc = topk_accuracy(img, labels, txt, ks)
        rows.append(
            {"part": part, "method": method, "dims": int(img.shape[1])}
            | {f"acc@{k}": v for k, v in acc.items()}
        )
    return pd.DataFrame(rows)
