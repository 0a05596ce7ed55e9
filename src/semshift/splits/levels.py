"""SSB bins as shift levels: which bin is the smallest semantic shift.

Apart from :mod:`semshift.splits.ssb` (which re-exports it), so that reading a benchmark's sets
(``semshift benchmark list``) needs neither pandas nor pydantic.
"""

from __future__ import annotations

from collections.abc import Sequence

from semshift.errors import InputError

__all__ = ["BIN_NAMES", "ssb_bin_level"]

BIN_NAMES = ("easy", "medium", "hard")
#: SSB bins from the smallest semantic shift to the largest: Hard classes are the nearest the
#: known classes (the hardest to tell apart), Easy the farthest
_BY_SHIFT = ("hard", "medium", "easy")


def ssb_bin_level(bin: str, bins: Sequence[str] = BIN_NAMES) -> int:
    """The ``semantic_level`` of an SSB bin: 1 for the bin with the smallest semantic shift.

    semshift's one convention for shift levels: a higher level means a larger shift. SSB's Hard
    bin holds the unknown classes nearest the known ones (the smallest semantic shift), so it is
    level 1, and Easy is the highest level among the bins in ``bins``.

    Parameters
    ----------
    bin : str
        ``"easy"``, ``"medium"`` or ``"hard"`` (any case).
    bins : sequence of str
        The bins the split has (e.g. ``("easy", "hard")`` when Medium is merged into Hard).

    Examples
    --------
    >>> [ssb_bin_level(b) for b in ("hard", "medium", "easy")]
    [1, 2, 3]
    >>> ssb_bin_level("Easy", ("easy", "hard")), ssb_bin_level("hard", ("easy", "hard"))
    (2, 1)
    """
    have = {str(b).lower() for b in bins}
    unknown = have - set(_BY_SHIFT)
    if unknown:
        raise InputError(f"ssb_bin_level: unknown bins {sorted(unknown)}; expected {_BY_SHIFT}")
    order = [b for b in _BY_SHIFT if b in have]
    key = str(bin).lower()
    if key not in order:
        raise InputError(f"ssb_bin_level: bin {bin!r} is not one of {order}")
    return order.index(key) + 1
