"""The offline zero-shot example: glyph classes, image features and class embeddings.

:func:`glyph_zsl_data` renders characters of four taxonomy groups (Latin capitals, Greek small
letters, arrows, geometric shapes) in the four DejaVu Sans styles with the demo's light
augmentation, and returns a :class:`~semshift.training.zsl.ZSLData` with a proposed split V2:

* image features: the ink of each 32 x 32 rendering average-pooled to 16 x 16 (256 values;
  no training, so the example needs neither torch nor a GlyphNet);
* class embeddings, ``embedding="attributes"``: glyph attributes defined here from each
  character's canonical rendering (DejaVu Sans Regular, no augmentation) and its place in the
  taxonomy: ink on a 4 x 4 grid (16), total ink, left-right and top-bottom mirror symmetry,
  the ink's centre (x, y), and one-hot letter / symbol, script and case or symbol block.
  Columns are standardised over the classes, rows L2-normalised (as ``att`` of the
  ``xlsa17`` files);
* ``embedding="text"``: the shipped all-MiniLM-L6-v2 sentence model (NumPy forward pass, no
  network) on each class's name and description, e.g. "latin capital letter a, one of the
  Latin capital letters". The names say which group a class is in but little about its shape,
  so expect ZSL accuracies near those of a group-level guess.

Unseen classes are drawn per group (``unseen_fraction``), val classes from the seen ones
(``val_fraction``); ``test_seen_fraction`` of each seen class's images are held out. Same
arguments -> the same data.
"""

from __future__ import annotations

import unicodedata

import numpy as np
from numpy.typing import NDArray

from semshift.demo.fonts import get_family
from semshift.demo.glyphs import SCRIPTS, SYMBOL_BLOCKS, Glyph, inventory
from semshift.demo.render import Augment, canonical, render_many
from semshift.errors import InputError
from semshift.training.zsl import ZSLData

__all__ = ["EMBEDDINGS", "GROUPS", "glyph_attributes", "glyph_features", "glyph_zsl_data"]

#: Taxonomy groups the example draws classes from.
GROUPS: tuple[str, ...] = ("latin-capital", "greek-small", "arrows", "geometric-shapes")
#: Kinds of class embedding.
EMBEDDINGS: tuple[str, ...] = ("attributes", "text")
_FAMILY = "dejavu-sans"


def _pool(ink: NDArray[np.float64], size: int) -> NDArray[np.float64]:
    """Average-pool (n, 32, 32) to (n, size, size)."""
    k = ink.shape[-1] // size
    return ink.reshape(ink.shape[0], size, k, size, k).mean(axis=(2, 4))


def glyph_features(images: NDArray[np.uint8]) -> NDArray[np.float64]:
    """Image features: ink (1 - gray / 255) pooled to 16 x 16, flattened: (n, 256)."""
    ink = 1.0 - images.astype(np.float64) / 255.0
    return _pool(ink, 16).reshape(images.shape[0], -1)


def glyph_attributes(glyphs: list[Glyph]) -> tuple[NDArray[np.float64], list[str]]:
    """Class attributes (C, 30) and their names (see the module docstring)."""
    fonts = get_family(_FAMILY)
    canon = canonical(tuple(g.char for g in glyphs), fonts[:1])[0]
    ink = 1.0 - canon.astype(np.float64) / 255.0
    n = len(glyphs)
    grid = _pool(ink, 4).reshape(n, -1)
    total = ink.sum(axis=(1, 2))
    norm = np.maximum(total, 1e-9)
    lr = 1.0 - np.abs(ink - ink[:, :, ::-1]).sum(axis=(1, 2)) / (2 * norm)
    tb = 1.0 - np.abs(ink - ink[:, ::-1, :]).sum(axis=(1, 2)) / (2 * norm)
    coords = np.arange(32, dtype=np.float64)
    cx = (ink.sum(axis=1) * coords).sum(axis=1) / norm
    cy = (ink.sum(axis=2) * coords).sum(axis=1) / norm
    parts = [grid, total[:, None], lr[:, None], tb[:, None], cx[:, None], cy[:, None]]
    names = [f"ink_{r}{c}" for r in range(4) for c in range(4)]
    names += ["ink_total", "symmetry_lr", "symmetry_tb", "centre_x", "centre_y"]
    groups = sorted({g.parent for g in glyphs})
    kinds = ["letter", "symbol"]
    onehot = np.array(
        [[g.kind == k for k in kinds] + [g.parent == p for p in groups] for g in glyphs],
        dtype=np.float64,
    )
    parts.append(onehot)
    names += [f"is_{k}" for k in kinds] + [f"in_{p}" for p in groups]
    A = np.hstack(parts)
    std = A.std(axis=0)
    A = (A - A.mean(axis=0)) / np.where(std > 0, std, 1.0)
    A /= np.maximum(np.linalg.norm(A, axis=1, keepdims=True), 1e-12)
    return A, names


