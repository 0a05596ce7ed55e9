"""Packages that import their modules on the first use of a name (PEP 562), so that a light
command imports only what it uses (``semshift splits compare`` no layouts, ``semshift store
verify`` no pandas)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package``, whose names ``names``
    maps to the modules that define them (absolute, or relative to the package: ``".lists"``).
    A name is imported on its first use and then kept in the package's namespace.

    Examples
    --------
    >>> import types
    >>> pkg = types.ModuleType("lazy_demo")
    >>> sys.modules["lazy_demo"] = pkg
    >>> pkg.__getattr__, pkg.__dir__ = lazy_names("lazy_demo", {"dedent": "textwrap"})
    >>> pkg.dedent("  x")
    'x'
    >>> "dedent" in vars(pkg), "dedent" in dir(pkg)
    (True, True)
    >>> del sys.modules["lazy_demo"]
    """

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *names})

    return __getattr__, __dir__
