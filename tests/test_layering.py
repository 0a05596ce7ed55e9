"""The layering of the package, read from the source tree's imports (function-level included).

taxonomy / metrics / detectors -> features / splits -> protocols, training -> report -> run -> demo
-> cli:
a module may import its own layer and the layers below it, never one above. ``errors``,
``textio``, ``data`` and the package root are the base every layer may use.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "semshift"

LAYERS: dict[str, int] = {
    "errors": 0,
    "params": 0,
    "registry": 0,
    "textio": 0,
    "locking": 0,
    "progress": 0,
    "data": 0,
    "__init__": 0,
    "lazy": 0,
    "taxonomy": 1,
    "metrics": 1,
    "detectors": 1,
    "features": 2,
    "splits": 2,
    "catalog": 2,
    "protocols": 3,
    "training": 3,
    "report": 4,
    "run": 5,
    "study": 6,
    "demo": 7,
    "cli": 8,
    "__main__": 9,  # ``python -m semshift``: the command
}


def _part(module: str) -> str:
    """The top-level part of a ``semshift.*`` module name."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes inside ``if TYPE_CHECKING:`` blocks (annotations only)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            out |= {id(n) for b in node.body for n in ast.walk(b)}
    return out


def _imports(path: Path, *, type_checking: bool = True) -> list[tuple[int, str]]:
    """(line, imported semshift module) of every import in ``path``; ``type_checking=False``
    leaves out the imports under ``if TYPE_CHECKING:`` (used in annotations only)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    rel = path.relative_to(SRC.parent).with_suffix("")
    package = list(rel.parts) if path.name == "__init__.py" else list(rel.parts[:-1])
    if path.name == "__init__.py":
        package = package[:-1]
    skip = set() if type_checking else _type_checking_only(tree)
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("semshift")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the module's package
                base = package[: len(package) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if name == "semshift":  # from semshift import x: x is a subpackage or a name
                out += [(node.lineno, f"semshift.{a.name}") for a in node.names]
            elif name.startswith("semshift"):
                out.append((node.lineno, name))
    return out


def _modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def test_every_top_level_part_has_a_layer():
    parts = {p.relative_to(SRC).parts[0].removesuffix(".py") for p in _modules()}
    assert parts <= set(LAYERS), sorted(parts - set(LAYERS))


def test_the_import_reader_sees_relative_and_lazy_imports(tmp_path):
    lazy = SRC / "run" / "report.py"
    names = {m for _, m in _imports(lazy)}
    assert "semshift.report" in names and "semshift.run.context" in names
    rel = SRC / "detectors" / "knn.py"
    assert "semshift.detectors._base" in {m for _, m in _imports(rel)}


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_no_module_imports_a_higher_layer(path: Path):
    own = path.relative_to(SRC).parts[0].removesuffix(".py")
    level = LAYERS[own]
    bad = [
        f"{path.relative_to(SRC.parent)}:{line} imports {mod} ({_part(mod)} is above {own})"
        for line, mod in _imports(path)
        if LAYERS.get(_part(mod), 0) > level
    ]
    assert not bad, "\n".join(bad)


def _private_imports(path: Path, src: Path = SRC) -> list[str]:
    """``from semshift.<other package>... import _name`` or of a ``_module`` of another package."""
    own = path.relative_to(src).parts[0].removesuffix(".py")
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("semshift"):
            parts = (node.module or "").split(".")
            if (parts[1] if len(parts) > 1 else "__init__") == own:
                continue
            private = [p for p in parts[1:] if p.startswith("_") and not p.startswith("__")]
            private += [a.name for a in node.names if a.name.startswith("_")]
            private = [p for p in private if not p.startswith("__")]
            if private:
                where = f"{path.relative_to(src.parent)}:{node.lineno}"
                found.append(f"{where} {node.module}: {private}")
    return found


def test_no_module_imports_another_packages_private_names():
    bad = [hit for path in _modules() for hit in _private_imports(path)]
    assert not bad, "\n".join(bad)


def test_the_private_import_reader_sees_them(tmp_path):
    src = tmp_path / "semshift"
    fake = src / "report" / "_probe.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("from semshift.metrics.stats import _hidden\nfrom semshift.report import _x\n")
    assert [h.split(": ")[-1] for h in _private_imports(fake, src)] == ["['_hidden']"]
