"""Rendering glyphs into small grayscale images, and the pixel distance behind homoglyphs.

A glyph is drawn with PIL (``ImageFont.truetype``) in black on a white square canvas, its ink
bounding box centred; a glyph too large for the canvas (2 px margin) is drawn at the largest font
size that fits. Augmentation, all drawn from a seeded NumPy generator: integer shift, rotation
(bilinear) and a font-size scale.

Homoglyph distance between two renderings a and b (ink = 1 - pixel / 255):
``sum |ink_a - ink_b| / max(sum ink_a, sum ink_b)``; 0 for pixel-identical images, about 1 for
glyphs whose ink does not overlap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from semshift.demo.fonts import Font
from semshift.errors import InputError

__all__ = [
    "Augment",
    "canonical",
    "find_homoglyphs",
    "glyph_distance",
    "mean_distance",
    "render",
    "render_many",
]

U8 = NDArray[np.uint8]


@dataclass(frozen=True)
class Augment:
    """Ranges of the light augmentation: uniform in ``[-x, x]`` (scale: ``[lo, hi]``).

    Attributes
    ----------
    shift : int
        Pixels, each axis.
    rotate : float
        Degrees.
    scale : tuple of float
        Font-size factor.
    """

    shift: int = 2
    rotate: float = 10.0
    scale: tuple[float, float] = (0.85, 1.1)

    def draw(self, rng: np.random.Generator, n: int) -> NDArray[np.float64]:
        """``(n, 4)`` parameters: dx, dy, angle, scale."""
        out = np.empty((n, 4))
        out[:, :2] = rng.integers(-self.shift, self.shift + 1, size=(n, 2))
        out[:, 2] = rng.uniform(-self.rotate, self.rotate, size=n)
        out[:, 3] = rng.uniform(self.scale[0], self.scale[1], size=n)
        return out


@cache
def _font(path: str, size: int) -> Any:
    from PIL import ImageFont

    return ImageFont.truetype(path, size)


def render(
    char: str,
    font: Font,
    *,
    size: int = 32,
    font_size: int = 22,
    dx: int = 0,
    dy: int = 0,
    angle: float = 0.0,
    scale: float = 1.0,
) -> U8:
    """One glyph as a ``(size, size)`` uint8 image, black ink on white.

    Parameters
    ----------
    char : str
        One character the font covers.
    font : Font
    size : int
        Canvas side in pixels.
    font_size : int
        Nominal font size in pixels (before ``scale``).
    dx, dy : int
        Shift of the centred glyph.
    angle : float
        Counter-clockwise rotation in degrees about the canvas centre.
    scale : float
        Font-size factor.

    Raises
    ------
    InputError
        The font's character map lacks ``char`` (it would render as the ``.notdef`` box).
    """
    from PIL import Image

    if len(char) != 1:
        raise InputError(f"render: expected one character, got {char!r}")
    if ord(char) not in font.charmap():
        raise InputError(
            f"font {font.file} does not cover U+{ord(char):04X} ({char!r}); render it in a font "
            "whose character map has it"
        )
    base = _centred(char, str(font.path), max(4, round(font_size * scale)), int(size))
    dx, dy = int(dx), int(dy)
    if dx or dy:  # the same pixels as drawing at the shifted origin (integer offsets)
        img = np.full_like(base, 255)
        ys, yd = slice(max(0, -dy), size - max(0, dy)), slice(max(0, dy), size - max(0, -dy))
        xs, xd = slice(max(0, -dx), size - max(0, dx)), slice(max(0, dx), size - max(0, -dx))
        img[yd, xd] = base[ys, xs]
    else:
        img = base.copy()
    if angle:
        rotated = Image.fromarray(img, mode="L").rotate(
            float(angle),
            resample=Image.Resampling.BILINEAR,
            fillcolor=255,
            center=(size / 2, size / 2),
        )
        img = np.asarray(rotated, dtype=np.uint8)
    return img


@lru_cache(maxsize=16384)
def _centred(char: str, path: str, fs: int, size: int) -> U8:
    """The glyph drawn with its ink box centred (shrunk to fit a 2 px margin); read-only."""
    from PIL import Image, ImageDraw

    fnt = _font(path, fs)
    left, top, right, bottom = fnt.getbbox(char)
    span = max(right - left, bottom - top, 1)
    if span > size - 4:  # too large: the largest size that fits
        fs = max(4, int(fs * (size - 4) / span))
        fnt = _font(path, fs)
        left, top, right, bottom = fnt.getbbox(char)
    x = (size - (right - left)) // 2 - left
    y = (size - (bottom - top)) // 2 - top
    img = Image.new("L", (size, size), 255)
    ImageDraw.Draw(img).text((x, y), char, font=fnt, fill=0)
    out = np.asarray(img, dtype=np.uint8).copy()
    out.flags.writeable = False
    return out


def render_many(
    chars: Sequence[str],
    fonts: Sequence[Font],
    params: NDArray[np.float64],
    *,
    size: int = 32,
    font_size: int = 22,
) -> U8:
    """``(n, size, size)`` renderings of ``chars[i]`` in ``fonts[i]`` with ``params[i]``.

    ``params`` is ``(n, 4)``: dx, dy, angle, scale (see :meth:`Augment.draw`).
    """
    out = np.empty((len(chars), size, size), np.uint8)
    for i, (ch, font, p) in enumerate(zip(chars, fonts, params, strict=True)):
        out[i] = render(
            ch, font, size=size, font_size=font_size, dx=int(p[0]), dy=int(p[1]),
            angle=float(p[2]), scale=float(p[3]),
        )  # fmt: skip
    return out


def glyph_distance(a: U8, b: U8, *, block: int | None = None) -> NDArray[np.float64]:
    """Pairwise homoglyph distance between two stacks of renderings.

    Parameters
    ----------
    a : array (n, H, W) uint8
    b : array (m, H, W) uint8
        Black-on-white renderings of the same canvas size.
    block : int, optional
        Rows of ``a`` per step (memory ``block * m * H * W`` floats); default: about 4 M floats.

    Returns
    -------
    array (n, m) float64
        ``sum |ink_a - ink_b| / max(sum ink_a, sum ink_b)``; 0 = pixel-identical.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.full((1, 4, 4), 255, np.uint8); x[0, 1:3, 1:3] = 0
    >>> y = np.full((1, 4, 4), 255, np.uint8); y[0, 1:3, 1] = 0
    >>> glyph_distance(x, np.concatenate([x, y])).round(2).tolist()
    [[0.0, 0.5]]
    """
    ia = 1.0 - a.reshape(len(a), -1).astype(np.float32) / 255.0
    ib = 1.0 - b.reshape(len(b), -1).astype(np.float32) / 255.0
    sa, sb = ia.sum(1), ib.sum(1)
    out = np.empty((len(a), len(b)), np.float64)
    if block is None:
        block = max(1, (1 << 22) // max(1, ib.size))
    for lo in range(0, len(a), block):
        diff = np.abs(ia[lo : lo + block, None, :] - ib[None, :, :]).sum(-1)
        denom = np.maximum(np.maximum(sa[lo : lo + block, None], sb[None, :]), 1e-6)
        out[lo : lo + block] = diff / denom
    return out


def canonical(chars: Sequence[str], fonts: Sequence[Font], *, font_size: int = 22) -> U8:
    """``(len(fonts), len(chars), 32, 32)`` renderings without augmentation.

    Memoised per (characters, fonts, size) in the process: the result is read-only.
    """
    return _canonical(tuple(chars), tuple(fonts), int(font_size))


@cache
def _canonical(chars: tuple[str, ...], fonts: tuple[Font, ...], font_size: int) -> U8:
    out = np.empty((len(fonts), len(chars), 32, 32), np.uint8)
    for s, f in enumerate(fonts):
        for i, c in enumerate(chars):
            out[s, i] = render(c, f, font_size=font_size)
    out.flags.writeable = False
    return out


def mean_distance(a: U8, b: U8) -> NDArray[np.float64]:
    """Mean over styles of :func:`glyph_distance`: a (S, n, H, W), b (S, m, H, W) -> (n, m)."""
    if a.shape[0] != b.shape[0]:
        raise InputError(f"mean_distance: {a.shape[0]} vs {b.shape[0]} styles")
    return np.mean([glyph_distance(a[s], b[s]) for s in range(len(a))], axis=0)


def find_homoglyphs(
    known: Sequence[str],
    candidates: Sequence[str],
    fonts: Sequence[Font],
    *,
    threshold: float = 0.12,
    font_size: int = 22,
) -> list[tuple[str, str, float]]:
    """Candidates whose canonical glyph is pixel-near a known character's.

    Both sides are rendered without augmentation in every font of ``fonts``; the distance is the
    mean :func:`glyph_distance` over the fonts.

    Parameters
    ----------
    known, candidates : sequence of str
        Characters (every font must cover them).
    fonts : sequence of Font
    threshold : float
        Pixel-near = mean distance below it. Measured on DejaVu Sans: cross-script look-alikes
        (Latin A, Greek Alpha, Cyrillic A) are at 0.0, Armenian SEH vs Latin U at 0.11, the
        nearest pairs of distinct letters (Greek Lamda vs Latin A) at 0.18.
    font_size : int

    Returns
    -------
    list of (candidate, nearest known character, distance)
        In candidate order, only the pixel-near ones.
    """
    if not known or not candidates:
        return []
    d = mean_distance(
        canonical(candidates, fonts, font_size=font_size),
        canonical(known, fonts, font_size=font_size),
    )
    near = d.argmin(1)
    dist = d[np.arange(len(candidates)), near]
    return [
        (candidates[int(i)], known[int(near[i])], float(dist[i]))
        for i in np.flatnonzero(dist < threshold)
    ]
