"""Deep ensembles over feature stores (semshift.features.ensemble)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from semshift import detectors
from semshift.detectors.ensemble import ensemble_score, mean_scores
from semshift.errors import InputError
from semshift.features import open_store, write_store
from semshift.features.ensemble import (
    check_members,
    ensemble_detector_scores,
    ensemble_scores,
)

N, C, D = 40, 4, 6


def member_store(
    root: Path,
    name: str,
    seed: int,
    *,
    n: int = N,
    classes: int = C,
    paths: list[str] | None = None,
    fingerprint: str = "fp-1",
    split: bool = True,
) -> Path:
    """A store of ``n`` images (shared paths, labels, features) through model ``name``'s head."""
    rng = np.random.default_rng(100)  # the images: the same for every member
    h = rng.normal(size=(n, D)).astype(np.float32)
    labels = np.arange(n) % classes
    head_rng = np.random.default_rng(seed)  # the model: its own head
    w = head_rng.normal(size=(classes, D)).astype(np.float32)
    b = head_rng.normal(size=classes).astype(np.float32)
    idx = pd.DataFrame(
        {
            "path": paths or [f"img{k:03d}.png" for k in range(n)],
            "label": labels,
            **({"split": np.where(np.arange(n) < n // 2, "train", "test")} if split else {}),
        }
    )
    meta = {"model": name, "dataset": {"fingerprint": fingerprint}}
    write_store(
        root / name,
        index=idx,
        arrays={"logits": h @ w.T + b, "features": h},
        head=(w, b),
        meta=meta,
        fsync=False,
    )
    return root / name


@pytest.fixture
def members(tmp_path: Path) -> list[Path]:
    return [member_store(tmp_path, name, seed) for seed, name in enumerate(("r18", "r50", "vit"))]


@pytest.mark.parametrize("rule", ["msp", "energy"])
def test_scores_equal_the_array_rule_on_the_stores_logits(members: list[Path], rule: str) -> None:
    out = ensemble_scores(members, rule, rows=7)  # blocks that cut across the members alike
    logits = [open_store(m).all().arrays("logits")[0] for m in members]
    np.testing.assert_array_equal(out.scores, ensemble_score(logits, rule))
    assert out.rule == rule and len(out.members) == 3
    assert out.index["path"].tolist() == [f"img{k:03d}.png" for k in range(N)]


def test_selections_of_the_stores_are_members(members: list[Path]) -> None:
    sels = [open_store(m).select(split="test") for m in members]
    out = ensemble_scores(sels)
    logits = [s.arrays("logits")[0] for s in sels]
    np.testing.assert_array_equal(out.scores, ensemble_score(logits))
    assert len(out.scores) == N // 2 and out.index["path"].iloc[0] == f"img{N // 2:03d}.png"


def test_mean_of_a_fitted_detector_over_the_members(members: list[Path]) -> None:
    train = [open_store(m).select(split="train") for m in members]
    test = [open_store(m).select(split="test") for m in members]
    out = ensemble_detector_scores(train, test, "mahalanobis")
    by_hand = [
        detectors.get("mahalanobis")
        .fit(**tr.inputs("features", "labels"))
        .score(**te.inputs("features"))
        for tr, te in zip(train, test, strict=True)
    ]
    np.testing.assert_allclose(out.scores, mean_scores(by_hand), rtol=1e-12)
    assert out.rule == "mean:mahalanobis"


def test_detectors_that_need_validation_data_are_refused(members: list[Path]) -> None:
    with pytest.raises(InputError, match=r"ensemble: klm needs val_logits"):
        ensemble_detector_scores(members, members, "klm")


def _error(members: list[Path] | list[str]) -> str:
    with pytest.raises(InputError) as err:
        ensemble_scores(members)
    msg = str(err.value)
    assert "\n" not in msg
    return msg


def test_one_member_is_refused(members: list[Path]) -> None:
    assert "an ensemble needs at least two members" in _error(members[:1])
    assert "got 1" in _error(members[:1])


def test_stores_of_other_images_are_refused(tmp_path: Path, members: list[Path]) -> None:
    paths = [f"img{k:03d}.png" for k in range(N)]
    paths[5] = "other.png"
    other = member_store(tmp_path, "other", 9, paths=paths)
    msg = _error([members[0], other])
    assert "member 1" in msg and "row 5 has path 'other.png', member 0 'img005.png'" in msg
    shorter = member_store(tmp_path, "short", 9, n=N - 1)
    assert "has 39 rows but member 0" in _error([members[0], shorter])
    elsewhere = member_store(tmp_path, "elsewhere", 9, fingerprint="fp-2")
    assert "dataset fingerprints fp-2 and fp-1" in _error([members[0], elsewhere])


def test_different_class_counts_are_refused(tmp_path: Path, members: list[Path]) -> None:
    five = member_store(tmp_path, "five", 9, classes=5)
    assert "member 1" in (msg := _error([members[0], five]))
    assert "has 5 classes but member 0" in msg and "has 4" in msg


def test_the_same_model_twice_is_refused(tmp_path: Path, members: list[Path]) -> None:
    assert "members 0 and 1 are the same store" in _error([members[0], members[0]])
    copy = member_store(tmp_path / "copy", "r18", 0)  # the same model and head, another folder
    assert "hold the same model (r18)" in _error([members[0], copy])


def test_check_members_returns_aligned_selections(members: list[Path]) -> None:
    sels = check_members(members)
    assert [len(s) for s in sels] == [N, N, N]
    with pytest.raises(InputError, match=r"ensemble: unknown rule 'vote'; known rules: msp"):
        ensemble_scores(members, "vote")
