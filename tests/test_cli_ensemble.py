"""``semshift ensemble``: several networks' stores of the same images -> one score per image."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from semshift.detectors.ensemble import ensemble_score, mean_scores
from semshift.features import open_store
from tests.features.test_ensemble import N, member_store


def test_ensemble_writes_one_score_per_image(tmp_path: Path, semshift) -> None:
    a, b = member_store(tmp_path, "r18", 0), member_store(tmp_path, "r50", 1)
    out = tmp_path / "scores.csv"
    done = semshift("ensemble", "--member", str(a), "--member", str(b), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert f"ensemble msp of 2 members: {N} images -> {out}" in done.stdout
    table = pd.read_csv(out)
    assert list(table.columns) == ["sample_id", "path", "label", "score"]
    logits = [open_store(s).all().arrays("logits")[0] for s in (a, b)]
    np.testing.assert_allclose(table["score"], ensemble_score(logits), rtol=1e-12)
    assert table["path"].tolist() == [f"img{k:03d}.png" for k in range(N)]


def test_ensemble_selection_energy_and_detector_mean(tmp_path: Path, semshift) -> None:
    a, b = member_store(tmp_path, "r18", 0), member_store(tmp_path, "r50", 1)
    out = tmp_path / "e.csv"
    args = ("--member", str(a), "--member", str(b), "--select", "split=test")
    done = semshift("ensemble", *args, "--rule", "energy", "--out", str(out))
    assert done.returncode == 0, done.stderr
    sels = [open_store(s).select(split="test") for s in (a, b)]
    expected = ensemble_score([s.arrays("logits")[0] for s in sels], "energy")
    np.testing.assert_allclose(pd.read_csv(out)["score"], expected, rtol=1e-12)
    done = semshift(
        "ensemble", *args, "-d", "knn:k=3", "--train", str(a), "--train", str(b),
        "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "ensemble mean:knn of 2 members" in done.stdout
    from semshift import detectors

    by_hand = [
        detectors.get("knn", k=3).fit(features=open_store(s).all().arrays("features")[0])
        .score(features=sel.arrays("features")[0])
        for s, sel in zip((a, b), sels, strict=True)
    ]  # fmt: skip
    np.testing.assert_allclose(pd.read_csv(out)["score"], mean_scores(by_hand), rtol=1e-12)


def test_ensemble_user_mistakes_are_one_line(tmp_path: Path, semshift) -> None:
    a = member_store(tmp_path, "r18", 0)
    five = member_store(tmp_path, "five", 1, classes=5)
    out = str(tmp_path / "x.csv")
    cases = [
        (("--member", str(a)), "an ensemble needs at least two members"),
        (("--member", str(a), "--member", str(five)), "has 5 classes but member 0"),
        (("--member", str(a), "--member", str(a)), "members 0 and 1 are the same store"),
        (("--member", str(a), "--member", str(five), "--rule", "vote"), "unknown rule 'vote'"),
        (("--member", str(a), "--member", str(five), "--select", "split"), "expected KEY=VALUE"),
        (("--member", str(a), "--member", str(tmp_path / "nope")), "does not exist"),
    ]
    for args, message in cases:
        done = semshift("ensemble", *args, "--out", out)
        assert done.returncode == 2, args
        assert message in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert not Path(out).exists()
