"""Score many fitted detectors on the same inputs: shared intermediate results, in threads."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from semshift.errors import InputError

from ._base import Detector, FloatArray
from ._shared import SharedResults

__all__ = [
    "ManyFits",
    "ManyScores",
    "default_threads",
    "fit_many",
    "run_pooled",
    "score_many",
    "thread_start_failed",
]


@dataclass
class ManyScores:
    """What :func:`score_many` returns.

    Attributes
    ----------
    scores : dict of str to float64 array (n,)
        Scores of every detector that succeeded.
    errors : dict of str to Exception
        The exception of every detector that failed (the others are unaffected).
    seconds : dict of str to float
        Wall time of each detector's ``score`` call (in its worker thread).
    shared_hits : int
        How many times a detector reused a quantity another one had computed.
    """

    scores: dict[str, np.ndarray] = field(default_factory=dict)
    errors: dict[str, BaseException] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    shared_hits: int = 0


def default_threads() -> int:
    """Worker threads: ``SEMSHIFT_THREADS`` when set, else the CPUs this process may use (at
    most 8). Fewer threads hold fewer detectors' temporary arrays at once."""
    env = os.environ.get("SEMSHIFT_THREADS", "").strip()
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            raise InputError(
                f"SEMSHIFT_THREADS={env!r}: expected a whole number of threads"
            ) from None
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        n = os.cpu_count() or 1
    return max(1, min(n, 8))


def thread_start_failed(err: BaseException) -> bool:
    """Whether ``err`` is the interpreter refusing a new thread (a process or memory limit)."""
    return isinstance(err, RuntimeError) and "can't start new thread" in str(err)


def run_pooled(
    names: list[str], one: Callable[[str], Any], n_threads: int,
    on_done: Callable[[str], None] | None = None,
) -> None:  # fmt: skip
    """``one(name)`` for every name in worker threads; ``on_done`` in the calling thread.

    When the system refuses to start a thread (``RuntimeError: can't start new thread`` under
    a process or memory limit), the names no worker ran are run in the calling thread, one
    after the other: the results are the same, only slower. ``one`` must record that it ran
    (the caller checks ``ran``).
    """
    started: list[Any] = []
    finished: set[str] = set()  # ran to its end, in a worker or here
    reported: set[str] = set()

    def tagged(name: str) -> str:
        one(name)
        finished.add(name)
        return name

    with _blas_single_thread(), ThreadPoolExecutor(max_workers=n_threads) as pool:
        for name in names:
            try:
                started.append(pool.submit(tagged, name))
            except RuntimeError as err:
                if not thread_start_failed(err):
                    raise
                break  # (its work item may still run in a worker started before)
        for fut in as_completed(started):
            reported.add(fut.result())
            if on_done is not None:
                on_done(fut.result())
    for name in names:  # what no worker ran: here, in order
        if name not in finished:
            tagged(name)
        if name not in reported and on_done is not None:
            on_done(name)


