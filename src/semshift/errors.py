"""Exception types shared by every layer.

Every error a user can cause derives from :class:`SemshiftError` (a ``ValueError``), so the CLI can
print its one-line message and exit with status 2 instead of showing a traceback.
"""

from __future__ import annotations

__all__ = [
    "InputError",
    "NotFittedError",
    "SemshiftError",
    "TaxonomyFormatError",
    "UnknownNameError",
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
