"""Generated zero-shot data with a planted linear compatibility (shared by several test folders)."""

from __future__ import annotations

import numpy as np

from semshift.training.zsl import ZSLData


def planted(
    *,
    n_seen: int = 24,
    n_unseen: int = 8,
    dim: int = 32,
    att: int = 16,
    per_class: int = 30,
    noise: float = 0.1,
    seed: int = 0,
) -> ZSLData:
    """Features ``x = s_y A + noise`` (A: a random (att, dim) map with orthonormal rows), seen
    class embeddings random unit vectors, each unseen one the normalised sum of two seen ones
    (so CONSE's convex combinations can reach it). Seen images: 60% trainval, 40% test_seen;
    train / val classes: the first 2/3 / last 1/3 of the seen classes."""
    rng = np.random.default_rng(seed)
    S_seen = rng.standard_normal((n_seen, att))
    S_seen /= np.linalg.norm(S_seen, axis=1, keepdims=True)
    pairs = rng.permutation(n_seen)[: 2 * n_unseen].reshape(n_unseen, 2)
    S_unseen = S_seen[pairs[:, 0]] + S_seen[pairs[:, 1]]
    S_unseen /= np.linalg.norm(S_unseen, axis=1, keepdims=True)
    S = np.vstack((S_seen, S_unseen))
    A = np.linalg.qr(rng.standard_normal((dim, att)))[0].T
    n_cls = n_seen + n_unseen
    y = np.repeat(np.arange(n_cls), per_class)
    X = S[y] @ A + noise * rng.standard_normal((y.size, dim))
    rank = np.tile(np.arange(per_class), n_cls)
    seen_img = y < n_seen
    test_seen = np.flatnonzero(seen_img & (rank >= 0.6 * per_class))
    trainval = np.flatnonzero(seen_img & (rank < 0.6 * per_class))
    n_train = (2 * n_seen) // 3
    return ZSLData(
        name="planted",
        features=X,
        labels=y.astype(np.int64),
        embeddings=S,
        class_names=tuple(f"c{c}" for c in range(n_cls)),
        sets={
            "trainval": trainval,
            "train": trainval[y[trainval] < n_train],
            "val": trainval[y[trainval] >= n_train],
            "test_seen": test_seen,
            "test_unseen": np.flatnonzero(~seen_img),
        },
        source="planted",
    )


def linear_classes(
    seed: int = 0, n_cls: int = 6, d: int = 10, a: int = 5, per: int = 8, noise: float = 0.3
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Small zero-shot data ``(X, y, S)``: ``per`` images of each of ``n_cls`` classes with
    random embeddings ``S`` (n_cls, a), features ``x = s_y A + noise`` (A random (a, d))."""
    rng = np.random.default_rng(seed)
    S = rng.standard_normal((n_cls, a))
    y = np.repeat(np.arange(n_cls), per)
    X = S[y] @ rng.standard_normal((a, d)) + noise * rng.standard_normal((y.size, d))
    return X, y, S
