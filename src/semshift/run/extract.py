"""The extract stage: ``images:`` sets through the model into feature stores; every set resolved.

Each (set, model) pair has its own cache entry under ``.cache/extract/<key>/``, keyed by the
images' fingerprint, the model, its weights checksum (or random-init seed), preset, classes,
corruption and model-level detector scores. The random-model copies a protocol asks for (the
sanity check) are extracted in the same pass as the configured model
(:func:`semshift.features.extract.extract_many`): each image is decoded and corrupted once and
given to every model whose entry is missing, in passes of at most
:data:`MODELS_PER_PASS_BYTES` of parameters.

Every store a run reads, given or extracted, is verified in full (:mod:`semshift.run.verify`)
and every store must agree with the model and the other stores on the class list.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from semshift.errors import InputError, did_you_mean
from semshift.features.store import model_identity
from semshift.progress import progress_wanted
from semshift.run.cache import stable_hash
from semshift.run.config import RandomModelsConfig, RunConfig, SetConfig, SourceConfig
from semshift.run.context import Role, RunContext, Source, StageRecord, World
from semshift.run.split import SplitStage
from semshift.run.verify import VerifiedStores

if TYPE_CHECKING:
    from semshift.features.models import ModelAdapter

__all__ = ["MODELS_PER_PASS_BYTES", "ExtractStage", "class_names", "model_level_detectors",
           "run_extract"]  # fmt: skip

#: Parameter bytes of the models one extraction pass holds (the configured model and the
#: random copies share each decoded image; a larger model goes in several passes).
MODELS_PER_PASS_BYTES = 2 << 30


@dataclass
class ExtractStage:
    """The extract stage's result.

    Attributes
    ----------
    sources : dict of str to Source
        Every configured source (id_train, id_val, id_test, the sets), with its store and key.
    main : World
        The sources scored with the configured model.
    random_worlds : dict of int to World
        Random-init seed -> its sources (only when a protocol needs random models).
    skipped_model_level : dict of str to str
        Model-level detectors that could not be computed, and why.
    """

    sources: dict[str, Source]
    main: World
    random_worlds: dict[int, World] = field(default_factory=dict)
    skipped_model_level: dict[str, str] = field(default_factory=dict)


def model_level_detectors() -> list[str]:
    """Names of the detectors computed during extraction (from the detector registry)."""
    from semshift.detectors import list_detectors

    return list_detectors(level="model")


def class_names(cfg: RunConfig) -> list[str] | None:
    """Display names of the configured class list, in index order (None without a list).

    The list's own names where it has them, else the taxonomy's label of each id, else the ids.
    """
    if cfg.classes is None:
        return None
    from semshift.taxonomy.classlists import load_classlist

    cl = load_classlist(cfg.classes)
    if cl.names is not None and all(cl.names):
        return list(cl.names)
    try:
        from semshift.taxonomy.custom import load_taxonomy

        tax = load_taxonomy(cfg.taxonomy)
        return [tax.label(i) if i in tax else i for i in cl.ids]
    except (InputError, OSError, KeyError):
        return list(cl.ids)


class _Extractor:
    """Extraction of the ``images:`` sets for the configured model and its random copies."""

    def __init__(self, ctx: RunContext, verified: VerifiedStores) -> None:
        self.ctx = ctx
        self.cfg = ctx.cfg
        self.verified = verified
        self.model_adapter: ModelAdapter | None = None
        self.random_models: dict[int, ModelAdapter] = {}  # random copies kept between sources
        self.skipped: dict[str, str] = {}
        self.per_pass: int | None = None
        self.opened: dict[str, Any] = {}  # source name -> its ImageSource (listed once)
        self.fitted: dict[tuple[str, int | None], Any] = {}  # (detector, seed) -> fitted one

    def open_images(self, name: str, src: SourceConfig, role: str) -> Any:
        """The ImageSource of an ``images:`` / ``layout:`` set (listed once per run)."""
        if name not in self.opened:
            from semshift.features.data import open_source

            unknown = src.unknown or ("ood" if role == "ood" else "error")
            lay = src.layout
            if lay is not None:
                from semshift.catalog.layouts import open_layout

                self.opened[name] = open_layout(lay.name, lay.root, **lay.params)
            else:
                assert src.images is not None
                self.opened[name] = open_source(src.images, self.cfg.classes, unknown=unknown)
        return self.opened[name]

    def train_images(self) -> Any | None:
        """The id_train images a fitted model-level detector learns from (None for a store)."""
        src = self.cfg.sources().get("id_train")
        if src is None or not is_images(src):
            return None
        return self.open_images("id_train", src, "id_train")

    def fitted_detector(self, det: Any, adapter: ModelAdapter, seed: int | None) -> str | None:
        """Fit ``det`` on the id_train images with ``adapter`` (cached under ``model_fit/``),
        or say why it cannot be fitted."""
        train = self.train_images()
        if train is None and self.cfg.data.id_train is None:
            return "it learns from the ID training images, and no data.id_train is given"
        if train is None:
            return (
                "it learns from the ID training images, and data.id_train is a feature store "
                "(give data.id_train as images)"
            )
        m = self.cfg.model
        assert m is not None
        weights_id = (
            {"random_init_seed": seed} if seed is not None else {"weights": self.weights_id()}
        )
        key = stable_hash({
            "detector": det.describe(), "model": m.name, "num_classes": m.num_classes,
            "kwargs": m.kwargs, **weights_id, "preset": self.preset(),
            "images": train.fingerprint(), "classes": self.cfg.classes,
        })  # fmt: skip
        path = self.ctx.cache.dir("model_fit", key) / "state.npz"
        if path.is_file() and not self.ctx.force:
            det.load_state_file(path)
            return None
        from semshift.features.model_detectors import fit_model_detectors

        self.ctx.log.line(f"fit: {det.name} on id_train ({len(train)} images)")
        fit_model_detectors(
            [det], adapter, train, preset=self.preset(), batch_size=m.batch_size,
            workers=m.workers, device=m.device,
        )  # fmt: skip
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        det.save_state(tmp)
        tmp.replace(path)
        return None

    def model_level_params(self, name: str) -> dict[str, Any]:
        for d in self.cfg.detector_specs():
            if d.name == name:
                return dict(d.params)
        return {}

    def model_level_requested(self) -> list[str]:
        names = model_level_detectors()
        if self.cfg.detectors == "all":
            return names
        return [d.name for d in self.cfg.detector_specs() if d.name in names]

    def load_model(self, random_seed: int | None) -> ModelAdapter:
        from semshift.features.models import load_model

        m = self.cfg.model
        assert m is not None
        n_cls = m.num_classes or _class_count(self.cfg) or 1000
        names = class_names(self.cfg) if m.name.startswith("open_clip/") else None
        try:
            return load_model(
                m.name,
                weights=None if random_seed is not None else m.weights,
                random_init=random_seed is not None,
                seed=random_seed if random_seed is not None else 0,
                num_classes=n_cls,
                classnames=names,
                **m.kwargs,
            )
        except TypeError as err:
            raise InputError(f"{self.cfg.source}: model.kwargs: {err}") from None

    def preset(self) -> str:
        """The configured preprocessing, else what named weights were trained with (torchvision
        transforms, the timm / open_clip pretrained config), else ``imagenet``."""
        m = self.cfg.model
        assert m is not None
        if m.preset is not None:
            return m.preset
        from semshift.features.models import weights_preprocessing

        pre = weights_preprocessing(m.name, m.weights)
        return str(pre["preset"]) if pre is not None else "imagenet"

    def weights_id(self) -> str | None:
        """Content checksum of the weights: the local file, or named weights' cached file
        (torch's cache for torchvision names, the Hugging Face cache for timm / open_clip tags);
        the name itself while nothing is cached (loading then fails naming the path)."""
        m = self.cfg.model
        assert m is not None
        if m.weights is None:
            return None
        from semshift.features.models import (
            named_weights_library,
            resolve_pretrained,
            torchvision_weights,
            weights_cache_file,
        )

        path = Path(m.weights)
        library = None if path.is_file() else named_weights_library(m.name, m.weights)
        if library is None:
            return self.ctx.cache.file_checksum(path)
        if library == "torchvision":
            cached: Path | None = weights_cache_file(torchvision_weights(m.name, m.weights))
        else:
            cached = resolve_pretrained(m.name, m.weights).cached_file()
        if cached is None or not cached.is_file():
            return m.weights
        return self.ctx.cache.file_checksum(cached)

    def models_per_pass(self) -> int:
        """How many models one extraction pass holds: their parameters within the budget."""
        if self.per_pass is None:
            if self.cfg.protocols.random_models() is None:
                self.per_pass = 1
            else:
                if self.model_adapter is None:
                    self.model_adapter = self.load_model(None)
                params = self.model_adapter.module.parameters()
                size = sum(p.numel() * p.element_size() for p in params)
                self.per_pass = max(1, MODELS_PER_PASS_BYTES // max(size, 1))
        return self.per_pass

    def adapters(self, seeds: Sequence[int | None], keep: int) -> list[ModelAdapter]:
        """The models for ``seeds`` (None = the configured weights). Up to ``keep`` random copies
        stay loaded between sources; others are rebuilt, identically, from their seed."""
        if None in seeds and self.model_adapter is None:
            self.model_adapter = self.load_model(None)
        cache = self.random_models
        wanted = {seed for seed in seeds if seed is not None}
        if len(set(cache) | wanted) > keep:
            for seed in set(cache) - wanted:
                del cache[seed]
        for seed in sorted(wanted - set(cache)):
            cache[seed] = self.load_model(seed)
        out: list[ModelAdapter] = []
        for s in seeds:
            adapter = self.model_adapter if s is None else cache[s]
            assert adapter is not None
            out.append(adapter)
        return out

    def extract(self, jobs: Sequence[tuple[Source, int | None]], rec: StageRecord) -> None:
        """Extract one images source for the given models (seed None = the configured weights).

        Each (source, seed) has its own cache entry; those not cached yet are extracted together,
        decoding each image once, in passes of as many models as the parameter budget allows.
        """
        cfg, cache = self.cfg, self.ctx.cache
        m = cfg.model
        first = jobs[0][0]
        assert m is not None and is_images(first.cfg)
        unknown = first.cfg.unknown or ("ood" if first.role == "ood" else "error")
        source = self.open_images(first.name, first.cfg, first.role)
        corr = first.cfg.corruption
        # model-level detectors score the evaluated sets and id_val (an operating point's
        # threshold is set on its scores): no ODIN passes over training images
        scores = [] if first.role == "id_train" else self.model_level_requested()
        preset = self.preset()
        from semshift.detectors import ModelLevelDetector, get_class

        fitting = [
            n
            for n in scores
            if n not in self.skipped
            and issubclass(cls := get_class(n), ModelLevelDetector)
            and cls.fits
        ]
        train = self.train_images() if fitting else None
        desc = {
            "model": m.name,
            "num_classes": m.num_classes,
            "kwargs": m.kwargs,
            "preset": preset,
            "shard_size": m.shard_size,
            "images": source.fingerprint(),
            "classes": cfg.classes,
            "unknown": unknown,
            "corruption": corr.model_dump() if corr is not None else None,
            "corruption_seed": cfg.seed,
            "scores": {
                n: {**self.model_level_params(n),
                    **({"fit_on": train.fingerprint()} if n in fitting and train else {})}
                for n in scores
            },
        }  # fmt: skip
        todo: list[tuple[str, int | None, Path]] = []
        for s, seed in jobs:
            weights_id = (
                {"random_init_seed": seed} if seed is not None else {"weights": self.weights_id()}
            )
            key = stable_hash({**desc, **weights_id})
            label = f"{s.name}" + (f" (random seed {seed})" if seed is not None else "")
            rec.keys[label] = key
            s.store_path = path = cache.dir("extract", key)
            if (path / "meta.json").is_file() and not self.ctx.force:
                rec.reused.append(label)
                continue
            if self.ctx.force and path.exists():
                shutil.rmtree(path)
            todo.append((label, seed, path))
        if not todo:
            return
        from semshift.features.extract import extract_many
        from semshift.features.model_detectors import get_model_detector
        from semshift.features.store import open_store

        corruption = None
        if corr is not None:
            from semshift.features.corruptions import Corruption

            seed_c = corr.seed if corr.seed is not None else cfg.seed
            corruption = Corruption(corr.name, corr.severity, seed=seed_c)
        # a fitted detector's state belongs to one model: one model per pass then
        per_pass = 1 if fitting else self.models_per_pass()
        for start in range(0, len(todo), per_pass):
            part = todo[start : start + per_pass]
            adapters = self.adapters([seed for _, seed, _ in part], keep=max(per_pass, 1))
            dets = []
            for n in scores:
                if n in self.skipped:
                    continue
                det = get_model_detector(n, **self.model_level_params(n))
                # what the detector declares it needs (a feature map, dropout layers, ...)
                reason = det.unavailable(adapters[0])
                if reason is None and det.fits:
                    seed = part[0][1]
                    if (n, seed) in self.fitted:
                        det = self.fitted[n, seed]
                    else:
                        reason = self.fitted_detector(det, adapters[0], seed)
                        if reason is None:
                            self.fitted[n, seed] = det
                if reason is not None:
                    self.skipped[n] = reason
                    continue
                dets.append(det)
            through = ", ".join(
                "weights" if seed is None else f"random seed {seed}" for _, seed, _ in part
            )
            what = f"{first.name} ({len(source)} images; {through})"
            if progress_wanted():  # the set is the bar's label (it goes when done)
                label = f"extract {first.name}"
            else:  # no bar: a line per set in the log
                label = "extract"
                self.ctx.log.line(f"extract: {what}")
            extract_many(
                adapters,
                source,
                [path for _, _, path in part],
                preset=preset,
                batch_size=m.batch_size,
                shard_size=m.shard_size,
                workers=m.workers,
                device=m.device,
                corruption=corruption,
                scores=dets,
                progress=self.ctx.log.enabled,
                fsync=False,
                label=label,
            )
            for _, _, path in part:
                self.verified.remember(open_store(path))  # written just now: nothing to hash
            rec.computed.extend(label for label, _, _ in part)


def is_images(src: SourceConfig) -> bool:
    """Whether a source is extracted by the run (an image folder or list, or a release layout)."""
    return src.images is not None or src.layout is not None


def _class_count(cfg: RunConfig) -> int | None:
    if cfg.classes is None:
        return None
    from semshift.taxonomy.classlists import load_classlist

    return len(load_classlist(cfg.classes).ids)


def _resolve_sources(
    ctx: RunContext, splits: SplitStage, verified: VerifiedStores
) -> dict[str, Source]:
    cfg = ctx.cfg

    def opener(s: Source) -> Any:
        assert s.store_path is not None
        return verified.open(s.store_path, s.where)

    out: dict[str, Source] = {}
    for name, src in cfg.sources().items():
        role: Role
        if name in ("id_train", "id_val", "id_test"):
            role, where = name, f"{cfg.source}: data.{name}"  # type: ignore[assignment]
        else:
            assert isinstance(src, SetConfig)
            role, where = src.role, f"{cfg.source}: data.sets.{name}"
        s = Source(name, role, src, where, opener=opener)
        if src.classes_from is not None:
            cf = src.classes_from
            man = splits.manifests[cf.split]
            bins = {"known": list(man.known), **man.bins}
            if cf.bin not in bins:
                raise InputError(
                    f"{where}.classes_from.bin: split {cf.split!r} has no bin {cf.bin!r}"
                    f"{did_you_mean(cf.bin, bins)}; bins: {', '.join(bins)}"
                )
            s.class_filter = (cf.column, list(bins[cf.bin]))
        s.store_path = src.store
        out[name] = s
    return out


def _random_seeds(
    ctx: RunContext, sources: Mapping[str, Source], rm: RandomModelsConfig | None
) -> list[int]:
    """The random-init seeds whose copies this run extracts (none for precomputed stores)."""
    cfg = ctx.cfg
    if rm is None or rm.stores is not None:
        return []
    name = next(n for n in cfg.protocols.enabled() if cfg.protocols.get(n) is rm)
    usable = {n: s for n, s in sources.items() if is_images(s.cfg)}
    missing = [n for n in ("id_train", "id_test") if n not in usable]
    if missing:
        raise InputError(
            f"{cfg.source}: protocols.{name}: {' and '.join(missing)} come(s) from a feature "
            "store, so no random-init copy of the model can be applied; give image folders "
            f"or precomputed random-model stores in protocols.{name}.stores"
        )
    skipped = sorted(set(cfg.data.sets) - set(usable))
    if skipped:
        ctx.notes["sanity_skipped_sets"] = {
            n: "a feature store, not images: no random-model copy" for n in skipped
        }
    return [cfg.seed + k for k in range(rm.n_models)]


def make_world(
    cfg: RunConfig, tag: str, sources: Mapping[str, Source], *, calibration: bool = False
) -> World:
    """The world of ``sources``: id_train fits, id_test and the sets are evaluated."""
    evals = [sources["id_test"]] + [sources[n] for n in cfg.data.sets if n in sources]
    val = sources.get("id_val")
    return World(tag, sources.get("id_train"), val, evals, calibration=val if calibration else None)


def run_extract(ctx: RunContext, splits: SplitStage) -> ExtractStage:
    """Resolve every source to a store, extracting ``images:`` sets; check class lists."""
    from semshift.protocols.registry import get_protocol

    cfg = ctx.cfg
    verified = VerifiedStores(ctx.cache)
    with ctx.stage("extract") as rec:
        sources = _resolve_sources(ctx, splits, verified)
        rm = cfg.protocols.random_models()
        seeds = _random_seeds(ctx, sources, rm)
        ex = _Extractor(ctx, verified)
        copies: dict[int, dict[str, Source]] = {seed: {} for seed in seeds}
        for s in [s for s in sources.values() if is_images(s.cfg)]:
            # the configured model and every random copy see the images in one pass
            jobs: list[tuple[Source, int | None]] = [(s, None)]
            if s.name != "id_val":
                for seed in seeds:
                    c = s.copy_for(s.where)
                    copies[seed][s.name] = c
                    jobs.append((c, seed))
            ex.extract(jobs, rec)
        for s in sources.values():
            s.compute_key()
        calibration = any(get_protocol(n).needs_id_val for n in cfg.protocols.enabled())
        result = ExtractStage(
            sources, make_world(cfg, "main", sources, calibration=calibration),
            skipped_model_level=ex.skipped,
        )  # fmt: skip
        for seed, made in copies.items():
            for c in made.values():
                c.compute_key()
            result.random_worlds[seed] = make_world(cfg, f"seed{seed}", made)
        if rm is not None and rm.stores is not None:
            name = next(n for n in cfg.protocols.enabled() if cfg.protocols.get(n) is rm)
            for seed, paths in sorted(rm.stores.items()):
                made = {}
                for set_name, path in paths.items():
                    where = f"{cfg.source}: protocols.{name}.stores.{seed}.{set_name}"
                    made[set_name] = sources[set_name].copy_for(where, store_path=path)
                    made[set_name].compute_key()
                result.random_worlds[seed] = make_world(cfg, f"seed{seed}", made)
        if ex.skipped:
            ctx.notes.setdefault("skipped_model_level", {}).update(ex.skipped)
        mixed = _check_classes(cfg, result)
        if mixed:
            ctx.notes["mixed_models"] = mixed
        # every store is verified here, before any detector is fitted (on every run)
        for world in [result.main, *result.random_worlds.values()]:
            for src in world.stores:
                _ = src.store
        _check_labels(result)
        if verified.hashed:
            rec.keys["verified"] = {p: "hashed" for p in verified.hashed}
    return result


def _describe_model(model: Mapping[str, Any]) -> str:
    weights = str(model.get("weights") or "?").rsplit(":", 1)[-1]
    head = str(model.get("head") or "?").rsplit(":", 1)[-1]
    return f"model {model.get('model')!r}, weights {weights[:12]}, head {head[:12]}"


def _check_labels(result: ExtractStage) -> None:
    """Known labels of every set but the OOD ones must be classes of the head (they gave
    accuracy 0 silently): refused, naming the first row."""
    worlds = [("", result.main), *((f" (sanity seed {k})", w)
                                   for k, w in result.random_worlds.items())]  # fmt: skip
    for suffix, world in worlds:
        for src in world.stores:
            if src.role == "ood":
                continue
            c = int(src.meta()["arrays"]["logits"]["shape"][0])
            labels = src.selection.labels
            bad = (labels >= c) | (labels < -1)
            if bad.any():
                first = int(np.argmax(bad))
                path = src.selection.index["path"].iloc[first]
                raise InputError(
                    f"{src.where}{suffix}: {int(bad.sum())} row(s) have a label outside the "
                    f"head's {c} classes (first: label {int(labels[first])} of {path}); the "
                    "store's classes must be the model's"
                )


def _check_classes(cfg: RunConfig, result: ExtractStage) -> dict[str, str]:
    """Every store must agree with the model and with each other on the class list, and come
    from the same classifier (model, weights, head) unless ``data.mixed_models``.

    Returns the sets from another classifier (allowed by ``data.mixed_models``) and which.
    """
    expected_ids: list[str] | None = None
    if cfg.classes is not None:
        from semshift.taxonomy.classlists import load_classlist

        expected_ids = list(load_classlist(cfg.classes).ids)
    worlds = [("", list(result.sources.values()))] + [
        (f" (sanity seed {seed})", w.stores) for seed, w in result.random_worlds.items()
    ]
    model_c = cfg.model.num_classes if cfg.model is not None else None
    mixed: dict[str, str] = {}
    for suffix, sources in worlds:
        ref: dict[str, Any] = {}
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
            model = model_identity(meta)
            if "c" not in ref:
                ref.update(c=c, ids=ids, name=s.name, model=model)
                continue
            if c != ref["c"]:
                raise InputError(
                    f"{where}: the store has {c} classes but {ref['name']} has {ref['c']}; "
                    "every set must be scored by the same classifier"
                )
            if model != ref["model"]:
                differ = [k for k in model if model[k] != ref["model"][k]]
                if not cfg.data.mixed_models:
                    raise InputError(
                        f"{where}: the store comes from another model than {ref['name']} "
                        f"({_describe_model(model)} vs {_describe_model(ref['model'])}; "
                        f"{', '.join(differ)} differ); extract every set with one model, or set "
                        "data.mixed_models: true for a cross-model study"
                    )
                mixed[f"{s.name}{suffix}"] = (
                    f"{_describe_model(model)}, not {ref['name']}'s {_describe_model(ref['model'])}"
                )
            if s.role == "ood":
                continue  # labels of semantic-shift sets are ignored (all -1)
            if ids is not None and ref["ids"] is not None and list(ids) != list(ref["ids"]):
                raise InputError(
                    f"{where}: the store's class list differs from that of {ref['name']}; "
                    "every set must use the same class list (same order)"
                )
    return mixed
