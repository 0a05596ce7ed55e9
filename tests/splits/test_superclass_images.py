"""SOOD stage 2 from images (issue 31 item 10): the per-image scores computed by an image-text
model against the bare super-class names, from Python and ``splits superclass --images``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from semshift.cli import main
from semshift.errors import InputError
from semshift.splits.superclass import build_score_split, build_superclasses, score_images
from tests.features.conftest import TINY_CLIP, write_images

SUBS = ["awl", "bradawl", "chisel", "drill", "file"]
TOY = "id,parent,name\nentity,,entity\ntool,entity,tool\n" + "".join(
    f"{name},tool,{name}\n" for name in SUBS
)


class _Scorer:
    """Scores an image by the number in its file name (k.png -> k / 10), recording the texts."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def score(self, images, text):
        self.texts.append(text)
        return np.array([int(Path(p).stem) / 10 for p in images], dtype=np.float64)


@pytest.fixture
def setup(tmp_path: Path):
    tax = tmp_path / "toy.csv"
    tax.write_text(TOY)
    names = tmp_path / "names.txt"
    names.write_text("tool\n")
    root = tmp_path / "imgs"
    write_images(root, {s: 4 for s in SUBS[:-1]})  # "file" has no folder
    stage1 = build_superclasses(str(names), SUBS, taxonomy=str(tax), min_subclasses=2)
    return tax, names, root, stage1


def test_every_image_of_every_sub_class_is_scored_against_its_super_class(setup):
    _, _, root, stage1 = setup
    scorer = _Scorer()
    frame = score_images(stage1, root, scorer)
    assert scorer.texts == ["tool"]  # one call per super-class, the bare name
    assert list(frame.columns) == ["superclass", "class", "path", "score"]
    assert frame.groupby("class").size().to_dict() == {s: 4 for s in SUBS[:-1]}
    assert frame["score"].tolist() == [k / 10 for _ in SUBS[:-1] for k in range(4)]
    capped = score_images(stage1, root, _Scorer(), max_per_class=2)
    assert capped.groupby("class").size().to_dict() == {s: 2 for s in SUBS[:-1]}
    split = build_score_split(stage1, frame)
    assert split.manifest.extra["unscored"] == ["file"]
    with pytest.raises(InputError, match="no sub-class of a kept super-class has a folder"):
        score_images(stage1, root / "awl", _Scorer())


def test_the_cli_scores_with_an_open_clip_model(setup, tmp_path, capsys):
    from semshift.features.models import register_open_clip_config

    register_open_clip_config("semshift-tiny-clip-sood", TINY_CLIP)
    tax, names, root, _ = setup
    out = tmp_path / "out"
    args = ["splits", "superclass", "--names", str(names), "--pool", ",".join(SUBS),
            "--taxonomy", str(tax), "--min-subclasses", "2", "--out", str(out),
            "--images", str(root), "--score-model", "open_clip/semshift-tiny-clip-sood",
            "--score-random-init"]  # fmt: skip
    pool = tmp_path / "pool.txt"
    pool.write_text("\n".join(SUBS) + "\n")
    args[args.index("--pool") + 1] = str(pool)
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 0, capsys.readouterr().err
    scores = pd.read_csv(out / "scores.csv")
    assert len(scores) == 16 and np.isfinite(scores["score"]).all()
    split = json.loads((out / "split.json").read_text())
    assert split["method"] == "superclass:scores"
    assert "scores.csv" in capsys.readouterr().out
    with pytest.raises(SystemExit) as bad:
        main([*args[:-1]])  # neither weights nor random init
    assert bad.value.code == 2
