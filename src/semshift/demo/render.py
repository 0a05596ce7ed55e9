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
from functools import cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from semshift.demo.fonts import Font

__all__ = ["Augment", "glyph_distance", "render", "render_many"]

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
        One character; the caller checks the font covers it (:func:`~semshift.demo.fonts.covered`).
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
    """
    from PIL import Image, ImageDraw

    path = str(font.path)
    fs = max(4, round(font_size * scale))
    fnt = _font(path, fs)
    left, top, right, bottom = fnt.getbbox(char)
    span = max(right - left, bottom - top, 1)
    if span > size - 4:  # too large: the largest size that fits
        fs = max(4, int(fs * (size - 4) / span))
        fnt = _font(path, fs)
        left, top, right, bottom = fnt.getbbox(char)
    x = (size - (right - left)) // 2 - left + int(dx)
    y = (size - (bottom - top)) // 2 - top + int(dy)
    img = Image.new("L", (size, size), 255)
    ImageDraw.Draw(img).text((x, y), char, font=fnt, fill=0)
    if angle:
        img = img.rotate(
            float(angle),
            resample=Image.Resampling.BILINEAR,
            fillcolor=255,
            center=(size / 2, size / 2),
        )
    return np.asarray(img, dtype=np.uint8)


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


def glyph_distance(a: U8, b: U8, *, block: int = 256) -> NDArray[np.float64]:
    """Pairwise homoglyph distance between two stacks of renderings.

    Parameters
    ----------
    a : array (n, H, W) uint8
    b : array (m, H, W) uint8
        Black-on-white renderings of the same canvas size.
    block : int
        Rows of ``a`` per step (bounds memory at ``block * m * H * W`` floats).

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
    for lo in range(0, len(a), block):
        diff = np.abs(ia[lo : lo + block, None, :] - ib[None, :, :]).sum(-1)
        denom = np.maximum(np.maximum(sa[lo : lo + block, None], sb[None, :]), 1e-6)
        out[lo : lo + block] = diff / denom
    return out
