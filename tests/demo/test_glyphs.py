"""The glyph taxonomy, font coverage and rendering."""

from __future__ import annotations

import unicodedata

import numpy as np
import pandas as pd
import pytest
from matplotlib.ft2font import FT2Font

from semshift.demo.fonts import FAMILIES, covered, get_family
from semshift.demo.glyphs import inventory, taxonomy_csv
from semshift.demo.render import Augment, glyph_distance, render
from semshift.errors import InputError, UnknownNameError
from semshift.taxonomy import load_taxonomy

SANS = FAMILIES["dejavu-sans"]


def test_taxonomy_loads_with_the_stated_structure(tiny_demo):
    tax = load_taxonomy(tiny_demo.taxonomy_path)
    # glyph -> letter -> script -> case -> character
    assert tax.ancestors("U+0041") == ["latin-capital", "latin", "letter", "glyph"]
    assert tax.ancestors("U+03B1") == ["greek-small", "greek", "letter", "glyph"]
    assert tax.ancestors("U+0416") == ["cyrillic-capital", "cyrillic", "letter", "glyph"]
    assert tax.ancestors("U+0561") == ["armenian-small", "armenian", "letter", "glyph"]
    assert tax.ancestors("U+10D0") == ["georgian-small", "georgian", "letter", "glyph"]
    # glyph -> symbol -> block -> character
    assert tax.ancestors("U+2190") == ["arrows", "symbol", "glyph"]
    assert tax.ancestors("U+2200") == ["mathematical-operators", "symbol", "glyph"]
    assert tax.ancestors("U+25A0") == ["geometric-shapes", "symbol", "glyph"]
    assert sorted(tax.children("letter")) == ["armenian", "cyrillic", "georgian", "greek", "latin"]
    assert tax.roots == ["glyph"]
    # leaves are named by their Unicode names
    assert tax.label("U+0391") == "GREEK CAPITAL LETTER ALPHA"
    assert tax.label("U+0410") == "CYRILLIC CAPITAL LETTER A"
    assert tax.path_distance("U+0041", "U+0042") == 2  # siblings
    assert tax.path_distance("U+0041", "U+0061") == 4  # same script, other case
    assert tax.path_distance("U+0041", "U+0410") == 6  # other script


def test_inventory_counts_match_unicode():
    glyphs = inventory(SANS)
    counts = pd.Series([g.parent for g in glyphs]).value_counts().to_dict()
    assert counts["latin-capital"] == 26 and counts["latin-small"] == 26
    assert counts["greek-capital"] == 24  # U+03A2 is unassigned
    assert counts["greek-small"] == 25  # final sigma included
    assert counts["cyrillic-capital"] == 32 and counts["cyrillic-small"] == 32
    assert counts["armenian-capital"] == 38 and counts["armenian-small"] == 38
    assert counts["arrows"] == 112 and counts["mathematical-operators"] == 256
    assert counts["geometric-shapes"] == 96
    assert all(g.name == unicodedata.name(g.char) for g in glyphs)
    assert len({g.id for g in glyphs}) == len(glyphs) == 786


def test_inventory_keeps_only_covered_characters():
    # STIX lacks Armenian and Georgian: none of them enter an inventory that needs STIX
    stix = get_family("stix")[:1]
    parents = {g.parent for g in inventory(stix)}
    assert not any(p.startswith(("armenian", "georgian")) for p in parents)
    assert "latin-capital" in parents
    assert covered(["A", "\u0531"], stix) == ["A"]


def test_taxonomy_csv_writes_only_used_groups():
    glyphs = [g for g in inventory(SANS) if g.parent == "latin-capital"][:2]
    text = taxonomy_csv(glyphs)
    assert text.splitlines() == [
        "id,parent,name",
        "glyph,,glyph",
        "letter,glyph,letter",
        "latin,letter,Latin script",
        "latin-capital,latin,Latin capital letters",
        "U+0041,latin-capital,LATIN CAPITAL LETTER A",
        "U+0042,latin-capital,LATIN CAPITAL LETTER B",
    ]


def test_every_rendered_image_used_a_font_that_covers_its_character(tiny_demo):
    root = tiny_demo.root / "images"
    checked = 0
    for name, s in tiny_demo.sets.items():
        index = pd.read_csv(root / f"{name}.csv")
        assert len(index) == s.n_images
        for font_file, part in index.groupby("font_file"):
            cmap = FT2Font(str(SANS[0].path.parent / font_file)).get_charmap()
            missing = [c for c in part["char"] if ord(c) not in cmap]
            assert missing == [], (name, font_file, missing)
            checked += len(part)
        assert all((s.path / p).is_file() for p in index["path"])
    assert checked == sum(s.n_images for s in tiny_demo.sets.values())


def test_render_refuses_an_uncovered_character():
    stix_italic = get_family("stix")[2]
    with pytest.raises(InputError, match=r"does not cover U\+0531"):
        render("\u0531", stix_italic)
    with pytest.raises(UnknownNameError, match="known: dejavu-sans"):
        get_family("comic-sans")


def test_render_is_centred_black_on_white_and_deterministic():
    img = render("A", SANS[0])
    assert img.shape == (32, 32) and img.dtype == np.uint8
    assert img[0].min() == 255 and img[:, 0].min() == 255  # white margins
    ink = 255.0 - img
    ys = np.nonzero(ink)[0]
    cy = (ink.sum(1) * np.arange(32)).sum() / ink.sum()
    cx = (ink.sum(0) * np.arange(32)).sum() / ink.sum()
    assert abs(cx - 15.5) < 1.5 and abs((ys.min() + ys.max()) / 2 - 15.5) <= 1
    assert cy > 14  # 'A' is heavier at its base
    np.testing.assert_array_equal(img, render("A", SANS[0]))
    shifted = render("A", SANS[0], dx=2)
    np.testing.assert_array_equal(shifted[:, 4:], img[:, 2:-2])


def test_augment_draws_within_its_ranges():
    aug = Augment(shift=2, rotate=10.0, scale=(0.85, 1.1))
    p = aug.draw(np.random.default_rng(0), 500)
    assert set(np.unique(p[:, :2])) == {-2, -1, 0, 1, 2}
    assert np.abs(p[:, 2]).max() <= 10 and p[:, 3].min() >= 0.85 and p[:, 3].max() <= 1.1


def test_glyph_distance_identity_and_symmetry():
    imgs = np.stack([render(c, SANS[0]) for c in "ABCO"])
    d = glyph_distance(imgs, imgs, block=3)
    np.testing.assert_allclose(np.diag(d), 0.0)
    np.testing.assert_allclose(d, d.T)
    assert d[0, 1:].min() > 0.2


@pytest.mark.parametrize(("dx", "dy"), [(2, -1), (-2, 2), (0, -2)])
def test_shifted_render_equals_drawing_at_the_shifted_origin(dx, dy):
    from PIL import Image, ImageDraw, ImageFont

    for ch, font in (("Q", SANS[1]), ("\u21af", SANS[2]), ("\u03c8", SANS[3])):
        fnt = ImageFont.truetype(str(font.path), 22)
        left, top, right, bottom = fnt.getbbox(ch)
        ref = Image.new("L", (32, 32), 255)
        origin = ((32 - (right - left)) // 2 - left + dx, (32 - (bottom - top)) // 2 - top + dy)
        ImageDraw.Draw(ref).text(origin, ch, font=fnt, fill=0)
        np.testing.assert_array_equal(render(ch, font, dx=dx, dy=dy), np.asarray(ref))
