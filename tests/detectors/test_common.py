"""The shared numerical helpers: exact blocked percentile, top-k mask, class statistics."""

from __future__ import annotations

import numpy as np
import pytest

from semshift.detectors import _common


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("q", [0.0, 12.5, 85.0, 90.0, 99.9, 100.0])
def test_exact_percentile_equals_numpy(seed: int, q: float, monkeypatch) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((int(rng.integers(1, 400)), int(rng.integers(1, 30))))
    if seed % 2:
        x = np.maximum(x, 0).astype(np.float32)  # many tied zeros, float32
    if seed % 3 == 0:
        x = np.round(x, 1)  # many ties everywhere
    monkeypatch.setattr(_common, "BLOCK_BYTES", int(rng.choice([64, 4096, 2**26])))
    assert _common.exact_percentile(x, q) == np.percentile(x, q)


def test_topk_mask_ties_keep_lowest_indices() -> None:
    h = np.array([[1.0, 3.0, 3.0, 3.0, 0.0], [5.0, 4.0, 3.0, 2.0, 1.0]])
    np.testing.assert_array_equal(_common.topk_mask(h, 2), [[0, 1, 1, 0, 0], [1, 1, 0, 0, 0]])
    assert _common.topk_mask(h, 5).all()


def test_class_sums_skip_negative_labels(monkeypatch) -> None:
    monkeypatch.setattr(_common, "BLOCK_BYTES", 64)
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    sums = _common.class_sums(x, np.array([0, 1, -1, 1, 0, 2]), 3)
    np.testing.assert_array_equal(sums, [[0 + 8, 1 + 9], [2 + 6, 3 + 7], [10, 11]])


def test_scatter_matrix_and_whitening(monkeypatch) -> None:
    monkeypatch.setattr(_common, "BLOCK_BYTES", 256)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 4)) @ rng.standard_normal((4, 4))
    x[:, 3] = x[:, 0]  # rank-deficient: pinv needed
    mean = x.mean(0)
    scatter = _common.scatter_matrix(x, mean, None)
    np.testing.assert_allclose(scatter, (x - mean).T @ (x - mean), rtol=1e-12)
    proj = _common.pinv_sqrt(scatter / 50)
    assert proj.shape == (4, 3)
    np.testing.assert_allclose(proj @ proj.T, np.linalg.pinv(scatter / 50), atol=1e-8)
