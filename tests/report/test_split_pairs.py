"""The report's SSB Fig. 1 section: each open-set class beside its nearest known class.

A tiny made-up output directory: a custom taxonomy (animal > {dog > {beagle, husky, wolf},
cat > {tabby, lynx}}), id_test rows of beagle / tabby / husky, and two OOD sets whose images
are coloured PNGs, so a thumbnail's pixels tell which image was chosen.
"""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from semshift.protocols import ScoredSet
from semshift.protocols.osr import osr
from semshift.report import write_report
from semshift.report.gallery import GALLERY_DIR
from semshift.report.split_pairs import ClassPair, pair_galleries, select_pairs

TAXONOMY = (
    "id,parent,name\nanimal,,animal\ndog,animal,dog\ncat,animal,cat\nbeagle,dog,beagle\n"
    "husky,dog,husky\nwolf,dog,wolf\ntabby,cat,tabby\nlynx,cat,lynx\nfar,animal,far thing\n"
)
KNOWN = {"beagle": 0, "tabby": 1, "husky": 2}
# (set, semantic level, class, nearest known, n images); 'lynx' is in both sets
OOD = [
    ("near", 1, "wolf", "beagle", 3),
    ("near", 1, "lynx", "tabby", 2),
    ("far", 2, "far", "beagle", 2),
    ("far", 2, "lynx", "tabby", 2),
]


def _colour(k: int) -> tuple[int, int, int]:
    return (10 * k % 256, 255 - 7 * k % 256, 3 * k % 256)


def _frames(images: Path) -> dict[str, pd.DataFrame]:
    """scores/<set>.parquet contents; every image a PNG of its own colour (index k)."""
    images.mkdir(parents=True, exist_ok=True)
    k = 0
    rows: dict[str, list[dict[str, object]]] = {"id_test": []}

    def image(name: str) -> str:
        nonlocal k
        path = images / f"{name}.png"
        Image.new("RGB", (12, 8), _colour(k)).save(path)
        k += 1
        return str(path)

    # id_test: paths written out of order (z, a, m) so "first by path" is a real choice
    for cid, label in KNOWN.items():
        for tag in ("z", "a", "m"):
            rows["id_test"].append(
                {"label": label, "path": image(f"{cid}_{tag}"), "class_id": cid,
                 "class_name": cid, "nearest_known": None, "nearest_known_name": None,
                 "semantic_level": 0, "covariate_level": 0}
            )  # fmt: skip
    for set_name, level, cid, near, n in OOD:
        for i in range(n):
            rows.setdefault(set_name, []).append(
                {"label": -1, "path": image(f"{set_name}_{cid}_{n - i}"), "class_id": cid,
                 "class_name": cid.upper(), "nearest_known": near, "nearest_known_name": near,
                 "semantic_level": level, "covariate_level": 0}
            )  # fmt: skip
    return {name: pd.DataFrame(r) for name, r in rows.items()}


def test_select_pairs_known_answer(tmp_path):
    frames = _frames(tmp_path / "img")
    img = str(tmp_path / "img")
    dist = {("wolf", "beagle"): 2, ("lynx", "tabby"): 2, ("far", "beagle"): 3}

    def distance(a, b):
        return np.array([dist[(x, y)] for x, y in zip(a, b, strict=True)])

    pairs, left = select_pairs(frames, per_side=2, max_per_set=6, distance=distance)
    assert left == 0
    # near (level 1) before far (level 2); in near: distance ties -> by class id
    assert [(p.set, p.open_id, p.known_id, p.distance) for p in pairs] == [
        ("near", "lynx", "tabby", 2),
        ("near", "wolf", "beagle", 2),
        ("far", "far", "beagle", 3),
    ]  # lynx is shown once, in its first set (the smaller shift)
    wolf = pairs[1]
    assert wolf.open_name == "WOLF" and wolf.known_name == "beagle"
    assert wolf.semantic_level == 1.0
    # the first two paths in path order, on each side
    assert wolf.open_paths == (f"{img}/near_wolf_1.png", f"{img}/near_wolf_2.png")
    assert wolf.known_paths == (f"{img}/beagle_a.png", f"{img}/beagle_m.png")
    # the cap keeps the nearest classes of each set and counts the rest
    capped, left = select_pairs(frames, max_per_set=1, distance=distance)
    assert [p.open_id for p in capped] == ["lynx", "far"] and left == 1
    # without distances: classes by id; deterministic under row order
    shuffled = {k: v.sample(frac=1.0, random_state=3) for k, v in frames.items()}
    again, _ = select_pairs(shuffled)
    assert again == select_pairs(frames)[0]
    assert [p.distance for p in again] == [None, None, None]


