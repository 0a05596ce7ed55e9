"""The typer application and the registry of its command groups; the command modules register
on them.

A command group (``semshift splits ...``) is a :class:`typer.Typer` registered in
:data:`COMMAND_GROUPS` with :func:`register_command_group`; the root app mounts every
registered group, so one module adds a group (it registers at import), or a third-party
package does without an edit to semshift, through the ``semshift.commands`` entry-point group:
an entry point that names a ``typer.Typer`` object is registered under the entry point's name;
one that names a module registers when imported::

    [project.entry-points."semshift.commands"]
    mytool = "mypackage.cli:app"
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.models import CommandInfo, TyperInfo

from semshift.cli._options import console
from semshift.errors import DuplicateNameError, InputError
from semshift.registry import Registry

__all__ = ["COMMAND_GROUPS", "CommandGroup", "app", "register_command_group"]

_COUNTER = itertools.count()


@dataclass(frozen=True)
class CommandGroup:
    """A registered command group: ``semshift NAME ...`` runs the commands of ``app``.

    Attributes
    ----------
    name : str
        The group's name on the command line.
    app : typer.Typer
        Its commands (and its help: ``typer.Typer(help=...)``).
    builtin : bool
        Shipped with semshift (``docs/cli.md`` documents these alone).
    index : int
        Registration order: the order of ``semshift --help``.
    """

    name: str
    app: typer.Typer
    builtin: bool = False
    index: int = field(default_factory=lambda: next(_COUNTER))


def _adopt(name: str, obj: Any) -> None:
    """An entry point of ``semshift.commands`` that names an object: a typer app."""
    if not isinstance(obj, typer.Typer):
        raise InputError(
            f"command group {name!r}: the entry point must name a typer.Typer, "
            f"got {type(obj).__name__}"
        )
    register_command_group(name, obj)


#: every command group of the ``semshift`` command, in registration order
COMMAND_GROUPS: Registry[CommandGroup] = Registry(
    "command group",
    entry_points="semshift.commands",
    order=lambda name, group: group.index,
    adopt=_adopt,
)


#: the shipped command groups (:func:`register_command_group` with ``builtin``), which a
#: command naming one finds without loading the plugins of ``semshift.commands``
_BUILTIN: dict[str, CommandGroup] = {}


def _command_name(info: CommandInfo) -> str:
    """A command's name on the command line, as typer writes it."""
    callback = info.callback.__name__ if info.callback else ""
    return info.name or typer.main.get_command_name(callback)


@contextmanager
def _only_command(group: typer.Typer, name: str) -> Iterator[None]:
    """Within the block, ``group`` holds only its command ``name``, when it has one."""
    every = group.registered_commands
    mine = [c for c in every if _command_name(c) == name]
    group.registered_commands = mine or every
    try:
        yield
    finally:
        group.registered_commands = every


@contextmanager
def _no_commands(groups: Sequence[typer.Typer]) -> Iterator[None]:
    """Within the block, the ``groups`` hold no command (the root's help lists each group by
    its name and help alone: building every command's options for it took 35 ms)."""
    every = [g.registered_commands for g in groups]
    for g in groups:
        g.registered_commands = []
    try:
        yield
    finally:
        for g, commands in zip(groups, every, strict=True):
            g.registered_commands = commands


try:  # typer's coercion of parameter values (typer >= 0.25)
    from typer._coercion import RuntimeParam as _RuntimeParam
    from typer._coercion import build_runtime_param as _build_runtime_param
    from typer._param_types import coerce_cli_path as _coerce_cli_path
except ImportError:  # pragma: no cover - another typer: its own coercion, untouched
    _RuntimeParam = None  # type: ignore[assignment, misc]


if _RuntimeParam is not None:

    @dataclass(frozen=True)
    class _AsGiven(_RuntimeParam):
        """A ``str`` or ``bool`` parameter's value, returned as given when it has that type
        (a string from argv, a default, a flag); a ``Path`` parameter's string made a
        ``Path`` (what pydantic's validation of it gives) and checked by typer's own path
        checks; any other value checked as typer checks it."""

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            if type(value) is self.annotation:
                return value
            if self.annotation is Path and type(value) is str:
                info = self.parameter_info
                return _coerce_cli_path(Path(value), info, path_type=Path, param=param, ctx=ctx)
            checked = _build_runtime_param(param.type_descriptor)
            return checked._coerce_value(value, param=param, ctx=ctx)


def _plain_strings(command: Any) -> Any:
    """``command`` (a click command or group built by typer), its ``str``, ``bool`` and
    ``Path`` parameters checked without pydantic (:class:`_AsGiven`).

    Typer checks each parameter's value with a pydantic ``TypeAdapter`` built on first use:
    for a ``str`` value it returns the string it was given (argv and defaults are strings),
    for a ``Path`` it makes the string a ``Path`` and runs typer's path checks, but
    importing pydantic and building the adapters costs 60 to 90 ms, more than
    ``semshift taxonomy show`` needs for all its work. Parameters of other types (numbers,
    choices, lists) or with a ``parser`` keep typer's check.
    """
    if _RuntimeParam is None:  # pragma: no cover
        return command
    todo = [(command, None)]
    while todo:
        cmd, parent = todo.pop()
        # the --help option is made on first use, with the names the context gives it
        ctx = cmd.context_class(cmd, info_name=cmd.name, parent=parent, **cmd.context_settings)
        todo += [(sub, ctx) for sub in getattr(cmd, "commands", {}).values()]
        for param in [*cmd.params, cmd.get_help_option(ctx)]:
            if param is None:
                continue
            desc = getattr(param, "type_descriptor", None)
            info = getattr(desc, "parameter_info", None)
            kind = getattr(desc, "annotation", None)
            if (
                info is not None
                and (kind in (str, bool) or (kind is Path and info.path_type is None))
                and getattr(param, "_runtime_param", 0) is None
                and getattr(desc, "file_annotation", 0) is None
                and info.parser is None
                and not param.multiple
                and param.nargs == 1
            ):
                param._runtime_param = _AsGiven(info, kind)
    return command


