"""Exception types shared by every layer.

Every error a user can cause derives from :class:`SemshiftError` (a ``ValueError``), so the CLI can
print its one-line message and exit with status 2 instead of showing a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "InputError",
    "NotFittedError",
    "SemshiftError",
    "TaxonomyFormatError",
    "UnknownNameError",
    "did_you_mean",
]


class SemshiftError(ValueError):
    """Base class for user-facing errors: the message says what was wrong and where."""


class InputError(SemshiftError):
    """An argument, array or file does not meet the documented requirements."""


class UnknownNameError(SemshiftError, KeyError):
    """A name (wnid, class, registry entry) that does not exist; the message lists close matches."""

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return str(self.args[0]) if self.args else ""


class TaxonomyFormatError(SemshiftError):
    """A custom hierarchy file is malformed (cycle, missing parent, duplicate id, bad line)."""


class NotFittedError(SemshiftError, AttributeError):
    """A fitted estimator (detector) was used before ``fit`` was called."""


def did_you_mean(name: str, known: Iterable[str], n: int = 1) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``known`` to ``name``, or ``""``.

    >>> did_you_mean("sbb", ["ssb", "zsl"]), did_you_mean("xyz", ["ssb"])
    (" (did you mean 'ssb'?)", '')
    """
    import difflib

    close = difflib.get_close_matches(str(name), list(known), n=n)
    return f" (did you mean {', '.join(map(repr, close))}?)" if close else ""


def unknown_name(what: str, name: object, known: Iterable[str], *, n: int = 3) -> UnknownNameError:
    """The error for a name no registry entry has: close matches first, then every known name.

    >>> str(unknown_name("benchmark", "ssb-cb", ["ssb-cub", "ssb-scars"]))
    "unknown benchmark 'ssb-cb'. Did you mean 'ssb-cub', 'ssb-scars'? Known: ssb-cub, ssb-scars"
    """
    import difflib

    names = sorted(known)
    close = difflib.get_close_matches(str(name), names, n=n)
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    return UnknownNameError(f"unknown {what} {name!r}.{hint} Known: {', '.join(names)}")
