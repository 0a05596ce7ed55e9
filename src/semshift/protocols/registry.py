"""The protocol registry: each protocol registers its config model and how it runs, where it lives.

A run configuration's ``protocols:`` section has one key per registered protocol; a protocol
runs when its key is present. The run layer (:mod:`semshift.run`) builds that section from this
registry and calls :attr:`ProtocolSpec.run` with the scored sets; the report
(:mod:`semshift.report`) shows the :class:`ReportSection` objects a protocol declares beside it,
for the rows it says it writes (:attr:`ProtocolSpec.rows`). So adding a protocol touches its own
module (the function, its config model and its :func:`register_protocol` call, with its report
sections) and its test, nothing else. :data:`PROTOCOLS` is a
:class:`~semshift.registry.Registry`; a third-party package registers a protocol through the
``semshift.protocols`` entry-point group (an entry point naming the module that calls
:func:`register_protocol`).

>>> from semshift.protocols.registry import get_protocol, list_protocols
>>> list_protocols()[:3]
['osr', 'newclass_failure', 'graded']
>>> get_protocol("graded").config().min_count
10
>>> PROTOCOLS["newclass_failure"].rows
('newclass', 'failure', 'decomposition')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from semshift.protocols.sets import DEFAULT_BOOTSTRAP, Bootstrap, ScoredSet
from semshift.registry import Registry

__all__ = [
    "PROTOCOLS",
    "ProtocolConfig",
    "ProtocolInputs",
    "ProtocolSpec",
    "RandomModelsConfig",
    "ReportSection",
    "SetDescription",
    "config_paths",
    "get_protocol",
    "list_protocols",
    "register_protocol",
    "report_rows",
    "set_config_path",
]

#: The ranking metrics a protocol uses when its config names none.
DEFAULT_METRICS: tuple[str, ...] = ("auroc", "fpr95", "aupr_in", "aupr_out")


class ProtocolConfig(BaseModel):
    """Base of every protocol's config model: unknown keys are errors.

    ``Path`` fields are resolved against the config file's folder by the run layer, and the
    content of the files they name is part of the evaluation's cache key.
    """

    model_config = ConfigDict(extra="forbid")

    def check_sets(self, sets: Mapping[str, SetDescription]) -> str | None:
        """What makes the configured sets unusable for this protocol (None: nothing).

        Called when a run config is loaded, before any work; the message becomes one
        ``protocols.<name>: <message>`` error line.
        """
        return None


@dataclass(frozen=True)
class SetDescription:
    """What a protocol may check about a configured evaluation set before anything runs."""

    role: str
    has_levels: bool


class RandomModelsConfig(ProtocolConfig):
    """Config of a protocol evaluated on random-init copies of the model.

    ``n_models`` copies, seeds ``seed .. seed + n_models - 1`` of the run; or ``stores``:
    precomputed random-model stores ``{seed: {set: path}}`` whose set names are ``id_train``,
    ``id_test`` and names of ``data.sets``.
    """

    n_models: int = Field(default=3, ge=1)
    stores: dict[int, dict[str, Path]] | None = None


@dataclass(frozen=True)
class ProtocolInputs:
    """What a protocol is evaluated on.

    Attributes
    ----------
    id_test : ScoredSet
        The ID test set.
    others : list of ScoredSet
        Every other evaluation set (OOD and covariate), in configured order.
    id_val : ScoredSet or None
        The ID validation set (scored only for protocols with ``needs_id_val``).
    random_models : mapping of int to list of ScoredSet
        Random-init model seed -> its scored sets (id_test first); empty unless a protocol
        with ``needs_random_models`` is configured.
    metrics : tuple of str
        The run's ranking metrics (``metrics:`` of the config).
    bootstrap : Bootstrap
        Confidence-interval settings shared by every protocol.
    seed : int
        The run's seed.
    features : mapping of str to callable
        Set name (``id_train`` and every scored set) -> a loader of the model's feature rows
        of that set, ``() -> ndarray (n, d)``, row for row as the set's scores; read only by
        the protocols that use features (the distance regression). Empty where the caller has
        no stores (``semshift evaluate`` on score files).
    """

    id_test: ScoredSet
    others: list[ScoredSet]
    id_val: ScoredSet | None = None
    random_models: Mapping[int, list[ScoredSet]] = field(default_factory=dict)
    metrics: tuple[str, ...] = DEFAULT_METRICS
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP
    seed: int = 0
    features: Mapping[str, Callable[[], Any]] = field(default_factory=dict)


C = TypeVar("C", bound=ProtocolConfig)
RunFn = Callable[[ProtocolInputs, Any], pd.DataFrame]
#: ``table(rows) -> DataFrame or None``: a section's table from the protocol's result rows.
TableFn = Callable[[pd.DataFrame], pd.DataFrame | None]
#: ``figures(rows) -> [(name, Figure, alt, caption), ...]``: a section's matplotlib figures.
FiguresFn = Callable[[pd.DataFrame], Sequence[tuple[str, Any, str, str]]]


@dataclass(frozen=True)
class ReportSection:
    """A section of the report, declared by a protocol as data the report renders.

    The protocols layer never imports the report: a section's callables are pure pandas (and
    matplotlib) over the protocol's result rows, and :mod:`semshift.report` turns what they
    return into HTML and Markdown.

    Attributes
    ----------
    key : str
        Its HTML anchor (``section-<key>``); unique in a report.
    title : str
        Its heading.
    table : callable or None
        ``table(rows) -> DataFrame or None``: ``rows`` are the results rows whose ``protocol``
        is one of ``show_for``; the index gives the row labels (its name the header of the
        row-label column), the columns the column labels and the numeric values the cells
        (shown as ``value_kind`` says). None (returned): no table.
    caption : str
        The table's caption.
    value_kind : {"percent", "r", "flag", "score"}
        How the table's values are shown: ``percent`` x100 with one decimal (fractions),
        ``r`` two decimals, ``flag`` yes / no, ``score`` four significant digits.
    best : {"max", "min"} or None
        Which value of each column is bold; None marks nothing.
    figures : callable or None
        ``figures(rows) -> [(name, Figure, alt, caption), ...]``: saved as
        ``figures/<name>.png`` and closed by the report.
    show_for : tuple of str
        The ``protocol`` values of result rows whose presence shows the section; empty: the
        rows of the declaring protocol (:attr:`ProtocolSpec.rows`).
    builder : str or None
        A report-side builder, for a section that needs more than the result rows (the run's
        score files, its images): ``"module:function"``, or the name of a function of
        :mod:`semshift.report.sections`. ``function(context)`` receives the report's
        :class:`semshift.report.sections.SectionContext` and returns the section's blocks
        (None: no section). Used by the protocols shipped with semshift; when it is set
        ``table`` and ``figures`` are not used.
    """

    key: str
    title: str
    table: TableFn | None = None
    caption: str = ""
    value_kind: Literal["percent", "r", "flag", "score"] = "percent"
    best: Literal["max", "min"] | None = None
    figures: FiguresFn | None = None
    show_for: tuple[str, ...] = ()
    builder: str | None = None


@dataclass(frozen=True)
class ProtocolSpec:
    """A registered protocol.

    Attributes
    ----------
    name : str
        The key under ``protocols:`` in a run config.
    config : type of ProtocolConfig
        Its settings (defaults = the paper's).
    run : callable
        ``run(inputs, config) -> DataFrame`` in the tidy results format.
    summary : str
        One line for docs and help.
    needs_id_val : bool
        The run layer scores ``data.id_val`` and passes it as ``inputs.id_val``.
    needs_random_models : bool
        The run layer scores random-init copies of the model (``n_models`` and ``stores`` of
        its :class:`RandomModelsConfig`) and passes them as ``inputs.random_models``.
    metric_keys : tuple of str
        Config fields holding ranking-metric names (checked when the config is loaded).
    order : int
        Protocols run, and their rows appear, in increasing ``order`` (then by name).
    on_stores : bool
        It needs only the scored ID test set and other sets (no split levels, random models or
        zero-shot data), so ``semshift evaluate`` can run it on feature stores alone.
    rows : tuple of str
        The ``protocol`` values of the result rows it writes (default: its name).
    sections : tuple of ReportSection
        What the report shows of its rows.
    report_order : float
        Its sections (and its rows in the report's protocol list) appear in increasing
        ``report_order`` (default: ``order``).
    """

    name: str
    config: type[ProtocolConfig]
    run: RunFn
    summary: str
    needs_id_val: bool = False
    needs_random_models: bool = False
    metric_keys: tuple[str, ...] = ()
    order: int = 100
    on_stores: bool = False
    rows: tuple[str, ...] = ()
    sections: tuple[ReportSection, ...] = ()
    report_order: float = 100.0


def _load_all() -> None:
    """Import every module of this package: each shipped protocol registers itself on import,
    so a new one is found without being named anywhere else."""
    import importlib
    import pkgutil

    import semshift.protocols as package

    for info in pkgutil.iter_modules(package.__path__, f"{package.__name__}."):
        importlib.import_module(info.name)


def _adopt(name: str, obj: Any) -> ProtocolSpec:
    """Register a :class:`ProtocolSpec` an entry point names (a module registers on import)."""
    if not isinstance(obj, ProtocolSpec) or obj.name != name:
        raise TypeError(
            f"entry point {name!r} of semshift.protocols names {type(obj).__name__}, expected "
            f"a module calling register_protocol or a ProtocolSpec named {name!r}"
        )
    return PROTOCOLS.add(name, obj)


#: Every registered protocol by name (a :class:`~semshift.registry.Registry`), listed in the
#: order a run evaluates them.
PROTOCOLS: Registry[ProtocolSpec] = Registry(
    "protocol",
    entry_points="semshift.protocols",
    order=lambda name, spec: spec.order,
    loader=_load_all,
    adopt=_adopt,
)


def register_protocol(
    name: str,
    config: type[C],
    summary: str,
    *,
    needs_id_val: bool = False,
    needs_random_models: bool = False,
    metric_keys: Sequence[str] = (),
    order: int = 100,
    on_stores: bool = False,
    rows: Sequence[str] = (),
    sections: Sequence[ReportSection] = (),
    report_order: float | None = None,
) -> Callable[[Callable[[ProtocolInputs, C], pd.DataFrame]], Callable[..., pd.DataFrame]]:
    """Decorator registering ``run(inputs, config) -> DataFrame`` as the protocol ``name``.

    ``rows`` are the ``protocol`` values of the result rows it writes (default ``(name,)``),
    ``sections`` what the report shows of them (:class:`ReportSection`), ``report_order``
    where they appear in the report (default ``order``); the other arguments are the
    :class:`ProtocolSpec` attributes of the same names.

    Raises
    ------
    DuplicateNameError
        A protocol of this name is registered already.
    TypeError
        ``needs_random_models`` with a config that is not a :class:`RandomModelsConfig`.
    """

    def deco(fn: Callable[[ProtocolInputs, C], pd.DataFrame]) -> Callable[..., pd.DataFrame]:
        if needs_random_models and not issubclass(config, RandomModelsConfig):
            raise TypeError(f"protocol {name!r}: a random-model protocol's config must be a "
                            "RandomModelsConfig")  # fmt: skip
        spec = ProtocolSpec(
            name,
            config,
            fn,
            summary,
            needs_id_val,
            needs_random_models,
            tuple(metric_keys),
            order,
            on_stores,
            tuple(rows) or (name,),
            tuple(sections),
            float(order if report_order is None else report_order),
        )
        PROTOCOLS.add(name, spec)
        return fn

    return deco


def list_protocols() -> list[str]:
    """Registered protocol names, in the order a run evaluates them."""
    return PROTOCOLS.names()


def report_rows() -> list[str]:
    """The ``protocol`` values of result rows the registered protocols write, in the order the
    report shows them (by :attr:`ProtocolSpec.report_order`, then name; each value once)."""
    specs = sorted(PROTOCOLS.values(), key=lambda s: (s.report_order, s.name))
    return list(dict.fromkeys(row for spec in specs for row in spec.rows))


def get_protocol(name: str) -> ProtocolSpec:
    """The protocol registered as ``name``.

    Raises
    ------
    UnknownNameError
        No protocol has this name; the message lists close matches and every known name.
    """
    return PROTOCOLS[name]


def config_paths(config: BaseModel) -> dict[str, Path]:
    """The ``Path`` values of a protocol config (for path resolution and keys), by field name,
    dotted into nested configs and lists (``datasets.0.features``); mappings are not walked.
    :func:`set_config_path` writes one back."""
    out: dict[str, Path] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Path):
            out[prefix] = value
        elif isinstance(value, BaseModel):
            for k, v in value:
                walk(f"{prefix}.{k}", v)
        elif isinstance(value, list | tuple):
            for i, v in enumerate(value):
                walk(f"{prefix}.{i}", v)

    for key, value in config:
        walk(key, value)
    return out


def set_config_path(config: BaseModel, key: str, value: Path) -> None:
    """Set the path :func:`config_paths` listed under ``key`` (a dotted key)."""
    *parents, last = key.split(".")
    obj: Any = config
    for part in parents:
        obj = obj[int(part)] if isinstance(obj, list | tuple) else getattr(obj, part)
    if isinstance(obj, list):
        obj[int(last)] = value
    else:
        setattr(obj, last, value)
