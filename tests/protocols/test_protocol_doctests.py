"""The docstring examples of every protocol module run and give the printed values."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["sets", "tidy", "osr", "newclass", "graded", "sanity", "generalisation", "gzsl"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"semshift.protocols.{name}")
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0
