"""The report's building blocks (sections of tables, figures and text), shared by the builder
(:mod:`semshift.report._document`) and the renderers (:mod:`semshift.report.html`,
:mod:`semshift.report.markdown`), so neither side imports the other."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from semshift.report.gallery import Gallery
from semshift.report.tables import Table

__all__ = ["Block", "FigureRef", "Paragraph", "Report", "Section"]


@dataclass(frozen=True)
class FigureRef:
    """A saved figure: PNG path, alt text and caption."""

    path: Path
    alt: str
    caption: str


@dataclass(frozen=True)
class Paragraph:
    """Plain text (no markup); ``items`` renders as a bullet list after the text."""

    text: str
    items: tuple[str, ...] = ()


Block = Table | FigureRef | Paragraph | Gallery


@dataclass
class Section:
    """A report section: ``key`` is its HTML anchor."""

    key: str
    title: str
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Report:
    """Everything the renderers need."""

    title: str
    intro: Paragraph
    sections: list[Section]
    figures: list[Path]
    timings: dict[str, float]
    thumbnails: list[Path] = field(default_factory=list)
