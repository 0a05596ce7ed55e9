"""``report.md``: the report as GitHub-flavoured Markdown, figures linked by relative path."""

from __future__ import annotations

from pathlib import Path

from semshift.report.blocks import FigureRef, Paragraph, Report
from semshift.report.gallery import GALLERY_DIR, Gallery
from semshift.report.tables import Table

__all__ = ["render_markdown"]


def _paragraph(p: Paragraph) -> str:
    lines = [p.text]
    if p.items:
        lines.append("")
        lines += [f"- {item}" for item in p.items]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """Text for a Markdown table cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _gallery(g: Gallery) -> str:
    """A gallery as a two-column table: the thumbnail (a file under figures/gallery/) and
    its caption."""
    if not g.thumbnails:
        return f"**{g.title}**: {g.empty or 'no thumbnail shown (the report size bound)'}\n"
    lines = [f"**{g.title}**. {g.caption}", "", "| Image | Caption |", "|:---|:---|"]
    for t in g.thumbnails:
        alt = _cell(t.caption.replace("[", "(").replace("]", ")"))
        lines.append(f"| ![{alt}]({GALLERY_DIR}/{t.filename}) | {_cell(t.caption)} |")
    return "\n".join(lines) + "\n"


def render_markdown(report: Report, root: Path) -> str:
    """The whole report as Markdown; image links are relative to ``root`` (the output folder).

    The output depends only on the run's files: the same input gives the same text.
    """
    out = [f"# {report.title}", "", _paragraph(report.intro)]
    out.append("Contents: " + " · ".join(f"[{s.title}](#{s.key})" for s in report.sections))
    out.append("")
    for sec in report.sections:
        out.append(f'<a id="{sec.key}"></a>')
        out.append("")
        out.append(f"## {sec.title}")
        out.append("")
        for block in sec.blocks:
            if isinstance(block, Table):
                out.append(block.to_markdown())
            elif isinstance(block, FigureRef):
                rel = block.path.relative_to(root).as_posix()
                out.append(f"![{block.alt}]({rel})")
                out.append("")
                out.append(f"*{block.caption}*")
                out.append("")
            elif isinstance(block, Gallery):
                out.append(_gallery(block))
            else:
                out.append(_paragraph(block))
    return "\n".join(out).rstrip() + "\n"
