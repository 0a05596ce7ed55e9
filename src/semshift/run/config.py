"""The run configuration: pydantic models, YAML loading, path resolution and early checks.

The ``protocols:`` section is built from the protocol registry
(:mod:`semshift.protocols.registry`): one key per registered protocol, validated by the config
model declared beside it. A split's ``builder`` and ``params`` are checked against the split
builder registry (:mod:`semshift.splits.registry`) and detector hyperparameters against the
constraints each detector declares, all when the config is loaded, before any work.

A configuration (YAML file or dict, see ``docs/design/run.md``) names the data (feature stores
or image folders), the model (when images must be extracted), the detectors, the protocols and
the output directory. :func:`load_config` validates it and returns a :class:`RunConfig` whose
paths are absolute, so nothing later depends on the working directory.

Every mistake becomes one :class:`~semshift.errors.InputError` line naming the file, the key
path and what was expected, e.g. ``config.yaml: data.sets.easy.store: expected a path, got 3``.

>>> cfg = load_config({"output": "out", "data": {"id_train": {"store": "."},
...                    "id_test": {"store": "."}}, "detectors": ["msp"]}, base_dir=".",
...                   check_files=False)
>>> cfg.detector_specs()[0].name, cfg.bootstrap.n_resamples
('msp', 1000)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator

from semshift.errors import InputError, did_you_mean
from semshift.protocols.registry import (
    DEFAULT_METRICS,
    ProtocolConfig,
    RandomModelsConfig,
    SetDescription,
    config_paths,
    get_protocol,
    list_protocols,
    set_config_path,
)
from semshift.textio import read_yaml

__all__ = [
    "BootstrapConfig",
    "CorruptionConfig",
    "DataConfig",
    "DetectorSpec",
    "GridColumns",
    "LayoutConfig",
    "ModelConfig",
    "ProtocolsConfig",
    "ReportConfig",
    "RunConfig",
    "SearchConfig",
    "SearchSpec",
    "SetConfig",
    "SourceConfig",
    "SplitConfig",
    "fit_free_detectors",
    "load_config",
    "run_config_model",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False, arbitrary_types_allowed=False)


class SplitConfig(_Strict):
    """A named class split: loaded from a ``split.json`` or built by a split builder."""

    manifest: Path | None = None
    builder: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)


class ModelConfig(_Strict):
    """The classifier used to extract ``images:`` sets and by the random-model sanity check."""

    name: str
    weights: str | None = None  # a local file, or named torchvision weights (IMAGENET1K_V2)
    num_classes: int | None = Field(default=None, ge=1)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    preset: str | None = None  # default: what named weights were trained with, else imagenet
    batch_size: int = Field(default=64, ge=1)
    shard_size: int = Field(default=10_000, ge=1)
    workers: int = Field(default=0, ge=0)
    device: str = "auto"


class CorruptionConfig(_Strict):
    """An ImageNet-C corruption applied to an ``images:`` set after the crop."""

    name: str
    severity: int = Field(ge=1, le=5)
    seed: int | None = None


class ClassSelect(_Strict):
    """Keep the rows whose class column is in one bin of a configured split."""

    split: str
    bin: str
    column: str


class LayoutConfig(_Strict):
    """Images of a public release read by a dataset layout (:mod:`semshift.catalog.layouts`):
    ``name`` (``cub200``, ``imagenet1k``, ...), the release's ``root`` folder and the reader's
    parameters (``split``, ...)."""

    name: str
    root: Path
    params: dict[str, Any] = Field(default_factory=dict)


class SourceConfig(_Strict):
    """Where one set's samples come from: an existing feature store, an image folder/list, or a
    public release read by its layout."""

    store: Path | None = None
    images: Path | None = None
    layout: LayoutConfig | None = None
    select: dict[str, Any] = Field(default_factory=dict)
    classes_from: ClassSelect | None = None
    corruption: CorruptionConfig | None = None
    unknown: Literal["error", "skip", "ood"] | None = None

    @field_validator("select")
    @classmethod
    def _select_values(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key, v in value.items():
            items = v if isinstance(v, list) else [v]
            for item in items:
                if not isinstance(item, str | int | float | bool):
                    raise ValueError(
                        f"select.{key}: expected a value or a list of values, got {item!r}"
                    )
        return value


class GridColumns(_Strict):
    """Columns holding each row's semantic and covariate level (graded grid).

    The columns are group columns of the store, or columns of ``table``: a CSV such as the
    ``levels.csv`` of ``semshift splits graded``, matched to the set's rows by a ``path``
    column when it has one, else by its ``row`` column (position in the set, in store order).
    """

    semantic: str
    covariate: str
    table: Path | None = None


class SetConfig(SourceConfig):
    """An evaluation set: its source, its role and its shift labels."""

    role: Literal["ood", "covariate"]
    split: str | None = None
    semantic_level: str | int | None = None
    covariate_level: str | int | None = None
    grid: GridColumns | None = None


class DataConfig(_Strict):
    """ID training (fits the detectors), optional ID validation, ID test and the other sets.

    ``id_train`` may be left out when nothing is fitted: every detector scores without fitting
    (``msp``, ``energy``, ``mls``, ``odin`` ...; ``detectors: all`` then means every such
    detector), and no search and no random-model protocol is configured.
    """

    id_train: SourceConfig | None = None
    id_val: SourceConfig | None = None
    id_test: SourceConfig
    sets: dict[str, SetConfig] = Field(default_factory=dict)
    #: allow stores of different models or heads (cross-model transfer studies): without it a
    #: store whose model, weights or head differ from id_train's is an error; with it the
    #: results record which sets came from another model
    mixed_models: bool = False


class DetectorSpec(_Strict):
    """A detector by registry name with hyperparameter overrides."""

    name: str
    params: dict[str, Any] = Field(default_factory=dict)


class _ProtocolsBase(_Strict):
    """A protocol runs when its key is present (keys: the registered protocols)."""

    def enabled(self) -> list[str]:
        """The configured protocols, in the order they run."""
        return [name for name in list_protocols() if getattr(self, name, None) is not None]

    def get(self, name: str) -> ProtocolConfig | None:
        """The config of protocol ``name``, or None when it is not configured."""
        value = getattr(self, name, None)
        return value if isinstance(value, ProtocolConfig) else None

    def random_models(self) -> RandomModelsConfig | None:
        """The config of the configured protocol that needs random-init models, if any."""
        for name in self.enabled():
            value = self.get(name)
            if get_protocol(name).needs_random_models and isinstance(value, RandomModelsConfig):
                return value
        return None


def _registered() -> tuple[tuple[str, type[ProtocolConfig]], ...]:
    """The registered protocols and their config models, in run order."""
    return tuple((name, get_protocol(name).config) for name in list_protocols())


def _protocols_model(protocols: Sequence[tuple[str, type[ProtocolConfig]]]) -> type[Any]:
    return create_model(
        "ProtocolsConfig",
        __base__=_ProtocolsBase,
        **{name: (config | None, None) for name, config in protocols},  # type: ignore[call-overload]
    )


#: The ``protocols:`` section: one optional key per registered protocol, validated by the
#: config model the protocol declares (built when this module is imported; a protocol
#: registered later is validated by the model :func:`run_config_model` builds).
if TYPE_CHECKING:
    ProtocolsConfig = _ProtocolsBase
else:
    ProtocolsConfig = _protocols_model(_registered())


class SearchSpec(_Strict):
    """A detector to search, with candidates replacing its declared ``search_space``."""

    name: str
    #: hyperparameter -> candidates, in the order tried; None: the declared space
    params: dict[str, list[Any]] | None = None


class SearchConfig(_Strict):
    """The ``search:`` section: hyperparameters chosen on validation data, never on test data
    (docs/methods.md#hyperparameter-search).

    ``val_ood`` names a set of ``data.sets`` (role ``ood``) that is used for the search only
    and never evaluated; its classes must be unrelated to every test OOD class (same id, and
    in the taxonomy the same node, an ancestor or a descendant, are errors). The ID side is
    ``data.id_val``, which the search requires.
    """

    val_ood: str
    #: ``all``: every detector of the run with a search space (model-level ones have none);
    #: or a list of names / {name, params: {hyperparameter: [candidates]}}
    detectors: Literal["all"] | list[str | SearchSpec] = "all"
    #: a ranking metric of (scores, is_ood), maximised (minimised when lower is better)
    objective: str = "auroc"
    max_combinations: int = Field(default=256, ge=1)

    def specs(self) -> list[SearchSpec]:
        """The explicit detector list (empty for ``all``, which the search stage resolves)."""
        if self.detectors == "all":
            return []
        return [d if isinstance(d, SearchSpec) else SearchSpec(name=d) for d in self.detectors]


class BootstrapConfig(_Strict):
    n_resamples: int = Field(default=1000, ge=0)
    level: float = Field(default=0.95, gt=0.0, lt=1.0)
    seed: int = 0


class ReportConfig(_Strict):
    formats: list[Literal["html", "md"]] = Field(default_factory=lambda: ["html", "md"])  # type: ignore[arg-type]


class RunConfig(_Strict):
    """A validated run configuration (see ``docs/design/run.md``); paths are absolute."""

    name: str = "run"
    output: Path = Path("runs/run")
    seed: int = 0
    taxonomy: str = "wordnet"
    classes: str | None = None
    splits: dict[str, SplitConfig] = Field(default_factory=dict)
    model: ModelConfig | None = None
    data: DataConfig
    detectors: Literal["all"] | list[str | DetectorSpec] = "all"
    protocols: ProtocolsConfig = Field(default_factory=ProtocolsConfig)
    metrics: list[str] = Field(default_factory=lambda: list(DEFAULT_METRICS))
    #: ``openood``: FPR@95 and AUPR-In/Out exactly as OpenOOD v1.5's evaluator computes them
    #: (ranking metrics fpr95 / aupr_in / aupr_out become their ``*_openood`` variants)
    conventions: Literal["exact", "openood"] = "exact"
    bootstrap: BootstrapConfig = Field(default_factory=BootstrapConfig)
    report: ReportConfig | None = None
    search: SearchConfig | None = None

    #: where the config came from (for messages); not part of the YAML
    source: str = Field(default="config", exclude=True)
    #: the folder relative paths were resolved against (for split builder params)
    base_dir: Path = Field(default=Path("."), exclude=True)

    def detector_specs(self) -> list[DetectorSpec]:
        """The explicit detector list (empty for ``all``, which the runner resolves)."""
        if self.detectors == "all":
            return []
        return [d if isinstance(d, DetectorSpec) else DetectorSpec(name=d) for d in self.detectors]

    def sources(self) -> dict[str, SourceConfig]:
        """Every source by name: ``id_train``, ``id_val`` (if any), ``id_test`` and the sets."""
        out: dict[str, SourceConfig] = {}
        if self.data.id_train is not None:
            out["id_train"] = self.data.id_train
        if self.data.id_val is not None:
            out["id_val"] = self.data.id_val
        out["id_test"] = self.data.id_test
        out.update(self.data.sets)
        return out

    def to_json(self) -> dict[str, Any]:
        """The configuration as plain JSON values (for ``results.json``)."""
        return json.loads(self.model_dump_json(exclude={"source", "base_dir"}))


# --------------------------------------------------------------------------- errors
_TYPE_WORDS = {
    "path_type": "a path",
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "dict_type": "a mapping",
    "list_type": "a list",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


def _loc(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "<top level>"


def _clean_loc(loc: Sequence[int | str]) -> list[int | str]:
    """Drop pydantic's union-branch markers (``str``, ``DetectorSpec``, ``literal[...]``)."""
    branch = {"str", "int", "float", "bool", "none", "path", "function-after[_select_values()]"}
    out: list[int | str] = []
    for part in loc:
        if isinstance(part, str) and (
            part in branch or part.startswith(("literal[", "list[", "dict[")) or part[:1].isupper()
        ):
            continue
        out.append(part)
    return out


def _describe(err: Mapping[str, Any], root: type[BaseModel] | None = None) -> tuple[str, str]:
    loc = _clean_loc(err.get("loc", ()))
    kind = str(err.get("type", ""))
    value = err.get("input")
    got = repr(value)
    if len(got) > 60:
        got = got[:57] + "..."
    if kind == "extra_forbidden":
        parent = _parent_model(loc[:-1], root)
        known = ", ".join(parent.model_fields) if parent is not None else ""
        hint = did_you_mean(str(loc[-1]), parent.model_fields) if parent is not None else ""
        return _loc(loc), f"unknown key{hint}" + (f"; known keys: {known}" if known else "")
    if kind == "missing":
        return _loc(loc), "required key is missing"
    if kind in _TYPE_WORDS:
        return _loc(loc), f"expected {_TYPE_WORDS[kind]}, got {got}"
    if kind.startswith("literal_error"):
        expected = err.get("ctx", {}).get("expected", "")
        return _loc(loc), f"expected one of {expected}, got {got}"
    msg = str(err.get("msg", kind))
    msg = msg.removeprefix("Value error, ")
    msg = f"{msg[:1].lower()}{msg[1:]}"
    return _loc(loc), msg if "got " in msg else f"{msg}, got {got}"


def _parent_model(
    loc: Sequence[int | str], root: type[BaseModel] | None = None
) -> type[BaseModel] | None:
    # walk field names, skipping mapping keys (set names, seeds) that are not fields
    cls: type[BaseModel] | None = root or RunConfig
    import typing

    for part in loc:
        if cls is None:
            return None
        field = cls.model_fields.get(str(part))
        if field is None:
            continue  # a mapping key or list index: stay on the value model found below
        stack: list[Any] = [field.annotation]
        nxt: type[BaseModel] | None = None
        while stack:
            t = stack.pop(0)
            if isinstance(t, type) and issubclass(t, BaseModel):
                nxt = t
                break
            stack.extend(typing.get_args(t))
        cls = nxt
    return cls


#: What the items of a list-valued key are, for "expected a list of ... or 'all'".
_LIST_NOUNS = {"detectors": "detector names"}


def _validation_error(
    err: ValidationError, where: str, root: type[BaseModel] | None = None
) -> InputError:
    errors = err.errors()
    # prefer the most specific error (longest location) for union fields
    best = max(errors, key=lambda e: len(_clean_loc(e.get("loc", ()))))
    if any(e.get("type") == "extra_forbidden" for e in errors):
        best = next(e for e in errors if e.get("type") == "extra_forbidden")
    path, message = _describe(best, root)
    if best.get("type") == "literal_error":  # `detectors: msp`: a list or one of the words
        loc = _clean_loc(best.get("loc", ()))
        if any(
            e.get("type") == "list_type" and _clean_loc(e.get("loc", ())) == loc for e in errors
        ):
            noun = _LIST_NOUNS.get(str(loc[-1]) if loc else "", "values")
            expected = best.get("ctx", {}).get("expected", "")
            got = repr(best.get("input"))
            message = f"expected a list of {noun} or {expected}, got {got[:57]}"
    # several errors under one top-level key are usually the branches of one union field
    tops = {str(e.get("loc", ("",))[0]) for e in errors if e.get("loc")}
    more = f" (and {len(errors) - 1} more problem(s))" if len(tops) > 1 else ""
    return InputError(f"{where}: {path}: {message}{more}")


# --------------------------------------------------------------------------- loading
def _read_yaml(path: Path) -> Any:
    if not path.exists():
        raise InputError(f"config file {path} does not exist")
    data = read_yaml(path, "config file")
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of keys at the top level")
    return data


def _abs(base: Path, p: Path | None) -> Path | None:
    if p is None:
        return None
    p = p.expanduser()
    return p if p.is_absolute() else (base / p).resolve()


def _resolve_paths(cfg: RunConfig, base: Path) -> None:
    cfg.output = _abs(base, cfg.output) or base
    for sp in cfg.splits.values():
        sp.manifest = _abs(base, sp.manifest)
    if cfg.model is not None:
        w = cfg.model.weights
        if w is not None and not (_is_weights_name(w, cfg.model.name) and not (base / w).is_file()):
            cfg.model.weights = str(_abs(base, Path(w)))
    for src in cfg.sources().values():
        src.store = _abs(base, src.store)
        src.images = _abs(base, src.images)
        if src.layout is not None:
            src.layout.root = _abs(base, src.layout.root) or src.layout.root
            for key, value in src.layout.params.items():  # files the reader is given
                if isinstance(value, str) and ("/" in value or "." in value):
                    candidate = _abs(base, Path(value))
                    if candidate is not None and candidate.exists():
                        src.layout.params[key] = str(candidate)
        if isinstance(src, SetConfig) and src.grid is not None:
            src.grid.table = _abs(base, src.grid.table)
    protocols = cfg.protocols
    for name in protocols.enabled():
        pc = protocols.get(name)
        assert pc is not None
        for field_name, value in config_paths(pc).items():
            set_config_path(pc, field_name, _abs(base, value) or value)
        if isinstance(pc, RandomModelsConfig) and pc.stores is not None:
            pc.stores = {
                seed: {set_name: _abs(base, path) or path for set_name, path in sets.items()}
                for seed, sets in pc.stores.items()
            }
    for key in ("classes", "taxonomy"):
        value = getattr(cfg, key)
        if value is not None and (("/" in value) or value.endswith((".txt", ".csv", ".json"))):
            setattr(cfg, key, str(_abs(base, Path(value))))


def _check(cfg: RunConfig, where: str, check_files: bool) -> None:
    """Checks pydantic cannot express: exactly-one-of, cross references, names, files."""
    from semshift.metrics.registry import get_metric

    def fail(path: str, message: str) -> None:
        raise InputError(f"{where}: {path}: {message}")

    def exists(path: str, p: Path | None, what: str) -> None:
        if check_files and p is not None and not p.exists():
            fail(path, f"{what} {p} does not exist")

    for name, sp in cfg.splits.items():
        if (sp.manifest is None) == (sp.builder is None):
            fail(f"splits.{name}", "give exactly one of 'manifest' and 'builder'")
        exists(f"splits.{name}.manifest", sp.manifest, "split manifest")
        if sp.builder is not None:
            from semshift.splits.registry import list_builders, validate_params

            if sp.builder not in list_builders():
                hint = did_you_mean(sp.builder, list_builders())
                fail(f"splits.{name}.builder", f"unknown split builder {sp.builder!r}{hint}; "
                     f"known: {', '.join(list_builders())}")  # fmt: skip
            validate_params(sp.builder, sp.params, where=f"{where}: splits.{name}")
    need_model = False
    for name, src in cfg.sources().items():
        path = f"data.{name}" if name in ("id_train", "id_val", "id_test") else f"data.sets.{name}"
        given = [k for k in ("store", "images", "layout") if getattr(src, k) is not None]
        if len(given) != 1:
            fail(path, "give exactly one of 'store' (a feature store), 'images' (a folder or "
                 "list) and 'layout' (a public release)")  # fmt: skip
        if src.store is not None:
            exists(f"{path}.store", src.store, "feature store")
            if src.corruption is not None:
                fail(f"{path}.corruption", "a corruption applies to 'images', not to a 'store'")
        elif src.images is not None:
            need_model = True
            exists(f"{path}.images", src.images, "image folder or list")
        else:
            assert src.layout is not None
            need_model = True
            _check_layout(f"{path}.layout", src.layout, fail, exists)
        if src.classes_from is not None and src.classes_from.split not in cfg.splits:
            known = ", ".join(cfg.splits) or "none configured"
            fail(f"{path}.classes_from.split", f"no split named {src.classes_from.split!r} "
                 f"(splits: {known})")  # fmt: skip
        if isinstance(src, SetConfig) and src.grid is not None:
            exists(f"{path}.grid.table", src.grid.table, "level table")
        if isinstance(src, SetConfig) and src.grid is not None and src.role != "ood":
            if src.semantic_level is not None or src.covariate_level is not None:
                fail(f"{path}.grid", "a grid set takes its levels from columns, not constants")
    random = cfg.protocols.random_models()
    random_name = next(
        (n for n in cfg.protocols.enabled() if cfg.protocols.get(n) is random), "sanity"
    )
    if need_model or (random is not None and random.stores is None):
        if cfg.model is None:
            why = (
                "an 'images' set" if need_model else f"the {random_name} protocol without 'stores'"
            )
            fail("model", f"required by {why}; add a model: section")
    if cfg.model is not None and cfg.model.name.startswith("open_clip/") and cfg.classes is None:
        fail("classes", f"model {cfg.model.name!r} builds its zero-shot head from class names; "
             "give the class list (classes: a list name or a file)")  # fmt: skip
    if cfg.model is not None and cfg.model.weights is not None:
        w = cfg.model.weights
        if _is_weights_name(w, cfg.model.name) and not Path(w).is_file():
            from semshift.errors import SemshiftError
            from semshift.features.models import check_weights_name

            try:  # resolved by the library's own configs, nothing loaded
                check_weights_name(cfg.model.name, w)
            except SemshiftError as err:
                fail("model.weights", str(err))
        else:
            exists("model.weights", Path(w), "weights file")
    if cfg.model is not None and cfg.model.weights is None and need_model:
        fail("model.weights", "required to extract 'images' sets (semshift never downloads)")
    from semshift.detectors import check_params, list_detectors

    detector_names = list_detectors()
    for i, spec in enumerate(cfg.detector_specs()):
        if spec.name not in detector_names:
            hint = did_you_mean(spec.name, detector_names, n=3)
            fail(f"detectors[{i}]", f"unknown detector {spec.name!r}{hint}; known: "
                 f"{', '.join(detector_names)}")  # fmt: skip
        try:
            check_params(spec.name, spec.params)  # declared constraints, before any work
        except InputError as err:
            fail(f"detectors[{i}].params", str(err))
    names = [s.name for s in cfg.detector_specs()]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        fail("detectors", f"detector(s) {', '.join(dup)} listed twice")
    if cfg.data.id_train is None:
        _check_no_training(cfg, fail)
    if cfg.search is not None:
        _check_search(cfg, cfg.search, fail)
    metric_lists = [("metrics", cfg.metrics)]
    for name in cfg.protocols.enabled():
        pc = cfg.protocols.get(name)
        for key in get_protocol(name).metric_keys:
            value = getattr(pc, key, None)
            if value is not None:
                metric_lists.append((f"protocols.{name}.{key}", value))
    for path, metrics in metric_lists:
        for i, m in enumerate(metrics):
            try:
                spec_m = get_metric(m)
            except KeyError as err:
                fail(f"{path}[{i}]", str(err))
                raise AssertionError from err
            if tuple(spec_m.inputs) != ("scores", "is_ood"):
                fail(f"{path}[{i}]", f"{m!r} is not a ranking metric of (scores, is_ood)")
    sets = {
        name: SetDescription(
            role=src.role,
            has_levels=src.grid is not None
            or src.semantic_level is not None
            or src.covariate_level is not None,
        )
        for name, src in cfg.data.sets.items()
        if cfg.search is None or name != cfg.search.val_ood  # searched on, never evaluated
    }
    for name in cfg.protocols.enabled():
        pc = cfg.protocols.get(name)
        assert pc is not None
        for key, value in config_paths(pc).items():
            exists(f"protocols.{name}.{key}", value, "file")
        problem = pc.check_sets(sets)
        if problem is not None:
            fail(f"protocols.{name}", problem)
        if isinstance(pc, RandomModelsConfig) and pc.stores is not None:
            allowed = {"id_train", "id_test", *cfg.data.sets}
            for seed, paths in pc.stores.items():
                for set_name, p in paths.items():
                    at = f"protocols.{name}.stores.{seed}.{set_name}"
                    if set_name not in allowed:
                        fail(
                            at,
                            f"no set named {set_name!r}{did_you_mean(set_name, sorted(allowed))}",
                        )
                    exists(at, p, "feature store")
                for need in ("id_train", "id_test"):
                    if need not in paths:
                        fail(f"protocols.{name}.stores.{seed}", f"needs a store for {need!r}")


def _check_no_training(cfg: RunConfig, fail: Any) -> None:
    """Without ``data.id_train`` nothing may need fitting: the detectors, the search, the
    random-model protocols."""
    from semshift import detectors as D

    for i, spec in enumerate(cfg.detector_specs()):
        cls = D.get_class(spec.name)
        if cls.fit_requires or getattr(cls, "fits", False):
            fail(
                f"detectors[{i}]",
                f"detector {spec.name} is fitted on the ID training data; give data.id_train "
                f"(or use a detector that needs no fitting: {', '.join(fit_free_detectors())})",
            )
    if cfg.search is not None:
        fail("search", "fits every grid point on the ID training data; give data.id_train")
    random = cfg.protocols.random_models()
    if random is not None:
        name = next(n for n in cfg.protocols.enabled() if cfg.protocols.get(n) is random)
        fail(f"protocols.{name}", "fits the detectors on each random model's ID training "
             "data; give data.id_train")  # fmt: skip


def fit_free_detectors() -> list[str]:
    """The registered detectors that score without fitting (a run without ``data.id_train``
    runs these)."""
    from semshift import detectors as D

    return [
        n for n in D.list_detectors()
        if not D.get_class(n).fit_requires and not getattr(D.get_class(n), "fits", False)
    ]  # fmt: skip


def _check_search(cfg: RunConfig, search: SearchConfig, fail: Any) -> None:
    """The ``search:`` section against the sets, the detectors and their search spaces."""
    from semshift.detectors import check_search_space, list_detectors
    from semshift.errors import SemshiftError
    from semshift.protocols.search import check_objective, grid

    sets = cfg.data.sets
    if search.val_ood not in sets:
        hint = did_you_mean(search.val_ood, list(sets))
        names = ", ".join(sets) or "none configured"
        fail("search.val_ood", f"no set named {search.val_ood!r}{hint} (data.sets: {names})")
    role = sets[search.val_ood].role
    if role != "ood":
        fail(
            "search.val_ood",
            f"set {search.val_ood!r} has role {role!r}; the validation OOD set needs role: ood",
        )
    if cfg.data.id_val is None:
        fail(
            "search",
            "needs data.id_val: ID validation rows the detectors are not fitted on (scoring "
            "id_train's own rows would favour overfitting values such as knn k=1)",
        )
    try:
        check_objective(search.objective)
    except SemshiftError as err:
        fail("search.objective", str(err))
    run_specs = {s.name: s for s in cfg.detector_specs()}
    known = list_detectors()
    seen: set[str] = set()
    for i, spec in enumerate(search.specs()):
        at = f"search.detectors[{i}]"
        if spec.name not in known:
            fail(at, f"unknown detector {spec.name!r}{did_you_mean(spec.name, known)}")
        if spec.name in seen:
            fail(at, f"detector {spec.name} is listed twice")
        seen.add(spec.name)
        if run_specs and spec.name not in run_specs:
            fail(
                at,
                f"{spec.name} is not among the run's detectors ({', '.join(run_specs)}); add "
                "it to them (detectors: or --detector) or leave it out of the search",
            )
        fixed = run_specs[spec.name].params if spec.name in run_specs else {}
        try:
            n = len(grid(check_search_space(spec.name, spec.params, fixed=fixed)))
        except SemshiftError as err:
            fail(at, str(err))
            return
        if n > search.max_combinations:
            fail(
                at,
                f"{spec.name}: {n} combinations exceed search.max_combinations = "
                f"{search.max_combinations}; give fewer candidates or raise the limit",
            )


def _check_layout(path: str, layout: LayoutConfig, fail: Any, exists: Any) -> None:
    from semshift.catalog.layouts import LAYOUTS, check_sample, layout_parameters, list_layouts

    if layout.name not in LAYOUTS:
        hint = did_you_mean(layout.name, list_layouts())
        fail(f"{path}.name", f"unknown layout {layout.name!r}{hint}; known: "
             f"{', '.join(list_layouts())}")  # fmt: skip
        return
    exists(f"{path}.root", layout.root, "dataset root")
    accepted = layout_parameters(layout.name)
    unknown = sorted(set(layout.params) - set(accepted))
    if unknown:
        fail(f"{path}.params", f"layout {layout.name!r} takes no parameter "
             f"{', '.join(unknown)}; accepted: {', '.join(accepted)}")  # fmt: skip
    try:
        check_sample(layout.params.get("sample"), "sample")
    except InputError as err:
        fail(f"{path}.params.sample", str(err))


#: The ranking metrics OpenOOD v1.5's conventions replace (AUROC is the same under both).
OPENOOD_METRICS = {
    "fpr95": "fpr95_openood",
    "aupr_in": "aupr_in_openood",
    "aupr_out": "aupr_out_openood",
    "aupr_in_trapezoid": "aupr_in_openood",
    "aupr_out_trapezoid": "aupr_out_openood",
}


def _openood_metrics(cfg: RunConfig) -> None:
    """Every ranking-metric list of the config in OpenOOD v1.5's conventions."""

    def swap(names: list[str]) -> list[str]:
        return list(dict.fromkeys(OPENOOD_METRICS.get(n, n) for n in names))

    cfg.metrics = swap(cfg.metrics)
    for name in cfg.protocols.enabled():
        pc = cfg.protocols.get(name)
        for key in get_protocol(name).metric_keys:
            value = getattr(pc, key, None)
            if value is not None:
                setattr(pc, key, swap(list(value)))


def _is_weights_name(spec: str, model: str) -> bool:
    """Whether ``spec`` is spelled as named weights of ``model`` (a torchvision enum name, a timm
    or open_clip pretrained tag for those namespaces) rather than a file path."""
    from semshift.features.models import named_weights_library

    return named_weights_library(model, spec) is not None


_BUILT_WITH = _registered()
_MODELS: dict[tuple[tuple[str, type[ProtocolConfig]], ...], type[RunConfig]] = {}


def run_config_model() -> type[RunConfig]:
    """The :class:`RunConfig` model for the protocols registered now.

    :class:`RunConfig` itself when they are those registered when this module was imported;
    else a subclass whose ``protocols:`` section has one key per protocol registered now (a
    plugin's, a test's toy), built once per set of protocols.
    """
    protocols = _registered()
    if protocols == _BUILT_WITH:
        return RunConfig
    model = _MODELS.get(protocols)
    if model is None:
        section = _protocols_model(protocols)
        model = create_model(
            "RunConfig",
            __base__=RunConfig,
            protocols=(section, Field(default_factory=section)),
        )
        _MODELS[protocols] = model
    return model


def load_config(
    config: str | Path | Mapping[str, Any] | RunConfig,
    *,
    base_dir: str | Path | None = None,
    check_files: bool = True,
    source: str = "config",
    overrides: Mapping[str, Any] | None = None,
) -> RunConfig:
    """Validate a run configuration from a YAML file, a dict or a :class:`RunConfig`.

    Parameters
    ----------
    config : path, mapping or RunConfig
        A YAML file (read with ``yaml.safe_load``) or its contents as a dict.
    base_dir : path, optional
        Folder relative paths are resolved against: the YAML file's folder by default, the
        current directory for a dict.
    check_files : bool
        Check that every named file and store exists (default).
    source : str
        What messages call a mapping config (default ``"config"``); a file is named by its path.
    overrides : mapping, optional
        Top-level keys replacing the file's or mapping's own (e.g. ``{"conventions":
        "openood"}`` from a command-line option), before validation.

    Returns
    -------
    RunConfig
        With absolute paths.

    Raises
    ------
    InputError
        One line: the file, the key path and what was expected or missing.
    """
    if isinstance(config, RunConfig):
        cfg = config.model_copy(deep=True)
        base = Path(base_dir) if base_dir is not None else Path.cwd()
        where = cfg.source
    else:
        if isinstance(config, str | Path):
            path = Path(config)
            data = _read_yaml(path)
            base = Path(base_dir) if base_dir is not None else path.resolve().parent
            where = str(path)
        elif isinstance(config, Mapping):
            data = dict(config)
            base = Path(base_dir) if base_dir is not None else Path.cwd()
            where = source
        else:
            raise InputError(f"config: expected a path or a mapping, got {type(config).__name__}")
        data.update(overrides or {})
        model = run_config_model()
        try:
            cfg = model.model_validate(data)
        except ValidationError as err:
            raise _validation_error(err, where, model) from None
        cfg.source = where
    cfg.base_dir = base.resolve()
    _resolve_paths(cfg, cfg.base_dir)
    if cfg.conventions == "openood":
        _openood_metrics(cfg)
    _check(cfg, where, check_files)
    return cfg
