"""Split one module into a package of submodules along given top-level names (a refactoring aid,
not shipped: run once per split, then delete the old module).

usage: python scripts/_split_module.py SRC.py PKGDIR PLAN.json

PLAN.json: {"parts": [["_io", ["first_name_of_part", ...]], ["writer", [...]], ...]} where each
part starts at the top-level statement defining its first listed name and runs until the next
part's start. The module docstring, ``__all__`` and re-exports of every top-level name go to
``PKGDIR/__init__.py``; each part gets the module's imports (ruff removes the unused ones) and
imports of the names it uses from earlier parts (names used only in annotations, or defined in a
later part, are imported under ``TYPE_CHECKING``; a runtime use of a later part is reported).
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path


def defined(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def used(nodes: list[ast.stmt]) -> tuple[set[str], set[str]]:
    """(names used at run time, names used in annotations)."""
    runtime: set[str] = set()
    annot: set[str] = set()
    ann_nodes: set[int] = set()
    for top in nodes:
        for n in ast.walk(top):
            anns = []
            if isinstance(n, ast.arg) and n.annotation is not None:
                anns.append(n.annotation)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.returns is not None:
                anns.append(n.returns)
            if isinstance(n, ast.AnnAssign):
                anns.append(n.annotation)
            for a in anns:
                for m in ast.walk(a):
                    ann_nodes.add(id(m))
                    if isinstance(m, ast.Name):
                        annot.add(m.id)
                    if isinstance(m, ast.Constant) and isinstance(m.value, str):
                        try:
                            for k in ast.walk(ast.parse(m.value, mode="eval")):
                                if isinstance(k, ast.Name):
                                    annot.add(k.id)
                        except SyntaxError:
                            pass
        for n in ast.walk(top):
            if isinstance(n, ast.Name) and id(n) not in ann_nodes:
                runtime.add(n.id)
    return runtime, annot - runtime


def main() -> None:
    src, pkg, plan_file = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    plan = json.loads(plan_file.read_text())["parts"]
    text = src.read_text()
    lines = text.splitlines(keepends=True)
    tree = ast.parse(text)
    body = tree.body
    doc = ast.get_docstring(tree)
    imports: list[str] = []
    all_node = None
    units = []
    for node in body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and node is body[0]:
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            seg = "".join(lines[node.lineno - 1 : node.end_lineno])
            if "__future__" not in seg:
                imports.append(seg)
            continue
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            all_node = node
            continue
        units.append(node)
    # a unit starts at its first decorator or at preceding comment lines
    starts = []
    for node in units:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        k = first - 1
        while k - 1 >= 0 and lines[k - 1].lstrip().startswith("#"):
            k -= 1
        starts.append(k)
    name_to_unit = {}
    for i, node in enumerate(units):
        for nm in defined(node):
            name_to_unit.setdefault(nm, i)
    part_starts = []
    for part, names in plan:
        part_starts.append((name_to_unit[names[0]], part))
    part_starts.sort()
    part_of_unit = {}
    for j, (ui, part) in enumerate(part_starts):
        end = part_starts[j + 1][0] if j + 1 < len(part_starts) else len(units)
        for u in range(ui, end):
            part_of_unit[u] = part
    if part_starts[0][0] != 0:
        raise SystemExit(f"units before the first part: {defined(units[0])}")
    order = [p for p, _ in plan]  # the dependency order: a part imports from earlier ones
    defs_of: dict[str, list[str]] = {p: [] for p in order}
    for u, node in enumerate(units):
        defs_of[part_of_unit[u]] += defined(node)
    owner = {nm: p for p, ns in defs_of.items() for nm in ns}
    pkg.mkdir(parents=True, exist_ok=True)
    problems = []
    for p in order:
        idx = [u for u in range(len(units)) if part_of_unit[u] == p]
        nodes = [units[u] for u in idx]
        runtime, annot = used(nodes)
        now: dict[str, list[str]] = {}
        later: dict[str, list[str]] = {}
        for nm in sorted(runtime | annot):
            q = owner.get(nm)
            if q is None or q == p:
                continue
            if nm in runtime and order.index(q) < order.index(p):
                now.setdefault(q, []).append(nm)
            elif nm in runtime:
                # module-level use of a later part is a real problem; inside functions: lazy
                problems.append(f"{p} uses {nm} of later part {q} at run time")
                later.setdefault(q, []).append(nm)
            else:
                later.setdefault(q, []).append(nm)
        title = f"{src.stem}: the {p.strip('_')} part (see the package docstring)."
        out = ['"""' + title + '"""\n\n']
        out.append("from __future__ import annotations\n\n")
        out += imports
        if later:
            out.append("from typing import TYPE_CHECKING\n")
        for q, nms in now.items():
            out.append(f"from .{q} import {', '.join(nms)}\n")
        if later:
            out.append("\nif TYPE_CHECKING:\n")
            for q, nms in later.items():
                out.append(f"    from .{q} import {', '.join(nms)}\n")
        out.append("\n\n")
        for u in idx:
            node = units[u]
            end = node.end_lineno
            out.append("".join(lines[starts[u] : end]))
            out.append("\n\n")
        (pkg / f"{p}.py").write_text("".join(out).rstrip() + "\n")
    init = ['"""' + (doc or "") + '\n"""\n\n', "from __future__ import annotations\n\n"]
    for p in order:
        names = defs_of[p]
        if names:
            init.append(f"from .{p} import (  # noqa: F401\n")
            init += [f"    {nm},\n" for nm in names]
            init.append(")\n")
    if all_node is not None:
        init.append("\n" + "".join(lines[all_node.lineno - 1 : all_node.end_lineno]) + "\n")
    (pkg / "__init__.py").write_text("".join(init))
    for pr in problems:
        print("PROBLEM:", pr)


if __name__ == "__main__":
    main()
