"""write_report: sections per protocol, self-contained HTML, linked PNGs, determinism."""

from __future__ import annotations

import base64
import json
import re
import shutil
from pathlib import Path

import pytest
from tests.report.conftest import make_run

from semshift.errors import InputError
from semshift.report import write_report

PNG = b"\x89PNG\r\n\x1a\n"
ALL_SECTIONS = (
    "osr",
    "newclass_failure",
    "decomposition",
    "graded",
    "sanity",
    "generalisation",
    "gzsl",
    "scores",
    "errors",
    "provenance",
)


@pytest.fixture(scope="module")
def written(run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("written") / "out"
    shutil.copytree(run_dir, out)
    return out, write_report(out)


def test_every_section_and_figure(written: tuple[Path, object]) -> None:
    out, paths = written
    html = (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    for key in ALL_SECTIONS:
        assert f'<section id="{key}">' in html
        assert f'<a id="{key}"></a>' in md
    names = sorted(p.name for p in paths.figures)  # type: ignore[attr-defined]
    assert names == sorted(
        [
            "level_curves.png",
            "oscr_curves.png",
            "decomposition.png",
            "grid_auroc.png",
            "grid_fpr95.png",
            "sanity.png",
            "score_histograms.png",
            "failure_ranks.png",
            "correct_incorrect_scores.png",
            "axis_curves_auroc.png",
            "axis_curves_fpr95.png",
        ]
    )
    assert sorted(p.name for p in (out / "figures").glob("*.png")) == names
    for p in paths.figures:  # type: ignore[attr-defined]
        data = p.read_bytes()
        assert data.startswith(PNG) and len(data) > 5000
        # Markdown links each PNG by its relative path
        assert f"](figures/{p.name})" in md
    assert "FPR@95 convention: id_recall" in md and "FPR@95 convention: id_recall" in html
    # one failure in five protocols and the sanity check: two bullets, grouped
    assert ("- broken: failed in protocols osr, newclass, failure, decomposition, graded "
            "(5 sets): RuntimeError: singular covariance in broken.fit.") in md  # fmt: skip
    assert "- broken: failed on the sanity check's random-init models (seed0, seed1; 1 set)" in md
    # N/A grid cells: one bullet per reason, apart from the failures
    assert "- energy, knn, msp: in protocol graded (1 set each): fewer than 10 samples." in md
    assert "err: msp" not in md


def test_html_is_self_contained_with_decodable_pngs(written: tuple[Path, object]) -> None:
    out, paths = written
    html = (out / "report.html").read_text()
    uris = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(uris) == len(paths.figures) == html.count("<img ")  # type: ignore[attr-defined]
    on_disk = sorted(p.read_bytes() for p in paths.figures)  # type: ignore[attr-defined]
    assert sorted(base64.b64decode(u) for u in uris) == on_disk
    # no external resource of any kind
    assert not re.search(r"(src|href)\s*=\s*\"(?!data:|#)", html)
    assert "http://" not in html and "https://" not in html
    assert "<link" not in html and "@import" not in html
    # scripts only inline: the vendored libraries and their wiring, no src= anywhere
    assert not re.search(r"<script[^>]*\bsrc\s*=", html)


def test_sections_only_for_present_protocols(tmp_path: Path) -> None:
    out = make_run(tmp_path / "osr_only", protocols=("osr",), bootstrap=0)
    shutil.rmtree(out / "scores")
    paths = write_report(out, formats=("md",))
    assert paths.html is None and not (out / "report.html").exists()
    md = (out / "report.md").read_text()
    sections = re.findall(r'<a id="(\w+)"></a>', md)
    assert sections == ["osr", "errors", "provenance"]
    assert [p.name for p in paths.figures] == ["level_curves.png"]  # OSCR needs scores/
    assert "[" not in md.split("| msp |")[1].split("\n")[0]  # no CI without bootstrap


def test_same_input_same_markdown_and_stale_figures_removed(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a")
    b = make_run(tmp_path / "b")
    (b / "figures").mkdir()
    (b / "figures" / "stale.png").write_bytes(PNG)
    write_report(a, formats=("md",))
    write_report(b, formats=("md",))
    assert (a / "report.md").read_text() == (b / "report.md").read_text()
    assert not (b / "figures" / "stale.png").exists()
    first = (a / "report.md").read_text()
    write_report(a, formats=("md",))
    assert (a / "report.md").read_text() == first


def test_title_provenance_and_delta_from_results_json(tmp_path: Path) -> None:
    out = make_run(tmp_path / "r", protocols=("sanity",))
    prov = json.loads((out / "results.json").read_text())
    prov["config"]["protocols"]["sanity"] = {"n_models": 2, "delta": 0.2}
    prov["fpr_convention"] = {"fpr95": "ood_recall"}
    prov["stages"] = {"score": {"seconds": 3.5, "cached": False}}
    (out / "results.json").write_text(json.dumps(prov))
    write_report(out, formats=("md",), title="My study")
    md = (out / "report.md").read_text()
    assert md.startswith("# My study\n")
    assert "0.5 ± 0.2" in md
    assert "FPR@95 convention: ood_recall" in md
    assert "- score: 3.50 s" in md and "- numpy " in md


def test_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="output directory not found"):
        write_report(tmp_path / "missing")
    with pytest.raises(InputError, match=r"no results\.parquet"):
        write_report(tmp_path)
    out = make_run(tmp_path / "r", protocols=("gzsl",))
    with pytest.raises(InputError, match=r"formats: unknown \['pdf'\]"):
        write_report(out, formats=("pdf",))
    (out / "results.json").write_text("{not json")
    with pytest.raises(InputError, match=r"results\.json: not valid JSON"):
        write_report(out)