def _blas_single_thread() -> contextlib.AbstractContextManager[Any]:
    """One BLAS / OpenMP thread per worker while detectors run side by side."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return contextlib.nullcontext()
    return threadpool_limits(limits=1)


def score_many(
    detectors: Mapping[str, Detector],
    *,
    logits: FloatArray | None = None,
    features: FloatArray | None = None,
    threads: int | None = None,
    order: Sequence[str] | None = None,
) -> ManyScores:
    """Score every fitted detector on the same ``logits`` / ``features``.

    Quantities several detectors need (the log-softmax, the head product, the top-k
    activations, the Mahalanobis distances, ...) are computed once (:class:`SharedResults`),
    and detectors run side by side in ``threads`` worker threads, each with a single BLAS
    thread, so that the element-wise work of one overlaps the matrix products of another.
    The scores are those of calling each detector's ``score`` alone with one BLAS thread,
    whatever the number of worker threads above one (``threads=1`` keeps the process's BLAS
    threads, whose other summation order may change the last bits).

    Parameters
    ----------
    detectors : mapping of str to Detector
        Fitted detectors by name. Each receives the inputs its ``score_requires`` names.
    logits, features : array, optional
        The score inputs.
    threads : int, optional
        Worker threads; default :func:`default_threads`. ``1`` scores one detector after the
        other with the process's usual BLAS threads.
    order : sequence of str, optional
        Names in the order to start them (longest first balances the threads best); default
        the mapping's order. Names not listed start after the listed ones.

    Returns
    -------
    ManyScores
        A detector that raises is reported in ``errors``; the others are still scored.

    Examples
    --------
    >>> import numpy as np
    >>> from semshift import detectors
    >>> z = np.array([[2.0, 0.0], [0.0, 0.0]])
    >>> dets = {n: detectors.get(n).fit() for n in ("msp", "energy", "entropy")}
    >>> out = detectors.score_many(dets, logits=z, threads=2)
    >>> {k: v.round(4).tolist() for k, v in sorted(out.scores.items())}
    {'energy': [2.1269, 0.6931], 'entropy': [-0.3653, -0.6931], 'msp': [0.8808, 0.5]}
    """
    shared = SharedResults(logits=logits, features=features)
    given = {"logits": logits, "features": features}
    names = list(detectors)
    if order is not None:
        first = [n for n in order if n in detectors]
        names = first + [n for n in names if n not in set(first)]
    # what the detectors declare they consume; the first of each group computes it for all,
    # so the others start last (they would wait for it in a worker)
    groups: set[Any] = set()
    later: list[str] = []
    for name in names:
        reqs = detectors[name].requests()
        for req in reqs:
            shared.declare(req)
        if reqs and all(r.group in groups for r in reqs):
            later.append(name)
        groups.update(r.group for r in reqs)
    names = [n for n in names if n not in set(later)] + later
    out = ManyScores()

    def one(name: str) -> None:
        det = detectors[name]
        kw = {k: v for k, v in given.items() if k in det.score_requires and v is not None}
        t0 = time.perf_counter()
        try:
            out.scores[name] = det.score(**kw, shared=shared)
        except Exception as err:  # reported per detector; the others go on
            out.errors[name] = err
        out.seconds[name] = time.perf_counter() - t0

    n_threads = default_threads() if threads is None else max(1, int(threads))
    if n_threads == 1 or len(names) == 1:
        for name in names:
            one(name)
    else:
        run_pooled(names, one, n_threads)
    out.shared_hits = shared.hits
    return out


@dataclass
class ManyFits:
    """What :func:`fit_many` returns: the fitted detectors, the errors, the seconds."""

    fitted: dict[str, Detector] = field(default_factory=dict)
    errors: dict[str, BaseException] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    shared_hits: int = 0


def fit_many(
    detectors: Mapping[str, Detector],
    inputs: Mapping[str, Any],
    *,
    threads: int | None = None,
    on_done: Callable[[str], None] | None = None,
) -> ManyFits:
    """Fit every detector on the same ``inputs``, side by side in threads.

    Each detector receives the inputs its ``fit_requires`` and ``fit_accepts`` name.
    Detectors that fit on features (covariances, eigendecompositions, banks) start first, and
    what several of them learn alike is computed once (:class:`SharedResults`: the class
    statistics of mahalanobis and rmd, the principal subspace of vim and residual with the
    same ``dim``). A detector that raises is reported in ``errors``; the others are still
    fitted. The fitted states are
    those of each detector's own ``fit`` with one BLAS thread, whatever the number of worker
    threads above one and whichever detectors are fitted together (``threads=1`` keeps the
    process's BLAS threads: eigenvector bases may then differ, scores only by rounding).

    Parameters
    ----------
    detectors : mapping of str to Detector
        Unfitted detectors by name.
    inputs : mapping
        Keyword arguments of :meth:`Detector.fit` (``logits``, ``features``, ``head``,
        ``labels``, ``val_logits``, ``val_labels``).
    threads : int, optional
        Worker threads; default :func:`default_threads`.
    on_done : callable, optional
        Called with each name when its fit ends (in the calling thread).
    """
    out = ManyFits()
    # feature fits first, and one detector of each fit group before the second: the second
    # waits for the first's result, so starting both side by side would leave a thread idle
    later: set[str] = set()
    groups: set[str] = set()
    for n in detectors:
        group = detectors[n].fit_group
        if group in groups:
            later.add(n)
        elif group is not None:
            groups.add(group)
    names = sorted(
        detectors, key=lambda n: ("features" not in detectors[n].fit_requires, n in later)
    )
    shared = SharedResults(**inputs)

    def one(name: str) -> str:
        det = detectors[name]
        t0 = time.perf_counter()
        try:
            wanted = det.fit_requires | det.fit_accepts
            det.fit(**{k: v for k, v in inputs.items() if k in wanted}, shared=shared)
            out.fitted[name] = det
        except Exception as err:  # reported per detector; the others go on
            out.errors[name] = err
        out.seconds[name] = time.perf_counter() - t0
        return name

    n_threads = default_threads() if threads is None else max(1, int(threads))
    if n_threads == 1 or len(names) <= 1:
        for name in names:
            one(name)
            if on_done is not None:
                on_done(name)
        out.shared_hits = shared.hits
        return out
    run_pooled(names, one, n_threads, on_done)
    out.shared_hits = shared.hits
    return out
