"""Homoglyphs are measured from pixels and excluded from the open-set candidates."""

from __future__ import annotations

import pandas as pd

from semshift.demo.fonts import FAMILIES
from semshift.demo.render import find_homoglyphs
from semshift.splits.manifest import SplitManifest

SANS = FAMILIES["dejavu-sans"]


def test_finds_greek_alpha_and_cyrillic_a_next_to_latin_a():
    latin_a, alpha, cyr_a = "A", "\u0391", "\u0410"
    cands = [alpha, cyr_a, "B", "\u039b", "\u0531"]  # + Latin B, Greek Lamda, Armenian Ayb
    found = find_homoglyphs([latin_a, "\u03b1"], cands, SANS)
    assert [(c, k) for c, k, _ in found] == [(alpha, latin_a), (cyr_a, latin_a)]
    assert [d for _, _, d in found] == [0.0, 0.0]  # the same outlines in DejaVu Sans


def test_threshold_separates_lookalikes_from_distinct_letters():
    # Armenian SEH looks like Latin U (distance 0.11); Greek Lamda is a different letter (0.18)
    found = find_homoglyphs(["U", "A"], ["\u054d", "\u039b"], SANS, threshold=0.12)
    assert [c for c, _, _ in found] == ["\u054d"]
    assert 0.09 < found[0][2] < 0.12
    assert find_homoglyphs(["A"], ["\u039b"], SANS, threshold=0.2)[0][1] == "A"


def test_demo_reports_and_excludes_its_homoglyphs(tiny_demo):
    homo = pd.read_csv(tiny_demo.homoglyphs_path)
    assert list(homo.columns) == [
        "id", "char", "name", "group", "bin", "nearest_id", "nearest_id_char",
        "nearest_id_name", "distance",
    ]  # fmt: skip
    assert (homo["distance"] < tiny_demo.params.homoglyph_threshold).all()
    assert set(homo["nearest_id"]) <= set(tiny_demo.id_classes)
    # each ID Latin capital with a Greek twin in DejaVu Sans drags it (and the Cyrillic one) along
    greek_twin = {"A": "\u0391", "B": "\u0392", "E": "\u0395", "H": "\u0397", "I": "\u0399",
                  "K": "\u039a", "M": "\u039c", "N": "\u039d", "O": "\u039f", "P": "\u03a1",
                  "T": "\u03a4", "X": "\u03a7", "Y": "\u03a5", "Z": "\u0396"}  # fmt: skip
    id_chars = {chr(int(c[2:], 16)) for c in tiny_demo.id_classes}
    hits = [c for c in greek_twin if c in id_chars]
    assert hits, "the tiny demo should hold a Latin capital with a Greek twin"
    for c in hits:
        assert f"U+{ord(greek_twin[c]):04X}" in set(homo["id"])
    manifest = SplitManifest.read(tiny_demo.split_manifest)
    binned = {c for ids in manifest.bins.values() for c in ids}
    assert not binned & set(homo["id"])
    assert sorted(manifest.extra["demo"]["homoglyphs_excluded"]) == sorted(homo["id"])
    rendered = {c for n, s in tiny_demo.sets.items() if n.startswith("ood_") for c in s.classes}
    assert not rendered & set(homo["id"])
