"""report.html in a real headless browser (Debian's chromium): no console errors, every figure
rendered, a screenshot taken.

Without chromium the test is skipped with the install command, unless SEMSHIFT_REQUIRE_BROWSER=1
(set by .ci/run), in which case it fails.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread
from tests.report._cdp import Browser

from semshift.report import write_report

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def browser(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> Browser:
    profile = tmp_path_factory.mktemp("chromium") / "profile"
    profile.mkdir()
    with Browser(chromium, profile) as b:
        yield b  # type: ignore[misc]


def _decode_png(data: bytes) -> np.ndarray:
    assert data.startswith(PNG)
    return np.asarray(imread(io.BytesIO(data), format="png"))


def test_report_renders_in_headless_chromium(
    browser: Browser, run_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    shutil.copytree(run_dir, out)
    paths = write_report(out)
    assert paths.html is not None
    page = browser.check_page(paths.html.resolve().as_uri())
    assert page.console_errors == []
    assert len(page.images) == len(paths.figures) == 11  # 7 + failure views and axis curves
    for img in page.images:
        assert img["complete"] and img["naturalWidth"] > 0 and img["naturalHeight"] > 0, img
        assert img["src"].startswith("data:image/png;base64,")
    # the rendered sizes are those of the PNGs on disk
    on_disk = sorted(_decode_png(p.read_bytes()).shape[1::-1] for p in paths.figures)
    assert sorted((i["naturalWidth"], i["naturalHeight"]) for i in page.images) == on_disk
    shot = tmp_path / "report_screenshot.png"
    shot.write_bytes(page.screenshot)
    pixels = _decode_png(shot.read_bytes())
    assert pixels.shape[0] > 1000 and pixels.shape[1] >= 1000
    assert float(pixels[..., :3].std()) > 0.01  # not a blank page


def test_the_check_catches_errors_and_broken_images(browser: Browser, tmp_path: Path) -> None:
    """The harness itself: a page with a console error, an exception and a broken image."""
    page = tmp_path / "bad.html"
    page.write_text(
        "<!DOCTYPE html><html><body><p>bad</p>"
        '<img src="data:image/png;base64,AAAA" alt="broken">'
        "<script>console.error('boom'); null.f();</script></body></html>"
    )
    result = browser.check_page(page.as_uri())
    text = "\n".join(result.console_errors)
    assert "boom" in text and "exception" in text
    assert [i["naturalWidth"] for i in result.images] == [0]
