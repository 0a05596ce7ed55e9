"""The split-builder registry: name -> params model and build function, for run configs.

A run config names a builder and its parameters (``splits: {mine: {builder: ssb, params:
{...}}}``); the split stage validates the parameters before any work starts
(:func:`validate_params`) and builds the manifest (:func:`build_split`). Each builder registers
itself where it is defined, with :func:`register_builder` beside a pydantic params model::

    class MyParams(BuilderParams):
        known: ClassSpec = "imagenet1k"

    @register_builder("mine", MyParams, "One line for the docs and `semshift splits` help.")
    def _build_from_params(params: MyParams, ctx: BuildContext) -> SplitManifest: ...

The registry imports every builder module on its first lookup or listing
(:func:`semshift.splits.import_builders`), so a lookup sees every builder.

Parameter conventions shared by the builders:

- class lists (:data:`ClassSpec`): a shipped list name (``imagenet1k``), a file of ids or a list
  of ids; a file path that is relative is resolved against :attr:`BuildContext.base_dir`;
- files (``Path``): resolved the same way and checked to exist before any work;
- the taxonomy comes from the context (the config's ``taxonomy:``), not from the params;
- a ``seed`` parameter left at ``None`` takes :attr:`BuildContext.seed`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, overload

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from semshift.errors import (
    InputError,
    ParamError,
    SemshiftError,
    UnknownNameError,
    did_you_mean,
)
from semshift.registry import Registry
from semshift.splits.manifest import SplitManifest

if TYPE_CHECKING:
    from semshift.taxonomy.core import Taxonomy

__all__ = [
    "BUILDERS",
    "BuildContext",
    "BuilderParams",
    "ClassSpec",
    "ParamError",
    "PathSpec",
    "SplitBuilder",
    "build_split",
    "get_builder",
    "list_builders",
    "register_builder",
    "validate_params",
]

F = TypeVar("F", bound=Callable[..., Any])


class BuilderParams(BaseModel):
    """Base of every builder's params model: unknown keys are errors, instances are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _class_spec(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, str):
        if not value.strip():
            raise ValueError("expected a class list name, a file of ids or a list of ids, got ''")
        return value
    if isinstance(value, (list, tuple)):
        bad = [v for v in value if not isinstance(v, (str, int)) or isinstance(v, bool)]
        if not value or bad:
            what = f"item {bad[0]!r}" if bad else "an empty list"
            raise ValueError(f"expected a non-empty list of class ids, got {what}")
        return [str(v) for v in value]
    raise ValueError(
        f"expected a class list name, a file of ids or a list of ids, got {_short(value)}"
    )


#: A class list parameter: a shipped list name, a file of ids (relative to the config's folder)
#: or a list of ids (integers are read as their decimal string).
ClassSpec = Annotated[str | list[str], BeforeValidator(_class_spec)]


def _path_spec(value: Any) -> Any:
    if isinstance(value, Path) or (isinstance(value, str) and value.strip()):
        return Path(value)
    raise ValueError(f"expected a file path, got {_short(value)}")


#: A file parameter (relative: to the config's folder; resolved by :meth:`BuildContext.path`).
PathSpec = Annotated[Path, BeforeValidator(_path_spec)]


@dataclass(frozen=True)
class BuildContext:
    """What a builder gets besides its parameters.

    Attributes
    ----------
    taxonomy : str
        ``"wordnet"`` or the path of a custom CSV/JSON taxonomy (relative: to ``base_dir``).
    base_dir : Path
        Folder relative paths in params are resolved against (the config's folder).
    seed : int
        The run's seed; builders with a ``seed`` parameter left at ``None`` use it.
    where : str
        Key path prefix of error messages, e.g. ``"run.yaml: splits.mine"``.
    """

    taxonomy: str
    base_dir: Path
    seed: int = 0
    where: str = "config"

    def path(self, key: str, value: str | Path) -> Path:
        """The absolute path of the file parameter ``key``; it must exist.

        Raises
        ------
        InputError
            ``{where}.params.{key}: file ... does not exist``.
        """
        p = Path(value).expanduser()
        if not p.is_absolute():
            p = (Path(self.base_dir) / p).resolve()
        if not p.exists():
            rel = "" if Path(value).expanduser().is_absolute() else f" (from {str(value)!r})"
            raise InputError(f"{self.where}.params.{key}: file {p}{rel} does not exist")
        return p

    @overload
    def classes(self, key: str, value: str | list[str]) -> str | list[str]: ...
    @overload
    def classes(self, key: str, value: None) -> None: ...
    @overload
    def classes(self, key: str, value: str | list[str] | None) -> str | list[str] | None: ...
    def classes(self, key: str, value: str | list[str] | None) -> str | list[str] | None:
        """A :data:`ClassSpec` ready for the builder: a shipped list name or an id list unchanged,
        any other string as an absolute, existing file (see :meth:`path`)."""
        from semshift.taxonomy.classlists import SHIPPED

        if value is None or isinstance(value, list) or value in SHIPPED:
            return value
        return str(self.path(key, value))

    def load_taxonomy(self) -> Taxonomy:
        """The context's taxonomy (WordNet is loaded once per process)."""
        from semshift.taxonomy.custom import load_taxonomy

        return load_taxonomy(self.taxonomy_spec())

    def taxonomy_spec(self) -> str:
        """``"wordnet"`` / ``"wordnet-3.0"`` unchanged, a file as an absolute path."""
        from semshift.taxonomy.wordnet import WORDNET_NAME

        if self.taxonomy in ("wordnet", WORDNET_NAME):
            return self.taxonomy
        p = Path(self.taxonomy).expanduser()
        return str(p if p.is_absolute() else (Path(self.base_dir) / p).resolve())

    def is_wordnet(self) -> bool:
        """Whether the taxonomy is the shipped WordNet (some defaults are WordNet lists)."""
        from semshift.taxonomy.wordnet import WORDNET_NAME

        return self.taxonomy in ("wordnet", WORDNET_NAME)


