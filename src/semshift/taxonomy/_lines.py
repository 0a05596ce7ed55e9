"""Strings kept as one ``\\n``-joined UTF-8 text, an item decoded when it is asked for.

The shipped WordNet (:func:`semshift.taxonomy.wordnet`) holds its 82,115 ids, names, aliases,
lemmas and glosses this way: ``semshift taxonomy show dog.n.01`` reads a dozen of them, where
splitting every column into Python strings took 60 ms. Iterating, slicing or listing decodes
the whole column once.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["LineKeys", "Lines"]


class Lines(Sequence[str]):
    """The lines of ``blob`` (UTF-8, ``\\n`` between items, none after the last), as a
    read-only sequence of ``str``; an empty blob holds one empty string, as
    ``"".split("\\n")`` does. ``starts``: :meth:`starts` of the blob, when known (else
    found on the first item asked for)."""

    def __init__(
        self, blob: bytes | NDArray[np.uint8], starts: NDArray[np.integer[Any]] | None = None
    ) -> None:
        self._blob = blob  # bytes, or a uint8 array (a view of a mapped file: no copy)
        self._list: list[str] | None = None
        self._starts = starts

    def _bytes(self) -> bytes:
        if not isinstance(self._blob, bytes):
            self._blob = bytes(self._blob)
        return self._blob

    @staticmethod
    def starts(blob: bytes | NDArray[np.uint8]) -> NDArray[np.int64]:
        """The offset of every line of ``blob``, then ``len(blob) + 1`` (where a line after
        the last would start)."""
        import numpy as np

        breaks = np.flatnonzero(np.frombuffer(blob, dtype=np.uint8) == 10)
        starts = np.empty(len(breaks) + 2, dtype=np.int64)
        starts[0], starts[-1] = 0, len(blob) + 1
        starts[1:-1] = breaks + 1
        return starts

    def _bounds(self) -> NDArray[np.integer[Any]]:
        if self._starts is None:
            self._starts = self.starts(self._blob)
        return self._starts

    def tolist(self) -> list[str]:
        """Every item (decoded once, then kept)."""
        if self._list is None:
            self._list = self._bytes().decode("utf-8").split("\n")
        return self._list

    def __len__(self) -> int:
        return len(self._list) if self._list is not None else len(self._bounds()) - 1

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        if self._list is not None or isinstance(i, slice):
            return self.tolist()[i]
        k = operator.index(i)
        starts = self._bounds()
        n = len(starts) - 1
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError("Lines index out of range")
        return bytes(self._blob[int(starts[k]) : int(starts[k + 1]) - 1]).decode("utf-8")

    def __iter__(self) -> Iterator[str]:
        return iter(self.tolist())

    def find(self, key: str) -> int:
        """The position of the first item equal to ``key``, or -1 (a search of the text: no
        item is decoded)."""
        if "\n" in key:
            return -1
        blob, word = self._bytes(), key.encode("utf-8")
        if blob.startswith(word + b"\n") or blob == word:
            return 0
        pos = blob.find(b"\n" + word + b"\n")
        if pos < 0:
            tail = b"\n" + word
            if not blob.endswith(tail):
                return -1
            pos = len(blob) - len(tail)
        return blob.count(b"\n", 0, pos + 1)


class LineKeys:
    """``{item: position}`` of a :class:`Lines` whose items are unique, for look-ups alone
    (``get``, ``in``, ``[]``): the first :data:`SEARCHES` keys are answered by :meth:`Lines.find`
    (a search of the text, no item decoded: what a command that looks up one name needs), the
    later ones by a dict built then (a search that misses reads the whole text, a millisecond
    for WordNet's ids; a run that asks thousands of keys must not pay that each time). As a
    dict, a key that is not a string is missing, an unhashable one raises ``TypeError``."""

    #: look-ups answered by a search of the text before the dict is built
    SEARCHES = 16

    def __init__(self, lines: Lines) -> None:
        self._lines = lines
        self._found: dict[str, int] = {}  # the keys searched so far (a key is asked again)
        self._dict: dict[str, int] | None = None

    def _find(self, key: Any) -> int:
        if self._dict is not None:
            return self._dict.get(key, -1)
        if not isinstance(key, str):
            hash(key)  # unhashable: TypeError, as a dict raises
            return -1
        pos = self._found.get(key)
        if pos is not None:
            return pos
        if len(self._found) >= self.SEARCHES:
            self._dict = {k: i for i, k in enumerate(self._lines.tolist())}
            return self._dict.get(key, -1)
        pos = self._found[key] = self._lines.find(key)
        return pos

    def get(self, key: Any, default: int) -> int:
        pos = self._find(key)
        return default if pos < 0 else pos

    def __contains__(self, key: Any) -> bool:
        return self._find(key) >= 0

    def __getitem__(self, key: Any) -> int:
        pos = self._find(key)
        if pos < 0:
            raise KeyError(key)
        return pos
