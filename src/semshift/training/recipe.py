"""The training recipe (optimiser, schedule, augmentation) and the full training configuration.

:class:`Recipe` holds the knobs every method shares, with the defaults of the SSB recipe
(Vaze et al., ICLR 2022, fine-grained datasets: SGD with momentum, cosine annealing with two
warm restarts, RandAugment N = 2, M = 30, batch 32, learning rate 0.001, 600 epochs).
:data:`RECIPES` names whole recipes: ``ssb`` (those defaults) and ``sood``, the SOOD-ImageNet
paper's (Bacchin et al., 2024: AdamW, learning rate 1.25e-3, weight decay 5e-3, batch 48, 25
epochs, one cosine cycle; docs/methods.md#training-recipes).
:class:`TrainConfig` adds the model, the data, the method and the seed; its JSON form
(:meth:`TrainConfig.to_dict`) is what a checkpoint records and what a resumed run must match.
:func:`check_config_file` checks the same keys read from a YAML file (``semshift train
--config``).

Departures from the reference code, written here because they change numbers:

- No warm-up epochs before the first cosine cycle (the reference scheduler
  ``cosine_warm_restarts_warmup`` warms up linearly for 10 epochs).
- Training crops are the extraction preset's resize followed by a random crop of the preset's
  crop size with ``crop_padding`` zero pixels, then a horizontal flip (``flip``) and
  RandAugment; the reference code resizes to the final size first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from numbers import Integral, Real
from pathlib import Path
from typing import Any, ClassVar

from semshift.errors import InputError, SemshiftError, unknown_name
from semshift.params import Boolean, Constraint, Interval

__all__ = [
    "CONFIG_FILE_KEYS",
    "OPTIMIZERS",
    "RECIPES",
    "Recipe",
    "TrainConfig",
    "check_config_file",
]

#: The optimisers a recipe can name.
OPTIMIZERS = ("sgd", "adamw")


def _check(owner: str, constraints: dict[str, list[Constraint]], values: dict[str, Any]) -> None:
    for key, accepted in constraints.items():
        value = values[key]
        if not any(c.is_satisfied_by(value) for c in accepted):
            words = " or ".join(str(c) for c in accepted)
            raise InputError(f"{owner}: {key} must be {words}, got {value!r}")


class _Text(Constraint):
    """A non-empty string."""

    def is_satisfied_by(self, value: object) -> bool:
        return isinstance(value, str) and bool(value.strip())

    def __str__(self) -> str:
        return "a non-empty string"

    def examples_outside(self) -> list[Any]:
        return ["", 3, ["a"]]


class _OneOf(Constraint):
    """One of a few strings."""

    def __init__(self, options: tuple[str, ...]) -> None:
        self.options = options

    def is_satisfied_by(self, value: object) -> bool:
        return isinstance(value, str) and value in self.options

    def __str__(self) -> str:
        return "one of " + ", ".join(repr(o) for o in self.options)

    def examples_outside(self) -> list[Any]:
        return ["", "adam", 1]


class _Mapping(Constraint):
    """A mapping with string keys (``KEY: VALUE`` lines in YAML)."""

    def is_satisfied_by(self, value: object) -> bool:
        return isinstance(value, Mapping) and all(isinstance(k, str) for k in value)

    def __str__(self) -> str:
        return "a mapping of names to values"

    def examples_outside(self) -> list[Any]:
        return [[1], "a=1", {1: 2}]


class _TextList(Constraint):
    """A list of non-empty strings."""

    def is_satisfied_by(self, value: object) -> bool:
        return isinstance(value, list) and all(_Text().is_satisfied_by(v) for v in value)

    def __str__(self) -> str:
        return "a list of strings"

    def examples_outside(self) -> list[Any]:
        return ["a.json", [1], None]


@dataclass(frozen=True)
class Recipe:
    """Optimiser, schedule and augmentation shared by every method.

    Parameters
    ----------
    epochs : int
        Passes over the training images (600).
    batch_size : int
        Images per step, over all processes (32).
    lr : float
        Initial learning rate (0.001).
    momentum : float
        SGD momentum (0.9); AdamW ignores it (its betas are torch's, 0.9 and 0.999).
    weight_decay : float
        Weight decay (1e-4): L2 added to the gradient by SGD, decoupled (``lr * wd * w``
        subtracted from the weights) by AdamW.
    num_restarts : int
        Warm restarts of the cosine schedule: it runs ``num_restarts + 1`` cycles of
        ``max(1, epochs // (num_restarts + 1))`` epochs, from ``lr`` down to ``lr * 1e-3``, and
        is stepped once per epoch (2).
    randaugment_n, randaugment_m : int
        RandAugment's number of operations N and magnitude M in [0, 30] (torchvision's
        ``RandAugment(N, M, num_magnitude_bins=31)``); N = 0 turns it off (2, 30).
    flip : bool
        Random horizontal flip (True).
    crop_padding : int
        Zero padding of the random crop, in pixels (4).
    optimizer : {"sgd", "adamw"}
        SGD with momentum (the SSB recipe) or AdamW (SOOD-ImageNet's). A recipe with SGD
        leaves the key out of its JSON (:meth:`to_dict`), so the runs and checkpoints of
        semshift versions without it compare and resume as before.
    """

    epochs: int = 600
    batch_size: int = 32
    lr: float = 0.001
    momentum: float = 0.9
    weight_decay: float = 1e-4
    num_restarts: int = 2
    randaugment_n: int = 2
    randaugment_m: int = 30
    flip: bool = True
    crop_padding: int = 4
    optimizer: str = "sgd"

    _constraints: ClassVar[dict[str, list[Constraint]]] = {
        "epochs": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "lr": [Interval(Real, 0, None, closed="neither")],
        "momentum": [Interval(Real, 0, 1, closed="left")],
        "weight_decay": [Interval(Real, 0, None, closed="left")],
        "num_restarts": [Interval(Integral, 0, None, closed="left")],
        "randaugment_n": [Interval(Integral, 0, None, closed="left")],
        "randaugment_m": [Interval(Integral, 0, 30, closed="both")],
        "flip": [Boolean()],
        "crop_padding": [Interval(Integral, 0, None, closed="left")],
        "optimizer": [_OneOf(OPTIMIZERS)],
    }

    def __post_init__(self) -> None:
        _check("recipe", self._constraints, asdict(self))

    @property
    def cycle_epochs(self) -> int:
        """Epochs of the first cosine cycle (``T_0``)."""
        return max(1, self.epochs // (self.num_restarts + 1))

    def to_dict(self) -> dict[str, Any]:
        """The recipe as plain JSON values; ``optimizer`` only when it is not SGD."""
        out = asdict(self)
        if out["optimizer"] == "sgd":
            del out["optimizer"]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Recipe:
        """A recipe from a mapping; unknown keys are an error naming the known ones.

        ``name`` picks a recipe of :data:`RECIPES` whose values the other keys override.

        >>> r = Recipe.from_dict({"name": "sood", "epochs": 2})
        >>> r.optimizer, r.lr, r.weight_decay, r.batch_size, r.epochs, r.num_restarts
        ('adamw', 0.00125, 0.005, 48, 2, 0)
        """
        known = [f.name for f in fields(cls)]
        values = dict(data)
        name = values.pop("name", None)
        base: dict[str, Any] = {}
        if name is not None:
            if not isinstance(name, str) or name not in RECIPES:
                raise unknown_name("recipe", str(name), list(RECIPES))
            base = dict(RECIPES[name])
        for key in values:
            if key not in known:
                raise unknown_name("recipe option", key, [*known, "name"])
        return cls(**{**base, **values})


#: Named recipes (``semshift train --recipe NAME``, ``recipe: {name: NAME}`` in a config file):
#: the knobs each sets; the others keep :class:`Recipe`'s defaults. ``ssb``: Vaze et al.'s
#: (the defaults); ``sood``: SOOD-ImageNet's (Bacchin et al., 2024, Sec. 4: cross-entropy,
#: AdamW, base learning rate 1.25e-3, cosine annealing, weight decay 5e-3, batch 48, 25 epochs).
RECIPES: dict[str, dict[str, Any]] = {
    "ssb": {},
    "sood": {
        "optimizer": "adamw",
        "lr": 1.25e-3,
        "weight_decay": 5e-3,
        "batch_size": 48,
        "epochs": 25,
        "num_restarts": 0,
    },
}


@dataclass(frozen=True)
class TrainConfig:
    """Everything that determines a training run's weights.

    Parameters
    ----------
    model : str
        Model registry name (:func:`semshift.features.models.list_models`).
    data : str
        Training images: a class-folder tree or a file list.
    classes : str or None
        Class list (shipped name or file); default: the sorted class folders.
    method : str
        Training method (:func:`semshift.training.methods.list_methods`).
    method_params : dict
        Hyperparameters of the method (defaults filled in by :meth:`resolved`).
    recipe : Recipe
    seed : int
        Seeds the initialisation, the batch order, the augmentation and every other draw.
    num_classes : int or None
        Head size; default the class list's length.
    preset : str or None
        Resize and crop (as extraction's ``resize<R>-crop<C>``); default: the model's input
        size (``resize<S>-crop<S>``), ``imagenet`` for 224.
    weights : str or None
        Initial weights (local file or library name); default a seeded random initialisation.
    init_backbone : str or None
        A checkpoint (local file; e.g. MoCo, DINO, SimCLR) to initialise every tensor but the
        head's from, the head re-initialised (seeded), as
        :func:`semshift.features.models.load_backbone` does; not with ``weights``.
    model_kwargs : dict
        Passed to the model's constructor.
    outliers : str or None
        Auxiliary outlier images (Outlier Exposure), a folder or file list.
    test_splits : list of str
        Split manifests (``split.json``) of every test set; the outlier classes must be
        disjoint from all their class sets (:mod:`semshift.training.outliers`).
    data_fingerprint : str or None
        :meth:`semshift.features.data.ImageSource.fingerprint` of the training images (filled
        by the loop), so a resumed run sees the same files.
    """

    model: str
    data: str
    classes: str | None = None
    method: str = "ce"
    method_params: dict[str, Any] = field(default_factory=dict)
    recipe: Recipe = field(default_factory=Recipe)
    seed: int = 0
    num_classes: int | None = None
    preset: str | None = None
    weights: str | None = None
    init_backbone: str | None = None
    model_kwargs: dict[str, Any] = field(default_factory=dict)
    outliers: str | None = None
    test_splits: list[str] = field(default_factory=list)
    data_fingerprint: str | None = None

    # Accepted values, checked for a config file (check_config_file); not in __post_init__,
    # since code builds configs with paths and tuples that the loop normalises itself.
    _constraints: ClassVar[dict[str, list[Constraint | None]]] = {
        "model": [_Text()],
        "data": [_Text()],
        "classes": [_Text(), None],
        "method": [_Text()],
        "method_params": [_Mapping()],
        "recipe": [_Mapping()],
        "seed": [Interval(Integral, None, None, closed="neither")],
        "num_classes": [Interval(Integral, 1, None, closed="left"), None],
        "preset": [_Text(), None],
        "weights": [_Text(), None],
        "init_backbone": [_Text(), None],
        "model_kwargs": [_Mapping()],
        "outliers": [_Text(), None],
        "test_splits": [_TextList()],
        "data_fingerprint": [_Text(), None],
    }

    def to_dict(self) -> dict[str, Any]:
        """The configuration as plain JSON values."""
        out = asdict(self)
        out["recipe"] = self.recipe.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """The inverse of :meth:`to_dict`; unknown keys are an error naming the known ones."""
        known = [f.name for f in fields(cls)]
        for key in data:
            if key not in known:
                raise unknown_name("training config key", key, known)
        values = dict(data)
        values["recipe"] = Recipe.from_dict(dict(values.get("recipe") or {}))
        return cls(**values)


#: The keys of a training config file: :class:`TrainConfig`'s (as ``train.json`` records
#: them) but the fingerprint the loop fills in, and ``out``, the output folder.
CONFIG_FILE_KEYS = (*[f.name for f in fields(TrainConfig) if f.name != "data_fingerprint"], "out")
_CONFIG_FILE_CONSTRAINTS: dict[str, list[Constraint | None]] = {
    **{k: v for k, v in TrainConfig._constraints.items() if k in CONFIG_FILE_KEYS},
    "out": [_Text()],
}


def check_config_file(data: Any, path: str | Path) -> dict[str, Any]:
    """The training configuration read from a YAML file, checked, its paths made absolute.

    The keys are :data:`CONFIG_FILE_KEYS`: those of :class:`TrainConfig` (``recipe`` a mapping
    of :class:`Recipe` knobs, ``method_params`` of the method's hyperparameters) and ``out``;
    every key is optional (``semshift train`` options override the file's values). Relative
    paths are relative to the file's folder: always for ``data``, ``outliers``,
    ``init_backbone``, ``test_splits`` and ``out``; for ``classes`` and ``weights`` (also
    shipped or library names) when that file exists. Reading the file is the caller's
    (:func:`semshift.textio.read_yaml`: a key given twice refused, ``1e-3`` a number); this
    checks what it holds.

    Parameters
    ----------
    data : object
        The parsed YAML document (a mapping; None for an empty file).
    path : str or Path
        The file: named in every message, its folder the base of relative paths.

    Returns
    -------
    dict
        The file's keys and values (``recipe`` checked by :class:`Recipe`; the method's
        hyperparameters are checked with the method, once the command line is merged in).

    Raises
    ------
    InputError
        Not a mapping, an unknown key, or a value of the wrong kind: one line naming the file
        and the key.

    Examples
    --------
    >>> cfg = check_config_file(
    ...     {"model": "demo-glyphnet", "data": "imgs", "recipe": {"epochs": 2, "lr": 1e-2}},
    ...     "/runs/train.yaml",
    ... )
    >>> cfg["model"], cfg["recipe"], cfg["data"]
    ('demo-glyphnet', {'epochs': 2, 'lr': 0.01}, '/runs/imgs')
    """
    path = Path(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of keys at the top level")
    for key, value in data.items():
        if key not in CONFIG_FILE_KEYS:
            err = unknown_name("training config key", key, CONFIG_FILE_KEYS)
            raise InputError(f"{path}: {err}")
        accepted = _CONFIG_FILE_CONSTRAINTS[key]
        if not any(value is None if c is None else c.is_satisfied_by(value) for c in accepted):
            words = " or ".join("null" if c is None else str(c) for c in accepted)
            raise InputError(f"{path}: {key} must be {words}, got {value!r}")
    out = dict(data)
    if "recipe" in out:
        recipe = dict(out["recipe"])
        try:
            Recipe.from_dict(recipe)
        except SemshiftError as err:
            raise InputError(f"{path}: {err}") from None
        out["recipe"] = recipe
    for key in ("method_params", "model_kwargs"):
        if key in out:
            out[key] = dict(out[key])
    base = path.resolve().parent

    def under(p: str) -> str:
        q = Path(p).expanduser()
        return str(q if q.is_absolute() else (base / q).resolve())

    for key in ("data", "outliers", "init_backbone", "out"):
        if isinstance(out.get(key), str):
            out[key] = under(out[key])
    if "test_splits" in out:
        out["test_splits"] = [under(p) for p in out["test_splits"]]
    for key in ("classes", "weights"):
        value = out.get(key)
        if isinstance(value, str) and Path(under(value)).is_file():
            out[key] = under(value)
    return out
