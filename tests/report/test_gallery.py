"""The operating-point section: tables from the results, and the image gallery from scores/.

A tiny fake output directory: results.parquet holds the rows of the real ``operating_point``
protocol (results_frame), scores/<set>.parquet carry the gallery columns (path, class_id,
nearest_known, nearest_known_name, pred_name) pointing at small PNGs written here, each of its
own colour, so a thumbnail's pixels tell which image was chosen.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from semshift.protocols import Bootstrap, ScoredSet
from semshift.protocols.operating import operating_point
from semshift.protocols.tidy import results_frame
from semshift.report import (
    headline_table,
    operating_point_overview_table,
    operating_point_table,
    write_report,
)
from semshift.report.gallery import GALLERY_COLUMNS, ThumbnailCache, gallery_settings

CLASS_NAMES = ["tabby", "beagle", "jeep"]
# id_test: label, pred, msp, knn (rows 3 misclassified)
ID_ROWS = [
    (0, 0, 0.9, 9.0),
    (1, 1, 0.2, 6.0),
    (2, 2, 0.1, 2.0),
    (0, 1, 0.3, 8.0),
    (1, 1, 0.8, 4.0),
    (2, 2, 0.7, 7.0),
    (0, 0, 0.45, 3.0),
    (1, 1, 0.6, 8.5),
]
# OOD sets: pred, msp, knn
FAR = [(0, 0.95, 1.0), (1, 0.4, 2.0), (2, 0.55, 6.0), (0, 0.7, 3.0), (1, 0.1, 7.0)]
NEAR = [(2, 0.65, 5.5), (0, 0.52, 9.5), (1, 0.3, 1.0), (2, 0.2, 0.0)]
T_MSP, T_KNN = 0.5, 5.0  # every calibration score is the threshold


def _colour(set_name: str, i: int) -> tuple[int, int, int]:
    base = {"id_test": 0, "far": 80, "near": 160}[set_name]
    return (base + 9 * i, 255 - 25 * i, (37 * i + base) % 256)


def _sets() -> tuple[ScoredSet, ScoredSet, list[ScoredSet]]:
    val = ScoredSet(
        "id_val",
        "id_test",
        [0] * 10,
        [0] * 10,
        {"msp": np.full(10, T_MSP), "knn": np.full(10, T_KNN)},
    )
    lab, pred, msp, knn = (np.array(c) for c in zip(*ID_ROWS, strict=True))
    idt = ScoredSet("id_test", "id_test", lab, pred, {"msp": msp, "knn": knn})
    others = []
    for name, rows, level in (("far", FAR, 1), ("near", NEAR, 2)):
        p, m, k = (np.array(c) for c in zip(*rows, strict=True))
        n = len(rows)
        others.append(
            ScoredSet(name, "ood", [-1] * n, p, {"msp": m, "knn": k}, semantic_level=level)
        )
    return val, idt, others


def _frame(s: ScoredSet, images: Path) -> pd.DataFrame:
    paths = []
    for i in range(s.n):
        p = images / f"{s.name}_{i}.png"
        if (s.name, i) == ("far", 3):
            p.write_bytes(b"not an image")  # unreadable: a grey placeholder
        else:
            Image.new("RGB", (20, 10), _colour(s.name, i)).save(p)
        paths.append(str(p))
    known = s.labels >= 0
    frame = pd.DataFrame(
        {
            "label": s.labels,
            "pred": s.preds,
            "role": "id" if s.role == "id_test" else s.role,
            "set": s.name,
            "semantic_level": s.semantic_level,
            "covariate_level": None,
            "path": paths,
            "class_id": [
                f"n0000000{y}" if y >= 0 else f"n0999999{i}" for i, y in enumerate(s.labels)
            ],
            "nearest_known": [None if k else "n00000001" for k in known],
            "nearest_known_name": [None if k else "beagle" for k in known],
            "pred_name": [CLASS_NAMES[p] for p in s.preds],
        }
    )
    for det, v in s.scores.items():
        frame[f"score:{det}"] = v
    return frame


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("gallery")
    images = base / "images"
    images.mkdir()
    root = base / "out"
    (root / "scores").mkdir(parents=True)
    val, idt, others = _sets()
    for s in (idt, *others):
        _frame(s, images).to_parquet(root / "scores" / f"{s.name}.parquet", index=False)
    rows = operating_point(idt, others, calibration=val, recall=0.8, bootstrap=Bootstrap(50))
    results_frame(rows.to_dict("records")).to_parquet(root / "results.parquet", index=False)
    _config(root, gallery=3)
    return root


def _config(root: Path, **op: Any) -> None:
    prov = {
        "name": "gallery study",
        "config": {
            "name": "gallery study",
            "protocols": {"operating_point": {"recall": 0.8, **op}},
        },
    }
    (root / "results.json").write_text(json.dumps(prov))


def _copy(run_dir: Path, tmp_path: Path, **op: Any) -> Path:
    out = tmp_path / "out"
    shutil.copytree(run_dir, out)
    if op:
        _config(out, **op)
    return out


_THUMB = re.compile(
    r'<figure class="thumb"><img src="data:(image/(?:png|jpeg));base64,([A-Za-z0-9+/=]+)" '
    r'alt="([^"]*)" width="(\d+)" height="(\d+)"><figcaption>([^<]*)</figcaption></figure>'
)


def _gallery(page: str, key: str) -> list[tuple[str, Image.Image]]:
    """(caption, decoded thumbnail) of every thumbnail of the gallery ``key``, in order."""
    m = re.search(
        rf'<figure class="gallery" id="gallery-{re.escape(key)}">(.*?)</div></figure>', page
    )
    assert m, key
    out = []
    for mime, data, alt, w, h, cap in _THUMB.findall(m.group(1)):
        img = Image.open(io.BytesIO(base64.b64decode(data)))
        assert img.format == ("PNG" if mime == "image/png" else "JPEG")
        assert img.size == (int(w), int(h)) and alt == cap
        out.append((html.unescape(cap), img.convert("RGB")))
    return out


def _is(img: Image.Image, set_name: str, i: int) -> bool:
    """The thumbnail shows image i of the set (its colour), at 64 px on the long side."""
    pixels = np.asarray(img, dtype=float).reshape(-1, 3)
    return img.size == (64, 32) and bool(np.abs(pixels - np.array(_colour(set_name, i))).max() <= 6)


def _caption(set_name: str, i: int, score: float, extra: str = "") -> str:
    if set_name == "id_test":
        label, pred = ID_ROWS[i][0], ID_ROWS[i][1]
        text = f"pred: {CLASS_NAMES[pred]}; score {score:.4g}; set id_test, class n0000000{label}"
    else:
        pred = (FAR if set_name == "far" else NEAR)[i][0]
        text = (
            f"pred: {CLASS_NAMES[pred]}; nearest known: beagle (n00000001); score {score:.4g}; "
            f"set {set_name}, class n0999999{i}"
        )
    return text + (f"; {extra}" if extra else "")


@pytest.fixture(scope="module")
def written(run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    out = tmp_path_factory.mktemp("written") / "out"
    shutil.copytree(run_dir, out)
    return out, write_report(out)


def test_accepted_ood_gallery(written: tuple[Path, Any]) -> None:
    out, _ = written
    page = (out / "report.html").read_text()
    # msp, t = 0.5: OOD scores >= t, highest first: far 0 (0.95), far 3 (0.7), near 0 (0.65)
    got = _gallery(page, "msp-accepted_ood")
    assert [c for c, _ in got] == [
        _caption("far", 0, 0.95),
        "unreadable image; " + _caption("far", 3, 0.7),
        _caption("near", 0, 0.65),
    ]
    assert _is(got[0][1], "far", 0) and _is(got[2][1], "near", 0)
    grey = np.asarray(got[1][1])
    assert got[1][1].size == (64, 64) and (grey == 200).all()  # the placeholder
    # knn, t = 5: near 1 (9.5), far 4 (7), far 2 (6); near 0 (5.5) is 4th
    got = _gallery(page, "knn-accepted_ood")
    assert [c for c, _ in got] == [
        _caption("near", 1, 9.5),
        _caption("far", 4, 7.0),
        _caption("far", 2, 6.0),
    ]
    assert all(
        _is(img, s, i)
        for (_, img), (s, i) in zip(got, [("near", 1), ("far", 4), ("far", 2)], strict=True)
    )


def test_rejected_correct_id_gallery(written: tuple[Path, Any]) -> None:
    out, _ = written
    page = (out / "report.html").read_text()
    # msp < 0.5 and correctly classified, lowest first: rows 2 (0.1), 1 (0.2), 6 (0.45);
    # row 3 (0.3) is rejected but misclassified
    got = _gallery(page, "msp-rejected_correct")
    assert [c for c, _ in got] == [
        _caption("id_test", 2, 0.1),
        _caption("id_test", 1, 0.2),
        _caption("id_test", 6, 0.45),
    ]
    assert all(_is(img, "id_test", i) for (_, img), i in zip(got, [2, 1, 6], strict=True))
    got = _gallery(page, "knn-rejected_correct")
    assert [c for c, _ in got] == [
        _caption("id_test", 2, 2.0),
        _caption("id_test", 6, 3.0),
        _caption("id_test", 4, 4.0),
    ]


def test_disagreement_with_msp_gallery(written: tuple[Path, Any]) -> None:
    out, _ = written
    page = (out / "report.html").read_text()
    # rank percentiles within far: msp 100 40 60 80 20, knn 20 40 80 60 100 -> far 0 and far 4
    # differ by 80; then id_test row 4 (msp 87.5, knn 37.5)
    got = _gallery(page, "knn-disagree_msp")
    assert [c for c, _ in got] == [
        _caption("far", 0, 1.0, "rank pct knn 20 vs msp 100"),
        _caption("far", 4, 7.0, "rank pct knn 100 vs msp 20"),
        _caption("id_test", 4, 4.0, "rank pct knn 38 vs msp 88"),
    ]
    assert _is(got[0][1], "far", 0) and _is(got[2][1], "id_test", 4)
    assert 'id="gallery-msp-disagree_msp"' not in page  # msp against itself: no gallery


def test_markdown_links_thumbnail_files(written: tuple[Path, Any]) -> None:
    out, paths = written
    md = (out / "report.md").read_text()
    page = (out / "report.html").read_text()
    files = sorted(p.name for p in (out / "figures" / "gallery").iterdir())
    assert files == sorted(p.name for p in paths.gallery)
    # 15 thumbnails shown, 2 of them the same image (far 0, far 4 shown twice) and the
    # placeholder: distinct files are fewer
    assert len(_THUMB.findall(page)) == 15
    assert len(files) == len({base64.b64decode(d) for _, d, *_ in _THUMB.findall(page)})
    for name in files:
        assert f"](figures/gallery/{name}) |" in md
    assert (
        "| ![pred: tabby; nearest known: beagle (n00000001); score 0.95; set far, class n09999990]"
        in md
    )
    data = (out / "figures" / "gallery" / files[0]).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" or data[:2] == b"\xff\xd8"
    # a second report removes the old thumbnails first
    stale = out / "figures" / "gallery" / "stale.jpg"
    stale.write_bytes(b"x")
    write_report(out, formats=("md",))
    assert not stale.exists()


def test_tables_in_the_report(written: tuple[Path, Any]) -> None:
    out, _ = written
    res = pd.read_parquet(out / "results.parquet")
    table = operating_point_table(res, "msp", recall=0.8, ci=False)
    assert table.rows == [
        "id_test",
        "far",
        "near",
        "semantic level 1 (far)",
        "semantic level 2 (near)",
    ]
    # msp, t = 0.5: id_test rejects rows 1 2 3 6 (50.0); accepted and wrong: none (0.0);
    # far rejects 0.4 and 0.1 (40.0) and lets 3 of 5 through (60.0)
    assert [[table.text(i, j) for j in range(2)] for i in range(3)] == [
        ["50.0", "0.0"],
        ["40.0", "60.0"],
        ["50.0", "50.0"],
    ]
    assert "Threshold t = 0.5 (score units), chosen on id_val: the largest t" in table.caption
    assert "keeping 80% of the calibration scores" in table.caption
    with_ci = operating_point_table(res, "knn")
    assert re.fullmatch(r"\d+\.\d \[\d+\.\d, \d+\.\d\]", with_ci.text(1, 1))
    assert "Threshold t = 5 [5, 5] (score units)" in with_ci.caption
    overview = operating_point_overview_table(res)
    assert overview.rows == ["msp", "knn"]
    assert [c.full_label for c in overview.columns] == [
        "Threshold",
        "Rejected id_test",
        "Rejected far",
        "Rejected near",
        "Accepted & wrong id_test",
        "Accepted & wrong far",
        "Accepted & wrong near",
    ]
    assert overview.text(0, 0) == "0.5" and overview.text(1, 0) == "5"
    # knn lets 2 of 5 far images through (40.0) against msp's 60.0: bold
    assert overview.text(1, 5) == "40.0" and overview.is_best(1, 5)
    assert headline_table(res).key == "operating_point"  # the CLI's table for such a run
    md = (out / "report.md").read_text()
    assert '<a id="operating_point"></a>' in md and "**Operating point: knn**" in md
    page = (out / "report.html").read_text()
    assert '<section id="operating_point">' in page
    assert '<section id="operating_point_gallery">' in page


def test_the_size_bound_is_kept(run_dir: Path, written: tuple[Path, Any], tmp_path: Path) -> None:
    full, _ = written
    full_page = (full / "report.html").read_text()
    costs = [len(m.group(0).encode()) for m in _THUMB.finditer(full_page)]
    limit = len(full_page.encode()) - sum(costs) // 2
    out = _copy(run_dir, tmp_path, gallery=3, max_report_bytes=limit)
    write_report(out)
    page = (out / "report.html").read_text()
    assert len(page.encode()) <= limit
    shown = len(_THUMB.findall(page))
    assert 0 < shown < 15
    assert (
        f"The gallery stopped at the report's size bound (max_report_bytes = {limit:,} bytes of "
        f"report.html): {shown} of 15 thumbnails are shown, the best-ranked of every gallery first."
    ) in html.unescape(page)
    # every gallery got its best thumbnail before any got its second
    counts = [
        len(_gallery(page, k))
        for k in ("msp-accepted_ood", "msp-rejected_correct", "knn-accepted_ood",
                  "knn-rejected_correct", "knn-disagree_msp")
    ]  # fmt: skip
    assert sum(counts) == shown and max(counts) - min(counts) <= 1
    assert counts == sorted(counts, reverse=True)
    # Markdown shows the same thumbnails
    md = (out / "report.md").read_text()
    assert md.count("](figures/gallery/") == shown
    # a bound below the rest of the report: no thumbnail at all, and the report says so
    tiny = _copy(run_dir, tmp_path / "tiny", gallery=3, max_report_bytes=1000)
    write_report(tiny)
    page = (tiny / "report.html").read_text()
    assert 'class="thumb"' not in page and "0 of 15 thumbnails are shown" in page
    assert "no thumbnail shown (the report size bound)" in (tiny / "report.md").read_text()


def test_a_run_without_the_gallery_columns_still_renders(run_dir: Path, tmp_path: Path) -> None:
    out = _copy(run_dir, tmp_path)
    for f in (out / "scores").glob("*.parquet"):
        pd.read_parquet(f).drop(columns=list(GALLERY_COLUMNS)).to_parquet(f, index=False)
    paths = write_report(out)
    page = (out / "report.html").read_text()
    assert "No image gallery: the per-sample tables in scores/ have no image paths" in page
    assert '<figure class="thumb">' not in page and paths.gallery == []
    assert 'id="table-operating_point_msp"' in page  # the tables are there
    assert "No image gallery" in (out / "report.md").read_text()
    # paths present but all null (feature stores without images)
    for f in (out / "scores").glob("*.parquet"):
        frame = pd.read_parquet(f)
        frame["path"] = None
        frame.to_parquet(f, index=False)
    write_report(out, formats=("md",))
    assert "no scored sample has an image path" in (out / "report.md").read_text()
    # gallery: 0 turns it off
    off = _copy(run_dir, tmp_path / "off", gallery=0)
    write_report(off, formats=("md",))
    assert (
        "the image gallery is off (protocols.operating_point.gallery = 0)"
        in (off / "report.md").read_text()
    )


def test_settings_and_cache() -> None:
    s = gallery_settings({"config": {"protocols": {"operating_point": {"max_report_bytes": 5}}}})
    assert (s.per_kind, s.max_report_bytes, s.recall) == (8, 5, 0.95)
    assert gallery_settings({}).max_report_bytes == 10_000_000
    bad = gallery_settings({"config": {"protocols": {"operating_point": {"gallery": "x"}}}})
    assert bad.per_kind == 8


def test_thumbnails_are_cached_per_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import semshift.report.gallery as gallery

    p = tmp_path / "a.png"
    Image.new("L", (30, 90), 10).save(p)
    calls = []
    real = gallery.make_thumbnail
    monkeypatch.setattr(gallery, "make_thumbnail", lambda *a: calls.append(a) or real(*a))
    cache = ThumbnailCache()
    one, two = cache.get(str(p), "a"), cache.get(str(p), "b")
    assert len(calls) == 1 and one.data == two.data and (one.caption, two.caption) == ("a", "b")
    assert (one.width, one.height) == (21, 64)  # 64 px on the long side


def test_gallery_report_in_headless_chromium(
    written: tuple[Path, Any], tmp_path: Path, chromium: str
) -> None:
    from tests.report._cdp import Browser

    out, paths = written
    profile = tmp_path / "profile"
    profile.mkdir()
    with Browser(chromium, profile) as browser:
        page = browser.check_page((out / "report.html").resolve().as_uri())
    assert page.console_errors == []
    assert len(page.images) == len(paths.figures) + 15
    for img in page.images:
        assert img["complete"] and img["naturalWidth"] > 0, img
