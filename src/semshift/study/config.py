"""The study file: models x datasets x seeds, each cell an ordinary run configuration.

A study names its models (registry names with weights, or a named zoo), its datasets (a
benchmark of the catalog with its roots, or a run configuration's ``data`` block), the
detectors, protocols and seeds, and the run settings every cell shares::

    name: toy-study
    output: studies/toy                 # cells/<dataset>/<model>/seed<k>/, results, report
    models:
      - zoo: imagenet-ood-13            # every member, weights from the local caches
      - {name: resnet18, weights: IMAGENET1K_V1, label: r18-v1}
    datasets:
      inet-ood:
        benchmark: imagenet-ood
        roots: {imagenet: /data/imagenet, imagenet_ood: /data/imagenet-ood}
      mine:                             # a run configuration's data block (and its splits)
        data: {id_train: {store: ...}, id_test: {store: ...}, sets: {...}}
        protocols: {osr: {}}
    detectors: [msp, mls, energy]
    protocols: {osr: {}}                # default of the datasets that give none
    seeds: [0]
    run: {bootstrap: {n_resamples: 200}}  # any other run-config key, for every cell
    jobs: 2                             # cells at once on this machine (or "auto")
    executor: local                     # or ray (ray_address: ... for a cluster)

:func:`load_study` validates the file and every cell's run configuration before anything runs:
an unknown key, a wrong type, an unknown zoo, model or dataset name, weights missing from the
cache, or two cells that would write the same folder is one line naming the cell and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from semshift.errors import InputError, SemshiftError, close_matches
from semshift.study.entries import DatasetEntry, ModelEntry, ZooEntry, _Strict
from semshift.study.published import BENCHMARK_SETTINGS, published_setting
from semshift.study.zoos import get_zoo, missing_weights

__all__ = [
    "Cell",
    "DatasetEntry",
    "ModelEntry",
    "Study",
    "StudyConfig",
    "ZooEntry",
    "load_study",
]

#: a label or dataset name becomes a folder name: letters, digits, ``.``, ``_``, ``-``, ``+``
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


class StudyConfig(_Strict):
    """The study file (see the module docstring)."""

    name: str = "study"
    output: str = "studies/study"
    models: list[ModelEntry | ZooEntry] = Field(min_length=1)
    datasets: dict[str, DatasetEntry] = Field(min_length=1)
    detectors: Literal["all"] | list[str | dict[str, Any]] = "all"
    protocols: dict[str, Any] | None = None
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    run: dict[str, Any] = Field(default_factory=dict)
    jobs: int | Literal["auto"] = 1
    executor: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    plugins: list[str] = Field(default_factory=list)

    @field_validator("jobs")
    @classmethod
    def _jobs(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 1:
            raise ValueError(f"must be at least 1 or 'auto', got {value}")
        return value

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, value: list[int]) -> list[int]:
        if len(set(value)) != len(value):
            raise ValueError(f"seeds repeat: {value}")
        return value


#: run-config keys a study sets itself (``run:`` may not)
_OWN_KEYS = ("output", "model", "data", "seed", "detectors", "protocols", "splits")


@dataclass(frozen=True)
class Cell:
    """One (model, dataset, seed) of a study: an ordinary run.

    Attributes
    ----------
    model, dataset : str
        The model's label and the dataset's name.
    seed : int
    output : Path
        ``<study output>/cells/<dataset>/<model>/seed<seed>``.
    config : dict
        The run configuration (:func:`semshift.run.load_config` validates it).
    """

    model: str
    dataset: str
    seed: int
    output: Path
    config: dict[str, Any] = field(compare=False, hash=False)

    @property
    def name(self) -> str:
        """``model / dataset / seed k``: how messages name the cell."""
        return f"{self.model} / {self.dataset} / seed {self.seed}"


@dataclass(frozen=True)
class Study:
    """A validated study: its settings, models and cells (model-major order)."""

    config: StudyConfig
    source: str
    base_dir: Path
    output: Path
    models: tuple[ModelEntry, ...]
    cells: tuple[Cell, ...]
    #: study dataset -> (paper, published dataset) whose numbers it reproduces
    published: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def datasets(self) -> list[str]:
        return list(self.config.datasets)


def _where(loc: Sequence[Any]) -> str:
    out = ""
    for part in loc:
        if part in ("ModelEntry", "ZooEntry", "str", "dict[str,any]"):
            continue
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _validation(err: ValidationError, source: str) -> InputError:
    """The first problem of a study file as one line: file, key path, what to do."""
    errors = err.errors()
    # a models entry failing as both a model and a zoo: report the form it was meant as
    first = errors[0]
    for e in errors:
        if e["loc"][:1] == ("models",) and len(e["loc"]) > 2:
            meant = "ZooEntry" if e["loc"][2] == "ZooEntry" else "ModelEntry"
            if meant == "ZooEntry" and "zoo" in (e.get("input") or {}):
                first = e
                break
            if meant == "ModelEntry" and "zoo" not in (e.get("input") or {}):
                first = e
                break
    loc = [p for p in first["loc"]]
    kind = first["type"]
    if kind == "extra_forbidden":
        key = str(loc[-1])
        fields: Any = {
            "models": {*ModelEntry.model_fields, *ZooEntry.model_fields},
            "datasets": DatasetEntry.model_fields,
        }.get(str(loc[0]), StudyConfig.model_fields)
        if len(loc) == 1:
            fields = StudyConfig.model_fields
        close = close_matches(key, list(fields), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return InputError(f"{source}: {_where(loc)}: unknown key{hint}")
    if kind == "missing":
        return InputError(f"{source}: {_where(loc)}: required")
    return InputError(f"{source}: {_where(loc)}: {first['msg']}")


def _read(path: Path) -> Any:
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(f"{path}: cannot read the study file ({err.strerror or err})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f", line {mark.line + 1}" if mark is not None else ""
        raise InputError(f"{path}{line}: not valid YAML") from None


def _check_model_name(name: str, where: str) -> None:
    """A registry name (``timm/...`` and ``open_clip/...`` are checked when built)."""
    from semshift.features.models import MODELS

    if name in MODELS or name.startswith(("timm/", "open_clip/")):
        return
    close = close_matches(name, MODELS.names(), n=3)
    hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
    raise InputError(f"{where}: unknown model {name!r}{hint}; semshift list models lists them")


def _models(cfg: StudyConfig, source: str) -> list[ModelEntry]:
    out: list[ModelEntry] = []
    for k, entry in enumerate(cfg.models):
        if isinstance(entry, ModelEntry):
            _check_model_name(entry.name, f"{source}: models[{k}].name")
            out.append(entry)
            continue
        try:
            zoo = get_zoo(entry.zoo)
        except KeyError as err:
            raise InputError(f"{source}: models[{k}].zoo: {err.args[0]}") from None
        members = {m.key: m for m in zoo.members}
        for label in [*(entry.only or []), *entry.weights]:
            if label not in members:
                close = close_matches(label, list(members), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise InputError(
                    f"{source}: models[{k}]: {label!r} is not a member of zoo {zoo.name!r}"
                    f"{hint}; members: {', '.join(members)}"
                )
        keep = entry.only if entry.only is not None else list(members)
        for label in keep:
            m = members[label]
            update = {"label": m.key}
            if label in entry.weights:
                update["weights"] = entry.weights[label]
            for key in ("batch_size", "device"):
                if getattr(entry, key) is not None:
                    update[key] = getattr(entry, key)
            out.append(m.model_copy(update=update))
    seen: dict[str, int] = {}
    for m in out:
        if not _SAFE.match(m.key):
            raise InputError(
                f"{source}: model label {m.key!r} cannot name a folder; give it a 'label:' of "
                "letters, digits, '.', '_', '-' or '+'"
            )
        if m.key in seen:
            raise InputError(
                f"{source}: two models are labelled {m.key!r} (their cells would write the "
                "same folders); give one a different 'label:'"
            )
        seen[m.key] = 1
    return out


def _cell_config(
    cfg: StudyConfig, model: ModelEntry, name: str, ds: DatasetEntry, seed: int, out: Path
) -> dict[str, Any]:
    """The run configuration of one cell (a plain dict, validated by the caller)."""
    block = model.model_block()
    if ds.num_classes is not None:
        block.setdefault("num_classes", ds.num_classes)
    detectors: Any = cfg.detectors if cfg.detectors == "all" else list(cfg.detectors)
    if ds.benchmark is not None:
        from semshift.catalog.benchmarks import benchmark_config

        run_cfg = benchmark_config(
            ds.benchmark,
            roots=ds.roots,
            model=block,
            out=out,
            conventions=cfg.run.get("conventions", "exact"),
            **ds.options,
        )
        if cfg.detectors != "all":
            run_cfg["detectors"] = detectors
        if ds.protocols is not None:
            run_cfg["protocols"] = dict(ds.protocols)
    else:
        run_cfg = {"output": str(out), "model": block, "data": dict(ds.data or {})}
        run_cfg["detectors"] = detectors
        run_cfg["protocols"] = dict(
            ds.protocols if ds.protocols is not None else (cfg.protocols or {"osr": {}})
        )
        if ds.splits is not None:
            run_cfg["splits"] = dict(ds.splits)
    for key in ("taxonomy", "classes"):
        if getattr(ds, key) is not None:
            run_cfg[key] = getattr(ds, key)
    run_cfg.update({k: v for k, v in cfg.run.items() if k != "name"})
    run_cfg["name"] = f"{cfg.name}: {model.key} on {name}, seed {seed}"
    run_cfg["seed"] = int(seed)
    return run_cfg


def load_study(
    study: str | Path | Mapping[str, Any],
    *,
    base_dir: str | Path | None = None,
    check_files: bool = True,
    check_weights: bool = True,
) -> Study:
    """Validate a study file (or its contents) and every cell's run configuration.

    Parameters
    ----------
    study : path or mapping
        A YAML file, or its contents.
    base_dir : path, optional
        Folder relative paths resolve against: the file's folder, else the current directory.
    check_files : bool
        Check every file and store the cells name (as ``semshift run`` does).
    check_weights : bool
        Check that every model's named weights are in their library's cache (semshift never
        downloads), before any cell runs.

    Returns
    -------
    Study

    Raises
    ------
    InputError
        One line naming the file, the key or cell, and the fix.
    """
    from semshift.run import load_config

    if isinstance(study, Mapping):
        data, source = dict(study), "study"
        base = Path(base_dir) if base_dir is not None else Path.cwd()
    else:
        path = Path(study)
        data, source = _read(path), str(path)
        base = Path(base_dir) if base_dir is not None else path.resolve().parent
    if not isinstance(data, Mapping):
        raise InputError(f"{source}: expected a mapping of study keys, got {type(data).__name__}")
    try:
        cfg = StudyConfig.model_validate(data)
    except ValidationError as err:
        raise _validation(err, source) from None
    for key in _OWN_KEYS:
        if key in cfg.run:
            own = {"model": "models", "data": "datasets", "splits": "datasets"}.get(key, key)
            raise InputError(
                f"{source}: run.{key}: set by the study itself; use the study's {own!r} key"
            )
    for name, ds in cfg.datasets.items():
        if not _SAFE.match(name):
            raise InputError(f"{source}: datasets.{name}: a dataset name must be a folder name")
        if (ds.benchmark is None) == (ds.data is None):
            raise InputError(f"{source}: datasets.{name}: give either 'benchmark' or 'data'")
        if ds.benchmark is None and (ds.roots or ds.options):
            raise InputError(
                f"{source}: datasets.{name}: 'roots' and 'options' apply to a benchmark only"
            )
    published = {}
    for name, ds in cfg.datasets.items():
        if ds.published is not None:
            try:
                published[name] = published_setting(ds.published)
            except InputError as err:
                raise InputError(f"{source}: datasets.{name}.published: {err}") from None
        elif ds.benchmark in BENCHMARK_SETTINGS:
            published[name] = BENCHMARK_SETTINGS[ds.benchmark]
    base = base.resolve()
    output = Path(cfg.output).expanduser()
    output = (output if output.is_absolute() else base / output).resolve()
    _import_plugins(cfg.plugins, source)
    models = _models(cfg, source)
    if check_weights:
        for m in models:
            why = missing_weights(m.name, m.weights, base)
            if why is not None:
                raise InputError(f"{source}: model {m.key}: {why}")
    cells = []
    for m in models:
        for name, ds in cfg.datasets.items():
            for seed in cfg.seeds:
                out = output / "cells" / name / m.key / f"seed{seed}"
                try:
                    run_cfg = _cell_config(cfg, m, name, ds, seed, out)
                except SemshiftError as err:  # a benchmark's name, roots or options
                    raise InputError(f"{source}: datasets.{name}: {err}") from None
                cell = Cell(m.key, name, int(seed), out, run_cfg)
                try:
                    load_config(run_cfg, base_dir=base, check_files=check_files,
                                source=f"{source}: cell {cell.name}")  # fmt: skip
                except InputError as err:
                    raise InputError(str(err).splitlines()[0]) from None
                cells.append(cell)
    return Study(cfg, source, base, output, tuple(models), tuple(cells), published)


def _import_plugins(modules: Sequence[str], source: str) -> None:
    """Import the modules a study names under ``plugins:`` (they register models, detectors
    ...); every worker process imports them too."""
    import importlib

    for k, name in enumerate(modules):
        try:
            importlib.import_module(name)
        except ImportError as err:
            raise InputError(f"{source}: plugins[{k}]: cannot import {name!r} ({err})") from None
