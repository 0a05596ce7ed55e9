"""Relation's skipped tiles: the scores of the full computation, bit for bit.

Every edge relation computes is the full computation's (its products stay on the BLAS kernels of
large products), and the float64 sums of the kept edges are exact for power 1 and 2 at these
sizes (multiples of ``2^-29`` or ``2^-34`` below 2, at most 2,000 of them), so the scores equal a
dense reference bit for bit; for power 8 only the order of the float64 sums may differ.
"""

from __future__ import annotations

import numpy as np
import pytest

import semshift.detectors.relation as relation
from semshift import detectors

C, D = 200, 256


def dense(det: relation.Relation, h: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Every edge of every test row with every training row: one float32 product per block."""
    f, p = relation.unit_rows(h), relation.probabilities(z)
    thr, power = np.float32(det.threshold), np.float32(det.power)
    out = np.zeros(f.shape[0])
    for r0 in range(0, f.shape[0], 256):
        rel = f[r0 : r0 + 256] @ det._features.T
        rel *= p[r0 : r0 + 256] @ det._probs.T
        kept = rel > thr
        if power != 1:
            rel **= power
        out[r0 : r0 + 256] = np.add.reduce(rel, axis=1, where=kept, dtype=np.float64)
    return out


def bench_like(seed: int, n_train: int = 2000, n_test: int = 512) -> tuple[np.ndarray, ...]:
    """ReLU features around sparse class means (10 training rows per class), logits from a
    head on the centred means; test rows: ID rows, noisier rows and mixtures with new means
    (confident rows and rows with their probability spread over several classes)."""
    rng = np.random.default_rng(seed)
    mu = 3.0 * (rng.random((C, D)) < 0.1)
    new = 3.0 * (rng.random((40, D)) < 0.1)
    w = mu - mu.mean(0)
    h_train = np.maximum(mu[np.arange(n_train) % C] + rng.standard_normal((n_train, D)), 0)
    a = rng.choice([0.0, 0.3, 0.6, 1.0], n_test)[:, None]
    y, y_new = rng.integers(0, C, n_test), rng.integers(0, len(new), n_test)
    noise = rng.choice([1.0, 2.0], n_test)[:, None]
    h = np.maximum((1 - a) * mu[y] + a * new[y_new] + noise * rng.standard_normal((n_test, D)), 0)
    return h_train, h_train @ w.T / 8, h, h @ w.T / 8


def count_products(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts, through ``_take``, the test rows of the agreement and feature products."""
    counts = {"agreement": 0, "feature": 0}
    take = relation._take

    def counted(x: np.ndarray, rows: np.ndarray) -> np.ndarray:
        if x.ndim == 2 and x.shape[1] in (C, D):  # not the agreements of a tile (128 columns)
            counts["agreement" if x.shape[1] == C else "feature"] += rows.size
        return take(x, rows)

    monkeypatch.setattr(relation, "_take", counted)
    return counts


@pytest.mark.parametrize(
    ("power", "threshold"), [(1, 0.03), (2, 0.03), (1, 0.1), (8, 0.03), (1, 0.0)]
)
def test_equals_the_full_computation(
    power: int, threshold: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    h_train, z_train, h, z = bench_like(0)
    det = detectors.get("relation", power=power, threshold=threshold)
    det.fit(features=h_train, logits=z_train)
    counts = count_products(monkeypatch)
    ours, ref = det.score(features=h, logits=z), dense(det, h, z)
    assert np.count_nonzero(ref) > 400
    if power == 8 or threshold == 0:  # sums not exact: the order of the float64 sums differs
        np.testing.assert_allclose(ours, ref, rtol=1e-12)
    else:
        np.testing.assert_array_equal(ours, ref)
    pairs = h.shape[0] * det._tile_max.shape[0]  # rows x tiles
    if threshold > 0:  # most tiles are skipped
        assert 0 < counts["feature"] <= counts["agreement"] < 0.3 * pairs
    else:  # every agreement is positive: nothing is skipped
        assert counts["agreement"] == counts["feature"] == pairs


def test_both_bounds_are_used() -> None:
    h_train, z_train, h, z = bench_like(1)
    det = detectors.get("relation").fit(features=h_train, logits=z_train)
    p = relation.probabilities(z)
    rest = 1.0 - p.max(axis=1)
    # confident rows (first bound) and rows with more than the threshold elsewhere (product)
    assert 0.2 < np.mean(rest > 0.03) < 0.8
    np.testing.assert_array_equal(det.score(features=h, logits=z), dense(det, h, z))


def test_edges_at_the_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    # confident training rows of each class, near-identical features; test rows whose
    # agreement with a class is within 0.1 % of the threshold: the skip margins must keep every
    # edge above it (and the scores bit for bit the dense ones)
    rng = np.random.default_rng(2)
    mu = 3.0 * (rng.random((C, D)) < 0.1) + 0.01
    n_train, n_test = 2000, 512
    y_train = np.arange(n_train) % C
    h_train = mu[y_train] * (1 + 1e-3 * rng.random((n_train, D)))
    z_train = 30.0 * np.eye(C)[y_train]
    y = rng.integers(0, C, n_test)
    h = mu[y]
    prob = np.full((n_test, C), 0.0)
    prob[np.arange(n_test), y] = 0.03 * (1 + rng.uniform(-1e-3, 2e-3, n_test))
    others = rng.random((n_test, C)) < 0.02  # a few more classes near the threshold
    prob[others] = np.maximum(prob[others], 0.03 * (1 + rng.uniform(-1e-3, 2e-3, others.sum())))
    prob[prob == 0] = 1e-12
    prob[np.arange(n_test), (y + C // 2) % C] += 1 - prob.sum(axis=1)  # the rest on one class
    z = np.log(prob)
    det = detectors.get("relation").fit(features=h_train, logits=z_train)
    counts = count_products(monkeypatch)
    ours, ref = det.score(features=h, logits=z), dense(det, h, z)
    rel = (relation.unit_rows(h) @ det._features.T) * (relation.probabilities(z) @ det._probs.T)
    assert np.count_nonzero((rel > 0.03) & (rel < 0.03 * 1.002)) > 1000  # kept, and
    assert np.count_nonzero((rel <= 0.03) & (rel > 0.03 * 0.998)) > 500  # cut at a hair
    np.testing.assert_array_equal(ours, ref)
    assert counts["agreement"] < 0.5 * n_test * det._tile_max.shape[0]


def test_scores_do_not_depend_on_the_other_rows() -> None:
    h_train, z_train, h, z = bench_like(3)
    det = detectors.get("relation").fit(features=h_train, logits=z_train)
    whole = det.score(features=h, logits=z)
    # blocks of 64 rows: enough for every product to be padded to the large-product kernels
    parts = [det.score(features=h[i : i + 64], logits=z[i : i + 64]) for i in range(0, 512, 64)]
    np.testing.assert_array_equal(np.concatenate(parts), whole)
    perm = np.random.default_rng(0).permutation(h.shape[0])
    np.testing.assert_array_equal(det.score(features=h[perm], logits=z[perm]), whole[perm])


def test_random_model_computes_no_product(monkeypatch: pytest.MonkeyPatch) -> None:
    # features without class structure through a small random head: every probability is
    # near 1/C, every agreement near 1/C < 0.03, and the product bound skips every tile
    rng = np.random.default_rng(4)
    w = rng.standard_normal((C, D)) / np.sqrt(D)
    h_train, h = np.maximum(rng.standard_normal((2000, D)), 0), np.maximum(rng.random((300, D)), 0)
    det = detectors.get("relation").fit(features=h_train, logits=h_train @ w.T)
    counts = count_products(monkeypatch)
    scores = det.score(features=h, logits=h @ w.T)
    np.testing.assert_array_equal(scores, np.zeros(300))
    np.testing.assert_array_equal(dense(det, h, h @ w.T), np.zeros(300))
    assert counts == {"agreement": 0, "feature": 0}


@pytest.mark.parametrize(
    ("n_train", "bounds"), [(389, [0, 128, 256, 389]), (448, [0, 128, 256, 384, 448])]
)
def test_no_narrow_last_tile(n_train: int, bounds: list[int]) -> None:
    h_train, z_train, h, z = bench_like(5, n_train=n_train, n_test=256)
    det = detectors.get("relation").fit(features=h_train, logits=z_train)
    assert det._tile_bounds.tolist() == bounds
    assert det._tile_max.shape == (len(bounds) - 1, C)
    np.testing.assert_array_equal(det.score(features=h, logits=z), dense(det, h, z))


def test_padded_rows() -> None:
    rows = np.array([3, 9])
    np.testing.assert_array_equal(relation._padded(rows, 5, 20), [0, 1, 2, 3, 9])
    np.testing.assert_array_equal(relation._padded(rows, 2, 20), rows)  # enough already
    np.testing.assert_array_equal(relation._padded(rows, 5, 4), np.arange(4))  # all there are
    assert relation._padded(np.array([], dtype=np.int64), 5, 20).size == 0
    np.testing.assert_array_equal(relation._padded(np.array([0, 1, 2]), 5, 20), np.arange(5))
    view = relation._take(np.arange(10.0)[:, None], np.array([4, 5, 6]))
    assert view.base is not None and view[:, 0].tolist() == [4.0, 5.0, 6.0]
    below = relation._f32_below(0.1)
    assert float(below) <= 0.1 < float(np.nextafter(below, np.float32(1)))
    assert relation._f32_below(0.5) == np.float32(0.5)