@dataclass(frozen=True)
class SplitBuilder:
    """A registered split builder.

    Attributes
    ----------
    name : str
        Registry name (the config's ``builder:``).
    params : type of BuilderParams
        Its parameters (``extra="forbid"``); defaults are the builder function's defaults unless
        the model's docstring says otherwise.
    build : callable
        ``build(params, ctx) -> SplitManifest``.
    summary : str
        One line, for docs and ``semshift splits`` help.
    """

    name: str
    params: type[BaseModel]
    build: Callable[[Any, BuildContext], SplitManifest]
    summary: str


def _adopt(name: str, builder: Any) -> None:
    """Register the :class:`SplitBuilder` a ``semshift.split_builders`` entry point names."""
    if not isinstance(builder, SplitBuilder):
        raise TypeError(f"entry point {name!r} names {builder!r}, not a SplitBuilder")
    register_builder(builder.name, builder.params, builder.summary)(builder.build)


#: Every split builder, by name; other packages add theirs through the
#: ``semshift.split_builders`` entry-point group (a module applying :func:`register_builder`, or
#: a :class:`SplitBuilder`).
def _load_builders() -> None:
    """Import the builder modules (each registers its builder), on the first lookup."""
    from semshift.splits import import_builders

    import_builders()


BUILDERS: Registry[SplitBuilder] = Registry(
    "split builder", entry_points="semshift.split_builders", adopt=_adopt, loader=_load_builders
)


def register_builder(name: str, params: type[BaseModel], summary: str) -> Callable[[F], F]:
    """Decorator registering ``build(params, ctx) -> SplitManifest`` under ``name``.

    Parameters
    ----------
    name : str
        Unique registry name.
    params : type of pydantic.BaseModel
        The params model; it must forbid unknown keys (subclass :class:`BuilderParams`).
    summary : str
        One line.

    Returns
    -------
    callable
        The decorator; it returns the function unchanged.
    """
    BUILDERS.check_new(name)
    if not (isinstance(params, type) and issubclass(params, BaseModel)):
        raise ValueError(f"split builder {name!r}: params must be a pydantic model class")
    if params.model_config.get("extra") != "forbid":
        raise ValueError(f"split builder {name!r}: {params.__name__} must set extra='forbid'")
    if not summary.strip() or "\n" in summary:
        raise ValueError(f"split builder {name!r}: the summary must be one non-empty line")

    def decorator(function: F) -> F:
        BUILDERS.add(name, SplitBuilder(name=name, params=params, build=function, summary=summary))
        return function

    return decorator


def list_builders() -> list[str]:
    """Names of every registered split builder, sorted.

    Examples
    --------
    >>> from semshift.splits.registry import list_builders
    >>> list_builders()
    ['cleaning', 'graded', 'sample', 'ssb', 'superclass', 'zsl']
    """
    return BUILDERS.names()


def get_builder(name: str) -> SplitBuilder:
    """The split builder registered as ``name``.

    Raises
    ------
    UnknownNameError
        No builder has this name; the message lists close matches and every known name.

    Examples
    --------
    >>> from semshift.splits.registry import get_builder
    >>> get_builder("ssb").params.model_fields["preset"].default
    'ssb'
    """
    return BUILDERS[name]


