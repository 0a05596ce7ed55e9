"""The examples in the features docstrings run."""

from __future__ import annotations

import doctest

import pytest

import semshift.features.corruptions
import semshift.features.data
import semshift.features.models
import semshift.features.store


@pytest.mark.parametrize(
    "module",
    [
        semshift.features.store,
        semshift.features.data,
        semshift.features.models,
        semshift.features.corruptions,
    ],
)
def test_doctests(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
