"""No import cycles between semshift's modules (module-level and function-level imports).

Imports under ``if TYPE_CHECKING:`` are left out: a name used only in annotations makes no
module need another to load or to run.

A cycle means two modules each need the other: neither can be read, tested or moved alone. The
import reader is tests/test_layering.py's (relative and lazy imports included); an import of a
package counts as an import of its ``__init__``. Cycles through a package's own ``__init__``
(a package re-exporting its modules, which import siblings) are not counted: the ``__init__``
only gathers names.
"""

from __future__ import annotations

from pathlib import Path

from .test_layering import SRC, _imports, _modules

#: cycles left, each with the reason it stays (none today)
ALLOWED: dict[frozenset[str], str] = {}


def _name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _graph() -> dict[str, set[str]]:
    paths = {_name(p): p for p in _modules()}
    packages = {_name(p) for p in _modules() if p.name == "__init__.py"}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        if name in packages:
            continue  # a package's __init__ gathers names; its imports are not dependencies
        deps = set()
        for _, mod in _imports(path, type_checking=False):
            while mod and mod not in paths:  # `from semshift.x import name`: the module x
                mod = mod.rpartition(".")[0]
            if mod and mod != name and mod not in packages:
                deps.add(mod)
        graph[name] = deps
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in graph:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    found = [c for c in _cycles(_graph()) if frozenset(c) not in ALLOWED]
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)
