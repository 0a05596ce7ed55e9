"""The score stage: every detector fitted on ID train and applied to every evaluated set.

Per detector, the cache key is its name and parameters and the content hashes of its training
stores (``.cache/score/<key>/``), with one file per scored set (key = the set's store checksums
and selection), so a changed detector list fits only the new detectors. A detector failure
caused by its inputs (a ``ValueError`` or ``ArithmeticError``) is recorded under the detector's
key and reported again by a re-run without refitting; ``--force`` retries it.

Each set's labels, predictions, per-row levels, image paths and class ids are cached beside
(``.cache/sets/<key>.npz``) for the evaluate stage.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from semshift import __version__
from semshift.errors import InputError
from semshift.run.cache import stable_hash
from semshift.run.context import RunContext, Source, World, one_line
from semshift.run.extract import ExtractStage, model_level_detectors

__all__ = [
    "BLOCK_ROWS",
    "INFO_VERSION",
    "ScoreStage",
    "ScoredWorld",
    "class_ids",
    "detectors_for",
    "run_score",
]

#: Rows per block when scoring a set (bounds memory for ImageNet-scale sets); the
#: environment variable ``SEMSHIFT_BLOCK_ROWS`` overrides it.
BLOCK_ROWS = 16_384


def block_rows() -> int:
    """Rows per scoring block: ``SEMSHIFT_BLOCK_ROWS`` when set, else :data:`BLOCK_ROWS`."""
    env = os.environ.get("SEMSHIFT_BLOCK_ROWS", "").strip()
    if not env:
        return BLOCK_ROWS
    try:
        rows = int(env)
    except ValueError:
        rows = 0
    if rows < 1:
        raise InputError(f"SEMSHIFT_BLOCK_ROWS={env!r}: expected a whole number of rows >= 1")
    return rows


#: Version of the per-set info arrays (part of their cache key).
INFO_VERSION = 3

Params = dict[str, Any]


@dataclass
class ScoredWorld:
    """One world after scoring.

    Attributes
    ----------
    world : World
    detectors : list of (name, params)
        The detectors run, in configured order.
    scores : dict
        Set name -> detector -> scores (float64, higher = more in-distribution).
    errors : dict
        Set name -> detector -> one-line error, for detectors without scores on that set.
    infos : dict
        Set name -> its info arrays: ``labels``, ``preds``, ``path``, ``class_id`` (+ mask
        ``class_id_missing``) and, for grid sets, ``row_<axis>`` / ``row_<axis>_missing``.
    fit_keys : dict
        Detector -> the cache key of its fit.
    """

    world: World
    detectors: list[tuple[str, Params]]
    scores: dict[str, dict[str, NDArray[np.float64]]]
    errors: dict[str, dict[str, str]]
    infos: dict[str, dict[str, np.ndarray]]
    fit_keys: dict[str, str]


@dataclass
class ScoreStage:
    """The score stage's result: the configured model's world and each random-model world."""

    main: ScoredWorld
    random: dict[int, ScoredWorld] = field(default_factory=dict)

    def worlds(self) -> list[ScoredWorld]:
        return [self.main, *self.random.values()]


def detectors_for(ctx: RunContext, world: World) -> tuple[list[tuple[str, Params]], dict[str, str]]:
    """The (name, params) list to run in ``world`` and why some of 'all' were left out.

    The params are the configured ones; the search stage's chosen values are applied on top
    by :func:`run_score`.
    """
    from semshift import detectors as D

    left_out: dict[str, str] = {}
    eval_arrays = [set(s.meta().get("arrays", {})) for s in world.evals]
    # model-level detectors the model cannot compute (no feature map, no dropout, ...) are
    # skipped at extraction with the reason noted (this run) or absent from every evaluated
    # store (a cached extraction): they are left out once, not failed on every set
    skipped = ctx.notes.get("skipped_model_level", {})
    level_model = set(model_level_detectors())

    def unavailable(name: str) -> str | None:
        if name in skipped:
            return str(skipped[name])
        if not any(name in a for a in eval_arrays):
            return (f"no evaluated store has a {name!r} score column (the model cannot compute "
                    "it, or the stores were extracted without it)")  # fmt: skip
        return None

    out: list[tuple[str, Params]] = []
    if ctx.cfg.detectors != "all":
        for d in ctx.cfg.detector_specs():
            why = unavailable(d.name) if d.name in level_model else None
            if why is not None:
                left_out[d.name] = why
            else:
                out.append((d.name, dict(d.params)))
        return out, left_out
    # without data.id_train: the detectors that need no fitting, on id_test's arrays
    ref = world.train or world.evals[0]
    ref_meta = ref.meta()
    arrays = set(ref_meta.get("arrays", {}))
    has_head = bool(ref_meta.get("head"))
    labels_ok = world.train is not None and bool(
        (world.train.store.labels[world.train.selection.positions] >= 0).all()
    )
    no_train = "is fitted on ID training data, and no data.id_train is given"
    for name in D.list_detectors(level="post_hoc"):
        if world.train is None and D.get_class(name).fit_requires:
            left_out[name] = no_train
            continue
        need = set(D.get_class(name).requires)
        lack = []
        if "logits" in need and "logits" not in arrays:
            lack.append("logits")
        if "features" in need and "features" not in arrays:
            lack.append("features")
        if "head" in need and not has_head:
            lack.append("a head")
        if "labels" in need and not labels_ok:
            lack.append("labels (id_train has label -1 rows)")
        if lack:
            left_out[name] = "needs " + ", ".join(lack)
            continue
        out.append((name, {}))
    for name in model_level_detectors():
        why = unavailable(name)
        if why is None and world.train is None and getattr(D.get_class(name), "fits", False):
            why = no_train
        if why is not None:
            left_out[name] = why
        elif all(name in a for a in eval_arrays):
            out.append((name, {}))
        else:
            left_out[name] = "not a score column of every evaluated store"
    return out, left_out


class _WorldScorer:
    """Fits and scores every detector of one world, through the cache."""

    def __init__(
        self, ctx: RunContext, world: World, chosen: Mapping[str, Mapping[str, Any]]
    ) -> None:
        self.ctx = ctx
        self.cache = ctx.cache
        self.world = world
        self.chosen = chosen
        # the search's validation OOD set (checked disjoint from every test OOD class), as
        # this world's model saw it: its features go to the detectors that accept
        # `val_ood_features`
        self.val_ood = world.val_ood
        self.model_level = set(model_level_detectors())
        self.errors: dict[str, dict[str, str]] = {s.name: {} for s in world.scored}

    # ---------------------------------------------------------------- failures
    def cached_failure(self, path: Path) -> str | None:
        """The message of a failure recorded at ``path`` by an earlier run, if any."""
        rec = self.cache.read_json(path)
        if isinstance(rec, dict) and isinstance(rec.get("error"), str):
            return str(rec["error"])
        return None

    def remember_failure(self, path: Path, err: BaseException) -> None:
        """Record a failure that the same inputs would repeat (bad data, not the machine).

        A ``ValueError`` (every :class:`~semshift.errors.SemshiftError`, ``LinAlgError``) or an
        ``ArithmeticError`` (non-finite scores) follows from the inputs, which the key names; a
        ``MemoryError``, an ``OSError`` or a runtime error may not recur, so it is retried.
        """
        if isinstance(err, ValueError | ArithmeticError):
            self.cache.write_json(path, {"error": one_line(err), "type": type(err).__name__})

    def fit_failed(self, name: str, msg: str) -> None:
        on = self.world.train.name if self.world.train is not None else "no training data"
        for s in self.world.scored:
            self.errors[s.name][name] = f"fit failed on {on}: {msg}"
        self.ctx.error(self.world.tag, f"detector {name}: fit failed on {on}: {msg}")

    def score_failed(self, s: Source, name: str, msg: str) -> None:
        self.errors[s.name][name] = f"score failed on {s.name}: {msg}"
        self.ctx.error(self.world.tag, f"detector {name} on set {s.name}: {msg}")

    # ---------------------------------------------------------------- keys
    def val_desc(self) -> tuple[dict[str, Any], NDArray[np.int64] | None]:
        world, seed = self.world, self.ctx.cfg.seed
        if world.val is not None:
            return {"val": world.val.key}, None
        if world.train is None:  # nothing is fitted, so nothing is validated
            return {}, None
        n = len(world.train.selection)
        rng = np.random.default_rng(seed)
        pos = np.sort(rng.permutation(n)[: max(1, n // 2)])
        if world.tag == "main":
            self.ctx.notes["val_source"] = (
                f"no data.id_val: klm and temp_scaling use a seeded half of id_train as "
                f"validation inputs ({pos.size} of {n} rows, seed {seed})"
            )
        return {"val": f"half of id_train, seed {seed}"}, pos

    def info_path(self, s: Source) -> Path:
        grid = None
        sc = s.set_config
        if sc is not None and sc.grid is not None:
            grid = sc.grid.model_dump(mode="json")
            if sc.grid.table is not None:
                grid["table"] = self.cache.file_checksum(sc.grid.table)
        key = stable_hash({"set": s.key, "role": s.role, "grid": grid, "info": INFO_VERSION})
        return self.cache.dir("sets", "") / f"{key}.npz"

    # ---------------------------------------------------------------- the world
    def run(self, rec: Any) -> ScoredWorld:
        from semshift import detectors as D

        ctx, world = self.ctx, self.world
        dets, left_out = detectors_for(ctx, world)
        # values chosen by the search stage (part of each fit key through get_params)
        dets = [(n, {**p, **self.chosen.get(n, {})}) for n, p in dets]
        if world.tag == "main" and left_out:
            ctx.notes["detectors_left_out"] = left_out
            if ctx.cfg.detectors != "all":  # asked for by name: say once why it did not run
                for n, why in left_out.items():
                    ctx.error(world.tag, f"detector {n} left out: {why}")
        val_desc, val_pos = self.val_desc()
        fit_keys: dict[str, str] = {}
        for name, params in dets:
            model_level = name in self.model_level
            needs_val = not model_level and bool(
                D.get_class(name).fit_requires & {"val_logits", "val_labels"}
            )
            gets_ood = (
                not model_level
                and self.val_ood is not None
                and "val_ood_features" in D.get_class(name).fit_accepts
            )
            fit_keys[name] = stable_hash(
                {
                    "detector": name,
                    # every hyperparameter, defaults included: a changed default is a new key
                    "params": D.get(name, **params).get_params(),
                    "train": None if model_level or world.train is None else world.train.key,
                    **(val_desc if needs_val else {}),
                    **({"val_ood": self.val_ood.key} if gets_ood and self.val_ood else {}),
                    "semshift": __version__,
                }
            )
        rec.keys[world.tag] = {"detectors": fit_keys,
                               "sets": {s.name: s.key for s in world.scored}}  # fmt: skip
        scores: dict[str, dict[str, NDArray[np.float64]]] = {s.name: {} for s in world.scored}
        todo: dict[str, list[Source]] = {}
        n_failed = 0  # failures an earlier run recorded for the same inputs
        force = ctx.force
        for name, _ in dets:
            d = self.cache.dir("score", fit_keys[name])
            known = None if force else self.cached_failure(d / "error.json")
            if known is not None:
                self.fit_failed(name, known)
                rec.reused.append(f"{world.tag}/{name}/fit failure")
                n_failed += 1
                continue
            for s in world.scored:
                arr = None if force else self.cache.read_array(d / f"{s.key}.npy")
                if arr is not None:
                    scores[s.name][name] = arr
                    rec.reused.append(f"{world.tag}/{name}/{s.name}")
                    continue
                known = None if force else self.cached_failure(d / f"{s.key}.error.json")
                if known is not None:
                    self.score_failed(s, name, known)
                    rec.reused.append(f"{world.tag}/{name}/{s.name} failure")
                    n_failed += 1
                else:
                    todo.setdefault(name, []).append(s)
        if n_failed:
            ctx.log.line(
                f"{world.tag}: {n_failed} detector failure(s) as recorded by an earlier run on the "
                "same inputs (--force retries them)"
            )
        infos: dict[str, dict[str, np.ndarray]] = {}
        need_info: list[Source] = []
        for s in world.scored:
            info = None if force else self.cache.read_arrays(self.info_path(s))
            if info is None:
                need_info.append(s)
            else:
                infos[s.name] = info
        fitted: dict[str, Any] = {}
        to_fit = [(n, p) for n, p in dets if n in todo and n not in self.model_level]
        for s in need_info + [s for ss in todo.values() for s in ss]:
            _ = s.selection  # zero-sample sets fail here, before any fitting
        if to_fit:
            fitted, failures = self.fit_all(to_fit, val_pos)
            for n, err in failures.items():
                self.remember_failure(self.cache.dir("score", fit_keys[n]) / "error.json", err)
        sets_todo = {s.name: s for ss in todo.values() for s in ss}
        for s in need_info:
            sets_todo.setdefault(s.name, s)
        total = sum(len(s.selection) for s in sets_todo.values())
        with ctx.log.bar(f"score {world.tag}", total) as advance:
            for s in sets_todo.values():
                names = [n for n, ss in todo.items() if s in ss]
                out = self.score_set(s, names, fitted, s in need_info, advance)
                for n, arr in out.scores.items():
                    path = self.cache.dir("score", fit_keys[n]) / f"{s.key}.npy"
                    self.cache.write_array(path, arr)
                    scores[s.name][n] = arr
                    rec.computed.append(f"{world.tag}/{n}/{s.name}")
                for n, err in out.failures.items():
                    d = self.cache.dir("score", fit_keys[n])
                    self.remember_failure(d / f"{s.key}.error.json", err)
                if out.info is not None:
                    self.cache.write_arrays(self.info_path(s), out.info)
                    infos[s.name] = out.info
                if world.tag == "main":
                    for n, sec in out.seconds.items():
                        entry = ctx.detector_info.setdefault(n, {})
                        entry["score_seconds"] = entry.get("score_seconds", 0.0) + sec
        return ScoredWorld(world, dets, scores, self.errors, infos, fit_keys)

    def fit_all(
        self, to_fit: list[tuple[str, Params]], val_pos: NDArray[np.int64] | None
    ) -> tuple[dict[str, Any], dict[str, BaseException]]:
        """Fitted detectors by name, and the exception of each that failed."""
        from semshift import detectors as D

        ctx, world = self.ctx, self.world
        need: set[str] = set()
        for n, _ in to_fit:
            need |= set(D.get_class(n).fit_requires)
        if world.train is None:  # every detector is fit-free (checked with the config)
            done = D.fit_many({n: D.get(n, **p) for n, p in to_fit}, {})
            for name, err in done.errors.items():
                self.fit_failed(name, one_line(err))
            return dict(done.fitted), dict(done.errors)
        train = world.train.selection
        arrays = set(world.train.store.array_names)
        t0 = time.perf_counter()
        inputs: dict[str, Any] = {}
        short: dict[str, BaseException] = {}  # inputs that did not fit in memory

        def load(name: str) -> None:
            try:
                inputs[name] = np.ascontiguousarray(train.arrays(name)[0])
            except MemoryError as err:  # the detectors that need it fail, the others go on
                short[name] = err

        if "logits" in need or (val_pos is not None and need & {"val_logits", "val_labels"}):
            if "logits" in arrays:
                load("logits")
        if "features" in need and "features" in arrays:
            load("features")
        if "head" in need and world.train.store.has_head:
            inputs["head"] = world.train.store.head
        inputs["labels"] = train.labels
        accepts = {a for n, _ in to_fit for a in D.get_class(n).fit_accepts}
        ood = self.val_ood
        if (
            "val_ood_features" in accepts
            and ood is not None
            and "features" in ood.store.array_names
        ):
            inputs["val_ood_features"] = np.ascontiguousarray(ood.selection.arrays("features")[0])
        if need & {"val_logits", "val_labels"}:
            if world.val is not None:
                val = world.val.selection
                inputs["val_logits"] = np.ascontiguousarray(val.arrays("logits")[0])
                inputs["val_labels"] = val.labels
            elif "logits" in inputs and val_pos is not None:
                inputs["val_logits"] = inputs["logits"][val_pos]
                inputs["val_labels"] = inputs["labels"][val_pos]
        if world.tag == "main":
            ctx.notes["train_rows"] = len(train)
            ctx.notes["train_load_seconds"] = round(time.perf_counter() - t0, 3)
        dets: dict[str, Any] = {}
        failures: dict[str, BaseException] = {}
        for name, params in to_fit:
            lacking = sorted(set(D.get_class(name).fit_requires) & set(short))
            if lacking:
                err = short[lacking[0]]
                failures[name] = err
                self.fit_failed(name, f"loading id_train {lacking[0]}: {one_line(err)}")
                continue
            try:
                dets[name] = D.get(name, **params)
            except Exception as err:
                failures[name] = err
                self.fit_failed(name, one_line(err))
        with ctx.log.bar(f"fit {world.tag}", len(to_fit)) as advance:
            advance(len(to_fit) - len(dets))
            done = D.fit_many(dets, inputs, on_done=lambda _: advance(1))
        for name in dets:  # in the configured order, whatever order the threads ended in
            if name in done.errors:
                failures[name] = done.errors[name]
                self.fit_failed(name, one_line(done.errors[name]))
        if world.tag == "main":
            for name, sec in done.seconds.items():
                ctx.detector_info.setdefault(name, {})["fit_seconds"] = round(sec, 4)
        return dict(done.fitted), failures

    def score_set(
        self,
        s: Source,
        names: list[str],
        fitted: Mapping[str, Any],
        want_info: bool,
        advance: Callable[[int], None],
    ) -> _SetScores:
        from semshift.detectors import score_many

        world, errors = self.world, self.errors[s.name]
        sel = s.selection
        store_arrays = set(s.store.array_names)
        model_level = self.model_level
        live = [n for n in names if n in fitted or n in model_level]
        for n in live:
            if n in model_level and n not in store_arrays:
                errors[n] = (
                    f"{n} is a model-level detector and store {s.store_path} has no {n!r} "
                    "score column (extract the set from images, or with --score " + n + ")"
                )
                self.ctx.error(world.tag, f"detector {n} on set {s.name}: no score column")
        live = [n for n in live if n not in errors]
        need: set[str] = set()
        for n in live:
            need |= {n} if n in model_level else set(fitted[n].score_requires)
        if want_info:
            need.add("logits")
        need &= store_arrays
        parts: dict[str, list[np.ndarray]] = {n: [] for n in live}
        seconds: dict[str, float] = {n: 0.0 for n in live}
        preds: list[np.ndarray] = []
        failures: dict[str, BaseException] = {}

        def failed(n: str, err: BaseException) -> None:
            failures[n] = err
            self.score_failed(s, n, one_line(err))

        def keep(n: str, part: np.ndarray) -> None:
            if not np.isfinite(part).all():
                bad = int(np.count_nonzero(~np.isfinite(part)))
                failed(n, FloatingPointError(f"{bad} non-finite score(s)"))
            else:
                parts[n].append(part)

        for block in sel.blocks(*sorted(need), rows=block_rows()):
            if want_info:
                preds.append(np.asarray(block["logits"]).argmax(axis=1).astype(np.int64))
            for n in live:
                if n in model_level and n not in errors:
                    keep(n, np.asarray(block[n], dtype=np.float64))
            todo = {n: fitted[n] for n in live if n not in model_level and n not in errors}
            if todo:
                # detectors side by side, what they share computed once; the slowest so far
                # start first (scores do not depend on the order or the threads)
                slow = world.seconds
                done = score_many(
                    todo,
                    logits=block.get("logits"),
                    features=block.get("features"),
                    order=sorted(todo, key=lambda n: -slow.get(n, 0.0)),
                )
                for n in todo:  # in a fixed order, whatever order the threads ended in
                    if n in done.errors:
                        failed(n, done.errors[n])
                    else:
                        keep(n, done.scores[n])
                for n, sec in done.seconds.items():
                    seconds[n] += sec
                    slow[n] = slow.get(n, 0.0) + sec
            advance(len(block["positions"]))
        out_scores = {
            n: np.concatenate(parts[n]).astype(np.float64)
            for n in live
            if n not in errors and parts[n]
        }
        info = set_info(s, np.concatenate(preds)) if want_info else None
        return _SetScores(out_scores, info, seconds, failures)


@dataclass
class _SetScores:
    scores: dict[str, NDArray[np.float64]]
    info: dict[str, np.ndarray] | None
    seconds: dict[str, float]
    failures: dict[str, BaseException]


def _strings(values: list[Any], prefix: str, info: dict[str, np.ndarray]) -> None:
    """Store a list of optional strings as ``prefix`` (str array) and ``prefix_missing``."""
    info[prefix] = np.asarray(["" if v is None else str(v) for v in values], dtype=str)
    info[f"{prefix}_missing"] = np.asarray([v is None for v in values], dtype=bool)


def set_info(s: Source, preds: NDArray[np.int64]) -> dict[str, np.ndarray]:
    """Labels, predictions, paths, class ids and per-row levels of one scored set."""
    sel = s.selection
    labels = sel.labels.astype(np.int64)
    index = sel.index
    if s.role == "ood":
        labels = np.full(labels.shape, -1, np.int64)
    elif (labels < 0).any():
        bad = int(np.argmax(labels < 0))
        raise InputError(
            f"{s.where}: a {s.role.replace('_', ' ')} set needs known labels, but "
            f"{int((labels < 0).sum())} row(s) have label -1 (first: "
            f"{index['path'].iloc[bad]}); use role: ood or select known rows"
        )
    info: dict[str, np.ndarray] = {"labels": labels, "preds": preds}
    sc = s.set_config
    if sc is not None and sc.grid is not None:
        from semshift.protocols.sets import level_str

        grid = sc.grid
        idx = level_table(s, grid.table) if grid.table is not None else index
        for axis, col in (("semantic", grid.semantic), ("covariate", grid.covariate)):
            if col not in idx.columns:
                where = grid.table if grid.table is not None else f"store {s.store_path}"
                raise InputError(
                    f"{s.where}.grid.{axis}: {where} has no column {col!r}; columns: "
                    f"{', '.join(map(str, idx.columns))}"
                )
            _strings([level_str(v) for v in idx[col].tolist()], f"row_{axis}", info)
    info["path"] = absolute_paths(s.meta(), index["path"].astype(str).tolist())
    _strings(class_ids(s, labels, index), "class_id", info)
    return info


def absolute_paths(meta: Mapping[str, Any], names: list[str]) -> np.ndarray:
    """The images' absolute paths: the store's index holds them as written by the source,
    relative to the image folder (``dataset.root`` of ``meta.json``) or to a list's folder."""
    dataset = meta.get("dataset") or {}
    root = dataset.get("root") if isinstance(dataset, Mapping) else None
    if not root:
        return np.asarray(names, dtype=str)
    base = Path(root) if dataset.get("kind") != "list" else Path(root).parent
    return np.asarray([n if os.path.isabs(n) else str(base / n) for n in names], dtype=str)