class _RootApp(typer.Typer):
    """The root app: its command groups are :data:`COMMAND_GROUPS`, read whenever the command
    is built (so a group registered or removed later is mounted or gone)."""

    #: the groups :attr:`registered_groups` holds while :meth:`command_for` builds (None: all)
    _only_groups: tuple[str, ...] | None = None

    @property
    def registered_groups(self) -> list[TyperInfo]:
        only = self._only_groups
        if only is not None and all(name in _BUILTIN for name in only):
            # shipped groups (or none, for --version): no scan of the installed packages'
            # entry points (importlib.metadata, 40 ms), which could only add other groups
            return [TyperInfo(_BUILTIN[name].app, name=name) for name in only]
        return [TyperInfo(g.app, name=name) for name, g in COMMAND_GROUPS.items()
                if only is None or name in only]  # fmt: skip

    @registered_groups.setter
    def registered_groups(self, value: list[TyperInfo]) -> None:
        if value:  # typer's constructor sets []; groups come from the registry
            raise TypeError("register command groups with register_command_group")

    def command_for(self, args: Sequence[str]) -> Any:
        """The click command that runs ``args``, with only the command they name built.

        Typer builds the options of every command it mounts (evaluating each annotation: 0.1
        to 0.4 s for all of semshift's), so ``semshift taxonomy show ...`` builds the root and
        ``taxonomy show`` alone, and ``--version`` the root alone; arguments naming no command
        (``--help``, a group's ``--help``, a typo) build all of the root's or the group's
        commands, which their help or error lists; the root's ``--help`` builds no group's
        commands (it lists the groups by name and help). A plugin's group is built whole (its
        options could take values).
        """
        words = [a for a in args if not a.startswith("-")]
        name = words[0] if words else ""
        every = self.registered_commands
        mine = [c for c in every if _command_name(c) == name]
        # a shipped group is found without scanning the entry points (see registered_groups)
        group = None if mine or not name else _BUILTIN.get(name) or COMMAND_GROUPS.get(name)
        bare = not words and bool(args) and "--help" not in args  # --version: the root alone
        if not words and "--help" in args:  # the root's help: its commands, the groups' names
            with _no_commands([g.app for g in COMMAND_GROUPS.values()]):
                return _plain_strings(typer.main.get_command(self))
        if not mine and group is None and not bare:
            return _plain_strings(typer.main.get_command(self))
        self.registered_commands, self._only_groups = mine, (name,) if group else ()
        try:
            if group is None or not group.builtin or len(words) < 2:
                return _plain_strings(typer.main.get_command(self))
            with _only_command(group.app, words[1]):
                return _plain_strings(typer.main.get_command(self))
        finally:
            self.registered_commands, self._only_groups = every, None

    def add_typer(self, typer_instance: typer.Typer, *, name: str | None = None, **_: Any) -> None:
        """``app.add_typer(group, name=...)``: :func:`register_command_group`."""
        if name is None:
            raise InputError("a command group needs a name: add_typer(group, name=...)")
        register_command_group(name, typer_instance)


app = _RootApp(
    name="semshift",
    help="Measure classifiers and OOD detectors under semantic vs covariate shift.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def register_command_group(name: str, group: typer.Typer, *, builtin: bool = False) -> typer.Typer:
    """Mount ``group`` as ``semshift NAME``.

    Parameters
    ----------
    name : str
        The group's name on the command line; not a command's or another group's.
    group : typer.Typer
        Its commands.
    builtin : bool
        Shipped with semshift (documented in ``docs/cli.md``).

    Returns
    -------
    typer.Typer
        ``group``, unchanged.

    Raises
    ------
    DuplicateNameError
        ``name`` is a command or a registered group already.
    """
    if not isinstance(group, typer.Typer):
        raise InputError(f"command group {name!r}: expected a typer.Typer, got {group!r}")
    commands = {c.name or (c.callback.__name__ if c.callback else "") for c in
                app.registered_commands}  # fmt: skip
    if name in commands:
        raise DuplicateNameError(f"command group name {name!r} is a command already")
    entry = COMMAND_GROUPS.add(name, CommandGroup(name, group, builtin=builtin))
    if builtin:
        _BUILTIN[name] = entry
    return group


def _builtin(name: str, help: str) -> typer.Typer:
    group = typer.Typer(help=help, no_args_is_help=True)
    return register_command_group(name, group, builtin=True)


splits_app = _builtin("splits", "Build and inspect class splits.")
taxonomy_app = _builtin("taxonomy", "Query WordNet or a custom hierarchy.")
benchmark_app = _builtin("benchmark", "The seed papers' benchmarks: list, check the files, run.")
zsl_app = _builtin("zsl", "Zero-shot learning: the proposed-splits paper's thirteen methods.")
store_app = _builtin("store", "Check and repair feature stores.")


def _version(value: bool) -> None:
    if value:
        from semshift import __version__  # importlib.metadata: only for --version

        console.print(f"semshift {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """semshift: semantic-shift benchmarks for image classifiers and OOD detectors."""
