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
    """A package's examples are in its modules too (store, models)."""
    import importlib
    import pkgutil

    modules = [module]
    if hasattr(module, "__path__"):
        for info in pkgutil.iter_modules(module.__path__):
            modules.append(importlib.import_module(f"{module.__name__}.{info.name}"))
    attempted = failed = 0
    for mod in modules:
        result = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE)
        attempted, failed = attempted + result.attempted, failed + result.failed
    assert attempted > 0 and failed == 0
