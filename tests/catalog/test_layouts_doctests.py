"""The examples in the dataset layouts' docstrings run (every module of the package)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import semshift.catalog.layouts as layouts


def test_doctests():
    modules = [layouts] + [
        importlib.import_module(f"{layouts.__name__}.{m.name}")
        for m in pkgutil.iter_modules(layouts.__path__)
    ]
    results = [doctest.testmod(m, optionflags=doctest.NORMALIZE_WHITESPACE) for m in modules]
    assert sum(r.attempted for r in results) > 0 and sum(r.failed for r in results) == 0
