"""One registry type for every kind of extension: detectors, metrics, protocols, split builders,
training methods, zero-shot methods, models, dataset layouts, benchmarks and CLI command groups.

A :class:`Registry` is a read-only mapping from names to entries, with one vocabulary everywhere:
``registry[name]`` looks an entry up, ``name in registry`` tests, :meth:`Registry.names` lists and
:meth:`Registry.add` registers (usually through the ``register_*`` function or decorator of its
package; :meth:`Registry.remove` undoes it). ``registry.get(name)`` is the mapping's (None when
missing).

- a name given twice raises :class:`~semshift.errors.DuplicateNameError` (one error type,
  an :class:`~semshift.errors.InputError`, so also a ``ValueError``);
- an unknown name raises :class:`~semshift.errors.UnknownNameError` (also a ``KeyError``) with
  close matches and every known name, through :func:`semshift.errors.unknown_name`;
- :meth:`Registry.names` lists the names in the registry's order (sorted unless an ``order`` key
  is given), optionally filtered.

A registry may name a Python entry-point group (``semshift.detectors``, ``semshift.models``, ...)
so a third-party package registers its extensions without any edit to semshift: each entry point
names a module (or an object in one) that calls the package's ``register_*`` function when it is
imported; an entry point that names an object not yet registered is added under the entry point's
name (or handed to the registry's ``adopt`` function, which validates it as its ``register_*``
function does). Entry points load once, on the first lookup or listing; a plugin that fails to
import is
reported with a :class:`PluginWarning` naming it and the cause, and the rest of semshift works.

>>> colours = Registry("colour")
>>> colours.add("red", 1)
1
>>> colours["red"], "red" in colours, colours.names(), colours.get("blue")
(1, True, ['red'], None)
>>> colours["rde"]
Traceback (most recent call last):
...
semshift.errors.UnknownNameError: unknown colour 'rde'. Did you mean 'red'? Known: red
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from semshift.errors import DuplicateNameError, InputError, unknown_name

__all__ = ["PluginWarning", "Registry"]

T = TypeVar("T")


class PluginWarning(UserWarning):
    """A third-party plugin (entry point) could not be loaded; semshift goes on without it."""


class Registry(Mapping[str, T], Generic[T]):
    """Named entries of one kind of extension.

    Parameters
    ----------
    kind : str
        What an entry is, in words, for messages: ``"detector"``, ``"dataset layout"``.
    entry_points : str or None, default None
        The entry-point group third-party packages register in (``"semshift.detectors"``);
        None: this registry takes no plugins.
    order : callable or None, default None
        ``order(name, entry)`` gives the sort key of :meth:`names` (a paper's table order, say);
        None: alphabetical.
    loader : callable or None, default None
        Called once before the first lookup or listing, to import the modules that register the
        built-in entries (for registries whose entries live in modules imported lazily).
    adopt : callable or None, default None
        ``adopt(name, obj)`` registers an object an entry point names (a class, say) the way the
        package's ``register_*`` function does; None: ``add(name, obj)``.
    """

    def __init__(
        self,
        kind: str,
        *,
        entry_points: str | None = None,
        order: Callable[[str, T], Any] | None = None,
        loader: Callable[[], None] | None = None,
        adopt: Callable[[str, Any], Any] | None = None,
    ) -> None:
        self.kind = kind
        self.entry_point_group = entry_points
        self._order = order
        self._loader = loader
        self._adopt = adopt
        self._entries: dict[str, T] = {}
        self._loaded = loader is None and entry_points is None
        self._loading = False

    # -- filling ------------------------------------------------------------------------------

    def add(self, name: str, entry: T, *, replace: bool = False) -> T:
        """Register ``entry`` under ``name`` and return it.

        Raises
        ------
        InputError
            ``name`` is empty or not a string.
        DuplicateNameError
            ``name`` is registered already (unless ``replace``).
        """
        if not replace or not isinstance(name, str) or not name:
            self.check_new(name)
        self._entries[name] = entry
        return entry

    def check_new(self, name: object) -> None:
        """Raise what :meth:`add` would for ``name`` (for a ``register_*`` function that checks
        the name before anything else); loads no plugins.

        Raises
        ------
        InputError
            ``name`` is empty or not a string.
        DuplicateNameError
            ``name`` is registered already.
        """
        if not isinstance(name, str) or not name:
            raise InputError(f"a {self.kind} needs a non-empty name, got {name!r}")
        if name in self._entries:
            raise DuplicateNameError(f"{self.kind} name {name!r} is already registered")

    def remove(self, name: str) -> T:
        """Take ``name`` out of the registry (tests that register a toy entry clean up with it)."""
        self._ensure_loaded()
        if name not in self._entries:
            raise unknown_name(self.kind, name, self._entries)
        return self._entries.pop(name)

    # -- reading ------------------------------------------------------------------------------

    def __getitem__(self, name: str) -> T:
        """The entry registered as ``name``.

        Raises
        ------
        UnknownNameError
            No entry has this name (a ``KeyError`` too); the message lists close matches and
            every known name.
        """
        self._ensure_loaded()
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise unknown_name(self.kind, name, self._entries) from None

    def names(self, where: Callable[[str, T], bool] | None = None) -> list[str]:
        """The registered names in this registry's order, those for which ``where(name, entry)``
        holds when it is given."""
        self._ensure_loaded()
        names = [n for n, e in self._entries.items() if where is None or where(n, e)]
        if self._order is None:
            return sorted(names)
        order = self._order
        return sorted(names, key=lambda n: (order(n, self._entries[n]), n))

    def __contains__(self, name: object) -> bool:
        self._ensure_loaded()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        self._ensure_loaded()
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {len(self._entries)} entries)"

    # -- loading ------------------------------------------------------------------------------

    def refresh(self) -> None:
        """Scan the entry-point group again (after a plugin was installed in this process)."""
        self._ensure_loaded()
        if self.entry_point_group is not None:
            self._load_plugins(self.entry_point_group)

    def _ensure_loaded(self) -> None:
        if self._loaded or self._loading:
            return
        self._loading = True
        try:
            if self._loader is not None:
                self._loader()
            if self.entry_point_group is not None:
                self._load_plugins(self.entry_point_group)
            self._loaded = True
        finally:
            self._loading = False

    def _load_plugins(self, group: str) -> None:
        from importlib import metadata  # 40 ms: only where plugins are looked up

        for ep in metadata.entry_points(group=group):
            try:
                obj = ep.load()
                if _is_module(obj) or any(e is obj for e in self._entries.values()):
                    continue  # importing it registered its entries
                if self._adopt is not None:
                    self._adopt(ep.name, obj)
                else:
                    self.add(ep.name, obj)
            except Exception as err:  # a broken plugin must not stop semshift
                warnings.warn(
                    f"semshift plugin {ep.name!r} ({ep.value}, entry-point group {group}) was not "
                    f"loaded: {type(err).__name__}: {err}",
                    PluginWarning,
                    stacklevel=4,
                )


def _is_module(obj: object) -> bool:
    import types

    return isinstance(obj, types.ModuleType)
