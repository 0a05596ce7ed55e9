"""Exact neighbour search: the blocked NumPy path, the faiss path and the backend switch."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from semshift import detectors
from semshift.detectors import _common, _search
from semshift.errors import InputError


def _brute_kth_distance(train: np.ndarray, test: np.ndarray, k: int) -> np.ndarray:
    def norm(x: np.ndarray) -> np.ndarray:
        return x / (np.linalg.norm(x, axis=1, keepdims=True) + 1e-10)

    d = np.linalg.norm(norm(test)[:, None, :] - norm(train)[None, :, :], axis=2)
    return -np.sort(d, axis=1)[:, k - 1]


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    return rng.standard_normal((700, 12)), rng.standard_normal((90, 12))


@pytest.mark.parametrize("k", [1, 7, 50])
@pytest.mark.parametrize("chunk", [8, 64, 8192])
def test_blocked_numpy_path_equals_brute_force(data, k: int, chunk: int, monkeypatch) -> None:
    train, test = data
    monkeypatch.setattr(_search, "BANK_CHUNK", chunk)
    monkeypatch.setattr(_common, "BLOCK_BYTES", 4096)
    det = detectors.get("knn", k=k, backend="numpy").fit(features=train)
    assert det.backend_ == "numpy"
    # The bank is stored as float32 unit vectors: distances agree to float32 rounding.
    np.testing.assert_allclose(
        det.score(features=test), _brute_kth_distance(train, test, k), rtol=0, atol=2e-7
    )
    # ... and the neighbours found are exactly the brute-force ones, in order.
    bank = (train / np.linalg.norm(train, axis=1, keepdims=True)).astype(np.float32)
    queries = (test / np.linalg.norm(test, axis=1, keepdims=True)).astype(np.float32)
    _, idx = _search.InnerProductIndex(bank, "numpy").search(queries, k)
    brute = np.argsort(-(queries.astype(np.float64) @ bank.T.astype(np.float64)), axis=1)
    np.testing.assert_array_equal(idx, brute[:, :k])


def test_numpy_search_returns_sorted_topk_with_lowest_index_ties() -> None:
    bank = np.array([[1, 0], [0, 1], [1, 0], [0.5, 0.5], [1, 0]], dtype=np.float32)
    vals, idx = _search.InnerProductIndex(bank, "numpy").search(
        np.array([[1, 0]], dtype=np.float32), 3
    )
    np.testing.assert_array_equal(vals, [[1, 1, 1]])
    np.testing.assert_array_equal(idx, [[0, 2, 4]])


def test_auto_backend_dispatch(data) -> None:
    train, test = data
    det = detectors.get("knn", k=5).fit(features=train)
    assert det.backend_ == "scan"  # "auto": the shared scan (detectors/_scan.py)
    np.testing.assert_allclose(
        det.score(features=test), _brute_kth_distance(train, test, 5), rtol=0, atol=1e-6
    )


def test_faiss_backend_matches_numpy_or_explains_missing_package(data) -> None:
    train, test = data
    if _search.faiss_available():
        for name, params in (("knn", {"k": 9}), ("nnguide", {"k": 9, "alpha": 0.5})):
            fit: dict[str, Any] = {"features": train, "logits": train[:, :5]}
            score: dict[str, Any] = {"features": test, "logits": test[:, :5]}
            fast = detectors.get(name, backend="faiss", **params).fit(**fit)
            slow = detectors.get(name, backend="numpy", **params).fit(**fit)
            assert fast.backend_ == "faiss"
            np.testing.assert_allclose(
                fast.score(**score), slow.score(**score), rtol=1e-6, atol=1e-6
            )
    else:
        with pytest.raises(InputError, match=r"backend='faiss' needs the faiss-cpu package"):
            detectors.get("knn", k=5, backend="faiss").fit(features=train)
        assert _search.resolve_backend("knn", "auto") == "numpy"


def test_unknown_backend(data) -> None:
    message = r"^knn: backend must be one of 'auto', 'numpy', 'faiss', got 'gpu'$"
    with pytest.raises(InputError, match=message):
        detectors.get("knn", backend="gpu")
    with pytest.raises(InputError, match=message):
        detectors.get_class("knn")(backend="gpu").fit(features=data[0])
