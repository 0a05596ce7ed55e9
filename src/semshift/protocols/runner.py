"""The benchmark runner behind ``semshift run``: split, extract, score, evaluate, report.

:func:`run` takes a configuration (:mod:`semshift.protocols.config`) and writes the output
directory of ``docs/design/run.md``. Each stage caches what it computes under
``<output>/.cache`` by content hash (:mod:`semshift.protocols.cache`) as soon as it is done:

- **split**: split manifests, loaded or built by a split builder; key = builder, parameters,
  taxonomy.
- **extract**: ``images:`` sets through the configured model into feature stores (with the
  model-level detectors ``odin`` / ``rankfeat`` as score columns); key = model, weights checksum,
  image list fingerprint, corruption, preprocessing. The random-model copies of the sanity
  check are extracted the same way (key with the seed instead of the weights).
- **score**: every detector fitted on ID train (+ validation logits for ``klm`` and
  ``temp_scaling``) and applied to ID test and every set; key per detector = its name and
  parameters and the content hashes of its training stores, one file per scored set (key = the
  set's store checksums and selection). A changed detector list fits only new detectors.
- **evaluate**: the configured protocols over the scored sets, concatenated into the tidy table;
  key = every score key, the set descriptions and the protocol settings.
- **report**: :func:`semshift.report.write_report` when ``report:`` is configured.

A detector that raises while fitting or scoring gets an error recorded (its rows carry the
error) and the run goes on; so does a protocol that raises (one error row). Bad input (a missing
file, an empty set, class lists that do not match) raises :class:`~semshift.errors.InputError`
with one line naming the set and the key path.
"""

from __future__ import annotations

import difflib
import json
import platform
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from semshift import __version__
from semshift.errors import InputError
from semshift.protocols.cache import StageCache, stable_hash, store_fingerprint
from semshift.protocols.config import RunConfig, SetConfig, SourceConfig, load_config

__all__ = ["STAGES", "RunResult", "StageRecord", "run"]

#: The stages, in order.
STAGES = ("split", "extract", "score", "evaluate", "report")
#: Model-level detectors: computed during extraction, read from store score columns.
MODEL_LEVEL = ("odin", "rankfeat")
#: Rows per block when scoring a set (bounds memory for ImageNet-scale sets).
BLOCK_ROWS = 16_384
#: Parameter bytes of the models one extraction pass holds (the configured model and the sanity
#: check's random copies share each decoded image; a larger model goes in several passes).
MODELS_PER_PASS_BYTES = 2 << 30


# --------------------------------------------------------------------------- results
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
    keys: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 4),
            "cpu_seconds": round(self.cpu_seconds, 4),
            "cached": self.cached,
            "computed": self.computed,
            "reused": self.reused,
            "keys": self.keys,
        }


@dataclass
class RunResult:
    """The outcome of :func:`run`.

    Attributes
    ----------
    output : Path
        The output directory.
    results : DataFrame
        The tidy table (columns :data:`semshift.protocols.tidy.RESULT_COLUMNS`).
    stages : dict of str to StageRecord
    errors : list of str
        Detector, protocol and report errors (the run went on after each).
    provenance : dict
        The contents of ``results.json``.
    report : object or None
        What :func:`semshift.report.write_report` returned, when a report was written.
    """

    output: Path
    results: pd.DataFrame
    stages: dict[str, StageRecord]
    errors: list[str]
    provenance: dict[str, Any]
    report: Any = None


# --------------------------------------------------------------------------- progress output
class _Log:
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
        if self._console is None or total <= 0:
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


# --------------------------------------------------------------------------- resolved sets
@dataclass
class _Source:
    """One configured source, resolved to a store and a row selection."""

    name: str  # id_train, id_val, id_test or a set name
    role: str  # id_train, id_val, id_test, ood, covariate
    cfg: SourceConfig
    where: str  # key path in the config, for messages
    store_path: Path | None = None
    class_filter: tuple[str, list[str]] | None = None  # (column, class ids)
    key: str = ""
    _store: Any = None
    _selection: Any = None

    @property
    def store(self) -> Any:
        if self._store is None:
            from semshift.features.store import open_store

            assert self.store_path is not None
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
    def selection(self) -> Any:
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


@dataclass
class _World:
    """The sources scored together: the configured model or one random-init copy."""

    tag: str  # "main" or "seed<k>"
    train: _Source
    val: _Source | None
    evals: list[_Source]  # id_test first
    seconds: dict[str, float] = field(default_factory=dict)  # score time per detector so far


