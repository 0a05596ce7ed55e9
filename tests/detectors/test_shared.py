"""Shared intermediate results and score_many: same scores as each detector alone."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from semshift import detectors
from semshift.detectors import SharedResults, _common, score_many
from semshift.errors import InputError

from .conftest import make_problem, small


@pytest.fixture(scope="module")
def fitted():
    p = make_problem(seed=3, n_classes=5, dim=20)
    dets = {}
    for name in detectors.list_detectors(level="post_hoc"):
        det = small(name)
        dets[name] = det.fit(**{k: v for k, v in p.fit_inputs().items() if k in det.requires})
    return p, dets


def _alone(p, dets):
    return {
        n: d.score(**{k: v for k, v in p.score_inputs().items() if k in d.score_requires})
        for n, d in dets.items()
    }


@pytest.mark.parametrize("block_bytes", [2**26, 4096])
@pytest.mark.parametrize("threads", [1, 2])
def test_score_many_equals_each_detector_alone(fitted, monkeypatch, block_bytes, threads):
    p, dets = fitted
    monkeypatch.setattr(_common, "BLOCK_BYTES", block_bytes)  # 4096: many chunks
    alone = _alone(p, dets)
    out = score_many(dets, **p.score_inputs(), threads=threads)
    assert out.errors == {}
    assert set(out.scores) == set(dets) == set(out.seconds)
    for name, s in alone.items():
        # the same functions compute every value: equal to the last bit
        np.testing.assert_array_equal(out.scores[name], s, err_msg=name)
    # what is shared: energy (energy, msp, vim, nnguide), log-softmax / softmax / entropy,
    # the head product (scale, max_cosine), top-k masks and kept product (ash_*), the
    # Mahalanobis minimum (mahalanobis, rmd), the ViM residual (vim, residual)
    assert out.shared_hits >= 10


def test_shared_quantities_are_computed_once_per_chunk(fitted):
    p, dets = fitted
    shared = SharedResults(**p.score_inputs())
    calls = []
    original = dets["mahalanobis"]._terms

    def counting(hb):
        calls.append(hb.shape[0])
        return original(hb)

    dets["mahalanobis"]._terms = counting
    try:
        a = dets["mahalanobis"].score(features=p.h_test, shared=shared)
        r = dets["rmd"].score(features=p.h_test, shared=shared)
    finally:
        del dets["mahalanobis"]._terms
    assert sum(calls) == p.h_test.shape[0]  # rmd reused mahalanobis's distances
    np.testing.assert_array_equal(a, dets["mahalanobis"].score(features=p.h_test))
    np.testing.assert_array_equal(r, dets["rmd"].score(features=p.h_test))


def test_detectors_fitted_on_other_data_do_not_share(fitted):
    p, dets = fitted
    q = make_problem(seed=4, n_classes=5, dim=20)
    other = small("mahalanobis").fit(features=q.h_train, labels=q.y_train)
    shared = SharedResults(features=p.h_test)
    a = dets["mahalanobis"].score(features=p.h_test, shared=shared)
    b = other.score(features=p.h_test, shared=shared)
    np.testing.assert_array_equal(b, other.score(features=p.h_test))
    assert not np.array_equal(a, b)
    assert shared.hits == 1  # only the finiteness check of the same array


def test_shared_results_refuse_other_arrays(fitted):
    p, dets = fitted
    shared = SharedResults(logits=p.z_test)
    with pytest.raises(InputError, match="`shared` was made for other inputs than the `logits`"):
        dets["msp"].score(logits=p.z_test.copy(), shared=shared)
    with pytest.raises(InputError, match="`features`"):
        dets["residual"].score(features=p.h_test, shared=shared)


def test_shared_get_waits_for_the_first_caller_and_retries_after_a_failure():
    shared = SharedResults()
    started, release = threading.Event(), threading.Event()
    calls = []

    def slow():
        calls.append(1)
        started.set()
        release.wait(5)
        return 42

    results = []
    t = threading.Thread(target=lambda: results.append(shared.get("k", slow)))
    t.start()
    started.wait(5)
    u = threading.Thread(target=lambda: results.append(shared.get("k", lambda: -1)))
    u.start()
    release.set()
    t.join(5)
    u.join(5)
    assert results == [42, 42] and calls == [1]
    assert (shared.hits, shared.misses) == (1, 1)

    def boom():
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        shared.get("x", boom)
    assert shared.get("x", lambda: 7) == 7  # a failure is not memoised


def test_score_many_reports_a_failing_detector_and_scores_the_rest(fitted):
    p, dets = fitted

    class Broken(detectors.Detector):
        name = "broken"
        score_requires = frozenset({"logits"})

        def _score(self, inputs):
            raise RuntimeError("kaput")

    todo = {"broken": Broken().fit(), "msp": dets["msp"], "energy": dets["energy"]}
    out = score_many(todo, logits=p.z_test, threads=2, order=["energy"])
    assert set(out.scores) == {"msp", "energy"}
    assert isinstance(out.errors["broken"], RuntimeError)
    np.testing.assert_array_equal(out.scores["msp"], dets["msp"].score(logits=p.z_test))


def test_scores_do_not_depend_on_the_chunking(fitted, monkeypatch):
    p, dets = fitted
    whole = _alone(p, dets)
    monkeypatch.setattr(_common, "BLOCK_BYTES", 1024)  # a few rows per chunk
    chunked = _alone(p, dets)
    for name in whole:
        # float32 products round differently for other block shapes; rmd subtracts two
        # distances of similar size, so the tolerance follows the scores' scale
        scale = float(np.abs(whole[name]).max())
        np.testing.assert_allclose(chunked[name], whole[name], rtol=1e-5, atol=2e-5 * scale,
                                   err_msg=name)  # fmt: skip


def test_fit_many_fits_like_one_by_one_and_reports_failures():
    p = make_problem(seed=5, n_classes=5, dim=20)
    names = ["mahalanobis", "rmd", "vim", "knn", "klm", "openmax", "energy"]
    inputs = p.fit_inputs()
    dets = {n: small(n) for n in names}
    dets["bad_knn"] = detectors.get("knn", k=10_000)  # more neighbours than training rows
    seen = []
    out = detectors.fit_many(dets, inputs, threads=2, on_done=seen.append)
    assert sorted(seen) == sorted(dets)
    assert set(out.fitted) == set(names) and set(out.errors) == {"bad_knn"}
    assert isinstance(out.errors["bad_knn"], InputError)
    assert set(out.seconds) == set(dets)
    for n in names:
        alone = small(n).fit(**{k: v for k, v in inputs.items() if k in dets[n].fit_requires})
        kw = {k: v for k, v in p.score_inputs().items() if k in alone.score_requires}
        np.testing.assert_array_equal(out.fitted[n].score(**kw), alone.score(**kw), err_msg=n)


def test_fit_many_computes_shared_fit_statistics_once():
    p = make_problem(seed=6, n_classes=5, dim=20)
    inputs = p.fit_inputs()
    names = ["mahalanobis", "rmd", "vim", "residual"]
    for threads in (1, 2):
        dets = {
            n: detectors.get(n, **({"dim": 8} if n in ("vim", "residual") else {})) for n in names
        }
        dets["residual_4"] = detectors.get("residual", dim=4)  # another subspace: its own
        out = detectors.fit_many(dets, inputs, threads=threads)
        assert set(out.fitted) == set(dets)
        maha, rmd = out.fitted["mahalanobis"], out.fitted["rmd"]
        assert rmd.projection_ is maha.projection_ and rmd.means_ is maha.means_
        vim, res, res4 = out.fitted["vim"], out.fitted["residual"], out.fitted["residual_4"]
        assert res.null_space_ is vim.null_space_ and res4.null_space_ is not vim.null_space_
        assert res4.null_space_.shape[1] == 20 - 4
        # two statistics shared, plus each detector's reuse of the features' finiteness check
        assert out.shared_hits >= 2
        for n, det in dets.items():
            alone = detectors.get(det.name, **det.get_params())
            alone.fit(**{k: v for k, v in inputs.items() if k in alone.fit_requires})
            for attr in ("means_", "center_", "projection_", "origin_", "null_space_", "alpha_"):
                if hasattr(alone, attr):
                    np.testing.assert_array_equal(getattr(det, attr), getattr(alone, attr))
            kw = {k: v for k, v in p.score_inputs().items() if k in alone.score_requires}
            np.testing.assert_array_equal(det.score(**kw), alone.score(**kw), err_msg=n)


def test_fit_refuses_a_shared_memo_of_other_inputs():
    p = make_problem(seed=7, n_classes=3, dim=6)
    inputs = p.fit_inputs()
    memo = SharedResults(features=inputs["features"].copy(), labels=inputs["labels"])
    with pytest.raises(InputError, match=r"mahalanobis\.fit: `shared` was made for other inputs"):
        detectors.get("mahalanobis").fit(
            features=inputs["features"], labels=inputs["labels"], shared=memo
        )


def test_fit_many_starts_one_detector_of_each_fit_group_first():
    p = make_problem(seed=8, n_classes=4, dim=10)
    order: list[str] = []
    dets = {n: small(n) for n in ("msp", "mahalanobis", "rmd", "knn", "residual", "vim")}
    detectors.fit_many(dets, p.fit_inputs(), threads=1, on_done=order.append)
    # feature fits first; of mahalanobis/rmd and residual/vim, one each before the second
    assert order == ["mahalanobis", "knn", "residual", "rmd", "vim", "msp"]