def class_ids(s: Source, labels: NDArray[np.int64], index: pd.DataFrame) -> list[str | None]:
    """Each row's class id (:func:`semshift.features.store.row_class_ids` of the source's
    store)."""
    from semshift.features.store import row_class_ids

    return row_class_ids(s.meta(), labels, index)


def level_table(s: Source, table: Path) -> pd.DataFrame:
    """The rows of a level table (e.g. ``levels.csv``) aligned with the set's rows."""
    try:
        frame = pd.read_csv(table)
    except (OSError, ValueError) as err:
        raise InputError(f"{s.where}.grid.table: {table} is unreadable ({err})") from None
    sel = s.selection
    if "path" in frame.columns:
        paths = sel.index["path"].astype(str).to_numpy()
        frame = frame.drop_duplicates("path").set_index(frame["path"].astype(str))
        missing = ~np.isin(paths, frame.index.to_numpy())
        if missing.any():
            raise InputError(
                f"{s.where}.grid.table: {int(missing.sum())} row(s) of the set have no line in "
                f"{table} (first: {paths[int(np.argmax(missing))]})"
            )
        return frame.loc[paths].reset_index(drop=True)
    rows = frame["row"].to_numpy(np.int64) if "row" in frame.columns else np.arange(len(frame))
    if len(frame) != len(sel) or not np.array_equal(np.sort(rows), np.arange(len(sel))):
        raise InputError(
            f"{s.where}.grid.table: {table} has {len(frame)} lines for a set of {len(sel)} rows "
            "and no 'path' column; give one line per row (column 'row' = position in the set)"
        )
    return frame.iloc[np.argsort(rows)].reset_index(drop=True)


def run_score(
    ctx: RunContext,
    extracted: ExtractStage,
    chosen: Mapping[str, Mapping[str, Any]] | None = None,
) -> ScoreStage:
    """Fit and score every detector in the main world and each random-model world.

    ``chosen`` holds the hyperparameters the search stage chose per detector (they replace
    the configured values in every world).
    """
    chosen = chosen or {}
    with ctx.stage("score") as rec:
        result = ScoreStage(_WorldScorer(ctx, extracted.main, chosen).run(rec))
        for seed, world in extracted.random_worlds.items():
            result.random[seed] = _WorldScorer(ctx, world, chosen).run(rec)
    return result
