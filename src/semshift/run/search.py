"""The search stage: hyperparameters chosen on ID validation vs a validation OOD set, never on test.

Runs between extract and score when the config has a ``search:`` section
(docs/methods.md#hyperparameter-search):

1. the validation OOD set (``search.val_ood``, a ``data.sets`` entry) is taken out of every
   world's evaluated sets: it is searched on, never evaluated;
2. leaks are refused before any fitting (one :class:`~semshift.errors.InputError` line): a
   validation OOD set holding ID classes (rows with a known label or an ID class id, such as
   an ID store given as ``val_ood``: :func:`semshift.protocols.search.check_val_ood_not_id`);
   a validation OOD class that is a test OOD class, or with the run's taxonomy the same node, an
   ancestor or a descendant of one (:func:`semshift.protocols.search.check_val_ood_disjoint`);
   ``data.id_val`` that is ``id_train`` or ``id_test`` (same store and rows) or shares image
   files with them; a validation OOD set that shares image files with a test OOD set;
3. each searched detector's grid is fitted on ``id_train`` and rated on ``id_val`` vs the
   validation OOD set (:func:`semshift.protocols.search.search_detector`), cached under
   ``.cache/search/<key>.json`` (key = detector, candidates, fixed values, objective and the
   three sets' keys);
4. the chosen values go to the score stage, where they are part of every fit key (and so of
   the evaluation's key); ``search.csv`` (every combination tried) and
   ``search_sensitivity.csv`` (the objective against each hyperparameter, the others at their
   chosen values) are written to the output folder, and ``results.json`` notes the choices.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from semshift import __version__
from semshift.errors import InputError
from semshift.protocols.search import (
    SearchResult,
    check_val_ood_disjoint,
    check_val_ood_not_id,
    search_detector,
    search_frame,
    sensitivity_frame,
)
from semshift.run.cache import stable_hash
from semshift.run.context import RunContext, Source, World
from semshift.run.extract import ExtractStage
from semshift.run.score import absolute_paths, class_ids, detectors_for

__all__ = ["SEARCH_FILES", "SearchStage", "run_search"]

#: Files the stage writes into the output folder (removed by a run without a search).
SEARCH_FILES = ("search.csv", "search_sensitivity.csv")
#: Version of the cached search results (part of their key).
_SEARCH_VERSION = 1


@dataclass
class SearchStage:
    """The search stage's result.

    Attributes
    ----------
    results : dict of str to SearchResult
        Detector -> its search (empty without a ``search:`` section).
    skipped : dict of str to str
        Detectors not searched, and why.
    val_ood : str or None
        The validation OOD set (not evaluated).
    keys : dict of str to str
        Detector -> the cache key of its search.
    """

    results: dict[str, SearchResult] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    val_ood: str | None = None
    keys: dict[str, str] = field(default_factory=dict)

    @property
    def chosen(self) -> dict[str, dict[str, Any]]:
        """Detector -> the chosen values of its searched hyperparameters."""
        return {name: res.chosen for name, res in self.results.items()}


def _class_ids_of(s: Source) -> list[str]:
    """The class id of every row of an OOD set; refuses rows without one."""
    sel = s.selection
    ids = class_ids(s, sel.labels.astype(np.int64), sel.index)
    missing = [i for i, c in enumerate(ids) if c is None]
    if missing:
        path = sel.index["path"].iloc[missing[0]]
        raise InputError(
            f"{s.where}: {len(missing)} row(s) have no class id (first: {path}); the search's "
            "leak check needs the class of every validation and test OOD row: give the store "
            "a class_id column or keep the images in class folders"
        )
    return [str(c) for c in ids]


def _image_paths(s: Source) -> set[str]:
    """Absolute image paths of a source's rows (empty when the store records none)."""
    paths = absolute_paths(s.meta(), s.selection.index["path"].astype(str).tolist())
    return {p for p in paths.tolist() if os.path.isabs(p)}


def _shared_images(a: Source, b: Source) -> tuple[int, str] | None:
    """How many image files two sources share, and the first (sorted), or None."""
    common = _image_paths(a) & _image_paths(b)
    return (len(common), min(common)) if common else None


def _id_classes(ctx: RunContext, world: World) -> set[str]:
    """The ID classes' ids: the run's class list, id_train's store's and its ``class_id``
    column (image folder names are not used: a flat folder is no class)."""
    out: set[str] = set()
    if ctx.cfg.classes is not None:
        from semshift.taxonomy.classlists import load_classlist

        out.update(map(str, load_classlist(ctx.cfg.classes).ids))
    train = world.train
    assert train is not None  # the config check requires data.id_train with a search
    classes = train.meta().get("classes") or {}
    out.update(map(str, (classes.get("ids") or []) if isinstance(classes, dict) else classes))
    index = train.selection.index
    if "class_id" in index.columns:
        out.update(map(str, index["class_id"].dropna().unique()))
    return out