def _get(name: str, where: str) -> SplitBuilder:
    try:
        return get_builder(name)
    except UnknownNameError as err:
        raise UnknownNameError(f"{where}.builder: {err}") from None


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _message(err: ValidationError, model: type[BaseModel], where: str) -> str:
    """One line for the first error: ``{where}.params.{key}: {what}``."""
    errors = err.errors(include_url=False)
    # a misspelt key first: it explains the "missing" error of the key it was meant to be
    e = next((x for x in errors if x["type"] == "extra_forbidden"), errors[0])
    loc = e["loc"]
    cause = (e.get("ctx") or {}).get("error")
    if isinstance(cause, ParamError):
        key = cause.key
    else:
        # union members add their type names to ``loc``; keep the field and list positions
        key = str(loc[0]) if loc else ""
        key += "".join(f"[{p}]" for p in loc[1:] if isinstance(p, int))
    prefix = f"{where}.params.{key}" if key else f"{where}.params"
    kind = e["type"]
    if kind == "extra_forbidden":
        accepted = list(model.model_fields)
        hint = did_you_mean(str(loc[0]), accepted).strip()
        hint = f"{hint[1:-2]}? " if hint else ""
        return f"{prefix}: unknown parameter; {hint}accepted: {', '.join(accepted)}"
    if kind == "missing":
        return f"{prefix}: required, not given"
    msg = e["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if kind not in ("value_error", "assertion_error"):
        # pydantic's wording, in the config's terms (YAML has lists, not tuples)
        msg = msg.replace("Input should be a valid tuple", "should be a list")
        msg = msg.replace("Input should be", "should be")
        msg += f", got {_short(e.get('input'))}"
    return " ".join(f"{prefix}: {msg}".split())


def validate_params(name: str, params: Mapping[str, Any], *, where: str) -> BaseModel:
    """Check a config's ``params`` for builder ``name``; nothing is read or built.

    Parameters
    ----------
    name : str
        A name from :func:`list_builders`.
    params : mapping
        Parameter overrides (the rest keep their defaults).
    where : str
        Key path of the split, e.g. ``"run.yaml: splits.mine"``.

    Returns
    -------
    pydantic.BaseModel
        The builder's validated params model.

    Raises
    ------
    UnknownNameError
        Unknown builder (``{where}.builder: ...``, listing the known ones).
    InputError
        One line ``{where}.params.{key}: {what}``; an unknown key lists the accepted keys.

    Examples
    --------
    >>> from semshift.splits.registry import validate_params
    >>> validate_params("ssb", {"bin_size": 50}, where="run.yaml: splits.mine").bin_size
    50
    >>> validate_params("ssb", {"bin_sise": 5}, where="run.yaml: s")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    semshift.errors.InputError: run.yaml: s.params.bin_sise: unknown parameter; did you mean ...
    """
    spec = _get(name, where)
    if not isinstance(params, Mapping):
        raise InputError(
            f"{where}.params: expected a mapping of parameter names to values, "
            f"got {type(params).__name__}"
        )
    bad = [k for k in params if not isinstance(k, str)]
    if bad:
        raise InputError(f"{where}.params: parameter names must be strings, got {bad[0]!r}")
    try:
        return spec.params.model_validate(dict(params))
    except ValidationError as err:
        raise InputError(_message(err, spec.params, where)) from None


def build_split(
    name: str, params: Mapping[str, Any] | BaseModel, ctx: BuildContext
) -> SplitManifest:
    """Validate ``params`` and build the split manifest with builder ``name``.

    Parameters
    ----------
    name : str
        A name from :func:`list_builders`.
    params : mapping or the builder's params model
        Parameter overrides, or an already validated model.
    ctx : BuildContext
        Taxonomy, base folder of relative paths, seed and the error-message prefix.

    Returns
    -------
    SplitManifest

    Raises
    ------
    UnknownNameError
        Unknown builder.
    InputError
        Bad parameters, missing files or inputs the builder rejects; the message starts with
        ``ctx.where``.
    """
    spec = _get(name, ctx.where)
    if isinstance(params, BaseModel):
        if not isinstance(params, spec.params):
            raise InputError(
                f"{ctx.where}.params: builder {name!r} takes {spec.params.__name__}, "
                f"not {type(params).__name__}"
            )
        checked = params
    else:
        checked = validate_params(name, params, where=ctx.where)
    try:
        manifest = spec.build(checked, ctx)
    except SemshiftError as err:
        text = str(err)
        if text.startswith(ctx.where) and isinstance(err, InputError):
            raise
        raise InputError(f"{ctx.where}: {text}") from err
    if not isinstance(manifest, SplitManifest):
        raise TypeError(f"split builder {name!r} returned {type(manifest).__name__}")
    return manifest