def test_no_pairs_without_the_columns():
    frame = pd.DataFrame({"label": [-1], "path": ["x.png"]})
    assert select_pairs({"ood": frame}) == ([], 0)
    no_id = pd.DataFrame(
        {"label": [-1], "path": ["x.png"], "class_id": ["wolf"], "nearest_known": ["beagle"]}
    )
    pairs, _ = select_pairs({"ood": no_id})
    assert pairs[0].known_paths == ()  # no ID image: the open side alone


def test_pair_gallery_shows_open_then_known(tmp_path):
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    Image.new("RGB", (4, 4), (255, 0, 0)).save(a)
    Image.new("RGB", (4, 4), (0, 0, 255)).save(b)
    pair = ClassPair("near", 1.0, "wolf", "wolf", "beagle", "Beagle", 2, (str(a),), (str(b),))
    (g,) = pair_galleries([pair])
    assert g.title == "wolf vs nearest known Beagle (beagle)"
    assert "Set near, semantic level 1; taxonomy path distance 2" in g.caption
    assert [t.caption for t in g.thumbnails] == ["open-set: wolf", "known: Beagle (beagle)"]
    pixels = [Image.open(io.BytesIO(t.data)).convert("RGB").getpixel((2, 2)) for t in g.thumbnails]
    assert pixels[0][0] > 200 and pixels[1][2] > 200  # red (open) first, then blue (known)


def _write_run(root: Path, frames: dict[str, pd.DataFrame], taxonomy: str | None) -> Path:
    out = root / "out"
    (out / "scores").mkdir(parents=True)
    rng = np.random.default_rng(0)
    sets = {}
    for name, f in frames.items():
        f = f.assign(
            pred=np.where(f["label"] >= 0, f["label"], 0), **{"score:msp": rng.random(len(f))}
        )
        f.to_parquet(out / "scores" / f"{name}.parquet")
        role = "id_test" if name == "id_test" else "ood"
        level = int(f["semantic_level"].iloc[0]) if role == "ood" else None
        sets[name] = ScoredSet(name, role, f["label"], f["pred"], {"msp": f["score:msp"]},
                               semantic_level=None if level is None else str(level))  # fmt: skip
    rows = osr(sets["id_test"], [s for k, s in sets.items() if k != "id_test"], metrics=["auroc"])
    rows.to_parquet(out / "results.parquet")
    config = {"name": "pairs"} | ({"taxonomy": taxonomy} if taxonomy else {})
    (out / "results.json").write_text(json.dumps({"config": config}))
    return out