# --------------------------------------------------------------------------- the runner
class _Runner:
    def __init__(self, cfg: RunConfig, *, progress: bool, force: bool) -> None:
        self.cfg = cfg
        self.force = force
        self.log = _Log(progress)
        self.out = cfg.output
        self.cache = StageCache(self.out / ".cache")
        self.stages: dict[str, StageRecord] = {}
        self.errors: list[str] = []
        self.notes: dict[str, Any] = {}
        self.detector_info: dict[str, dict[str, Any]] = {}
        self.manifests: dict[str, Any] = {}
        self.sources: dict[str, _Source] = {}
        self.sanity_worlds: dict[int, _World] = {}
        self.model_adapter: Any = None
        self._random_models: dict[int, Any] = {}  # random-init copies kept between sources
        self.results = pd.DataFrame()
        self.report_paths: Any = None
        self.t_start = time.perf_counter()

    # ---------------------------------------------------------------- helpers
    def _stage(self, name: str) -> StageRecord:
        rec = StageRecord(name)
        rec.cpu_seconds = time.process_time()
        self.stages[name] = rec
        return rec

    def _finish(self, rec: StageRecord, t0: float) -> None:
        rec.seconds = time.perf_counter() - t0
        rec.cpu_seconds = time.process_time() - rec.cpu_seconds
        rec.cached = not rec.computed
        n_c, n_r = len(rec.computed), len(rec.reused)
        self.log.line(
            f"[bold]{rec.name}[/bold]: {rec.seconds:.2f} s ({n_c} computed, {n_r} from cache)"
        )

    # ---------------------------------------------------------------- split
    def stage_split(self) -> None:
        rec, t0 = self._stage("split"), time.perf_counter()
        for name, sp in self.cfg.splits.items():
            from semshift.splits.manifest import SplitManifest

            if sp.manifest is not None:
                manifest = SplitManifest.read(sp.manifest)
                rec.keys[name] = stable_hash(manifest.to_dict())
                rec.reused.append(name)  # loaded, not built
            else:
                tax: Any = self.cfg.taxonomy
                tax_id = tax
                if Path(tax).is_file():
                    tax_id = self.cache.file_checksum(tax)
                key = stable_hash({"builder": sp.builder, "params": sp.params, "taxonomy": tax_id})
                rec.keys[name] = key
                path = self.cache.dir("split", key) / "split.json"
                if path.is_file() and not self.force:
                    manifest = SplitManifest.read(path)
                    rec.reused.append(name)
                else:
                    manifest = self._build_split(name, sp.builder or "", sp.params)
                    manifest.write(path)
                    rec.computed.append(name)
            manifest.write(self.out / "splits" / name / "split.json")
            self.manifests[name] = manifest
        self._finish(rec, t0)

    def _build_split(self, name: str, builder: str, params: Mapping[str, Any]) -> Any:
        params = dict(params)
        try:
            if builder == "ssb":
                from semshift.splits.ssb import build_ssb_split

                return build_ssb_split(taxonomy=self.cfg.taxonomy, **params).manifest
            from semshift.splits.cleaning import build_cleaning_split

            return build_cleaning_split(taxonomy=self.cfg.taxonomy, **params).manifest
        except TypeError as err:
            raise InputError(f"{self.cfg.source}: splits.{name}.params: {err}") from None

    # ---------------------------------------------------------------- extract
    def _resolve_sources(self) -> None:
        cfg = self.cfg
        for name, src in cfg.sources().items():
            if name in ("id_train", "id_val", "id_test"):
                role, where = name, f"{cfg.source}: data.{name}"
            else:
                assert isinstance(src, SetConfig)
                role, where = src.role, f"{cfg.source}: data.sets.{name}"
            s = _Source(name, role, src, where)
            if src.classes_from is not None:
                cf = src.classes_from
                man = self.manifests[cf.split]
                bins = {"known": list(man.known), **man.bins}
                if cf.bin not in bins:
                    close = difflib.get_close_matches(cf.bin, list(bins), n=1)
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    raise InputError(
                        f"{where}.classes_from.bin: split {cf.split!r} has no bin {cf.bin!r}"
                        f"{hint}; bins: {', '.join(bins)}"
                    )
                s.class_filter = (cf.column, list(bins[cf.bin]))
            s.store_path = src.store
            self.sources[name] = s

    def _model_level_requested(self) -> list[str]:
        if self.cfg.detectors == "all":
            return list(MODEL_LEVEL)
        return [d.name for d in self.cfg.detector_specs() if d.name in MODEL_LEVEL]

    def _model_level_params(self, name: str) -> dict[str, Any]:
        for d in self.cfg.detector_specs():
            if d.name == name:
                return dict(d.params)
        return {}

    def _load_model(self, random_seed: int | None) -> Any:
        from semshift.features.models import load_model

        m = self.cfg.model
        assert m is not None
        n_cls = m.num_classes or self._class_count_hint() or 1000
        try:
            return load_model(
                m.name,
                weights=None if random_seed is not None else m.weights,
                random_init=random_seed is not None,
                seed=random_seed if random_seed is not None else 0,
                num_classes=n_cls,
                **m.kwargs,
            )
        except TypeError as err:
            raise InputError(f"{self.cfg.source}: model.kwargs: {err}") from None

    def _class_count_hint(self) -> int | None:
        if self.cfg.classes is None:
            return None
        from semshift.taxonomy.classlists import load_classlist

        return len(load_classlist(self.cfg.classes).ids)

    def stage_extract(self) -> None:
        rec, t0 = self._stage("extract"), time.perf_counter()
        self._resolve_sources()
        sanity = self.cfg.protocols.sanity
        seeds = self._sanity_seeds(sanity) if sanity is not None else []
        copies: dict[int, dict[str, _Source]] = {seed: {} for seed in seeds}
        for s in [s for s in self.sources.values() if s.cfg.images is not None]:
            # the configured model and every random copy see the images in one pass
            jobs: list[tuple[_Source, int | None]] = [(s, None)]
            if s.name != "id_val":
                for seed in seeds:
                    c = _Source(s.name, s.role, s.cfg, s.where, class_filter=s.class_filter)
                    copies[seed][s.name] = c
                    jobs.append((c, seed))
            self._extract(jobs, rec)
        for s in self.sources.values():
            s.compute_key()
        for seed, made in copies.items():
            for c in made.values():
                c.compute_key()
            self.sanity_worlds[seed] = self._world(f"seed{seed}", made)
        if sanity is not None and sanity.stores is not None:
            self._sanity_stores(sanity.stores)
        self._check_classes()
        self._finish(rec, t0)

    def _extract(self, jobs: Sequence[tuple[_Source, int | None]], rec: StageRecord) -> None:
        """Extract one images source for the given models (seed None = the configured weights).

        Each (source, seed) has its own cache entry; those not cached yet are extracted together,
        decoding each image once (:func:`~semshift.features.extract.extract_many`), in passes of
        as many models as :data:`MODELS_PER_PASS_BYTES` of parameters allow.
        """
        from semshift.features.data import open_source

        m = self.cfg.model
        first = jobs[0][0]
        assert m is not None and first.cfg.images is not None
        unknown = first.cfg.unknown or ("ood" if first.role == "ood" else "error")
        source = open_source(first.cfg.images, self.cfg.classes, unknown=unknown)
        corr = first.cfg.corruption
        # model-level detectors score evaluated sets only: no ODIN passes over training images
        scores = [] if first.role in ("id_train", "id_val") else self._model_level_requested()
        desc = {
            "model": m.name,
            "num_classes": m.num_classes,
            "kwargs": m.kwargs,
            "preset": m.preset,
            "shard_size": m.shard_size,
            "images": source.fingerprint(),
            "classes": self.cfg.classes,
            "unknown": unknown,
            "corruption": corr.model_dump() if corr is not None else None,
            "corruption_seed": self.cfg.seed,
            "scores": {n: self._model_level_params(n) for n in scores},
        }
        todo: list[tuple[str, int | None, Path]] = []
        for s, seed in jobs:
            weights_id = (
                {"random_init_seed": seed}
                if seed is not None
                else {"weights": self.cache.file_checksum(m.weights) if m.weights else None}
            )
            key = stable_hash({**desc, **weights_id})
            label = f"{s.name}" + (f" (random seed {seed})" if seed is not None else "")
            rec.keys[label] = key
            s.store_path = path = self.cache.dir("extract", key)
            if (path / "meta.json").is_file() and not self.force:
                rec.reused.append(label)
                continue
            if self.force and path.exists():
                import shutil

                shutil.rmtree(path)
            todo.append((label, seed, path))
        if not todo:
            return
        from semshift.features.extract import extract_many
        from semshift.features.model_detectors import get_model_detector

        corruption = None
        if corr is not None:
            from semshift.features.corruptions import Corruption

            seed_c = corr.seed if corr.seed is not None else self.cfg.seed
            corruption = Corruption(corr.name, corr.severity, seed=seed_c)
        per_pass = self._models_per_pass()
        for start in range(0, len(todo), per_pass):
            part = todo[start : start + per_pass]
            adapters = self._adapters([seed for _, seed, _ in part], keep=per_pass)
            dets = []
            for n in scores:
                if n == "rankfeat" and not adapters[0].has_feature_map:
                    self.notes.setdefault("skipped_model_level", {})[n] = (
                        f"model {m.name!r} exposes no feature map (CNN adapters only)"
                    )
                    continue
                dets.append(get_model_detector(n, **self._model_level_params(n)))
            through = ", ".join(
                "weights" if seed is None else f"random seed {seed}" for _, seed, _ in part
            )
            self.log.line(f"extract: {first.name} ({len(source)} images; {through})")
            extract_many(
                adapters,
                source,
                [path for _, _, path in part],
                preset=m.preset,
                batch_size=m.batch_size,
                shard_size=m.shard_size,
                workers=m.workers,
                device=m.device,
                corruption=corruption,
                scores=dets,
                progress=self.log.enabled,
                fsync=False,
            )
            rec.computed.extend(label for label, _, _ in part)

    def _models_per_pass(self) -> int:
        """How many models one extraction pass holds: their parameters within the budget."""
        if self.cfg.protocols.sanity is None:
            return 1
        if self.model_adapter is None:
            self.model_adapter = self._load_model(None)
        size = sum(p.numel() * p.element_size() for p in self.model_adapter.module.parameters())
        return max(1, MODELS_PER_PASS_BYTES // max(size, 1))

    def _adapters(self, seeds: Sequence[int | None], keep: int) -> list[Any]:
        """The models for ``seeds`` (None = the configured weights). Up to ``keep`` random copies
        stay loaded between sources; others are rebuilt, identically, from their seed."""
        if None in seeds and self.model_adapter is None:
            self.model_adapter = self._load_model(None)
        cache = self._random_models
        wanted = {seed for seed in seeds if seed is not None}
        if len(set(cache) | wanted) > keep:
            for seed in set(cache) - wanted:
                del cache[seed]
        for seed in sorted(wanted - set(cache)):
            cache[seed] = self._load_model(seed)
        return [self.model_adapter if seed is None else cache[seed] for seed in seeds]

    def _sanity_seeds(self, sanity: Any) -> list[int]:
        """The random-init seeds whose copies this run extracts (none for precomputed stores)."""
        cfg = self.cfg
        if sanity.stores is not None:
            return []
        usable = {n: s for n, s in self.sources.items() if s.cfg.images is not None}
        missing = [n for n in ("id_train", "id_test") if n not in usable]
        if missing:
            raise InputError(
                f"{cfg.source}: protocols.sanity: {' and '.join(missing)} come(s) from a feature "
                "store, so no random-init copy of the model can be applied; give image folders "
                "or precomputed random-model stores in protocols.sanity.stores"
            )
        skipped = sorted(set(cfg.data.sets) - set(usable))
        if skipped:
            self.notes["sanity_skipped_sets"] = {
                n: "a feature store, not images: no random-model copy" for n in skipped
            }
        return [cfg.seed + k for k in range(sanity.n_models)]

    def _sanity_stores(self, stores: Mapping[int, Mapping[str, Path]]) -> None:
        """Sanity worlds from precomputed random-model stores."""
        for seed, paths in sorted(stores.items()):
            made: dict[str, _Source] = {}
            for name, path in paths.items():
                base = self.sources[name]
                s = _Source(
                    name, base.role, base.cfg, f"{self.cfg.source}: protocols.sanity.stores."
                    f"{seed}.{name}", store_path=path, class_filter=base.class_filter,
                )  # fmt: skip
                s.compute_key()
                made[name] = s
            self.sanity_worlds[seed] = self._world(f"seed{seed}", made)

    def _world(self, tag: str, sources: Mapping[str, _Source]) -> _World:
        evals = [sources["id_test"]] + [sources[n] for n in self.cfg.data.sets if n in sources]
        return _World(tag, sources["id_train"], sources.get("id_val"), evals)

    def _check_classes(self) -> None:
        """Every store must agree with the model and with each other on the class list."""
        cfg = self.cfg
        ref: dict[str, Any] = {}
        expected_ids: list[str] | None = None
        if cfg.classes is not None:
            from semshift.taxonomy.classlists import load_classlist

            expected_ids = list(load_classlist(cfg.classes).ids)
        worlds = [("", list(self.sources.values()))] + [
            (f" (sanity seed {seed})", [w.train, *([w.val] if w.val else []), *w.evals])
            for seed, w in self.sanity_worlds.items()
        ]
        model_c = cfg.model.num_classes if cfg.model is not None else None
        for suffix, sources in worlds:
            ref.clear()
            for s in sources:
                meta = s.meta()
                arrays = meta.get("arrays", {})
                if "logits" not in arrays:
                    raise InputError(f"{s.where}: store {s.store_path} has no 'logits' array")
                c = int(arrays["logits"]["shape"][0])
                head = meta.get("head") or {}
                head_c = int(head["shape"][0]) if head.get("shape") else None
                classes = meta.get("classes") or {}
                ids = classes.get("ids") if isinstance(classes, Mapping) else None
                where = f"{s.where}{suffix}"
                if head_c is not None and head_c != c:
                    raise InputError(f"{where}: the store's head has {head_c} classes but its "
                                     f"logits {c}; the store is inconsistent")  # fmt: skip
                if model_c is not None and c != model_c:
                    raise InputError(
                        f"{where}: the store has {c} classes (logits) but model.num_classes is "
                        f"{model_c}; the model and the data must share one class list"
                    )
                if expected_ids is not None and c != len(expected_ids):
                    raise InputError(
                        f"{where}: the store has {c} classes but the class list {cfg.classes!r} "
                        f"has {len(expected_ids)}"
                    )
                if expected_ids is not None and ids is not None and list(ids) != expected_ids:
                    first = next(
                        (i for i, (a, b) in enumerate(zip(ids, expected_ids, strict=False))
                         if a != b), min(len(ids), len(expected_ids)),
                    )  # fmt: skip
                    raise InputError(
                        f"{where}: the store's class list differs from {cfg.classes!r} at index "
                        f"{first}; extract with the same class list"
                    )
                if "c" not in ref:
                    ref.update(c=c, ids=ids, name=s.name)
                    continue
                if c != ref["c"]:
                    raise InputError(
                        f"{where}: the store has {c} classes but {ref['name']} has {ref['c']}; "
                        "every set must be scored by the same classifier"
                    )
                if s.role == "ood":
                    continue  # labels of semantic-shift sets are ignored (all -1)
                if ids is not None and ref["ids"] is not None and list(ids) != list(ref["ids"]):
                    raise InputError(
                        f"{where}: the store's class list differs from that of {ref['name']}; "
                        "every set must use the same class list (same order)"
                    )

    # ---------------------------------------------------------------- score
    def _detectors_for(self, world: _World) -> tuple[list[tuple[str, dict[str, Any]]], dict]:
        """The (name, params) list to run in ``world`` and why some of 'all' were left out."""
        from semshift import detectors as D

        left_out: dict[str, str] = {}
        train_meta = world.train.meta()
        arrays = set(train_meta.get("arrays", {}))
        has_head = bool(train_meta.get("head"))
        if self.cfg.detectors != "all":
            return [(d.name, dict(d.params)) for d in self.cfg.detector_specs()], left_out
        eval_arrays = [set(s.meta().get("arrays", {})) for s in world.evals]
        labels_ok = bool((world.train.store.labels[world.train.selection.positions] >= 0).all())
        out: list[tuple[str, dict[str, Any]]] = []
        for name in D.list_detectors():
            cls = D.get_class(name)
            need = set(cls.requires)
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
        for name in MODEL_LEVEL:
            if all(name in a for a in eval_arrays):
                out.append((name, {}))
            else:
                left_out[name] = "not a score column of every evaluated store"
        return out, left_out

    def stage_score(self) -> dict[str, Any]:
        rec, t0 = self._stage("score"), time.perf_counter()
        main = self._world("main", {n: s for n, s in self.sources.items()})
        scored = {"main": self._score_world(main, rec)}
        for world in self.sanity_worlds.values():
            scored[world.tag] = self._score_world(world, rec)
        self._finish(rec, t0)
        return scored

    def _val_desc(self, world: _World) -> tuple[dict[str, Any], Any]:
        if world.val is not None:
            return {"val": world.val.key}, None
        n = len(world.train.selection)
        rng = np.random.default_rng(self.cfg.seed)
        pos = np.sort(rng.permutation(n)[: max(1, n // 2)])
        if world.tag == "main":
            self.notes["val_source"] = (
                f"no data.id_val: klm and temp_scaling use a seeded half of id_train as "
                f"validation inputs ({pos.size} of {n} rows, seed {self.cfg.seed})"
            )
        return {"val": f"half of id_train, seed {self.cfg.seed}"}, pos

    def _score_world(self, world: _World, rec: StageRecord) -> dict[str, Any]:
        """Fit and score every detector in ``world``; returns set infos, scores and errors."""
        from semshift import detectors as D

        dets, left_out = self._detectors_for(world)
        if world.tag == "main" and left_out:
            self.notes["detectors_left_out"] = left_out
        val_desc, val_pos = self._val_desc(world)
        fit_keys: dict[str, str] = {}
        for name, params in dets:
            needs_val = name in MODEL_LEVEL or bool(
                D.get_class(name).fit_requires & {"val_logits", "val_labels"}
            )
            fit_keys[name] = stable_hash(
                {
                    "detector": name,
                    "params": params,
                    "train": None if name in MODEL_LEVEL else world.train.key,
                    **(val_desc if needs_val and name not in MODEL_LEVEL else {}),
                    "semshift": __version__,
                }
            )
        rec.keys[world.tag] = {"detectors": fit_keys, "sets": {s.name: s.key for s in world.evals}}
        scores: dict[str, dict[str, NDArray[np.float64]]] = {s.name: {} for s in world.evals}
        errors: dict[str, dict[str, str]] = {s.name: {} for s in world.evals}
        todo: dict[str, list[_Source]] = {}
        n_failed = 0  # failures an earlier run recorded for the same inputs
        for name, _ in dets:
            d = self.cache.dir("score", fit_keys[name])
            known = None if self.force else self._cached_failure(d / "error.json")
            if known is not None:
                self._fit_failed(world, name, known, errors)
                rec.reused.append(f"{world.tag}/{name}/fit failure")
                n_failed += 1
                continue
            for s in world.evals:
                arr = None if self.force else self.cache.read_array(d / f"{s.key}.npy")
                if arr is not None:
                    scores[s.name][name] = arr
                    rec.reused.append(f"{world.tag}/{name}/{s.name}")
                    continue
                known = None if self.force else self._cached_failure(d / f"{s.key}.error.json")
                if known is not None:
                    self._score_failed(world, s, name, known, errors)
                    rec.reused.append(f"{world.tag}/{name}/{s.name} failure")
                    n_failed += 1
                else:
                    todo.setdefault(name, []).append(s)
        if n_failed:
            self.log.line(
                f"{world.tag}: {n_failed} detector failure(s) as recorded by an earlier run on the "
                "same inputs (--force retries them)"
            )
        infos: dict[str, dict[str, np.ndarray]] = {}
        need_info: list[_Source] = []
        for s in world.evals:
            info = None if self.force else self.cache.read_arrays(self._info_path(s))
            if info is None:
                need_info.append(s)
            else:
                infos[s.name] = info
        # fit
        fitted: dict[str, Any] = {}
        to_fit = [(n, p) for n, p in dets if n in todo and n not in MODEL_LEVEL]
        for s in need_info + [s for ss in todo.values() for s in ss]:
            _ = s.selection  # zero-sample sets fail here, before any fitting
        if to_fit:
            fitted, failures = self._fit_all(world, to_fit, val_pos, errors)
            for n, err in failures.items():
                self._remember_failure(self.cache.dir("score", fit_keys[n]) / "error.json", err)
        # score, one pass over each set that needs anything
        sets_todo = {s.name: s for ss in todo.values() for s in ss}
        for s in need_info:
            sets_todo.setdefault(s.name, s)
        det_timing = self.detector_info
        total = sum(len(s.selection) for s in sets_todo.values())
        with self.log.bar(f"score {world.tag}", total) as advance:
            for s in sets_todo.values():
                names = [n for n, ss in todo.items() if s in ss]
                out = self._score_set(world, s, names, fitted, s in need_info, errors, advance)
                for n, arr in out["scores"].items():
                    self.cache.write_array(self.cache.dir("score", fit_keys[n]) / f"{s.key}.npy",
                                           arr)  # fmt: skip
                    scores[s.name][n] = arr
                    rec.computed.append(f"{world.tag}/{n}/{s.name}")
                for n, err in out["failures"].items():
                    d = self.cache.dir("score", fit_keys[n])
                    self._remember_failure(d / f"{s.key}.error.json", err)
                if out["info"] is not None:
                    self.cache.write_arrays(self._info_path(s), out["info"])
                    infos[s.name] = out["info"]
                for n, sec in out["seconds"].items():
                    entry = det_timing.setdefault(n, {}) if world.tag == "main" else {}
                    entry["score_seconds"] = entry.get("score_seconds", 0.0) + sec
        return {"world": world, "dets": dets, "scores": scores, "errors": errors, "infos": infos,
                "fit_keys": fit_keys}  # fmt: skip

    def _cached_failure(self, path: Path) -> str | None:
        """The message of a failure recorded at ``path`` by an earlier run, if any."""
        rec = self.cache.read_json(path)
        if isinstance(rec, dict) and isinstance(rec.get("error"), str):
            return rec["error"]
        return None

    def _remember_failure(self, path: Path, err: BaseException) -> None:
        """Record a failure that the same inputs would repeat (bad data, not the machine).

        A ``ValueError`` (every :class:`~semshift.errors.SemshiftError`, ``LinAlgError``) or an
        ``ArithmeticError`` (non-finite scores) follows from the inputs, which the key names; a
        ``MemoryError``, an ``OSError`` or a runtime error may not recur, so it is retried.
        """
        if isinstance(err, ValueError | ArithmeticError):
            self.cache.write_json(path, {"error": _one_line(err), "type": type(err).__name__})

    def _info_path(self, s: _Source) -> Path:
        grid = None
        if isinstance(s.cfg, SetConfig) and s.cfg.grid is not None:
            grid = s.cfg.grid.model_dump(mode="json")
            if s.cfg.grid.table is not None:
                grid["table"] = self.cache.file_checksum(s.cfg.grid.table)
        key = stable_hash({"set": s.key, "role": s.role, "grid": grid})
        return self.cache.dir("sets", "") / f"{key}.npz"

    def _fit_all(
        self,
        world: _World,
        to_fit: list[tuple[str, dict[str, Any]]],
        val_pos: NDArray[np.int64] | None,
        errors: dict[str, dict[str, str]],
    ) -> tuple[dict[str, Any], dict[str, BaseException]]:
        """Fitted detectors by name, and the exception of each that failed."""
        from semshift import detectors as D

        need: set[str] = set()
        for n, _ in to_fit:
            need |= set(D.get_class(n).fit_requires)
        train = world.train.selection
        arrays = set(world.train.store.array_names)
        t0 = time.perf_counter()
        inputs: dict[str, Any] = {}
        if "logits" in need or (val_pos is not None and need & {"val_logits", "val_labels"}):
            if "logits" in arrays:
                inputs["logits"] = np.ascontiguousarray(train.arrays("logits")[0])
        if "features" in need and "features" in arrays:
            inputs["features"] = np.ascontiguousarray(train.arrays("features")[0])
        if "head" in need and world.train.store.has_head:
            inputs["head"] = world.train.store.head
        inputs["labels"] = train.labels
        if need & {"val_logits", "val_labels"}:
            if world.val is not None:
                val = world.val.selection
                inputs["val_logits"] = np.ascontiguousarray(val.arrays("logits")[0])
                inputs["val_labels"] = val.labels
            elif "logits" in inputs and val_pos is not None:
                inputs["val_logits"] = inputs["logits"][val_pos]
                inputs["val_labels"] = inputs["labels"][val_pos]
        load_s = time.perf_counter() - t0
        if world.tag == "main":
            self.notes["train_rows"] = len(train)
            self.notes["train_load_seconds"] = round(load_s, 3)
        dets: dict[str, Any] = {}
        failures: dict[str, BaseException] = {}
        for name, params in to_fit:
            try:
                dets[name] = D.get(name, **params)
            except Exception as err:
                failures[name] = err
                self._fit_failed(world, name, _one_line(err), errors)
        with self.log.bar(f"fit {world.tag}", len(to_fit)) as advance:
            advance(len(to_fit) - len(dets))
            done = D.fit_many(dets, inputs, on_done=lambda _: advance(1))
        fitted: dict[str, Any] = done.fitted
        for name in dets:  # in the configured order, whatever order the threads ended in
            if name in done.errors:
                failures[name] = done.errors[name]
                self._fit_failed(world, name, _one_line(done.errors[name]), errors)
        if world.tag == "main":
            for name, sec in done.seconds.items():
                self.detector_info.setdefault(name, {})["fit_seconds"] = round(sec, 4)
        return fitted, failures

    def _fit_failed(
        self, world: _World, name: str, msg: str, errors: dict[str, dict[str, str]]
    ) -> None:
        for s in world.evals:
            errors[s.name][name] = f"fit failed: {msg}"
        self._error(world, f"detector {name}: fit failed: {msg}")

    def _score_failed(
        self, world: _World, s: _Source, name: str, msg: str, errors: dict[str, dict[str, str]]
    ) -> None:
        errors[s.name][name] = f"score failed on {s.name}: {msg}"
        self._error(world, f"detector {name} on set {s.name}: {msg}")

    def _error(self, world: _World, message: str) -> None:
        text = message if world.tag == "main" else f"{world.tag}: {message}"
        if text not in self.errors:
            self.errors.append(text)
            self.log.line(f"[yellow]warning[/yellow]: {text}")

    def _score_set(
        self,
        world: _World,
        s: _Source,
        names: list[str],
        fitted: Mapping[str, Any],
        want_info: bool,
        errors: dict[str, dict[str, str]],
        advance: Callable[[int], None],
    ) -> dict[str, Any]:
        sel = s.selection
        store_arrays = set(s.store.array_names)
        live = [n for n in names if n in fitted or n in MODEL_LEVEL]
        for n in live:
            if n in MODEL_LEVEL and n not in store_arrays:
                errors[s.name][n] = (
                    f"{n} is a model-level detector and store {s.store_path} has no {n!r} "
                    "score column (extract the set from images, or with --score " + n + ")"
                )
                self._error(world, f"detector {n} on set {s.name}: no score column")
        live = [n for n in live if n not in errors[s.name]]
        need: set[str] = set()
        for n in live:
            if n in MODEL_LEVEL:
                need.add(n)
            else:
                need |= set(fitted[n].score_requires)
        if want_info:
            need.add("logits")
        need &= store_arrays
        parts: dict[str, list[np.ndarray]] = {n: [] for n in live}
        seconds: dict[str, float] = {n: 0.0 for n in live}
        preds: list[np.ndarray] = []
        from semshift.detectors import score_many

        failures: dict[str, BaseException] = {}

        def failed(n: str, err: BaseException) -> None:
            failures[n] = err
            self._score_failed(world, s, n, _one_line(err), errors)

        def keep(n: str, part: np.ndarray) -> None:
            if not np.isfinite(part).all():
                bad = int(np.count_nonzero(~np.isfinite(part)))
                failed(n, FloatingPointError(f"{bad} non-finite score(s)"))
            else:
                parts[n].append(part)

        for block in sel.blocks(*sorted(need), rows=BLOCK_ROWS):
            if want_info:
                preds.append(np.asarray(block["logits"]).argmax(axis=1).astype(np.int64))
            for n in live:
                if n in MODEL_LEVEL and n not in errors[s.name]:
                    keep(n, np.asarray(block[n], dtype=np.float64))
            todo = {n: fitted[n] for n in live if n not in MODEL_LEVEL and n not in errors[s.name]}
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
            if n not in errors[s.name] and parts[n]
        }
        info = None
        if want_info:
            info = self._set_info(s, np.concatenate(preds))
        return {"scores": out_scores, "info": info, "seconds": seconds, "failures": failures}

    def _set_info(self, s: _Source, preds: NDArray[np.int64]) -> dict[str, np.ndarray]:
        sel = s.selection
        labels = sel.labels.astype(np.int64)
        if s.role == "ood":
            labels = np.full(labels.shape, -1, np.int64)
        elif (labels < 0).any():
            bad = int(np.argmax(labels < 0))
            raise InputError(
                f"{s.where}: a {s.role.replace('_', ' ')} set needs known labels, but "
                f"{int((labels < 0).sum())} row(s) have label -1 (first: "
                f"{sel.index['path'].iloc[bad]}); use role: ood or select known rows"
            )
        info: dict[str, np.ndarray] = {"labels": labels, "preds": preds}
        if isinstance(s.cfg, SetConfig) and s.cfg.grid is not None:
            from semshift.protocols.sets import level_str

            grid = s.cfg.grid
            idx = _level_table(s, grid.table) if grid.table is not None else sel.index
            for axis, col in (("semantic", grid.semantic), ("covariate", grid.covariate)):
                if col not in idx.columns:
                    where = grid.table if grid.table is not None else f"store {s.store_path}"
                    raise InputError(
                        f"{s.where}.grid.{axis}: {where} has no column {col!r}; columns: "
                        f"{', '.join(map(str, idx.columns))}"
                    )
                values = [level_str(v) for v in idx[col].tolist()]
                info[f"row_{axis}"] = np.asarray(["" if v is None else v for v in values], str)
                info[f"row_{axis}_missing"] = np.asarray([v is None for v in values], bool)
        info["path"] = sel.index["path"].to_numpy(dtype=str)
        return info

    # ---------------------------------------------------------------- evaluate
    def _scored_sets(self, scored: Mapping[str, Any]) -> list[Any]:
        from semshift.protocols.sets import ScoredSet

        world: _World = scored["world"]
        out = []
        for s in world.evals:
            info = scored["infos"][s.name]
            cfg = s.cfg
            row_levels: dict[str, Any] = {}
            for axis in ("semantic", "covariate"):
                if f"row_{axis}" in info:
                    arr = info[f"row_{axis}"].astype(object)
                    arr[info[f"row_{axis}_missing"]] = None
                    row_levels[f"row_{axis}_level"] = arr
            det_order = [n for n, _ in scored["dets"]]
            sc = {
                n: scored["scores"][s.name][n] for n in det_order if n in scored["scores"][s.name]
            }
            er = {
                n: scored["errors"][s.name][n] for n in det_order if n in scored["errors"][s.name]
            }
            for n in det_order:  # neither scores nor error: cannot happen, but never lose it
                if n not in sc and n not in er:
                    er[n] = f"detector {n} produced no scores on set {s.name}"
            out.append(
                ScoredSet(
                    name=s.name,
                    role="id_test" if s.role == "id_test" else s.role,  # type: ignore[arg-type]
                    labels=info["labels"],
                    preds=info["preds"],
                    scores=sc,
                    errors=er,
                    split=getattr(cfg, "split", None),
                    semantic_level=getattr(cfg, "semantic_level", None),
                    covariate_level=getattr(cfg, "covariate_level", None),
                    **row_levels,
                )
            )
        return out

    def _eval_key(self, scored: Mapping[str, Any]) -> str:
        parts = {}
        for tag, sc in scored.items():
            parts[tag] = {
                "fit": sc["fit_keys"],
                "sets": [
                    {
                        "key": s.key,
                        "cfg": s.cfg.model_dump(mode="json", exclude={"store", "images"}),
                        "role": s.role,
                    }
                    for s in sc["world"].evals
                ],
                "errors": sc["errors"],
            }
        p = self.cfg.protocols
        gz = None
        if p.gzsl is not None:
            gz = self.cache.file_checksum(p.gzsl.predictions)
        return stable_hash(
            {
                "scored": parts,
                "protocols": p.model_dump(mode="json", exclude={"sanity": {"stores"}}),
                "gzsl": gz,
                "metrics": self.cfg.metrics,
                "bootstrap": self.cfg.bootstrap.model_dump(),
                "semshift": __version__,
            }
        )

    def stage_evaluate(self, scored: Mapping[str, Any]) -> None:
        rec, t0 = self._stage("evaluate"), time.perf_counter()
        key = self._eval_key(scored)
        rec.keys["results"] = key
        cached = (
            None
            if self.force
            else self.cache.read_frame(self.cache.dir("evaluate", key) / "results.parquet")
        )
        main_sets = self._scored_sets(scored["main"])
        sanity_runs = {
            int(tag[4:]): self._scored_sets(sc) for tag, sc in scored.items() if tag != "main"
        }
        marker = self.cache.root / "scores_written.key"
        if not marker.is_file() or marker.read_text() != key or self.force:
            self._write_scores(main_sets, sanity_runs)
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(key)
        if cached is not None:
            self.results = _object_strings(cached)
            rec.reused.append("results")
        else:
            self.results = self._protocols(main_sets, sanity_runs)
            self.cache.write_frame(self.cache.dir("evaluate", key) / "results.parquet",
                                   self.results)  # fmt: skip
            rec.computed.append("results")
        self._write_results()
        self._finish(rec, t0)

    def _protocols(self, main: list[Any], sanity_runs: Mapping[int, list[Any]]) -> pd.DataFrame:
        from semshift.protocols.sets import Bootstrap
        from semshift.protocols.tidy import error_row, results_frame

        cfg, p = self.cfg, self.cfg.protocols
        boot = Bootstrap(**cfg.bootstrap.model_dump())
        id_test, others = main[0], main[1:]
        frames: list[pd.DataFrame] = []
        calls: list[tuple[str, Callable[[], pd.DataFrame]]] = []
        if p.osr is not None:
            from semshift.protocols.osr import osr

            metrics = p.osr.metrics or cfg.metrics
            calls.append(("osr", lambda: osr(id_test, others, metrics=metrics, bootstrap=boot)))
        if p.newclass_failure is not None:
            from semshift.protocols.newclass import newclass_failure

            calls.append(("newclass", lambda: newclass_failure(id_test, others, bootstrap=boot)))
        if p.graded is not None:
            from semshift.protocols.graded import graded

            g = p.graded
            gm = g.metrics or cfg.metrics
            calls.append(
                (
                    "graded",
                    lambda: graded(
                        id_test, others, metrics=gm, min_count=g.min_count, bootstrap=boot
                    ),
                )
            )
        if p.sanity is not None:
            from semshift.protocols.sanity import sanity

            delta = p.sanity.delta
            runs = dict(sanity_runs)
            calls.append(("sanity", lambda: sanity(runs, delta=delta, bootstrap=boot)))
        if p.generalisation is not None:
            from semshift.protocols.generalisation import generalisation

            calls.append(("generalisation", lambda: generalisation(id_test, others)))
        if p.gzsl is not None:
            gz = p.gzsl

            def _gzsl() -> pd.DataFrame:
                from semshift.protocols.gzsl import gzsl

                labels, preds, seen, unseen = _read_gzsl(gz.predictions)
                return gzsl(labels, preds, seen, unseen)

            calls.append(("gzsl", _gzsl))
        with self.log.bar("evaluate", len(calls)) as advance:
            for name, call in calls:
                t1 = time.perf_counter()
                try:
                    frames.append(call())
                except Exception as err:
                    msg = _one_line(err)
                    frames.append(results_frame([error_row(name, error=msg)]))
                    self.errors.append(f"protocol {name}: {msg}")
                    self.log.line(f"[yellow]warning[/yellow]: protocol {name} failed: {msg}")
                self.notes.setdefault("protocol_seconds", {})[name] = round(
                    time.perf_counter() - t1, 4
                )
                advance(1)
        frames = [f for f in frames if len(f)]
        if not frames:
            return results_frame([])
        return pd.concat(frames, ignore_index=True)

    def _write_scores(self, main: list[Any], sanity_runs: Mapping[int, list[Any]]) -> None:
        self._write_score_files(self.out / "scores", main)
        for seed, sets in sanity_runs.items():
            self._write_score_files(self.out / "sanity" / f"seed{seed}", sets)

    def _write_score_files(self, folder: Path, sets: Sequence[Any]) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for s in sets:
            n = s.n

            def level(row: Any, const: Any, n: int = n) -> pd.Series:
                if row is not None:
                    return pd.Series(row, dtype=object)
                return pd.Series([const] * n, dtype=object)

            frame = pd.DataFrame(
                {
                    "label": s.labels,
                    "pred": s.preds,
                    "role": pd.Series([s.role] * n, dtype=object),
                    "set": pd.Series([s.name] * n, dtype=object),
                    "semantic_level": level(s.row_semantic_level, s.semantic_level),
                    "covariate_level": level(s.row_covariate_level, s.covariate_level),
                }
            )
            for det, arr in s.scores.items():
                frame[f"score:{det}"] = arr
            for det in s.errors:
                frame[f"score:{det}"] = np.full(n, np.nan)
            self.cache.write_frame(folder / f"{s.name}.parquet", frame)

    def _write_results(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.cache.write_frame(self.out / "results.parquet", self.results)
        tmp = self.out / ".results.csv.tmp"
        self.results.to_csv(tmp, index=False)
        tmp.replace(self.out / "results.csv")
        self.write_json()

    # ---------------------------------------------------------------- report
    def stage_report(self) -> None:
        rec, t0 = self._stage("report"), time.perf_counter()
        if self.cfg.report is None:
            self._finish(rec, t0)
            return
        # the runner is the one place a lower layer calls the report layer: a lazy import
        # inside this stage function, so semshift.protocols never imports semshift.report
        # at module level
        try:
            from semshift.report import (  # type: ignore[attr-defined,unused-ignore]
                ReportPaths,
                write_report,
            )

            formats = tuple(self.cfg.report.formats)
            # the report depends on the results (the evaluate key), the formats and the version
            key = stable_hash(
                {
                    "results": self.stages["evaluate"].keys.get("results"),
                    "formats": formats,
                    "name": self.cfg.name,
                    "semshift": __version__,
                }
            )
            rec.keys["report"] = key
            marker = self.cache.root / "report_written.key"
            paths = {f: self.out / f"report.{f}" for f in formats}
            figures = sorted((self.out / "figures").glob("*.png"))
            if (
                not self.force
                and marker.is_file()
                and marker.read_text() == key
                and all(p.is_file() for p in paths.values())
            ):
                self.report_paths = ReportPaths(
                    html=paths.get("html"), md=paths.get("md"), figures=figures
                )
                rec.reused.append("report")
            else:
                marker.unlink(missing_ok=True)
                self.write_json()  # the report reads results.json
                self.report_paths = write_report(self.out, formats=formats)
                marker.write_text(key)
                rec.computed.append("report")
        except Exception as err:
            msg = _one_line(err)
            self.errors.append(f"report: {msg}")
            self.notes["report_error"] = msg
            self.log.line(f"[red]report failed[/red]: {msg} (results are kept in {self.out})")
        self._finish(rec, t0)

    # ---------------------------------------------------------------- provenance
    def provenance(self) -> dict[str, Any]:
        from semshift.metrics.registry import get_metric

        conventions = {}
        for m in self.cfg.metrics:
            kw = dict(get_metric(m).kwargs)
            if "convention" in kw:
                conventions[m] = kw["convention"]
        return {
            "name": self.cfg.name,
            "semshift_version": __version__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "config": self.cfg.to_json(),
            "config_source": self.cfg.source,
            "versions": _versions(),
            "seeds": {
                "run": self.cfg.seed,
                "bootstrap": self.cfg.bootstrap.seed,
                "sanity_models": sorted(self.sanity_worlds),
            },
            "fpr_convention": conventions,
            "stages": {k: v.to_json() for k, v in self.stages.items()},
            "total_seconds": round(time.perf_counter() - self.t_start, 4),
            "detectors": self.detector_info,
            "sets": {
                n: {"role": s.role, "store": str(s.store_path), "key": s.key}
                for n, s in self.sources.items()
            },
            "notes": self.notes,
            "errors": self.errors,
            "report": _jsonable(self.report_paths),
        }

    def write_json(self) -> None:
        self.cache.write_json(self.out / "results.json", self.provenance())


def _jsonable(obj: Any) -> Any:
    if obj is None:
        return None
    if hasattr(obj, "__dataclass_fields__"):
        return {k: str(getattr(obj, k)) for k in obj.__dataclass_fields__}
    return str(obj)


def _object_strings(frame: pd.DataFrame) -> pd.DataFrame:
    """Text columns read back from Parquet as ``object`` holding ``str`` or ``None``."""
    out = frame.copy()
    for col in out.columns:
        if out[col].dtype == object or isinstance(out[col].dtype, pd.StringDtype):
            values = out[col].astype(object)
            out[col] = values.where(out[col].notna(), None).astype(object)
    return out


def _level_table(s: _Source, table: Path) -> pd.DataFrame:
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


def _read_gzsl(path: Path) -> tuple[NDArray[np.int64], NDArray[np.int64], Any, Any]:
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as err:
        raise InputError(f"gzsl predictions {path}: unreadable ({err})") from None
    missing = [c for c in ("label", "pred", "seen") if c not in frame.columns]
    if missing:
        raise InputError(f"gzsl predictions {path}: missing column(s) {', '.join(missing)}")
    seen_col = frame["seen"]
    if seen_col.dtype != bool:
        seen_col = seen_col.astype(str).str.lower().isin(["true", "1", "yes"])
    labels = frame["label"].to_numpy(np.int64)
    seen = np.unique(labels[seen_col.to_numpy(bool)])
    unseen = np.unique(labels[~seen_col.to_numpy(bool)])
    return labels, frame["pred"].to_numpy(np.int64), seen, unseen


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    msg = text[0] if text else ""
    return f"{type(err).__name__}: {msg}" if not isinstance(err, InputError) else msg


def _versions() -> dict[str, str | None]:
    import importlib.metadata as md
    import sys

    out: dict[str, str | None] = {"python": platform.python_version()}
    for pkg in ("numpy", "scipy", "scikit-learn", "pandas", "pyarrow", "pydantic", "torch",
                "torchvision", "faiss-cpu"):  # fmt: skip
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    out["platform"] = sys.platform
    return out


# --------------------------------------------------------------------------- public API
def run(
    config: str | Path | Mapping[str, Any] | RunConfig,
    *,
    progress: bool = True,
    force: bool = False,
    base_dir: str | Path | None = None,
) -> RunResult:
    """Run a benchmark configuration: split, extract, score, evaluate, report.

    Parameters
    ----------
    config : path, mapping or RunConfig
        A YAML file, its contents as a dict (paths relative to ``base_dir``, default the current
        directory) or a validated :class:`~semshift.protocols.config.RunConfig`.
    progress : bool
        Progress bars and one timing line per stage (on stderr).
    force : bool
        Recompute every stage, ignoring (and overwriting) the cache.
    base_dir : path, optional
        Folder relative paths of a dict config are resolved against.

    Returns
    -------
    RunResult
        The tidy table, stage records and errors; the output directory holds
        ``results.parquet``, ``results.csv``, ``results.json``, ``scores/`` and the report.

    Raises
    ------
    InputError
        Bad configuration or data (one line naming the key path or set). Results of stages
        already finished stay in the output directory and its cache.

    Examples
    --------
    A stores-only study (see ``examples/configs/``)::

        result = run("examples/configs/imagenet_ssb.yaml")
        result.results  # the tidy table; semshift.report.headline_table(result.results)
    """
    cfg = load_config(config, base_dir=base_dir)
    runner = _Runner(cfg, progress=progress, force=force)
    cfg.output.mkdir(parents=True, exist_ok=True)
    try:
        runner.stage_split()
        runner.stage_extract()
        scored = runner.stage_score()
        runner.stage_evaluate(scored)
        runner.stage_report()
    except BaseException as err:
        runner.notes["failed"] = _one_line(err)
        try:
            runner.write_json()
        except Exception:
            pass
        raise
    runner.write_json()
    return RunResult(
        output=cfg.output,
        results=runner.results,
        stages=runner.stages,
        errors=list(runner.errors),
        provenance=runner.provenance(),
        report=runner.report_paths,
    )
