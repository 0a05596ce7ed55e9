"""The protocol registry: each protocol registers its config model and how it runs, where it lives.

A run configuration's ``protocols:`` section has one key per registered protocol; a protocol
runs when its key is present. The run layer (:mod:`semshift.run`) builds that section from this
registry and calls :attr:`ProtocolSpec.run` with the scored sets, so adding a protocol touches
its own module (the function, its config model and its :func:`register_protocol` call) and its
test, nothing else.

>>> from semshift.protocols.registry import get_protocol, list_protocols
>>> list_protocols()[:3]
['osr', 'newclass_failure', 'graded']
>>> get_protocol("graded").config().min_count
10
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from semshift.errors import UnknownNameError
from semshift.protocols.sets import DEFAULT_BOOTSTRAP, Bootstrap, ScoredSet

__all__ = [
    "ProtocolConfig",
    "ProtocolInputs",
    "ProtocolSpec",
    "RandomModelsConfig",
    "SetDescription",
    "config_paths",
    "get_protocol",
    "list_protocols",
    "register_protocol",
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
    """

    id_test: ScoredSet
    others: list[ScoredSet]
    id_val: ScoredSet | None = None
    random_models: Mapping[int, list[ScoredSet]] = field(default_factory=dict)
    metrics: tuple[str, ...] = DEFAULT_METRICS
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP
    seed: int = 0


C = TypeVar("C", bound=ProtocolConfig)
RunFn = Callable[[ProtocolInputs, Any], pd.DataFrame]


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


_REGISTRY: dict[str, ProtocolSpec] = {}


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
) -> Callable[[Callable[[ProtocolInputs, C], pd.DataFrame]], Callable[..., pd.DataFrame]]:
    """Decorator registering ``run(inputs, config) -> DataFrame`` as the protocol ``name``."""

    def deco(fn: Callable[[ProtocolInputs, C], pd.DataFrame]) -> Callable[..., pd.DataFrame]:
        if name in _REGISTRY:
            raise ValueError(f"protocol {name!r} is already registered")
        if needs_random_models and not issubclass(config, RandomModelsConfig):
            raise TypeError(f"protocol {name!r}: a random-model protocol's config must be a "
                            "RandomModelsConfig")  # fmt: skip
        _REGISTRY[name] = ProtocolSpec(
            name,
            config,
            fn,
            summary,
            needs_id_val,
            needs_random_models,
            tuple(metric_keys),
            order,
            on_stores,
        )
        return fn

    return deco


def _load_all() -> None:
    # importing the package registers every protocol shipped with semshift, whichever module
    # a caller imported first
    import semshift.protocols  # noqa: F401


def list_protocols() -> list[str]:
    """Registered protocol names, in the order a run evaluates them."""
    _load_all()
    return sorted(_REGISTRY, key=lambda n: (_REGISTRY[n].order, n))


def get_protocol(name: str) -> ProtocolSpec:
    """The protocol registered as ``name``.

    Raises
    ------
    UnknownNameError
        No protocol has this name; the message lists close matches and every known name.
    """
    _load_all()
    try:
        return _REGISTRY[name]
    except KeyError:
        close = difflib.get_close_matches(str(name), list(_REGISTRY), n=2)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise UnknownNameError(
            f"unknown protocol {name!r}.{hint} Known protocols: {', '.join(list_protocols())}"
        ) from None


def config_paths(config: BaseModel) -> dict[str, Path]:
    """The ``Path`` values of a protocol config, by field name (for path resolution and keys)."""
    return {k: v for k, v in config if isinstance(v, Path)}
