"""The shared error helpers: their doctests, and the one-line unknown-name message."""

from __future__ import annotations

import doctest

import semshift.errors as errors
from semshift.errors import UnknownNameError, unknown_name


def test_doctests():
    result = doctest.testmod(errors)
    assert result.failed == 0 and result.attempted >= 2


def test_unknown_name_lists_close_matches_then_every_name():
    err = unknown_name("layout", "cub", {"cub200": 1, "imagenet1k": 2})
    assert isinstance(err, UnknownNameError) and isinstance(err, KeyError)
    assert str(err) == "unknown layout 'cub'. Did you mean 'cub200'? Known: cub200, imagenet1k"
    assert str(unknown_name("layout", "zzz", ["b", "a"])) == "unknown layout 'zzz'. Known: a, b"
