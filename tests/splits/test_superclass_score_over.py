"""SOOD sub-class scores (docs/methods.md#sood-superclasses): the mean over all images (the paper
and its released code) by default, over the images inside the IQR fences with
``score_over="kept"``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from semshift.cli import main
from semshift.errors import InputError
from semshift.splits.registry import BuildContext, build_split, validate_params
from semshift.splits.superclass import split_by_scores

WHERE = "run.yaml: splits.sood"

# One super-class, five sub-classes of five images, evenly spaced inside each sub-class; one
# image of "chisel" (-0.10) lies far below its others (0.40-0.43), outside 1.5 IQR.
RAW = {
    "awl": [0.10, 0.11, 0.12, 0.13, 0.14],
    "bradawl": [0.30, 0.31, 0.32, 0.33, 0.34],
    "chisel": [0.40, 0.41, 0.42, 0.43, -0.10],
    "drill": [0.70, 0.71, 0.72, 0.73, 0.74],
    "file": [0.90, 0.91, 0.92, 0.93, 0.94],
}
SUBS = [name for name, values in RAW.items() for _ in values]
SCORES = np.concatenate([np.array(v) for v in RAW.values()])
SPAN = 0.94 - -0.10  # min-max normalisation within the super-class

TOY = "id,parent,name\nentity,,entity\ntool,entity,tool\n" + "".join(
    f"{name},tool,{name}\n" for name in RAW
)


def test_all_and_kept_give_different_splits_on_a_hand_built_case() -> None:
    images, by_all = split_by_scores(["tool"] * 25, SUBS, SCORES)  # default: score_over="all"
    _, by_kept = split_by_scores(["tool"] * 25, SUBS, SCORES, score_over="kept")
    assert images["outlier"].tolist() == [False] * 14 + [True] + [False] * 10
    assert by_all["kept_images"].tolist() == by_kept["kept_images"].tolist() == [5, 5, 4, 5, 5]
    # "all": chisel's outlier stays in its mean, (1.66 - 0.10) / 5 = 0.312 < bradawl's 0.32
    all_scores = (np.array([0.12, 0.32, 0.312, 0.72, 0.92]) + 0.10) / SPAN
    np.testing.assert_allclose(by_all["score"], all_scores, rtol=1e-12)
    # "kept": chisel's four kept images, mean 0.415 > bradawl's 0.32
    kept_scores = (np.array([0.12, 0.32, 0.415, 0.72, 0.92]) + 0.10) / SPAN
    np.testing.assert_allclose(by_kept["score"], kept_scores, rtol=1e-12)
    # percentiles over the 24 kept images carrying their sub-class score (positions 4.6 and
    # 9.2): "all" orders awl, chisel, bradawl, so P40 falls on bradawl's own score (iid) and
    # chisel drops below it (easy); "kept" orders awl, bradawl, chisel: P40 lies between
    # bradawl (easy) and chisel (iid)
    assert by_all["split"].tolist() == ["hard", "iid", "easy", "iid", "iid"]
    assert by_kept["split"].tolist() == ["hard", "easy", "iid", "iid", "iid"]
    p20, p40 = np.percentile(np.repeat(all_scores, [5, 5, 4, 5, 5]), [20, 40])
    assert p20 == pytest.approx((0.12 + 0.6 * (0.312 - 0.12) + 0.10) / SPAN)
    assert p40 == all_scores[1]
    with pytest.raises(InputError, match=r"^score_over must be 'all' or 'kept', got 'mean'$"):
        split_by_scores(["tool"] * 25, SUBS, SCORES, score_over="mean")


@pytest.fixture
def base(tmp_path: Path) -> Path:
    (tmp_path / "toy.csv").write_text(TOY)
    (tmp_path / "names.txt").write_text("tool\n")
    (tmp_path / "pool.txt").write_text("\n".join(RAW) + "\n")
    rows = ["class,score"] + [f"{c},{s!r}" for c, s in zip(SUBS, SCORES.tolist(), strict=True)]
    (tmp_path / "scores.csv").write_text("\n".join(rows) + "\n")
    return tmp_path


PARAMS = {"names": "names.txt", "pool": list(RAW), "min_subclasses": 3, "scores": "scores.csv"}


def test_builder_param_is_validated_and_recorded_in_the_manifest(base: Path) -> None:
    ctx = BuildContext(taxonomy=str(base / "toy.csv"), base_dir=base, where=WHERE)
    by_all = build_split("superclass", PARAMS, ctx)
    by_kept = build_split("superclass", {**PARAMS, "score_over": "kept"}, ctx)
    assert by_all.params["score_over"] == "all" and by_kept.params["score_over"] == "kept"
    assert by_all.bins == {"iid": ["bradawl", "drill", "file"], "easy": ["chisel"],
                           "hard": ["awl"]}  # fmt: skip
    assert by_kept.bins == {"iid": ["chisel", "drill", "file"], "easy": ["bradawl"],
                            "hard": ["awl"]}  # fmt: skip
    assert by_all.extra["subclass_scores"]["chisel"] == pytest.approx(0.412 / SPAN)
    assert by_kept.extra["subclass_scores"]["chisel"] == pytest.approx(0.515 / SPAN)
    with pytest.raises(InputError) as info:
        validate_params("superclass", {**PARAMS, "score_over": "mean"}, where=WHERE)
    assert str(info.value).startswith(f"{WHERE}.params.score_over: ")
    assert "'all'" in str(info.value) and "'kept'" in str(info.value)
    stage1_only = {k: v for k, v in PARAMS.items() if k != "scores"}
    with pytest.raises(InputError) as info:
        validate_params("superclass", {**stage1_only, "score_over": "kept"}, where=WHERE)
    assert str(info.value) == (
        f"{WHERE}.params.score_over: applies only with 'scores' or 'image_store' (the "
        "image-score stage)"
    )


def _cli(base: Path, out: str, *extra: str) -> None:
    args = ["splits", "superclass", "--out", str(base / out), "--names", str(base / "names.txt")]
    args += ["--pool", str(base / "pool.txt"), "--taxonomy", str(base / "toy.csv")]
    main([*args, "--min-subclasses", "3", *extra])


def test_cli_score_over(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for out, extra, iid in (
        ("all", [], ["bradawl", "drill", "file"]),
        ("kept", ["--score-over", "kept"], ["chisel", "drill", "file"]),
    ):
        with pytest.raises(SystemExit) as done:
            _cli(base, out, "--scores", str(base / "scores.csv"), *extra)
        assert done.value.code == 0
        split = json.loads((base / out / "split.json").read_text())
        assert split["method"] == "superclass:scores"
        assert split["params"]["score_over"] == out and split["bins"]["iid"] == iid
        assert (base / out / "subclasses.csv").is_file() and (base / out / "audit.csv").is_file()
        assert f"score over {out} images" in capsys.readouterr().out
    for extra, message in (
        (["--score-over", "kept"], "error: --score-over: applies only with --scores"),
        (["--iid", "50"], "error: --iid: applies only with --scores"),
        (["--scores", str(base / "scores.csv"), "--score-over", "mean"],
         "error: --score-over: "),
        (["--scores", str(base / "scores.csv"), "--easy", "50", "--iid", "30"],
         "error: --iid: must exceed easy (50.0), got 30.0"),
        (["--levels", "0"], "error: --levels: "),
    ):  # fmt: skip
        with pytest.raises(SystemExit) as done:
            _cli(base, "bad", *extra)
        assert done.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(message)
        assert not (base / "bad").exists()  # refused before any work


def test_cli_takes_the_percentiles_and_iqr_factor(base: Path) -> None:
    """--iqr-factor, --easy and --iid reach the split (recorded in its params) and move it."""
    scores = str(base / "scores.csv")
    with pytest.raises(SystemExit) as done:
        _cli(base, "wide", "--scores", scores, "--iqr-factor", "3", "--easy", "5", "--iid", "95")
    assert done.value.code == 0
    split = json.loads((base / "wide" / "split.json").read_text())
    assert {k: split["params"][k] for k in ("iqr_factor", "easy", "iid")} == {
        "iqr_factor": 3.0,
        "easy": 5.0,
        "iid": 95.0,
    }
    with pytest.raises(SystemExit):
        _cli(base, "default", "--scores", scores)
    default = json.loads((base / "default" / "split.json").read_text())
    assert (default["params"]["easy"], default["params"]["iid"]) == (20.0, 40.0)
    assert split["bins"] != default["bins"]