def _check_leaks(ctx: RunContext, world: World, val_ood: Source) -> dict[str, Any]:
    """Refuse every way the search could see test data; return what was checked."""
    cfg = ctx.cfg
    where = f"{cfg.source}: search"
    val = world.val
    assert val is not None  # the config check requires data.id_val
    assert world.train is not None  # and data.id_train
    for other in (world.train, world.evals[0]):
        if val.key == other.key:
            raise InputError(
                f"{where}: data.id_val is the same store and rows as data.{other.name}; the "
                "search needs ID validation rows that are neither fitted on nor tested"
            )
        shared = _shared_images(val, other)
        if shared is not None:
            raise InputError(
                f"{where}: data.id_val shares {shared[0]} image file(s) with data.{other.name} "
                f"(first: {shared[1]}); the search needs ID validation images of their own"
            )
    sel = val_ood.selection
    labels = sel.labels.astype(np.int64)
    check_val_ood_not_id(
        val_ood.name,
        labels,
        class_ids(val_ood, labels, sel.index),
        _id_classes(ctx, world),
        where=f"{where}.val_ood",
    )
    tests = [s for s in world.evals if s.role == "ood"]
    for t in tests:
        shared = _shared_images(val_ood, t)
        if shared is not None:
            raise InputError(
                f"{where}.val_ood: set {val_ood.name!r} shares {shared[0]} image file(s) with "
                f"test OOD set {t.name!r} (first: {shared[1]})"
            )
    from semshift.taxonomy.custom import load_taxonomy

    tax = load_taxonomy(cfg.taxonomy)
    report = check_val_ood_disjoint(
        {val_ood.name: _class_ids_of(val_ood)},
        {t.name: _class_ids_of(t) for t in tests},
        tax,
        where=f"{where}.val_ood",
    )
    return {"taxonomy": tax.name, "test_sets": [t.name for t in tests], **report.checked}


def _to_search(
    ctx: RunContext, world: World
) -> tuple[list[tuple[str, dict[str, list[Any]] | None, dict[str, Any]]], dict[str, str]]:
    """(name, candidates or None for the declared space, fixed values) of each detector to
    search, and the detectors left out with the reason."""
    from semshift import detectors as D

    search = ctx.cfg.search
    assert search is not None
    run, left_out = detectors_for(ctx, world)
    params = dict(run)
    out: list[tuple[str, dict[str, list[Any]] | None, dict[str, Any]]] = []
    skipped: dict[str, str] = {}
    if search.detectors == "all":
        for name, fixed in run:
            cls = D.get_class(name)
            if cls.level != "post_hoc":
                skipped[name] = (
                    "model-level: computed during feature extraction, its hyperparameters are "
                    "fixed there"
                )
            elif cls.search_space and set(cls.search_space) <= set(fixed):
                skipped[name] = "every hyperparameter of its search space is fixed"
            elif cls.search_space:
                out.append((name, None, dict(fixed)))
        return out, skipped
    for spec in search.specs():
        if spec.name not in params:
            skipped[spec.name] = left_out.get(spec.name, "not among the run's detectors")
            continue
        out.append((spec.name, spec.params, dict(params[spec.name])))
    return out, skipped


class _Inputs:
    """The arrays of id_train, id_val and the validation OOD set, each read once."""

    def __init__(self, world: World, val_ood: Source) -> None:
        self.world = world
        self.val_ood = val_ood
        self._fit: dict[str, Any] = {}
        self._score: dict[str, dict[str, np.ndarray]] = {"id_val": {}, "val_ood": {}}

    def fit_inputs(self, need: frozenset[str]) -> dict[str, Any]:
        train = self.world.train
        assert train is not None  # the config check requires data.id_train with a search
        for name in need - set(self._fit):
            if name in ("logits", "features"):
                if name in train.store.array_names:
                    self._fit[name] = np.ascontiguousarray(train.selection.arrays(name)[0])
            elif name == "head":
                if train.store.has_head:
                    self._fit["head"] = train.store.head
            elif name == "labels":
                self._fit["labels"] = train.selection.labels
            elif name == "val_ood_features":
                if "features" in self.val_ood.store.array_names:
                    sel = self.val_ood.selection
                    self._fit[name] = np.ascontiguousarray(sel.arrays("features")[0])
            elif name in ("val_logits", "val_labels"):
                val = self.world.val
                assert val is not None
                self._fit["val_logits"] = np.ascontiguousarray(val.selection.arrays("logits")[0])
                self._fit["val_labels"] = val.selection.labels
        return {k: v for k, v in self._fit.items() if k in need}

    def score_inputs(self, which: str, need: frozenset[str]) -> dict[str, np.ndarray]:
        src = self.world.val if which == "id_val" else self.val_ood
        assert src is not None
        have = self._score[which]
        for name in need - set(have):
            if name in src.store.array_names:
                have[name] = np.ascontiguousarray(src.selection.arrays(name)[0])
        return {k: v for k, v in have.items() if k in need}


