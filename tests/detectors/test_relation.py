"""Relation: a hand-computed graph, agreement with OpenOOD's released code, bad inputs."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
import scipy.stats

import semshift.detectors.relation
from semshift import detectors
from semshift.errors import InputError

LOG3 = math.log(3.0)


def test_hand_computed_edges() -> None:
    # Training nodes: f = (1, 0), (0, 1), (1, 1) / sqrt 2 with p = (1/2, 1/2), (3/4, 1/4),
    # (1/4, 3/4) (logits (0, 0), (log 3, 0), (0, log 3)).
    h_train = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0]])
    z_train = np.array([[0.0, 0.0], [LOG3, 0.0], [0.0, LOG3]])
    # Test t: f = (1, 0), p = (1/2, 1/2): <f, f_j> = 1, 0, 1/sqrt 2 and <p, p_j> = 1/2 each,
    #   so the edges are 1/2, 0, 1/(2 sqrt 2).
    # Test u: f = (-1, 1) / sqrt 2, p = (3/4, 1/4): <f, f_j> = -1/sqrt 2 (cut at 0), 1/sqrt 2,
    #   0 and <p, p_2> = 9/16 + 1/16 = 5/8, so the only edge is 5 / (8 sqrt 2).
    h = np.array([[5.0, 0.0], [-1.0, 1.0]])
    z = np.array([[0.0, 0.0], [LOG3, 0.0]])
    t_edges = [0.5, 0.5 / math.sqrt(2)]
    u_edge = 5 / (8 * math.sqrt(2))
    cases = [
        ({}, [sum(t_edges), u_edge]),
        ({"power": 2}, [sum(e**2 for e in t_edges), u_edge**2]),
        ({"threshold": 0.4}, [0.5, u_edge]),  # 1/(2 sqrt 2) = 0.354 is cut
        ({"threshold": 0.5}, [0.0, 0.0]),  # an edge equal to the threshold is cut
    ]
    for params, expected in cases:
        det = detectors.get("relation", **params).fit(features=h_train, logits=z_train)
        np.testing.assert_allclose(det.score(features=h, logits=z), expected, rtol=1e-6, atol=1e-7)


def reference_relation(
    h_train: np.ndarray, z_train: np.ndarray, h: np.ndarray, z: np.ndarray, pow: float
) -> np.ndarray:
    """OpenOOD's relation score, ported line by line from
    Jingkang50/OpenOOD@openood/postprocessors/relation_postprocessor.py (normalize, kernel,
    get_relation, setup, postprocess), in float32 torch on the CPU."""
    torch = pytest.importorskip("torch")
    from math import ceil

    def normalize(feat, nc=50000):
        with torch.no_grad():
            split = ceil(len(feat) / nc)
            for i in range(split):
                feat_ = feat[i * nc : (i + 1) * nc]
                feat[i * nc : (i + 1) * nc] = feat_ / torch.sqrt(
                    (feat_**2).sum(-1) + 1e-10
                ).reshape(-1, 1)
        return feat

    def kernel(feat, feat_t, prob, prob_t, split=2):
        size = ceil(len(feat_t) / split)
        rel_full = []
        for i in range(split):
            feat_t_ = feat_t[i * size : (i + 1) * size]
            prob_t_ = prob_t[i * size : (i + 1) * size]
            with torch.no_grad():
                dot = torch.matmul(feat, feat_t_.transpose(1, 0))
                dot = torch.clamp(dot, min=0.0)
                sim = torch.matmul(prob, prob_t_.transpose(1, 0))
                rel = dot * sim
            rel_full.append(rel)
        return torch.cat(rel_full, dim=-1)

    def get_relation(feat, feat_t, prob, prob_t, pow=1, chunk=50, thres=0.03):
        n = feat.shape[0]
        n_chunk = ceil(n / chunk)
        score = []
        for i in range(n_chunk):
            feat_ = feat[i * chunk : (i + 1) * chunk]
            prob_ = prob[i * chunk : (i + 1) * chunk]
            rel = kernel(feat_, feat_t, prob_, prob_t)
            mask = rel.abs() > thres
            rel_mask = mask * rel
            edge_sum = (rel_mask.sign() * (rel_mask.abs() ** pow)).sum(-1)
            score.append(edge_sum.cpu())
        return torch.cat(score, dim=0)

    def as_t(a: np.ndarray):
        return torch.from_numpy(np.asarray(a, dtype=np.float32).copy())

    feat_train = normalize(as_t(h_train))  # setup
    prob_train = torch.softmax(as_t(z_train), dim=1)
    feature = normalize(as_t(h))  # postprocess
    prob = torch.softmax(as_t(z), dim=1)
    return get_relation(feature, feat_train, prob, prob_train, pow=pow).double().numpy()


@pytest.mark.parametrize(("power", "tiles"), [(1, False), (2, False), (1, True), (2, True)])
def test_agrees_with_released_code(
    power: int, tiles: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if tiles:  # small tiles, several chunks of them, no padding: tiles are skipped
        for attr, value in [("BANK_CHUNK", 96), ("TILE", 16), ("MIN_MULADDS", 0)]:
            monkeypatch.setattr(semshift.detectors.relation, attr, value)
    rng = np.random.default_rng(5)
    d, c, n_train = 16, 6, 700
    means = 2.0 * (rng.random((c, d)) < 0.4)
    y = rng.integers(0, c, n_train)
    h_train = np.maximum(means[y] + rng.standard_normal((n_train, d)), 0)
    h = np.maximum(means[rng.integers(0, c, 240)] + 1.5 * rng.standard_normal((240, d)), 0)
    w = means - means.mean(0)
    ours = (
        detectors.get("relation", power=power)
        .fit(features=h_train, logits=h_train @ w.T)
        .score(features=h, logits=h @ w.T)
    )
    ref = reference_relation(h_train, h_train @ w.T, h, h @ w.T, pow=power)
    assert np.count_nonzero(ref) > 200  # most samples have edges
    # float32 products: an edge within rounding of the threshold may fall on either side
    np.testing.assert_allclose(ours, ref, rtol=1e-4)
    assert scipy.stats.spearmanr(ours, ref).statistic >= 0.999


def test_classes_must_match_the_training_probabilities() -> None:
    rng = np.random.default_rng(0)
    det = detectors.get("relation").fit(features=rng.random((20, 4)), logits=rng.random((20, 5)))
    with pytest.raises(InputError, match=r"^relation.score: `logits` has 3 classes but fit saw 5$"):
        det.score(features=rng.random((2, 4)), logits=rng.random((2, 3)))
    with pytest.raises(InputError, match=r"^relation: threshold must be a number >= 0, got -0.1$"):
        detectors.get("relation", threshold=-0.1)


def test_doctests() -> None:
    result = doctest.testmod(semshift.detectors.relation, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
