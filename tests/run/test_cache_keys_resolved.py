"""Cache keys are computed from every parameter, defaults included: naming a default explicitly
gives the same key as leaving it out, and a changed default (a new release) gives a new key."""

from __future__ import annotations

from tests.run.conftest import base_config

from semshift.run import run


def _score_keys(result) -> dict[str, str]:
    return result.stages["score"].keys["main"]["detectors"]


def test_an_explicit_default_is_the_same_score_key(stores, tmp_path):
    implicit = run(base_config(stores, tmp_path / "a", detectors=["knn"]), progress=False)
    explicit = run(
        base_config(stores, tmp_path / "b", detectors=[{"name": "knn", "params": {"k": 50}}]),
        progress=False,
    )
    other = run(
        base_config(stores, tmp_path / "c", detectors=[{"name": "knn", "params": {"k": 5}}]),
        progress=False,
    )
    assert _score_keys(implicit)["knn"] == _score_keys(explicit)["knn"]
    assert _score_keys(other)["knn"] != _score_keys(implicit)["knn"]
