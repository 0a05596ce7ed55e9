"""The docstring examples of every metrics module run and give the printed values."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "registry",
    "ranking",
    "classification",
    "osr",
    "failure",
    "many",
    "shift",
    "stats",
    "zsl",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"semshift.metrics.{name}")
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0
