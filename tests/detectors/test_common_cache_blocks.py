"""Cache-sized row blocks (issue 33): the same scores, bitwise, whatever the block size.

The element-wise work of the middle tier of detectors (log-sum-exp, softmax, normalisation,
temperature scaling, LTS, CF-OOD's bisection, ...) runs in blocks of :data:`CACHE_BYTES`.
Each test compares the blocked result with a straightforward one-block reference (the formula
as written before the change) or with the same detector scored with one block per chunk.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from semshift import detectors
from semshift.detectors import _common

N, D, C = 301, 48, 23


def _ref_logsumexp(z: np.ndarray) -> np.ndarray:
    m = z.max(axis=1)
    if z.dtype == np.float32:
        total = np.exp(z - m[:, None]).sum(axis=1, dtype=np.float64)
        return np.log(total) + m.astype(np.float64)
    return np.log(np.exp(z - m[:, None]).sum(axis=1)) + m


def _ref_softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    e /= e.sum(axis=1, keepdims=True)
    return e


def _data(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    mu = np.maximum(rng.normal(0.3, 1.0, (C, D)), 0).astype(np.float32)
    w = (mu - mu.mean(0)).astype(np.float32)
    b = rng.normal(0, 0.1, C).astype(np.float32)

    def rows(n: int, noise: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        y = np.arange(n) % C
        h = np.maximum(mu[y] + noise * rng.standard_normal((n, D)).astype(np.float32), 0)
        return h, h @ w.T + b, y

    h_tr, z_tr, y_tr = rows(400, 1.0)
    h_te, z_te, _ = rows(N, 1.5)
    h_te[3] = 0.0  # a row without positive activation (LTS, ASH-S, SCALE fallbacks)
    return {"w": w, "b": b, "h_tr": h_tr, "z_tr": z_tr, "y_tr": y_tr, "h": h_te, "z": z_te}


@pytest.mark.parametrize("budget", [1, 700, 5000, 2**30])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blocked_helpers_equal_one_block(budget: int, dtype: type, monkeypatch) -> None:
    monkeypatch.setattr(_common, "CACHE_BYTES", budget)
    rng = np.random.default_rng(budget)
    z = (rng.standard_normal((N, C)) * 20).astype(dtype)
    z[5, 2] = -np.inf
    for arr in (z, np.asfortranarray(z), z[:, ::2]):
        np.testing.assert_array_equal(_common.logsumexp(arr), _ref_logsumexp(arr), strict=True)
        np.testing.assert_array_equal(_common.softmax(arr), _ref_softmax(arr), strict=True)
        ref_energy = _ref_logsumexp(np.asarray(arr, dtype=np.float64))
        np.testing.assert_array_equal(_common.energy(arr), ref_energy, strict=True)
        fin = np.where(np.isfinite(arr), arr, dtype(-1.0))
        fin = np.asfortranarray(fin) if arr.flags.f_contiguous else fin
        np.testing.assert_array_equal(
            _common.l2_normalize32(fin), _common.f32(_common.l2_normalize(fin)), strict=True
        )
    assert _common.softmax(z[:0]).shape == (0, C)
    blocks = list(_common.cache_blocks(10, 3 * budget))
    assert blocks[0].start == 0 and blocks[-1].stop == 10
    assert all(a.stop == b.start for a, b in itertools.pairwise(blocks))


def test_temp_scaling_equals_straightforward_form(monkeypatch) -> None:
    monkeypatch.setattr(_common, "CACHE_BYTES", 3000)  # blocks of a few rows
    d = _data()
    det = detectors.get("temp_scaling").fit(val_logits=d["z_tr"], val_labels=d["y_tr"])
    t = det.temperature_
    for z in (d["z"], d["z"].astype(np.float64) * 7, np.asfortranarray(d["z"])):
        zt = np.asarray(z, dtype=np.float64) / t
        ref = np.exp(-_ref_logsumexp(zt - zt.max(axis=1, keepdims=True)))
        np.testing.assert_array_equal(det.score(logits=z), ref, strict=True)


def test_lts_equals_straightforward_form(monkeypatch) -> None:
    monkeypatch.setattr(_common, "CACHE_BYTES", 5000)
    d = _data(1)
    from semshift.detectors.lts import lts_scores

    h, z = d["h"], d["z"]
    k = max(1, D - round(D * 0.9))
    h64 = np.maximum(np.asarray(h, dtype=np.float64), 0.0)
    s_all = h64.sum(axis=1)
    s_top = np.partition(h64, D - k, axis=1)[:, D - k :].sum(axis=1)
    ratio = np.where(s_top > 0, s_all / np.where(s_top > 0, s_top, 1.0), 1.0)
    ref = _ref_logsumexp(np.asarray(z, dtype=np.float64) * np.square(ratio)[:, None])
    np.testing.assert_array_equal(lts_scores(z, h, 90.0), ref, strict=True)
    assert ref[3] == _ref_logsumexp(np.asarray(z[3:4], dtype=np.float64))[0]  # S = 1


def test_cfood_bisection_equals_linear_scan(monkeypatch) -> None:
    monkeypatch.setattr(_common, "CACHE_BYTES", 2000)
    d = _data(2)
    det = detectors.get("cfood", alpha=0.5, k=0.05).fit(features=d["h_tr"])
    q = _common.f32(_common.l2_normalize(d["h"]))
    sq = np.einsum("ij,ij->i", q, q, dtype=np.float64).astype(np.float32)
    dist = det._sq_distances(q, sq, det._ref, det._sq)
    counts = (det.radii_[None, :, :] >= dist[:, None, :]).sum(axis=2)  # (n, K)
    ok = counts >= det._min_count
    first = np.where(ok.any(axis=1), ok.argmax(axis=1), det.kappas_.size)
    ref = -np.append(det.kappas_, 1.0)[first]
    np.testing.assert_array_equal(det.score(features=d["h"]), ref, strict=True)


NAMES = [
    "cfood", "klm", "ash_b", "ash_p", "ash_s", "scale", "react", "vra", "dice", "lts", "nci",
    "temp_scaling", "neco", "fdbd", "max_cosine", "caref", "cadref", "nnguide", "energy", "msp",
]  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_scores_do_not_depend_on_the_cache_budget(name: str, monkeypatch) -> None:
    d = _data(3)
    params = {"nnguide": {"k": 2, "alpha": 0.05}, "neco": {"dim": 5}, "cfood": {"alpha": 0.5}}
    fit = {
        "features": d["h_tr"],
        "logits": d["z_tr"],
        "labels": d["y_tr"],
        "val_logits": d["z_tr"],
        "val_labels": d["y_tr"],
        "head": (d["w"], d["b"]),
    }
    det = detectors.get(name, **params.get(name, {}))
    det.fit(**{k: v for k, v in fit.items() if k in det.fit_requires})
    inputs = {"features": d["h"], "logits": d["z"]}
    inputs = {k: v for k, v in inputs.items() if k in det.score_requires}
    scores = []
    for budget in (2**40, 1, 4000):  # one block per chunk (the former layout), rows, a few
        monkeypatch.setattr(_common, "CACHE_BYTES", budget)
        scores.append(det.score(**inputs))
    for s in scores[1:]:
        np.testing.assert_array_equal(s, scores[0], strict=True)
    assert np.isfinite(scores[0]).all()
