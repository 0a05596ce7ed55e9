"""One contract, generated from the registry, run over every post-hoc detector.

The model-level detectors (odin, rankfeat) have no fit or score on stored arrays; their
declaration is checked in test_params.py and their computation in
tests/features/test_model_detectors.py.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from semshift import detectors
from semshift.detectors import _common, _search
from semshift.errors import InputError, NotFittedError

NAMES = detectors.list_detectors(level="post_hoc")


def _fit_score(det: detectors.Detector, problem: Any) -> np.ndarray:
    return det.fit(**problem.fit_inputs()).score(**problem.score_inputs())


@pytest.fixture(scope="module")
def reference_scores(problem: Any, build: Any) -> dict[str, np.ndarray]:
    return {name: _fit_score(build(name), problem) for name in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_fit_returns_self_and_scores_are_float64_vector(name: str, problem: Any, build: Any):
    det = build(name)
    assert det.fit(**problem.fit_inputs()) is det
    assert det.n_features_in_ in (None, problem.h_train.shape[1])
    assert det.n_classes_ in (None, problem.w.shape[0])
    scores = det.score(**problem.score_inputs())
    assert scores.shape == (problem.h_test.shape[0],)
    assert scores.dtype == np.float64
    assert np.isfinite(scores).all()
    assert np.ptp(scores) > 0  # a constant score would be a broken detector


@pytest.mark.parametrize("name", NAMES)
def test_deterministic(name: str, problem: Any, build: Any, reference_scores: dict) -> None:
    det = build(name).fit(**problem.fit_inputs())
    first = det.score(**problem.score_inputs())
    np.testing.assert_array_equal(first, det.score(**problem.score_inputs()))
    np.testing.assert_array_equal(first, reference_scores[name])


@pytest.mark.parametrize("name", NAMES)
def test_inputs_not_mutated(name: str, problem: Any, build: Any) -> None:
    fit_in, score_in = problem.fit_inputs(), problem.score_inputs()
    before = copy.deepcopy((fit_in, score_in))
    build(name).fit(**fit_in).score(**score_in)
    for got, kept in zip(
        [*fit_in.values(), *score_in.values()],
        [*before[0].values(), *before[1].values()],
        strict=True,
    ):
        for g, k in zip(*(x if isinstance(x, tuple) else (x,) for x in (got, kept)), strict=True):
            np.testing.assert_array_equal(g, k)


def _as32(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_as32(v) for v in value)
    return value.astype(np.float32) if value.dtype == np.float64 else value


@pytest.mark.parametrize("name", NAMES)
def test_float32_inputs_match_float64(name: str, problem: Any, build: Any, reference_scores):
    fit32 = {k: _as32(v) for k, v in problem.fit_inputs().items()}
    score32 = {k: _as32(v) for k, v in problem.score_inputs().items()}
    scores32 = build(name).fit(**fit32).score(**score32)
    assert scores32.dtype == np.float64
    ref = reference_scores[name]
    np.testing.assert_allclose(scores32, ref, rtol=1e-4, atol=1e-5 * np.abs(ref).max())


@pytest.mark.parametrize("name", NAMES)
def test_score_before_fit_raises(name: str, problem: Any, build: Any) -> None:
    with pytest.raises(NotFittedError, match="not fitted yet; call fit"):
        build(name).score(**problem.score_inputs())


@pytest.mark.parametrize("name", NAMES)
def test_missing_inputs_are_named(name: str, problem: Any, build: Any) -> None:
    cls = detectors.get_class(name)
    for missing in sorted(cls.fit_requires):
        given = {k: v for k, v in problem.fit_inputs().items() if k != missing}
        with pytest.raises(InputError, match=rf"{name}\.fit\(\) needs `{missing}`"):
            build(name).fit(**given)
    det = build(name).fit(**problem.fit_inputs())
    for missing in sorted(cls.score_requires):
        given = {k: v for k, v in problem.score_inputs().items() if k != missing}
        with pytest.raises(InputError, match=rf"{name}\.score\(\) needs `{missing}`"):
            det.score(**given)


@pytest.mark.parametrize("name", NAMES)
def test_unneeded_inputs_are_ignored(name: str, problem: Any, build: Any, reference_scores):
    cls = detectors.get_class(name)
    junk = {"logits": np.full((2, 3), np.nan), "features": np.full((2, 3), np.nan)}
    junk_fit = {**junk, "head": None, "labels": np.array([-5, 99]), "val_logits": "junk"}
    fit_in = {k: v for k, v in problem.fit_inputs().items() if k in cls.fit_requires}
    fit_in |= {k: v for k, v in junk_fit.items() if k not in cls.fit_requires}
    score_in = {k: v for k, v in problem.score_inputs().items() if k in cls.score_requires}
    score_in |= {k: v for k, v in junk.items() if k not in cls.score_requires}
    np.testing.assert_array_equal(
        build(name).fit(**fit_in).score(**score_in), reference_scores[name]
    )


@pytest.mark.parametrize("name", NAMES)
def test_block_size_does_not_change_scores(
    name: str, problem: Any, build: Any, reference_scores: dict, monkeypatch: Any
) -> None:
    monkeypatch.setattr(_common, "BLOCK_BYTES", 512)  # a few rows per block
    monkeypatch.setattr(_search, "BANK_CHUNK", 16)
    ref = reference_scores[name]
    # Float32 matrix products may round differently for other block shapes: 1e-6 of the scale.
    np.testing.assert_allclose(
        _fit_score(build(name), problem), ref, rtol=1e-6, atol=1e-6 * np.abs(ref).max()
    )


@pytest.mark.parametrize("name", NAMES)
def test_scores_follow_sample_order(name: str, problem: Any, build: Any, reference_scores):
    perm = np.random.default_rng(1).permutation(problem.h_test.shape[0])
    det = build(name).fit(**problem.fit_inputs())
    shuffled = det.score(features=problem.h_test[perm], logits=problem.z_test[perm])
    ref = reference_scores[name][perm]
    np.testing.assert_allclose(shuffled, ref, rtol=1e-6, atol=1e-6 * np.abs(ref).max())
