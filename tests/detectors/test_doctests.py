"""The examples in the detectors docstrings run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "semshift.detectors",
    "semshift.params",
    "semshift.registry",
    "semshift.detectors._registry",
    "semshift.detectors.logit",
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
