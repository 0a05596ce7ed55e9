"""One pass over the training rows, shared by the detectors that compare every test row with
every training row (knn, grood; docs/methods.md#shared-scans).

Such a detector declares a :class:`~semshift.detectors._shared.Request` (:func:`scan_request`)
whose group names the :class:`TrainRows` it was fitted on (by digest) and whose payload is a
:data:`Reducer`. For each block of
test rows the scan computes one float32 product of the centred test rows with the centred
training rows, ``P = (h - c)(x - c)^T`` (c the mean training feature), and hands it to every
reducer of the group; each derives its own similarities from ``P`` with per-row and per-column
terms (``h.x = P + (h - c).c + c.(x - c) + c.c``) and reduces the block to one score per row.
The (n_test, n_train) matrix is never held: a block has at most :data:`BLOCK_BYTES
<semshift.detectors._common.BLOCK_BYTES>` of product and temporaries. A detector scored alone
runs the same scan with its own reducer only, on the same blocks: its scores are bitwise those
of the shared scan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ._base import Float64Array, Inputs
from ._common import F32, F64, column_mean, row_blocks
from ._shared import Request, digest

__all__ = ["Reducer", "TrainRows", "kth_largest", "scan_request", "scan_scores", "train_rows"]

#: A reduction of one block: ``reduce(hc, prod)`` with hc the test rows minus the centre
#: (float64, (m, D)) and prod the float32 product (m, n_train); returns float64 (m,). It must
#: not modify its arguments (other reducers read them).
Reducer = Callable[[F64, F32], Float64Array]

#: Working bytes per (test row, training row) cell of a block: the float32 product, a
#: reducer's float64 similarities and their partition copy.
CELL_BYTES = 24


@dataclass(frozen=True, eq=False)
class TrainRows:
    """Training features centred on their mean, in float32: what a scan multiplies.

    Attributes
    ----------
    center : float64 array (D,)
        The mean training feature c.
    rows32 : float32 array (n, D)
        ``x - c`` rounded to float32.
    token : str
        Digest of the two (the group of the requests scanning these rows).
    """

    center: F64
    rows32: F32
    token: str

    def rows(self, idx: np.ndarray) -> F64:
        """Training rows ``idx`` as stored, ``c + (x - c)`` in float64 (m, D)."""
        return self.rows32[idx].astype(np.float64) + self.center


def _make_rows(x: np.ndarray) -> TrainRows:
    center = column_mean(x)
    rows32 = np.empty(x.shape, dtype=np.float32)
    for sl in row_blocks(x.shape[0], 12 * x.shape[1]):
        rows32[sl] = np.asarray(x[sl], dtype=np.float64) - center
    return TrainRows(center, rows32, digest("train_rows", center, rows32))


def train_rows(inputs: Inputs) -> TrainRows:
    """The :class:`TrainRows` of the fit inputs' features; detectors fitted together on the
    same arrays (:func:`fit_many`) hold one copy."""
    return inputs.share(("train_rows",), lambda: _make_rows(inputs.get("features")))


def kth_largest(values: np.ndarray, k: int) -> np.ndarray:
    """Column of the ``k``-th largest entry of each row of ``values`` (m, n) (k <= n); among
    entries equal to it, the lowest column. Deterministic: the same values give the same
    columns."""
    n = values.shape[1]
    kth = np.partition(values, n - k, axis=1)[:, n - k]
    return np.argmax(values == kth[:, None], axis=1)


def scan_request(bank: TrainRows, token: str, reducer: Reducer) -> Request:
    """The request of a detector fitted on ``bank`` whose state and parameters digest to
    ``token``: every request on training rows with the same digest shares one scan."""
    return Request(("train_scan", bank.token), token, (bank, reducer))


def _scan(h: np.ndarray, requests: list[Request]) -> dict[str, Float64Array]:
    bank: TrainRows = requests[0].payload[0]  # the same rows for the whole group (digest)
    n, n_train = int(h.shape[0]), int(bank.rows32.shape[0])
    out = {r.token: np.empty(n, dtype=np.float64) for r in requests}
    for sl in row_blocks(n, CELL_BYTES * n_train):
        hc = np.asarray(h[sl], dtype=np.float64) - bank.center
        prod = hc.astype(np.float32) @ bank.rows32.T
        prod.flags.writeable = False  # every reducer reads the same product
        for r in requests:
            out[r.token][sl] = r.payload[1](hc, prod)
    return out


def scan_scores(inputs: Inputs, request: Request) -> Float64Array:
    """The scores of ``request`` (from :func:`scan_request`) on ``inputs``' features: from the
    scan of every request declared in its group when the inputs carry a
    :class:`SharedResults`, else from a scan of its own (the same numbers)."""
    h = inputs.get("features")
    if inputs.shared is None:
        return _scan(h, [request])[request.token]
    group = inputs.shared.declared(request)
    key = (request.group, tuple(r.token for r in group))
    return inputs.share(key, lambda: _scan(h, group))[request.token]
