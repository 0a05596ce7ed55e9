"""What the stages of a run share: the config, the cache, the log, stage records and sources.

Each stage module (:mod:`~semshift.run.split`, :mod:`~semshift.run.extract`,
:mod:`~semshift.run.score`, :mod:`~semshift.run.evaluate`, :mod:`~semshift.run.report`) is a
function ``run_<stage>(ctx, <previous results>) -> <Stage>Result``: the typed results say what
flows from one stage to the next, and :class:`RunContext` holds only what every stage shares.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from semshift.errors import InputError
from semshift.run.cache import StageCache, stable_hash, store_fingerprint
from semshift.run.config import RunConfig, SetConfig, SourceConfig

if TYPE_CHECKING:
    from semshift.features.store import FeatureStore, Selection

__all__ = ["STAGES", "Log", "RunContext", "Source", "StageRecord", "World", "one_line"]

#: The stages, in order (``search`` runs only when the config has a ``search:`` section).
STAGES = ("split", "extract", "search", "score", "evaluate", "report")

Role = Literal["id_train", "id_val", "id_test", "ood", "covariate"]
#: JSON-able values of a stage record's cache keys.
KeyTree = str | dict[str, "KeyTree"]


@dataclass
class StageRecord:
    """What one stage did.

    Attributes
    ----------
    name : str
        One of :data:`STAGES`.
    seconds : float
        Wall time.
    cpu_seconds : float
        CPU time of this process over the stage (all threads; on a shared machine this moves
        less with other jobs' load than the wall time).
    cached : bool
        True when every output came from the cache (nothing was recomputed).
    computed, reused : list of str
        The items (detector/set pairs, sets, splits) computed and taken from the cache.
    keys : dict
        Cache keys of the stage's outputs.
    """

    name: str
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    cached: bool = True
    computed: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    keys: dict[str, KeyTree] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 4),
            "cpu_seconds": round(self.cpu_seconds, 4),
            "cached": self.cached,
            "computed": self.computed,
            "reused": self.reused,
            "keys": self.keys,
        }


class Log:
    """Progress output on stderr (rich), or nothing."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._console: Any = None
        if enabled:
            from rich.console import Console

            self._console = Console(stderr=True, highlight=False)

    def line(self, text: str) -> None:
        if self._console is not None:
            self._console.print(text)

    @contextmanager
    def bar(self, label: str, total: int) -> Iterator[Callable[[int], None]]:
        from semshift.progress import progress_wanted

        if self._console is None or total <= 0 or not progress_wanted():
            yield lambda k: None
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        with Progress(
            TextColumn(label),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self._console,
            transient=True,
        ) as prog:
            task = prog.add_task(label, total=total)
            yield lambda k: prog.advance(task, k)


@dataclass
class Source:
    """One configured source, resolved to a store and a row selection.

    The store is opened (and verified, see :mod:`semshift.run.verify`) on first use.
    """

    name: str  # id_train, id_val, id_test or a set name
    role: Role
    cfg: SourceConfig
    where: str  # key path in the config, for messages
    store_path: Path | None = None
    class_filter: tuple[str, list[str]] | None = None  # (column, class ids)
    key: str = ""
    opener: Callable[[Source], FeatureStore] | None = None
    _store: FeatureStore | None = None
    _selection: Selection | None = None

    @property
    def set_config(self) -> SetConfig | None:
        """The set's config when it is an evaluation set of ``data.sets`` (None for id_*)."""
        return self.cfg if isinstance(self.cfg, SetConfig) else None

    @property
    def store(self) -> FeatureStore:
        if self._store is None:
            assert self.store_path is not None
            if self.opener is not None:
                self._store = self.opener(self)
            else:
                from semshift.features.store import open_store

                self._store = open_store(self.store_path)
        return self._store

    def meta(self) -> dict[str, Any]:
        if self._store is not None:
            return dict(self._store.meta)
        assert self.store_path is not None
        return dict(json.loads((self.store_path / "meta.json").read_text()))

    def compute_key(self) -> None:
        assert self.store_path is not None
        self.key = stable_hash(
            {
                "store": store_fingerprint(self.store_path),
                "select": self.cfg.select,
                "classes": self.class_filter,
            }
        )

    @property
    def selection(self) -> Selection:
        if self._selection is None:
            sel = self.store.select(**self.cfg.select) if self.cfg.select else self.store.all()
            if self.class_filter is not None:
                column, ids = self.class_filter
                sel = sel.select(**{column: list(ids)})
            if len(sel) == 0:
                what = f" after select {self.cfg.select}" if self.cfg.select else ""
                what += " and classes_from" if self.class_filter is not None else ""
                raise InputError(
                    f"{self.where}: the set has zero samples{what} (store {self.store_path} has "
                    f"{len(self.store)} rows); check the select values against the store's "
                    f"group columns ({', '.join(self.store.groups) or 'none'})"
                )
            self._selection = sel
        return self._selection

    def copy_for(self, where: str, store_path: Path | None = None) -> Source:
        """The same configured source for another model (a random-init copy)."""
        return Source(
            self.name, self.role, self.cfg, where, store_path=store_path,
            class_filter=self.class_filter, opener=self.opener,
        )  # fmt: skip


@dataclass
class World:
    """The sources scored together: the configured model or one random-init copy.

    ``evals`` are the evaluated sets, id_test first; ``calibration`` is id_val when a
    protocol needs it scored (its threshold or calibration set), else None; ``val_ood`` is the
    search's validation OOD set (taken out of ``evals``, never evaluated), whose features fit
    the detectors that accept ``val_ood_features``.
    """

    tag: str  # "main" or "seed<k>"
    train: Source | None  # None: no data.id_train (only detectors that need no fitting)
    val: Source | None
    evals: list[Source]
    calibration: Source | None = None
    val_ood: Source | None = None
    seconds: dict[str, float] = field(default_factory=dict)  # score time per detector so far

    @property
    def scored(self) -> list[Source]:
        """Every source this world scores: the evaluated sets, then id_val if needed."""
        return self.evals + ([self.calibration] if self.calibration is not None else [])

    @property
    def stores(self) -> list[Source]:
        """Every source of this world: id_train (if given), id_val (if given), the evaluated
        sets."""
        head = [s for s in (self.train, self.val) if s is not None]
        return head + self.evals


#: How to lower the memory a run needs, named in every out-of-memory message.
LOWER_MEMORY = (
    "to lower it: SEMSHIFT_THREADS=1 (one detector at a time), SEMSHIFT_BLOCK_ROWS=4096 "
    "(smaller score blocks), a smaller block_size or batch size of the detector, or fewer rows "
    "(select)"
)


def one_line(err: BaseException) -> str:
    """An exception as one line (the type named unless it is a user :class:`InputError`).

    Running out of memory (NumPy's "Unable to allocate 390. MiB for an array with shape ...",
    or a bare ``MemoryError``) and a refused thread read ``out of memory: ...`` with how to
    lower the memory use.
    """
    text = str(err).strip().splitlines()
    msg = text[0] if text else ""
    if isinstance(err, MemoryError):
        return f"out of memory: {msg or 'an allocation failed'}; {LOWER_MEMORY}"
    if isinstance(err, RuntimeError) and "can't start new thread" in msg:
        return f"out of memory: the system refused a new thread; {LOWER_MEMORY}"
    return f"{type(err).__name__}: {msg}" if not isinstance(err, InputError) else msg


class RunContext:
    """What every stage of one run shares.

    Attributes
    ----------
    cfg : RunConfig
    cache : StageCache
        ``<output>/.cache``.
    log : Log
    force : bool
        Recompute every stage, ignoring (and overwriting) the cache.
    stages : dict of str to StageRecord
    errors : list of str
        Detector, protocol and report errors; the run went on after each.
    notes : dict
        Facts for ``results.json`` (what was left out, where validation data came from, ...).
    detector_info : dict
        Fit and score seconds per detector of the configured model.
    """

    def __init__(self, cfg: RunConfig, *, progress: bool, force: bool) -> None:
        self.cfg = cfg
        self.force = force
        self.log = Log(progress)
        self.out = cfg.output
        self.cache = StageCache(self.out / ".cache")
        self.stages: dict[str, StageRecord] = {}
        self.errors: list[str] = []
        self.notes: dict[str, Any] = {}
        self.detector_info: dict[str, dict[str, float]] = {}
        self.t_start = time.perf_counter()

    @contextmanager
    def stage(self, name: str) -> Iterator[StageRecord]:
        """Time a stage and log one line when it ends; a failed stage is timed (results.json)
        but prints nothing, so the error is the only line its failure writes."""
        rec = StageRecord(name)
        self.stages[name] = rec
        t0, c0 = time.perf_counter(), time.process_time()
        ok = False
        try:
            yield rec
            ok = True
        finally:
            rec.seconds = time.perf_counter() - t0
            rec.cpu_seconds = time.process_time() - c0
            rec.cached = not rec.computed
            n_c, n_r = len(rec.computed), len(rec.reused)
            if ok:
                self.log.line(
                    f"[bold]{rec.name}[/bold]: {rec.seconds:.2f} s ({n_c} computed, {n_r} from "
                    "cache)"
                )

    def error(self, tag: str, message: str) -> None:
        """Record a failure the run goes on after (once). Nothing is printed here: the command
        prints the run's failures once at the end, grouped by detector and reason
        (:func:`semshift.report.errors.group_errors`), as the report does."""
        text = message if tag == "main" else f"{tag}: {message}"
        if text not in self.errors:
            self.errors.append(text)
