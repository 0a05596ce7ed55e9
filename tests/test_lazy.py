"""semshift.lazy: the packages' names imported on first use."""

from __future__ import annotations

import doctest
import sys
import types

import pytest

from semshift import lazy


def test_doctests():
    result = doctest.testmod(lazy)
    assert result.attempted >= 4 and result.failed == 0


def test_names_are_imported_once_relative_or_absolute():
    pkg = types.ModuleType("semshift_lazy_probe")
    pkg.__path__ = []  # a package, so that relative module names resolve against it
    sys.modules["semshift_lazy_probe"] = pkg
    try:
        pkg.__getattr__, pkg.__dir__ = lazy.lazy_names(
            "semshift_lazy_probe", {"wrap": "textwrap", "lazy_names": "semshift.lazy"}
        )
        assert "wrap" not in vars(pkg)
        import textwrap

        assert pkg.wrap is textwrap.wrap and vars(pkg)["wrap"] is textwrap.wrap
        assert pkg.lazy_names is lazy.lazy_names
        assert {"wrap", "lazy_names"} <= set(dir(pkg))
        with pytest.raises(AttributeError, match="'semshift_lazy_probe' has no attribute 'nope'"):
            pkg.nope  # noqa: B018
    finally:
        del sys.modules["semshift_lazy_probe"]
