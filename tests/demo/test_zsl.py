"""The offline zero-shot example on glyphs: data, attributes, text embeddings, every method."""

from __future__ import annotations

import numpy as np
import pytest

from semshift.cli import main
from semshift.demo.fonts import get_family
from semshift.demo.glyphs import inventory
from semshift.demo.zsl import glyph_attributes, glyph_zsl_data
from semshift.errors import InputError
from semshift.protocols import zsl_results
from semshift.report import gzsl_table, zsl_table
from semshift.training.zsl import evaluate_zsl, list_zsl_methods

SMALL = {"classes_per_group": 6, "images_per_class": 12}


@pytest.fixture(scope="module")
def glyphs():
    return glyph_zsl_data(**SMALL)


def test_the_split_is_a_v2_split_with_classes_from_every_group(glyphs):
    sp = glyphs.split("v2")
    assert glyphs.n_classes == 24 and glyphs.features.shape == (24 * 12, 256)
    assert np.intersect1d(sp.train, sp.test_seen).size == 0
    code = np.array([int(n.split(" ", 1)[0][2:], 16) for n in glyphs.class_names])
    ranges = [(0x41, 0x5A), (0x3B1, 0x3C9), (0x2190, 0x21FF), (0x25A0, 0x25FF)]  # the 4 groups
    for lo, hi in ranges:
        in_group = (code >= lo) & (code <= hi)
        assert in_group.sum() == 6 and in_group[glyphs.unseen_classes].any()
    again = glyph_zsl_data(**SMALL)
    np.testing.assert_array_equal(again.features, glyphs.features)


def test_glyph_attributes_describe_shape_and_group():
    inv = {g.char: g for g in inventory(get_family("dejavu-sans"))}
    chars = ["A", "F", "\u2190", "\u2192"]
    raw, names = glyph_attributes([inv[c] for c in chars])
    assert raw.shape == (4, len(names)) and np.allclose(np.linalg.norm(raw, axis=1), 1.0)
    lr = raw[:, names.index("symmetry_lr")]
    assert lr[0] > lr[1]  # A is mirror-symmetric left-right, F is not
    cx = raw[:, names.index("centre_x")]
    assert cx[0] > cx[1]  # F's ink leans left
    letter = raw[:, names.index("is_letter")]
    assert min(letter[:2]) > 0 > max(letter[2:])  # standardised: letters above the mean


def test_every_method_gives_a_zsl_and_a_gzsl_table(glyphs):
    outcomes = [evaluate_zsl(glyphs, m, grid={}) for m in list_zsl_methods()]
    res = zsl_results(outcomes)
    t1, t2 = zsl_table(res), gzsl_table(res)
    assert t1.rows == list_zsl_methods() == t2.rows
    assert [c.label for c in t2.columns] == ["ts", "tr", "H", "ZSL top-1"]
    zsl = t1.values().to_numpy().ravel()
    chance = 1.0 / glyphs.unseen_classes.size
    assert np.isfinite(zsl).all() and zsl.mean() > 1.5 * chance


def test_text_embeddings_come_from_the_shipped_minilm_offline():
    data = glyph_zsl_data(embedding="text", classes_per_group=4, images_per_class=8)
    S = data.embeddings
    assert S.shape == (16, 384) and np.allclose(np.linalg.norm(S, axis=1), 1.0, atol=1e-6)
    group = np.repeat(np.arange(4), 4)  # classes are drawn group by group
    sim = S @ S.T
    same = sim[(group[:, None] == group[None]) & ~np.eye(16, dtype=bool)].mean()
    other = sim[group[:, None] != group[None]].mean()
    assert same > other + 0.1


def test_bad_demo_arguments_are_input_errors():
    with pytest.raises(InputError, match="unknown embedding 'words'"):
        glyph_zsl_data(embedding="words")
    with pytest.raises(InputError, match="unknown glyph group 'runes'"):
        glyph_zsl_data(groups=("runes",))


def test_the_cli_runs_the_demo_with_one_method(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["zsl", "run", "--data", "demo", "--method", "eszsl"])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    assert "glyphs-attributes: 2400 images x 256 features, 60 classes" in out
    assert "eszsl" in out and "ZSL top-1" in out
