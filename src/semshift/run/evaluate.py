"""The evaluate stage: the configured protocols over the scored sets, one tidy table.

Protocols are looked up in :mod:`semshift.protocols.registry`; each gets a
:class:`~semshift.protocols.registry.ProtocolInputs` and its own config. The table is cached
under ``.cache/evaluate/<key>/results.parquet`` (key = every score key, the set descriptions, the
protocol settings and the content of files they name). The per-sample score tables
``scores/<set>.parquet`` (and ``sanity/seed<k>/``) are written here too, with each row's image
path, class id, predicted class name and nearest known class in the taxonomy.

Everything goes into the run's staging folder (``ctx.out``), which the runner commits at the
end (:mod:`semshift.run._commit`). Score tables the committed folder already holds for the
same key are linked into it instead of written again; the marker that says so
(:data:`SCORES_MARKER`) is written once the run is committed (:func:`mark_scores_committed`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from semshift import __version__
from semshift.protocols.registry import ProtocolInputs, config_paths, get_protocol
from semshift.protocols.sets import Bootstrap, ScoredSet, level_str
from semshift.protocols.tidy import error_row, results_frame
from semshift.run._commit import carry, committed_files
from semshift.run.cache import stable_hash
from semshift.run.context import RunContext, one_line
from semshift.run.extract import class_names
from semshift.run.score import INFO_VERSION, ScoredWorld, ScoreStage

__all__ = ["SCORES_MARKER", "EvaluateStage", "mark_scores_committed", "run_evaluate"]

#: Version of the per-sample score tables' columns (part of their marker key).
_SCORES_VERSION = 2
#: In the cache: the key of the score tables the committed output folder holds.
SCORES_MARKER = "scores_written.key"


@dataclass
class EvaluateStage:
    """The evaluate stage's result: the tidy table, its cache key and the key of the
    per-sample score tables (which the report's gallery reads)."""

    results: pd.DataFrame
    key: str
    scores_key: str


def _optional(info: Mapping[str, np.ndarray], name: str) -> np.ndarray | None:
    """An optional-string info column as an object array of str or None."""
    if name not in info:
        return None
    arr = info[name].astype(object)
    arr[info[f"{name}_missing"]] = None
    return arr


def scored_sets(scored: ScoredWorld, names: Sequence[str] | None = None) -> list[ScoredSet]:
    """The :class:`ScoredSet` of each evaluated set of a world (id_test first)."""
    out = []
    sources = (
        scored.world.scored
        if names is None
        else [s for s in scored.world.scored if s.name in names]
    )
    det_order = [n for n, _ in scored.detectors]
    for s in sources:
        info = scored.infos[s.name]
        row_levels: dict[str, Any] = {}
        for axis in ("semantic", "covariate"):
            levels = _optional(info, f"row_{axis}")
            if levels is not None:
                row_levels[f"row_{axis}_level"] = levels
        sc = {n: scored.scores[s.name][n] for n in det_order if n in scored.scores[s.name]}
        er = {n: scored.errors[s.name][n] for n in det_order if n in scored.errors[s.name]}
        for n in det_order:  # neither scores nor error: cannot happen, but never lose it
            if n not in sc and n not in er:
                er[n] = f"detector {n} produced no scores on set {s.name}"
        set_cfg = s.set_config
        out.append(
            ScoredSet(
                name=s.name,
                role="id_test" if s.role in ("id_test", "id_val") else s.role,  # type: ignore[arg-type]
                labels=info["labels"],
                preds=info["preds"],
                scores=sc,
                errors=er,
                split=set_cfg.split if set_cfg is not None else None,
                semantic_level=level_str(set_cfg.semantic_level) if set_cfg is not None else None,
                covariate_level=level_str(set_cfg.covariate_level) if set_cfg is not None else None,
                **row_levels,
            )
        )
    return out


def _eval_key(ctx: RunContext, scored: ScoreStage) -> str:
    cfg = ctx.cfg
    parts = {}
    for sw in scored.worlds():
        parts[sw.world.tag] = {
            "fit": sw.fit_keys,
            "sets": [
                {
                    "key": s.key,
                    "cfg": s.cfg.model_dump(mode="json", exclude={"store", "images", "layout"}),
                    "role": s.role,
                }
                for s in sw.world.scored
            ],
            "errors": sw.errors,
        }
    p = cfg.protocols
    files: dict[str, str] = {}
    for name in p.enabled():
        pc = p.get(name)
        assert pc is not None
        for key, value in config_paths(pc).items():
            if value.is_file():
                files[f"{name}.{key}"] = ctx.cache.file_checksum(value)
            elif (value / "meta.json").is_file():  # a feature store: its shard checksums
                files[f"{name}.{key}"] = ctx.cache.file_checksum(value / "meta.json")
    settings = {
        n: pc.model_dump(mode="json", exclude={"stores"})
        for n in p.enabled()
        if (pc := p.get(n)) is not None
    }
    return stable_hash(
        {
            "scored": parts,
            "protocols": settings,
            "files": files,
            "metrics": cfg.metrics,
            "bootstrap": cfg.bootstrap.model_dump(),
            "semshift": __version__,
        }
    )


def _feature_loaders(scored: ScoredWorld) -> dict[str, Callable[[], np.ndarray]]:
    """Lazy loaders of the ``features`` rows of id_train and of every scored set."""
    world = scored.world
    sources = [*([world.train] if world.train is not None else []), *world.scored]
    return {s.name: functools.partial(_features_of, s) for s in sources}


def _features_of(source: Any) -> np.ndarray:
    if "features" not in source.store.array_names:
        raise ValueError(f"store {source.store_path} of set {source.name!r} has no features")
    return np.asarray(source.selection.arrays("features")[0])


def _protocols(ctx: RunContext, scored: ScoreStage) -> pd.DataFrame:
    cfg = ctx.cfg
    main = scored_sets(scored.main)
    main_eval = [s for s in main if s.name != "id_val" or scored.main.world.calibration is None]
    calibration = next(
        (s for s in main if scored.main.world.calibration is not None and s.name == "id_val"),
        None,
    )
    inputs = ProtocolInputs(
        id_test=main_eval[0],
        others=main_eval[1:],
        id_val=calibration,
        random_models={seed: scored_sets(sw) for seed, sw in scored.random.items()},
        metrics=tuple(cfg.metrics),
        bootstrap=Bootstrap(**cfg.bootstrap.model_dump()),
        seed=cfg.seed,
        features=_feature_loaders(scored.main),
    )
    frames: list[pd.DataFrame] = []
    calls: list[tuple[str, Callable[[], pd.DataFrame]]] = []
    for name in cfg.protocols.enabled():
        spec, pc = get_protocol(name), cfg.protocols.get(name)
        calls.append((name, functools.partial(spec.run, inputs, pc)))
    with ctx.log.bar("evaluate", len(calls)) as advance:
        for name, call in calls:
            t1 = time.perf_counter()
            try:
                frames.append(call())
            except Exception as err:
                msg = one_line(err)
                frames.append(results_frame([error_row(name, error=msg)]))
                ctx.errors.append(f"protocol {name}: {msg}")
                ctx.log.line(f"[yellow]warning[/yellow]: protocol {name} failed: {msg}")
            ctx.notes.setdefault("protocol_seconds", {})[name] = round(time.perf_counter() - t1, 4)
            advance(1)
    frames = [f for f in frames if len(f)]
    if not frames:
        return results_frame([])
    return pd.concat(frames, ignore_index=True)


class _Names:
    """Class names and nearest known classes for the per-sample tables."""

    def __init__(self, ctx: RunContext, class_ids: Sequence[str] | None) -> None:
        self.ctx = ctx
        self.known = list(class_ids) if class_ids is not None else None
        self.display = class_names(ctx.cfg) or self.known
        self._tax: Any = None
        self._tax_failed = False
        self._nearest: dict[str, str] = {}
        # each distinct class id is looked up once per run, whichever sets it appears in
        self._known_to_tax: dict[str, bool] = {}
        self._labels: dict[str, str] = {}

    def taxonomy(self) -> Any:
        if self._tax is None and not self._tax_failed:
            from semshift.errors import SemshiftError
            from semshift.taxonomy.custom import load_taxonomy

            try:
                self._tax = load_taxonomy(self.ctx.cfg.taxonomy)
            except (SemshiftError, OSError):
                self._tax_failed = True
        return self._tax

    def in_taxonomy(self, class_id: str) -> bool:
        """Whether the taxonomy has ``class_id`` (False without a taxonomy)."""
        found = self._known_to_tax.get(class_id)
        if found is None:
            tax = self.taxonomy()
            found = self._known_to_tax[class_id] = tax is not None and class_id in tax
        return found

    def label(self, class_id: str) -> str:
        """The taxonomy's name of ``class_id`` (one of its classes)."""
        name = self._labels.get(class_id)
        if name is None:
            name = self._labels[class_id] = self.taxonomy().label(class_id)
        return name

    def pred_names(self, preds: np.ndarray) -> pd.Series:
        if self.display is None:
            return pd.Series([None] * len(preds), dtype=object)
        names = np.asarray([*self.display, None], dtype=object)
        p = np.where((preds >= 0) & (preds < len(self.display)), preds, len(self.display))
        return pd.Series(names[p], dtype=object)

    def labels_of(self, class_ids: np.ndarray | None) -> pd.Series:
        """Each row's class name in the taxonomy (None where its class is not in it)."""
        n = 0 if class_ids is None else len(class_ids)
        tax = self.taxonomy()
        if class_ids is None or tax is None:
            return pd.Series([None] * n, dtype=object)
        ids = pd.Series(class_ids, dtype=object)
        present = [str(c) for c in pd.unique(ids.dropna())]
        names = ids.map({c: self.label(c) for c in present if self.in_taxonomy(c)}).astype(object)
        return names.where(names.notna(), None)

    def nearest(self, class_ids: np.ndarray | None) -> tuple[pd.Series, pd.Series]:
        """Nearest known class (by taxonomy path distance) of each row not of a known class."""
        n = 0 if class_ids is None else len(class_ids)
        none = pd.Series([None] * n, dtype=object)
        tax = self.taxonomy()
        if class_ids is None or tax is None or not self.known:
            return none, none.copy()
        known_set = set(self.known)
        present = pd.unique(pd.Series(class_ids, dtype=object).dropna())
        unknown = sorted(str(c) for c in present if c not in known_set and self.in_taxonomy(c))
        new = [c for c in unknown if c not in self._nearest]
        known = [k for k in self.known if self.in_taxonomy(k)]
        if not known or not unknown:
            return none, none.copy()
        if new:  # each distinct class once per run, whichever sets and worlds it appears in
            dist = tax.distance_matrix(new, known)
            found = np.asarray(known, dtype=object)[np.argmin(dist, axis=1)].tolist()
            self._nearest.update(zip(new, found, strict=True))
        nearest = [self._nearest[c] for c in unknown]
        labels = {k: self.label(k) for k in set(nearest)}
        lookup = pd.Series(nearest, index=pd.Index(unknown, dtype=object), dtype=object)
        ids = pd.Series(class_ids, dtype=object).map(lookup)
        ids = ids.astype(object).where(ids.notna(), None)
        names = ids.map(lambda k: labels.get(k) if k is not None else None)
        return ids.reset_index(drop=True), names.astype(object).reset_index(drop=True)


def _known_ids(ctx: RunContext, scored: ScoredWorld) -> list[str] | None:
    if ctx.cfg.classes is not None:
        from semshift.taxonomy.classlists import load_classlist

        return list(load_classlist(ctx.cfg.classes).ids)
    ref = scored.world.train or scored.world.evals[0]
    classes = ref.meta().get("classes") or {}
    ids = classes.get("ids") if isinstance(classes, Mapping) else None
    return [str(i) for i in ids] if ids else None


def _write_score_files(
    ctx: RunContext, folder: Path, scored: ScoredWorld, sets: Sequence[ScoredSet], names: _Names
) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for s in sets:
        n = s.n
        info = scored.infos[s.name]

        def level(row: Any, const: Any, n: int = n) -> pd.Series:
            if row is not None:
                return pd.Series(row, dtype=object)
            return pd.Series([const] * n, dtype=object)

        class_ids = _optional(info, "class_id")
        nearest, nearest_name = names.nearest(class_ids)
        frame = pd.DataFrame(
            {
                "label": s.labels,
                "pred": s.preds,
                "role": pd.Series([s.role] * n, dtype=object),
                "set": pd.Series([s.name] * n, dtype=object),
                "semantic_level": level(s.row_semantic_level, s.semantic_level),
                "covariate_level": level(s.row_covariate_level, s.covariate_level),
                "path": pd.Series(
                    info["path"].astype(object) if "path" in info else [None] * n, dtype=object
                ),
                "class_id": pd.Series(
                    class_ids if class_ids is not None else [None] * n, dtype=object
                ),
                "class_name": names.labels_of(class_ids),
                "pred_name": names.pred_names(s.preds),
                "nearest_known": nearest,
                "nearest_known_name": nearest_name,
            }
        )
        for det, arr in s.scores.items():
            frame[f"score:{det}"] = arr
        for det in s.errors:
            frame[f"score:{det}"] = np.full(n, np.nan)
        ctx.cache.write_frame(folder / f"{s.name}.parquet", frame)


def _object_strings(frame: pd.DataFrame) -> pd.DataFrame:
    """Text columns read back from Parquet as ``object`` holding ``str`` or ``None``."""
    out = frame.copy()
    for col in out.columns:
        if out[col].dtype == object or isinstance(out[col].dtype, pd.StringDtype):
            values = out[col].astype(object)
            out[col] = values.where(out[col].notna(), None).astype(object)
    return out


def write_results(ctx: RunContext, results: pd.DataFrame) -> None:
    """``results.parquet`` and ``results.csv`` in the run's (staging) output folder."""
    ctx.out.mkdir(parents=True, exist_ok=True)
    ctx.cache.write_frame(ctx.out / "results.parquet", results)
    tmp = ctx.out / ".results.csv.tmp"
    results.to_csv(tmp, index=False)
    tmp.replace(ctx.out / "results.csv")


def run_evaluate(ctx: RunContext, scored: ScoreStage) -> EvaluateStage:
    """Run the configured protocols (cached) and write the per-sample score tables."""
    with ctx.stage("evaluate") as rec:
        key = _eval_key(ctx, scored)
        rec.keys["results"] = key
        entry = ctx.cache.dir("evaluate", key) / "results.parquet"
        cached = None if ctx.force else ctx.cache.read_frame(entry)
        marker = ctx.cache.root / SCORES_MARKER
        marker_key = f"{key}-{_SCORES_VERSION}-{INFO_VERSION}"
        reuse = (
            not ctx.force
            and marker.is_file()
            and marker.read_text() == marker_key
            and ctx.out != ctx.cfg.output
            and carry(ctx.cfg.output, ctx.out, committed_files(ctx.cfg.output, _SCORE_DIRS))
        )
        if not reuse:
            # one class list, taxonomy and nearest-class table for every world (the random-model
            # copies share the configured model's classes)
            names = _Names(ctx, _known_ids(ctx, scored.main))
            main_sets = scored_sets(scored.main)
            _write_score_files(ctx, ctx.out / "scores", scored.main, main_sets, names)
            for seed, sw in scored.random.items():
                folder = ctx.out / "sanity" / f"seed{seed}"
                _write_score_files(ctx, folder, sw, scored_sets(sw), names)
        if cached is not None:
            results = _object_strings(cached)
            rec.reused.append("results")
        else:
            results = _protocols(ctx, scored)
            ctx.cache.write_frame(entry, results)
            rec.computed.append("results")
        write_results(ctx, results)
    return EvaluateStage(results, key, marker_key)


_SCORE_DIRS = ("scores/", "sanity/")


def mark_scores_committed(ctx: RunContext, evaluated: EvaluateStage) -> None:
    """Record that the committed output folder holds the score tables of ``evaluated``."""
    ctx.cache.root.mkdir(parents=True, exist_ok=True)
    (ctx.cache.root / SCORES_MARKER).write_text(evaluated.scores_key)
