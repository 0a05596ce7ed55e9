"""The docstring examples of the zero-shot modules run and give the printed values."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["registry", "closed_form", "sse", "gfzsl"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"semshift.training.zsl.{name}")
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0