@pytest.mark.parametrize("with_taxonomy", [True, False])
def test_report_section_from_an_output_directory(tmp_path, with_taxonomy):
    tax = tmp_path / "tax.csv"
    tax.write_text(TAXONOMY)
    out = _write_run(tmp_path, _frames(tmp_path / "img"), str(tax) if with_taxonomy else None)
    paths = write_report(out)
    html = paths.html.read_text()
    md = paths.md.read_text()
    assert "Open-set classes and their nearest known class" in html
    assert "WOLF (wolf) vs nearest known beagle" in html and "LYNX (lynx) vs" in md
    # 3 pairs: lynx 2 + 2 images, wolf 2 + 2, far 2 + 2
    section = html.split('id="osr_class_pairs"')[1].split("</section>")[0]
    assert len(re.findall(r"data:image/(?:png|jpeg);base64,", section)) == 12
    if with_taxonomy:  # wolf - dog - beagle: 2 edges; far - animal - dog - beagle: 3
        assert "Set near, semantic level 1; taxonomy path distance 2" in html
        assert "Set far, semantic level 2; taxonomy path distance 3" in html
    else:
        assert "taxonomy path distance" not in html
    # report.md links the thumbnails it wrote under figures/gallery/
    links = re.findall(rf"\]\(({GALLERY_DIR}/[0-9a-f]+\.(?:png|jpg))\)", md)
    assert len(links) == 12 and all((out / link).is_file() for link in links)
    first = section.split("base64,")[1].split('"')[0]
    colour = Image.open(io.BytesIO(base64.b64decode(first))).convert("RGB").getpixel((3, 3))
    assert colour == pytest.approx(_colour(13), abs=3)  # near_lynx_1: the 14th image written


def test_report_section_says_why_without_columns(tmp_path):
    frames = {k: v.drop(columns=["nearest_known", "nearest_known_name"]) for k, v in
              _frames(tmp_path / "img").items()}  # fmt: skip
    out = _write_run(tmp_path, frames, None)
    html = write_report(out, formats=["html"]).html.read_text()
    assert "No class pairs: the per-sample tables in scores/ have no image paths or nearest" in html


def test_a_run_from_class_folders_shows_the_pairs(tmp_path):
    """End to end: a run over class-folder images records each OOD row's nearest known class,
    and its report pairs the OOD class with it (the demo's layout, in small)."""
    import torch
    from tests.tiny_model import register_tiny_cnn

    from semshift.features.models import MODELS
    from semshift.run import run

    model = register_tiny_cnn()
    colours = {"r": 0, "g": 1, "b": 2, "grey": 0}
    for folder, classes in (("train", "rgb"), ("test", "rgb"), ("ood", ["grey"])):
        for cls in classes:
            (tmp_path / folder / cls).mkdir(parents=True)
            for k in range(3):
                arr = np.full((16, 16, 3), 30, np.uint8)
                arr[..., colours[cls]] = 200 - 20 * k
                Image.fromarray(arr).save(tmp_path / folder / cls / f"{k}.png")
    (tmp_path / "classes.txt").write_text("r\ng\nb\n")
    (tmp_path / "tax.csv").write_text(
        "id,parent,name\ncolour,,colour\nwarm,colour,warm\ncool,colour,cool\n"
        "r,warm,red\ng,cool,green\nb,cool,blue\ngrey,warm,grey\n"
    )
    torch.manual_seed(0)
    torch.save(MODELS[model].build(num_classes=3).module.state_dict(), tmp_path / "w.pt")
    cfg = {
        "output": str(tmp_path / "out"), "classes": str(tmp_path / "classes.txt"),
        "taxonomy": str(tmp_path / "tax.csv"),
        "model": {"name": model, "weights": str(tmp_path / "w.pt"), "num_classes": 3,
                  "preset": "resize32-crop32", "batch_size": 8},
        "data": {"id_train": {"images": str(tmp_path / "train")},
                 "id_test": {"images": str(tmp_path / "test")},
                 "sets": {"ood": {"role": "ood", "images": str(tmp_path / "ood")}}},
        "detectors": ["msp"], "protocols": {"osr": {}}, "bootstrap": {"n_resamples": 0},
        "report": {"formats": ["md"]},
    }  # fmt: skip
    result = run(cfg, progress=False)
    assert not result.errors, result.errors
    md = (tmp_path / "out" / "report.md").read_text()
    assert "**grey vs nearest known red (r)**. Set ood; taxonomy path distance 2" in md
    section = md.split("## Open-set classes and their nearest known class")[1].split("## ")[0]
    names = re.findall(r"\| (open-set: grey|known: red \(r\)) \|", section)
    assert names == ["open-set: grey"] * 2 + ["known: red (r)"] * 2
