"""The fonts matplotlib ships (``mpl-data/fonts/ttf``), grouped in families, and their coverage.

Coverage comes from each font's character map (``matplotlib.ft2font.FT2Font.get_charmap``): a
character the cmap does not list would render as the font's ``.notdef`` box, so the demo never
renders it in that font.

==================  =========================================================================
family              files (styles)
==================  =========================================================================
dejavu-sans         DejaVuSans, -Bold, -Oblique, -BoldOblique (the ID training font)
dejavu-serif        DejaVuSerif, -Bold, -Italic, -BoldItalic
dejavu-sans-mono    DejaVuSansMono, -Bold, -Oblique, -BoldOblique
stix                STIXGeneral, -Bol, -Italic, -BolIta
==================  =========================================================================
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from semshift.errors import InputError, UnknownNameError

__all__ = ["FAMILIES", "Font", "covered", "font_dir", "get_family"]


@dataclass(frozen=True)
class Font:
    """One font file of a family.

    Attributes
    ----------
    family : str
        Family key (``"dejavu-sans"``).
    style : str
        ``"Regular"``, ``"Bold"``, ``"Oblique"``, ``"Italic"`` ...
    file : str
        File name in matplotlib's ``mpl-data/fonts/ttf``.
    """

    family: str
    style: str
    file: str

    @property
    def key(self) -> str:
        """``family-style`` in lower case, e.g. ``dejavu-sans-bold``."""
        return f"{self.family}-{self.style.lower()}"

    @property
    def path(self) -> Path:
        """Absolute path of the file; :class:`InputError` when matplotlib lacks it."""
        return _resolve(self.file)

    def charmap(self) -> frozenset[int]:
        """Code points the font maps to a glyph."""
        return _charmap(str(_resolve(self.file)))


def _fam(family: str, *pairs: tuple[str, str]) -> tuple[Font, ...]:
    return tuple(Font(family, style, file) for style, file in pairs)


#: Family key -> its fonts (four styles each).
FAMILIES: dict[str, tuple[Font, ...]] = {
    "dejavu-sans": _fam(
        "dejavu-sans",
        ("Regular", "DejaVuSans.ttf"),
        ("Bold", "DejaVuSans-Bold.ttf"),
        ("Oblique", "DejaVuSans-Oblique.ttf"),
        ("BoldOblique", "DejaVuSans-BoldOblique.ttf"),
    ),
    "dejavu-serif": _fam(
        "dejavu-serif",
        ("Regular", "DejaVuSerif.ttf"),
        ("Bold", "DejaVuSerif-Bold.ttf"),
        ("Italic", "DejaVuSerif-Italic.ttf"),
        ("BoldItalic", "DejaVuSerif-BoldItalic.ttf"),
    ),
    "dejavu-sans-mono": _fam(
        "dejavu-sans-mono",
        ("Regular", "DejaVuSansMono.ttf"),
        ("Bold", "DejaVuSansMono-Bold.ttf"),
        ("Oblique", "DejaVuSansMono-Oblique.ttf"),
        ("BoldOblique", "DejaVuSansMono-BoldOblique.ttf"),
    ),
    "stix": _fam(
        "stix",
        ("Regular", "STIXGeneral.ttf"),
        ("Bold", "STIXGeneralBol.ttf"),
        ("Italic", "STIXGeneralItalic.ttf"),
        ("BoldItalic", "STIXGeneralBolIta.ttf"),
    ),
}


def font_dir() -> Path:
    """matplotlib's bundled TrueType folder (``mpl-data/fonts/ttf``)."""
    import matplotlib

    return Path(matplotlib.get_data_path()) / "fonts" / "ttf"


@cache
def _resolve(file: str) -> Path:
    p = font_dir() / file
    if not p.is_file():
        raise InputError(f"font file {p} is missing from matplotlib's fonts; reinstall matplotlib")
    return p


@cache
def _charmap(path: str) -> frozenset[int]:
    from matplotlib.ft2font import FT2Font

    return frozenset(FT2Font(path).get_charmap())


def get_family(name: str) -> tuple[Font, ...]:
    """The fonts of a family key; unknown keys raise :class:`UnknownNameError` listing them."""
    if name not in FAMILIES:
        raise UnknownNameError(
            f"unknown font family {name!r}; known: {', '.join(sorted(FAMILIES))}"
        )
    return FAMILIES[name]


def covered(chars: Iterable[str], fonts: Sequence[Font]) -> list[str]:
    """The characters of ``chars`` (in order) that every font in ``fonts`` maps to a glyph."""
    maps = [f.charmap() for f in fonts]
    return [c for c in chars if all(ord(c) in m for m in maps)]
