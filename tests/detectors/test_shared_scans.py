"""The shared scan of the training rows (knn, grood, gmm): the same scores alone and together,
and the pre-change formulas to float32 rounding."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from semshift import detectors
from semshift.detectors import SharedResults, _common, _scan, score_many

from .conftest import make_problem

SCANNING = ("knn", "grood", "gmm")


@pytest.fixture(scope="module")
def problem():
    # 8 training rows per class in 30 dimensions: gmm's classes have fewer rows than
    # dimensions, so gmm scans too
    return make_problem(seed=5, n_classes=6, dim=30, n_per_class=8, n_test_id=50, n_test_ood=50)


def _fit(p, names, together: bool):
    params = {"knn": {"k": 3}, "grood": {"k": 2}, "gmm": {"reg": 1e-3}}
    dets = {n: detectors.get(n, **params.get(n, {})) for n in names}
    inputs = {"features": p.h_train, "logits": p.z_train, "labels": p.y_train}
    if together:
        return detectors.fit_many(dets, inputs, threads=1).fitted
    return {
        n: d.fit(**{k: v for k, v in inputs.items() if k in d.requires}) for n, d in dets.items()
    }


@pytest.mark.parametrize("block_bytes", [2**26, 3000])
def test_shared_scan_scores_equal_each_detector_alone(problem, monkeypatch, block_bytes) -> None:
    monkeypatch.setattr(_common, "BLOCK_BYTES", block_bytes)  # 3000: many chunks and blocks
    p = problem
    dets = _fit(p, (*SCANNING, "msp"), together=True)
    groups = {r.group for n in SCANNING for r in dets[n].requests()}
    assert len(groups) == 1 and dets["msp"].requests() == ()  # one training-row scan
    with threadpool_limits(limits=1):
        alone = {n: d.score(features=p.h_test, logits=p.z_test) for n, d in dets.items()}
    out = score_many(dets, features=p.h_test, logits=p.z_test, threads=2)
    assert out.errors == {}
    for name in dets:
        np.testing.assert_array_equal(out.scores[name], alone[name], err_msg=name)
    # fitted apart (each its own copy of the training rows): the same group, the same scores
    apart = _fit(p, SCANNING, together=False)
    assert {r.group for n in SCANNING for r in apart[n].requests()} == groups
    shared = SharedResults(features=p.h_test)
    for name in SCANNING:
        shared.declare(apart[name].requests()[0])
    for name in SCANNING:
        got = apart[name].score(features=p.h_test, shared=shared)
        np.testing.assert_array_equal(got, alone[name], err_msg=name)
    # one scan per chunk served all three
    n_chunks = len(list(detectors._shared.chunks(p.h_test.shape[0])))
    assert shared.hits >= 2 * n_chunks


def test_scan_is_computed_once_for_the_group(problem, monkeypatch) -> None:
    p = problem
    dets = _fit(p, SCANNING, together=True)
    calls = []
    original = _scan._scan

    def counting(h, requests):
        calls.append(sorted(r.token for r in requests))
        return original(h, requests)

    monkeypatch.setattr(_scan, "_scan", counting)
    score_many(dets, features=p.h_test, threads=1)
    assert len(calls) == 1 and len(calls[0]) == 3  # one chunk, three reducers
    calls.clear()
    dets["knn"].score(features=p.h_test)  # alone: its own reducer only
    assert len(calls) == 1 and len(calls[0]) == 1


def test_knn_scan_is_the_float64_kth_distance(problem) -> None:
    p = problem
    det = detectors.get("knn", k=4).fit(features=p.h_train)
    assert det.backend_ == "scan"

    def unit(x):
        return x / (np.linalg.norm(x, axis=1, keepdims=True) + 1e-10)

    dist = np.linalg.norm(unit(p.h_test)[:, None] - unit(p.h_train)[None], axis=2)
    want = -np.sort(dist, axis=1)[:, 3]
    np.testing.assert_allclose(det.score(features=p.h_test), want, rtol=0, atol=1e-6)
    old = detectors.get("knn", k=4, backend="numpy").fit(features=p.h_train)
    np.testing.assert_allclose(det.score(features=p.h_test), old.score(features=p.h_test),
                               rtol=0, atol=1e-6)  # fmt: skip


def test_grood_scan_is_the_float64_kth_gradient_distance(problem) -> None:
    p = problem
    fit = {"features": p.h_train, "logits": p.z_train, "labels": p.y_train}
    det = detectors.get("grood", k=2).fit(**fit)
    assert det.backend_ == "scan"
    correct = np.flatnonzero(p.z_train.argmax(axis=1) == p.y_train)
    bank, g = det.gradients(p.h_train[correct]), det.gradients(p.h_test)
    d2 = ((g[:, None, :] - bank[None]) ** 2).sum(axis=2)
    want = -np.sort(d2, axis=1)[:, 1]
    got = det.score(features=p.h_test)
    scale = (g**2).sum(axis=1) + (bank**2).sum(axis=1).max()
    assert np.all(np.abs(got - want) <= 1e-6 * scale)
    old = detectors.get("grood", k=2, backend="numpy").fit(**fit).score(features=p.h_test)
    assert np.all(np.abs(got - old) <= 1e-6 * scale)


def test_gmm_scan_is_the_float64_log_density(problem) -> None:
    p = problem
    det = detectors.get("gmm", reg=1e-3).fit(features=p.h_train, labels=p.y_train)
    assert det.requests() != ()
    d = p.h_train.shape[1]
    want = []
    for c in range(6):
        x = p.h_train[p.y_train == c]
        mu = x.mean(axis=0)
        cov = (x - mu).T @ (x - mu) / x.shape[0] + 1e-3 * np.eye(d)
        diff = p.h_test - mu
        md = np.einsum("ij,jk,ik->i", diff, np.linalg.inv(cov), diff)
        logdet = np.linalg.slogdet(cov)[1]
        want.append(np.log(1 / 6) - 0.5 * (md + logdet + d * np.log(2 * np.pi)))
    ref = np.logaddexp.reduce(np.stack(want, axis=1), axis=1)
    np.testing.assert_allclose(det.score(features=p.h_test), ref, rtol=1e-9)
    # with as many rows per class as dimensions: its own float32 products, no scan
    many = make_problem(seed=5, n_classes=3, dim=6, n_per_class=8)
    assert detectors.get("gmm").fit(features=many.h_train, labels=many.y_train).requests() == ()


def test_relation_bound_skips_nothing_that_counts() -> None:
    """Confident and diffuse logits: the bounded skip gives the dense computation's scores."""
    from semshift.detectors import relation

    rng = np.random.default_rng(2)
    h, ht = rng.standard_normal((300, 8)), rng.standard_normal((70, 8))
    for scale in (30.0, 0.3):  # confident (most tiles skipped), diffuse (none skipped)
        z, zt = rng.standard_normal((300, 5)) * scale, rng.standard_normal((70, 5)) * scale
        det = detectors.get("relation", threshold=0.05).fit(features=h, logits=z)
        got = det.score(features=ht, logits=zt)
        f = relation.unit_rows(h).astype(np.float64)
        ft = relation.unit_rows(ht).astype(np.float64)
        pr, prt = relation.probabilities(z), relation.probabilities(zt)
        r = np.maximum(ft @ f.T, 0) * (prt.astype(np.float64) @ pr.T.astype(np.float64))
        want = np.where(r > 0.05, r, 0).sum(axis=1)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
