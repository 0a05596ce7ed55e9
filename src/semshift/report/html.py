"""``report.html``: one self-contained file (inline CSS and script, figures as base64 data URIs).

No external scripts, style sheets, fonts or network requests: the file opens offline and can
be mailed as it is. Tables are sortable and filterable (:mod:`semshift.report.interactive`),
the level-curve and OSCR figures are interactive charts with their PNG kept beside them
(:mod:`semshift.report.interactive_charts`): the vendored libraries and their wiring are
inlined once, at the end of the body. Without JavaScript the page reads as plain tables and
PNGs.
"""

from __future__ import annotations

import base64
import html

from semshift.report.blocks import FigureRef, Paragraph, Report
from semshift.report.gallery import Gallery, Thumbnail
from semshift.report.interactive import (
    TABLE_CSS,
    chart_css,
    interactive_table_html,
    page_script,
)
from semshift.report.interactive_charts import chart_html, chart_json
from semshift.report.tables import Table

__all__ = ["gallery_html", "render_html", "thumbnail_html"]

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto;
       max-width: 1400px; padding: 0 1rem; color: #1a1a1a; line-height: 1.45; }
p, ul.items { max-width: 75rem; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.25rem; border-bottom: 1px solid #ddd;
     padding-bottom: .2rem; margin-top: 2.2rem; }
nav a { margin-right: .8rem; }
figure { margin: 1.2rem 0; overflow-x: auto; }
figure.table table { border-collapse: collapse; font-size: .85rem;
                     font-variant-numeric: tabular-nums; }
table caption { text-align: left; font-weight: 600; padding-bottom: .3rem; }
th, td { padding: .2rem .55rem; border-bottom: 1px solid #e3e3e3; white-space: nowrap; }
thead th { border-bottom: 2px solid #999; text-align: center; }
tbody th { text-align: left; font-weight: normal; }
td { text-align: right; }
td.err { color: #b00020; }
figcaption { font-size: .8rem; color: #555; max-width: 60rem; margin-top: .3rem; }
ol.footnotes { font-size: .78rem; color: #7a1020; margin: .3rem 0 0 0; }
figure.plot img { max-width: 100%; height: auto; border: 1px solid #eee; }
ul.items { font-size: .9rem; }
figure.gallery { margin: 1rem 0; }
figure.gallery > figcaption { font-size: .85rem; color: #1a1a1a; margin: 0 0 .4rem 0; }
div.thumbs { display: flex; flex-wrap: wrap; gap: .5rem; }
figure.thumb { margin: 0; width: 8.5rem; }
figure.thumb img { display: block; max-width: 64px; max-height: 64px; border: 1px solid #ddd; }
figure.thumb figcaption { font-size: .68rem; line-height: 1.25; margin-top: .15rem;
                          overflow-wrap: anywhere; }
"""


def _paragraph(p: Paragraph) -> str:
    out = f"<p>{html.escape(p.text)}</p>"
    if p.items:
        out += '\n<ul class="items">' + "".join(f"<li>{html.escape(i)}</li>" for i in p.items)
        out += "</ul>"
    return out + "\n"


def _figure(f: FigureRef) -> tuple[str, bool]:
    """The figure's HTML, and whether it holds an interactive chart.

    A figure with a chart (:func:`~semshift.report.interactive_charts.chart_json`) keeps its
    PNG in a ``<details>`` (open until the page's script has drawn the chart).
    """
    data = base64.b64encode(f.path.read_bytes()).decode("ascii")
    img = f'<img src="data:image/png;base64,{data}" alt="{html.escape(f.alt, quote=True)}">'
    caption = f"<figcaption>{html.escape(f.caption)}</figcaption></figure>\n"
    chart = chart_json(f.path)
    if chart is None:
        return f'<figure class="plot">{img}{caption}', False
    return (
        '<figure class="plot interactive">'
        + chart_html(chart, f.path.stem, f.alt)
        + '<details class="png" open><summary>Static figure (PNG, as in report.md)</summary>'
        + img
        + "</details>"
        + caption,
        True,
    )


def thumbnail_html(t: Thumbnail) -> str:
    """One thumbnail as a ``<figure>`` with its image as a data URI and its caption.

    A gallery's HTML is its frame plus the concatenation of these, so the report's size grows
    by exactly ``len(thumbnail_html(t))`` bytes (UTF-8) per thumbnail shown.
    """
    data = base64.b64encode(t.data).decode("ascii")
    cap = html.escape(t.caption)
    return (
        f'<figure class="thumb"><img src="data:{t.mime};base64,{data}" alt="{cap}" '
        f'width="{t.width}" height="{t.height}"><figcaption>{cap}</figcaption></figure>'
    )


def gallery_html(g: Gallery) -> str:
    """A gallery block: title and caption, then its thumbnails (or its ``empty`` sentence)."""
    esc = html.escape
    if not g.thumbnails and g.empty:
        return f"<p><strong>{esc(g.title)}</strong>: {esc(g.empty)}</p>\n"
    return (
        f'<figure class="gallery" id="gallery-{esc(g.key, quote=True)}"><figcaption>'
        f"<strong>{esc(g.title)}</strong>. {esc(g.caption)}</figcaption>"
        '<div class="thumbs">' + "".join(thumbnail_html(t) for t in g.thumbnails) + "</div>"
        "</figure>\n"
    )


def render_html(report: Report) -> str:
    """The whole report as one HTML document with its figures embedded."""
    esc = html.escape
    body, has_table, has_chart = _body(report)
    css = _CSS + TABLE_CSS + (chart_css() if has_chart else "")
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(report.title)}</title>",
        f"<style>{css}</style>",
        "</head>",
        "<body>",
        f"<h1>{esc(report.title)}</h1>",
        _paragraph(report.intro),
        "<nav>"
        + "".join(f'<a href="#{s.key}">{esc(s.title)}</a>' for s in report.sections)
        + "</nav>",
        *body,
    ]
    if has_table or has_chart:
        out.append(page_script(tables=has_table, charts=has_chart))
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"


def _body(report: Report) -> tuple[list[str], bool, bool]:
    """The sections' HTML; whether any table, any chart was written."""
    esc = html.escape
    out: list[str] = []
    has_table = has_chart = False
    for sec in report.sections:
        out.append(f'<section id="{esc(sec.key)}">')
        out.append(f"<h2>{esc(sec.title)}</h2>")
        for block in sec.blocks:
            if isinstance(block, Table):
                out.append(interactive_table_html(block))
                has_table = True
            elif isinstance(block, FigureRef):
                text, chart = _figure(block)
                out.append(text)
                has_chart = has_chart or chart
            elif isinstance(block, Gallery):
                out.append(gallery_html(block))
            else:
                out.append(_paragraph(block))
        out.append("</section>")
    return out, has_table, has_chart