def _description(g: Glyph) -> str:
    if g.kind == "letter":
        script, case = g.parent.rsplit("-", 1)
        group = f"{SCRIPTS[script][0].split()[0]} {case} letters"
    else:
        group = f"{SYMBOL_BLOCKS[g.parent][0]} symbols"
    return f"{g.name.lower()}, one of the {group}"


def glyph_zsl_data(
    *,
    embedding: str = "attributes",
    groups: tuple[str, ...] = GROUPS,
    classes_per_group: int = 15,
    images_per_class: int = 40,
    unseen_fraction: float = 0.25,
    val_fraction: float = 0.2,
    test_seen_fraction: float = 0.2,
    seed: int = 0,
) -> ZSLData:
    """Glyph zero-shot data with a proposed split V2 (see the module docstring).

    Parameters
    ----------
    embedding : ``"attributes"`` or ``"text"`` (MiniLM; needs the ``text`` extra)
    groups : taxonomy groups to draw classes from
    classes_per_group : classes drawn per group (fewer when a group is smaller)
    images_per_class : renderings per class
    unseen_fraction, val_fraction, test_seen_fraction : as ``semshift splits zsl``
    seed : drawing of classes, splits and augmentation

    Raises
    ------
    InputError
        An unknown embedding or group, or fractions outside (0, 1).
    """
    if embedding not in EMBEDDINGS:
        raise InputError(f"unknown embedding {embedding!r}; known: {', '.join(EMBEDDINGS)}")
    for name, frac in (
        ("unseen_fraction", unseen_fraction),
        ("val_fraction", val_fraction),
        ("test_seen_fraction", test_seen_fraction),
    ):
        if not 0.0 < frac < 1.0:
            raise InputError(f"{name} must be in (0, 1), got {frac}")
    if classes_per_group < 4 or images_per_class < 5:
        raise InputError("need at least 4 classes per group and 5 images per class")
    fonts = get_family(_FAMILY)
    inv = inventory(fonts)
    known_groups = sorted({g.parent for g in inv})
    rng = np.random.default_rng(seed)
    chosen: list[Glyph] = []
    unseen_ids: set[str] = set()
    val_ids: set[str] = set()
    for grp in groups:
        members = [g for g in inv if g.parent == grp]
        if not members:
            raise InputError(f"unknown glyph group {grp!r}; known: {', '.join(known_groups)}")
        k = min(classes_per_group, len(members))
        pick = [members[i] for i in sorted(rng.choice(len(members), k, replace=False))]
        order = rng.permutation(k)
        n_unseen = max(1, round(unseen_fraction * k))
        n_val = max(1, round(val_fraction * (k - n_unseen)))
        unseen_ids |= {pick[i].id for i in order[:n_unseen]}
        val_ids |= {pick[i].id for i in order[n_unseen : n_unseen + n_val]}
        chosen += pick
    n_cls = len(chosen)
    y = np.repeat(np.arange(n_cls), images_per_class)
    params = Augment().draw(rng, y.size)
    images = render_many(
        [chosen[c].char for c in y], [fonts[i % len(fonts)] for i in range(y.size)], params
    )
    X = glyph_features(images)
    if embedding == "attributes":
        S, _ = glyph_attributes(chosen)
    else:
        from semshift.splits.superclass import MiniLMEncoder

        texts = [_description(g) for g in chosen]
        S = MiniLMEncoder(backend="numpy").encode(texts).astype(np.float64)
    is_unseen = np.array([chosen[c].id in unseen_ids for c in y])
    is_val = np.array([chosen[c].id in val_ids for c in y])
    rank = np.tile(rng.permutation(images_per_class), n_cls)
    held = ~is_unseen & (rank < round(test_seen_fraction * images_per_class))
    trainval = np.flatnonzero(~is_unseen & ~held)
    return ZSLData(
        name=f"glyphs-{embedding}",
        features=X,
        labels=y.astype(np.int64),
        embeddings=S,
        class_names=tuple(f"{g.id} {unicodedata.name(g.char, g.name).lower()}" for g in chosen),
        sets={
            "trainval": trainval,
            "train": trainval[~is_val[trainval]],
            "val": trainval[is_val[trainval]],
            "test_seen": np.flatnonzero(held),
            "test_unseen": np.flatnonzero(is_unseen),
        },
        source=f"glyph demo ({embedding})",
    )
