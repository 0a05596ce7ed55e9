"""The offline demo: glyph images over a real taxonomy and a small CNN trained on CPU.

``build_demo_data(workdir)`` renders characters with the fonts matplotlib ships, writes their
taxonomy (glyph -> letter -> script -> case -> character; glyph -> symbol -> block -> character)
as a custom-taxonomy CSV, ranks open-set characters into Easy / Medium / Hard with the SSB split
builder, reports and excludes cross-script homoglyphs, trains GlyphNet and returns a
:class:`DemoData` whose :meth:`~DemoData.config` is a ready ``semshift run`` configuration.

Importing this package registers the model ``demo-glyphnet`` with
:func:`semshift.features.models.register_model`.

>>> from semshift.demo import MODEL_NAME
>>> from semshift.features.models import list_models
>>> MODEL_NAME in list_models()
True
"""

from semshift.demo.build import BINS, DemoData, DemoParams, DemoSet, build_demo_data
from semshift.demo.model import MODEL_NAME, GlyphNet, GlyphNetAdapter
from semshift.demo.render import Augment, glyph_distance

__all__ = [
    "BINS",
    "MODEL_NAME",
    "Augment",
    "DemoData",
    "DemoParams",
    "DemoSet",
    "GlyphNet",
    "GlyphNetAdapter",
    "build_demo_data",
    "glyph_distance",
]
