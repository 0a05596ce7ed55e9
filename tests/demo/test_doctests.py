"""The examples in the demo docstrings run."""

from __future__ import annotations

import doctest

import pytest

import semshift.demo
import semshift.demo.glyphs
import semshift.demo.render


@pytest.mark.parametrize("module", [semshift.demo, semshift.demo.glyphs, semshift.demo.render])
def test_doctests(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
