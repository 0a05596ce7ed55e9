"""The demo's open-set bins come from the SSB split builder over the glyph taxonomy."""

from __future__ import annotations

import numpy as np
import pandas as pd

from semshift.demo import BINS
from semshift.demo.fonts import FAMILIES
from semshift.demo.glyphs import inventory
from semshift.splits.manifest import SplitManifest
from semshift.splits.ssb import build_ssb_split
from semshift.taxonomy import load_taxonomy


def test_manifest_is_the_ssb_builders_output(tiny_demo):
    m = SplitManifest.read(tiny_demo.split_manifest)
    assert m.method == "ssb:hierarchy"
    assert m.known == tiny_demo.id_classes
    assert list(m.bins) == ["easy", "medium", "hard"]
    # the same call reproduces the manifest's bins
    tax = load_taxonomy(tiny_demo.taxonomy_path)
    homo = set(pd.read_csv(tiny_demo.homoglyphs_path)["id"])
    leaves = [g.id for g in inventory(FAMILIES["dejavu-sans"])]
    pool = [i for i in leaves if i not in homo and i not in tiny_demo.id_classes]
    rendered = [c for b in BINS for c in tiny_demo.sets[f"ood_{b}"].classes]
    again = build_ssb_split(
        tiny_demo.id_classes, pool, taxonomy=tax, preset="hierarchy", restrict_to=rendered
    )
    assert again.manifest.bins == m.bins
    for b in BINS:
        assert sorted(m.bins[b]) == sorted(tiny_demo.sets[f"ood_{b}"].classes)
        assert len(m.bins[b]) == tiny_demo.params.ood_classes


def test_hard_is_nearer_the_known_classes_than_easy(tiny_demo):
    tax = load_taxonomy(tiny_demo.taxonomy_path)
    m = SplitManifest.read(tiny_demo.split_manifest)
    mean_d = {b: tax.distance_matrix(m.known, m.bins[b]).mean() for b in BINS}
    nearest = {b: tax.distance_matrix(m.known, m.bins[b]).min(0) for b in BINS}
    assert mean_d["hard"] < mean_d["medium"] < mean_d["easy"]
    # hierarchy rule: Hard shares a parent with a known class, Medium a grandparent
    assert set(nearest["hard"]) == {2}
    assert set(nearest["medium"]) <= {3, 4}
    assert np.all(nearest["easy"] >= 5)
    known_parents = {tax.parents(k)[0] for k in m.known}
    assert all(tax.parents(c)[0] in known_parents for c in m.bins["hard"])
    assert not any(tax.parents(c)[0] in known_parents for c in m.bins["easy"])


def test_sets_carry_bins_and_semantic_levels(tiny_demo):
    for b, level in BINS.items():
        s = tiny_demo.sets[f"ood_{b}"]
        assert (s.role, s.split, s.semantic_level) == ("ood", b, level)
        assert s.n_images == len(s.classes) * tiny_demo.params.n_ood
        # class folders of the open-set characters (their true class kept; label -1 in a run)
        files = sorted(s.path.glob("*/*.png"))
        assert len(files) == s.n_images and len(list(s.path.iterdir())) == len(s.classes)
        assert {f.parent.name for f in files} == set(s.classes)
    assert BINS == {"hard": 1, "medium": 2, "easy": 3}