def _write_frame(path: Path, frame: pd.DataFrame) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    frame.to_csv(tmp, index=False)
    tmp.replace(path)


def run_search(ctx: RunContext, extracted: ExtractStage) -> SearchStage:
    """Choose the searched detectors' hyperparameters (nothing without ``search:``)."""
    from semshift import detectors as D

    cfg = ctx.cfg
    search = cfg.search
    if search is None:
        for name in SEARCH_FILES:  # an earlier run's search is not this run's
            (ctx.out / name).unlink(missing_ok=True)
        return SearchStage()
    with ctx.stage("search") as rec:
        worlds = [extracted.main, *extracted.random_worlds.values()]
        val_ood = extracted.sources[search.val_ood]
        for w in worlds:  # searched on, never evaluated (each world keeps its own copy)
            w.val_ood = next((s for s in w.evals if s.name == search.val_ood), None)
            w.evals = [s for s in w.evals if s.name != search.val_ood]
        world = extracted.main
        checked = _check_leaks(ctx, world, val_ood)
        todo, skipped = _to_search(ctx, world)
        assert world.val is not None
        inputs = _Inputs(world, val_ood)
        stage = SearchStage(skipped=skipped, val_ood=search.val_ood)
        with ctx.log.bar("search", len(todo)) as advance:
            for name, space, fixed in todo:
                cls = D.get_class(name)
                needs_val = bool(cls.fit_requires & {"val_logits", "val_labels"})
                key = stable_hash(
                    {
                        "detector": name,
                        "space": D.check_search_space(name, space, fixed=fixed),
                        "fixed": fixed,
                        "objective": search.objective,
                        "max_combinations": search.max_combinations,
                        "train": world.train.key if world.train else None,
                        "val": world.val.key,
                        "val_ood": val_ood.key,
                        "fit_val": needs_val,
                        "version": _SEARCH_VERSION,
                        "semshift": __version__,
                    }
                )
                path = ctx.cache.dir("search", "") / f"{key}.json"
                cached = None if ctx.force else ctx.cache.read_json(path)
                if isinstance(cached, dict):
                    result = SearchResult.from_json(cached)
                    rec.reused.append(name)
                else:
                    result = search_detector(
                        name,
                        fit_inputs=inputs.fit_inputs(cls.fit_requires | cls.fit_accepts),
                        id_val=inputs.score_inputs("id_val", cls.score_requires),
                        val_ood=inputs.score_inputs("val_ood", cls.score_requires),
                        space=space,
                        fixed=fixed,
                        objective=search.objective,
                        max_combinations=search.max_combinations,
                    )
                    ctx.cache.write_json(path, result.to_json())
                    rec.computed.append(name)
                stage.results[name] = result
                stage.keys[name] = key
                advance(1)
        rec.keys["search"] = dict(stage.keys)
        trials = search_frame(stage.results.values())
        ctx.out.mkdir(parents=True, exist_ok=True)
        _write_frame(ctx.out / "search.csv", trials)
        _write_frame(ctx.out / "search_sensitivity.csv", sensitivity_frame(trials))
        ctx.notes["search"] = {
            "val_ood": search.val_ood,
            "id_val": str(world.val.store_path),
            "objective": search.objective,
            "chosen": stage.chosen,
            "value": {n: r.value for n, r in stage.results.items()},
            "default_value": {n: _default_value(r) for n, r in stage.results.items()},
            "combinations": {n: len(r.trials) for n, r in stage.results.items()},
            "failed_combinations": {
                n: sum(t.error is not None for t in r.trials) for n, r in stage.results.items()
            },
            "not_searched": skipped,
            "leak_check": checked,
        }
        _log_choices(ctx, stage)
    return stage


def _default_value(result: SearchResult) -> float | None:
    """The objective at the detector's default values, when the grid holds them."""
    from semshift import detectors as D

    defaults = D.get(result.detector, **result.fixed).get_params()
    for t in result.trials:
        if all(defaults.get(k) == v for k, v in t.params.items()):
            return None if math.isnan(t.value) else t.value
    return None


def _log_choices(ctx: RunContext, stage: SearchStage) -> None:
    from semshift.protocols.search import format_value

    for name, res in stage.results.items():
        values = ", ".join(f"{k}={format_value(v)}" for k, v in res.chosen.items())
        ctx.log.line(f"search {name}: {values} ({res.objective} {res.value:.4f} on validation)")
    for name, why in stage.skipped.items():
        ctx.log.line(f"search {name}: not searched ({why})")
