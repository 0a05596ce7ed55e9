"""Intermediate results shared by several detectors scored on the same inputs.

Many detectors compute the same quantities: the log-softmax of the logits (msp, entropy, gen,
gradnorm, klm), its log-sum-exp (energy, vim, nnguide), the head product ``h @ W.T`` (scale,
max_cosine), the top-k activations and their product with the head (ash_p, ash_s, ash_b), the
minimum class Mahalanobis distance (mahalanobis, rmd) or the ViM residual (vim, residual).
A :class:`SharedResults` bound to one set of input arrays computes each of them once, whichever
detector asks first; the others reuse it. Values are identical with and without sharing: the
same function computes them either way.

Keys name the quantity, the fitted state it depends on (a digest of the arrays involved, see
:func:`digest`) and the row chunk (:func:`chunks`), so detectors fitted on different data never
share by mistake. A results object holds references to the arrays it was made for and
:meth:`Detector.score <semshift.detectors.Detector.score>` refuses it for other arrays.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import xxhash

from semshift.errors import InputError

from . import _common

__all__ = ["Request", "SharedResults", "chunks", "digest"]

T = TypeVar("T")


def digest(*parts: Any) -> str:
    """XXH3-128 digest of arrays (dtype, shape and bytes) and plain values, for share keys."""
    h = xxhash.xxh3_128()
    for p in parts:
        if isinstance(p, np.ndarray):
            a = np.ascontiguousarray(p)
            h.update(f"{a.dtype.str}{a.shape}".encode())
            h.update(a.reshape(-1).view(np.uint8).data)
        else:
            h.update(repr(p).encode())
        h.update(b"|")
    return h.hexdigest()


def chunk_rows() -> int:
    """Rows of one scoring chunk: ``BLOCK_BYTES / 32 KiB`` (2,048 rows by default).

    A function of nothing but the block budget, so every detector cuts the same chunks of the
    same inputs (per-chunk results can be shared, and a score never depends on which other
    arrays were given). Per-chunk matrices stay small: a (2048, C) float64 array is 16 MB for
    C = 1,000 and 180 MB for the 11,221 classes of ImageNet-21K-P.
    """
    return max(1, _common.BLOCK_BYTES // 2**15)


def chunks(n_rows: int) -> Iterator[slice]:
    """The row chunks :meth:`Detector.score` scores one at a time."""
    step = chunk_rows()
    for start in range(0, n_rows, step):
        yield slice(start, min(start + step, n_rows))


@dataclass(frozen=True)
class Request:
    """A shared computation a fitted detector declares it consumes (:meth:`Detector.requests`).

    Requests with the same ``group`` are served by one computation: the first detector scored
    computes it for every request of the group declared to the :class:`SharedResults` (by
    :func:`score_many`), the others read their part. ``token`` names the request's own part (a
    digest of the detector's fitted state and parameters); ``payload`` is what the computation
    needs from the detector (for example the reduction it applies to a shared product).
    """

    group: Hashable
    token: str
    payload: Any = field(compare=False)


class SharedResults:
    """Memo of quantities several detectors compute on the same inputs (thread-safe).

    Parameters
    ----------
    logits, features : array, optional
        The arrays every detector scored with this object receives (checked by identity).

    Examples
    --------
    >>> import numpy as np
    >>> from semshift import detectors
    >>> from semshift.detectors import SharedResults
    >>> z = np.array([[2.0, 0.0], [0.0, 0.0]])
    >>> shared = SharedResults(logits=z)
    >>> msp = detectors.get("msp").fit()
    >>> ent = detectors.get("entropy").fit()
    >>> msp.score(logits=z, shared=shared).round(4), ent.score(logits=z, shared=shared).round(4)
    (array([0.8808, 0.5   ]), array([-0.3653, -0.6931]))
    """

    def __init__(self, *, logits: Any = None, features: Any = None, **inputs: Any) -> None:
        # other inputs (the training labels, head, validation arrays) bind a fit-time memo
        given = {"logits": logits, "features": features, **inputs}
        self.arrays: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
        self._lock = threading.Lock()
        self._items: dict[Hashable, Future[Any]] = {}
        self._requests: dict[Hashable, dict[str, Request]] = {}
        self.hits = 0
        self.misses = 0

    def declare(self, request: Request) -> None:
        """Record that a detector scored with this object consumes ``request``."""
        with self._lock:
            self._requests.setdefault(request.group, {})[request.token] = request

    def declared(self, request: Request) -> list[Request]:
        """``request`` and every other request declared in its group, sorted by token (the
        same list, whichever member asks)."""
        with self._lock:
            group = dict(self._requests.get(request.group, {}))
        group[request.token] = request
        return [group[t] for t in sorted(group)]

    def check(self, given: Mapping[str, Any], owner: str) -> None:
        """Raise :class:`InputError` unless every array in ``given`` is the bound one."""
        for name, arr in given.items():
            if arr is None:
                continue
            if name not in self.arrays or self.arrays[name] is not arr:
                raise InputError(
                    f"{owner}: `shared` was made for other inputs than the `{name}` given; make "
                    f"one SharedResults per set of arrays (SharedResults({name}=...))"
                )

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()``, computed once per key; concurrent callers wait for the first."""
        with self._lock:
            fut = self._items.get(key)
            owner = fut is None
            if owner:
                fut = self._items[key] = Future()
                self.misses += 1
            else:
                self.hits += 1
        assert fut is not None
        if not owner:
            try:
                return fut.result()
            except BaseException:
                # the first caller failed: compute here, so that the error this caller raises
                # names its own detector (not the one that happened to compute first)
                return compute()
        try:
            value = compute()
        except BaseException as err:
            with self._lock:
                del self._items[key]  # a later caller computes (and fails) for itself
            fut.set_exception(err)
            raise
        fut.set_result(value)
        return value

    def __len__(self) -> int:
        return len(self._items)
