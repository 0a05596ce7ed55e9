"""The docstring examples of the shipped-lists module run and give the printed values."""

from __future__ import annotations

import doctest

import semshift.catalog.lists as lists


def test_docstring_examples():
    result = doctest.testmod(lists, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
