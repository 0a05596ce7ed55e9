"""The demo's character inventory and its taxonomy (a custom-taxonomy CSV).

Tree (ids; display names in brackets)::

    glyph
    +-- letter
    |   +-- latin [Latin script]
    |   |   +-- latin-capital [Latin capital letters]
    |   |   |   +-- U+0041 [LATIN CAPITAL LETTER A] ...
    |   |   +-- latin-small [Latin small letters]
    |   |       +-- U+0061 [LATIN SMALL LETTER A] ...
    |   +-- greek, cyrillic, armenian, georgian (the same two case levels)
    +-- symbol
        +-- arrows [Arrows]
        |   +-- U+2190 [LEFTWARDS ARROW] ...
        +-- mathematical-operators [Mathematical Operators]
        +-- geometric-shapes [Geometric Shapes]

Characters are leaves named by their Unicode name (``unicodedata.name``); a letter's case is its
Unicode general category (``Lu`` capital, ``Ll`` small; Georgian Asomtavruli are the capitals and
Mkhedruli the small letters, as Unicode 14 classifies them). Symbols are the characters of the
three Unicode blocks with category ``Sm`` or ``So``. Only characters that every given font covers
enter the inventory.
"""

from __future__ import annotations

import csv
import io
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from semshift.demo.fonts import Font, covered

__all__ = [
    "SCRIPTS",
    "SYMBOL_BLOCKS",
    "Glyph",
    "char_id",
    "inventory",
    "taxonomy_csv",
    "write_taxonomy",
]

#: Script id -> (display name, code point ranges, inclusive).
SCRIPTS: dict[str, tuple[str, tuple[tuple[int, int], ...]]] = {
    "latin": ("Latin script", ((0x0041, 0x005A), (0x0061, 0x007A))),
    "greek": ("Greek script", ((0x0391, 0x03A9), (0x03B1, 0x03C9))),
    "cyrillic": ("Cyrillic script", ((0x0410, 0x044F),)),
    "armenian": ("Armenian script", ((0x0531, 0x0556), (0x0561, 0x0586))),
    "georgian": ("Georgian script", ((0x10A0, 0x10CD), (0x10D0, 0x10FF))),
}
#: Symbol category id -> (display name = Unicode block name, code point range, inclusive).
SYMBOL_BLOCKS: dict[str, tuple[str, tuple[int, int]]] = {
    "arrows": ("Arrows", (0x2190, 0x21FF)),
    "mathematical-operators": ("Mathematical Operators", (0x2200, 0x22FF)),
    "geometric-shapes": ("Geometric Shapes", (0x25A0, 0x25FF)),
}
_CASES = {"Lu": ("capital", "capital letters"), "Ll": ("small", "small letters")}


@dataclass(frozen=True)
class Glyph:
    """A character of the inventory.

    Attributes
    ----------
    char : str
        The character.
    id : str
        Taxonomy id, ``U+XXXX``.
    name : str
        Unicode name.
    parent : str
        Taxonomy id of its group (``latin-capital``, ``arrows`` ...).
    kind : str
        ``"letter"`` or ``"symbol"``.
    """

    char: str
    id: str
    name: str
    parent: str
    kind: str


def char_id(ch: str) -> str:
    """``U+XXXX`` of a character (four hex digits at least).

    >>> char_id("A"), char_id("\\u10d0")
    ('U+0041', 'U+10D0')
    """
    return f"U+{ord(ch):04X}"


def _letters(script: str) -> list[Glyph]:
    _, ranges = SCRIPTS[script]
    out = []
    for lo, hi in ranges:
        for cp in range(lo, hi + 1):
            ch = chr(cp)
            name = unicodedata.name(ch, "")
            cat = unicodedata.category(ch)
            if name and cat in _CASES:
                out.append(Glyph(ch, char_id(ch), name, f"{script}-{_CASES[cat][0]}", "letter"))
    return out


def _symbols(block: str) -> list[Glyph]:
    _, (lo, hi) = SYMBOL_BLOCKS[block]
    out = []
    for cp in range(lo, hi + 1):
        ch = chr(cp)
        name = unicodedata.name(ch, "")
        if name and unicodedata.category(ch) in ("Sm", "So"):
            out.append(Glyph(ch, char_id(ch), name, block, "symbol"))
    return out


def inventory(fonts: Sequence[Font]) -> list[Glyph]:
    """Every character of the five scripts and three symbol blocks covered by all ``fonts``.

    Ordered by script / block (as in :data:`SCRIPTS`, :data:`SYMBOL_BLOCKS`), then code point.
    """
    glyphs = [g for s in SCRIPTS for g in _letters(s)] + [
        g for b in SYMBOL_BLOCKS for g in _symbols(b)
    ]
    keep = set(covered([g.char for g in glyphs], fonts))
    return [g for g in glyphs if g.char in keep]


def taxonomy_csv(glyphs: Sequence[Glyph]) -> str:
    """The taxonomy as ``id,parent,name`` CSV text (internal nodes first, then the leaves).

    Only groups that hold at least one of ``glyphs`` are written (a script whose characters no
    font covers would otherwise be a childless inner node).
    """
    used = {g.parent for g in glyphs}
    rows: list[tuple[str, str, str]] = [("glyph", "", "glyph")]
    letters = [s for s in SCRIPTS if any(u.startswith(f"{s}-") for u in used)]
    symbols = [b for b in SYMBOL_BLOCKS if b in used]
    if letters:
        rows.append(("letter", "glyph", "letter"))
    if symbols:
        rows.append(("symbol", "glyph", "symbol"))
    for script in letters:
        label = SCRIPTS[script][0]
        rows.append((script, "letter", label))
        for case, words in _CASES.values():
            if f"{script}-{case}" in used:
                rows.append((f"{script}-{case}", script, f"{label.split()[0]} {words}"))
    for block in symbols:
        rows.append((block, "symbol", SYMBOL_BLOCKS[block][0]))
    rows.extend((g.id, g.parent, g.name) for g in glyphs)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(("id", "parent", "name"))
    writer.writerows(rows)
    return buf.getvalue()


def write_taxonomy(glyphs: Sequence[Glyph], path: str | Path) -> Path:
    """Write :func:`taxonomy_csv` to ``path`` (UTF-8) and return it."""
    p = Path(path)
    p.write_text(taxonomy_csv(glyphs), encoding="utf-8")
    return p
