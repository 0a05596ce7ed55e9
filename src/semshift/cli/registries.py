"""``semshift list [KIND]``: the names in any registry (detectors, metrics, protocols, split
builders, training methods, zero-shot methods, models, dataset layouts, benchmarks, model zoos,
command groups), each with its one-line description; plugins installed through entry points
included.

The kinds are read from :data:`KINDS` (the module and the name of each registry), so the
command imports only the registry asked for: listing benchmarks does not import PyTorch.
"""

from __future__ import annotations

import importlib
from typing import Annotated, Any

import typer

from semshift.cli._app import app
from semshift.cli._options import Table, console
from semshift.errors import unknown_name

__all__ = ["KINDS", "describe", "registry_names"]

#: kind on the command line -> (module, registry attribute)
KINDS: dict[str, tuple[str, str]] = {
    "detectors": ("semshift.detectors", "DETECTORS"),
    "metrics": ("semshift.metrics", "METRICS"),
    "protocols": ("semshift.protocols.registry", "PROTOCOLS"),
    "split-builders": ("semshift.splits.registry", "BUILDERS"),
    "training-methods": ("semshift.training.methods", "METHODS"),
    "zsl-methods": ("semshift.training.zsl", "ZSL_METHODS"),
    "models": ("semshift.features.models", "MODELS"),
    "layouts": ("semshift.catalog.layouts", "LAYOUTS"),
    "benchmarks": ("semshift.catalog.benchmarks", "BENCHMARKS"),
    "zoos": ("semshift.study.zoos", "ZOOS"),
    "command-groups": ("semshift.cli._app", "COMMAND_GROUPS"),
}


def _first_sentence(text: str) -> str:
    """The first sentence of the first paragraph, on one line."""
    para = " ".join(text.strip().split("\n\n", 1)[0].split())
    end = para.find(". ")
    return para if end < 0 else para[: end + 1]


def describe(entry: Any) -> str:
    """One line about an entry: its description or summary, a zero-shot method's title and
    paper, a command group's help, or the first sentence of its docstring."""
    for attr in ("description", "summary"):
        text = getattr(entry, attr, None)
        if isinstance(text, str) and text.strip():
            return _first_sentence(text)
    title, reference = getattr(entry, "title", None), getattr(entry, "reference", None)
    if isinstance(title, str) and title and isinstance(reference, str) and reference:
        return f"{title} ({reference})"
    info = getattr(getattr(entry, "app", None), "info", None)  # a command group's typer app
    text = getattr(info, "help", None)
    if isinstance(text, str) and text.strip():
        return _first_sentence(text)
    doc = getattr(entry, "__doc__", None)
    return _first_sentence(doc) if isinstance(doc, str) and doc.strip() else ""


def registry_names(kind: str) -> list[tuple[str, str]]:
    """``(name, description)`` of every entry of registry ``kind`` (see :data:`KINDS`)."""
    if kind not in KINDS:
        raise unknown_name("kind", kind, KINDS)
    module, attr = KINDS[kind]
    registry = getattr(importlib.import_module(module), attr)
    if kind == "models":  # entry points are listed without importing them, namespaces too
        from semshift.features.models import list_models

        later = "an entry point's model, imported when it is first built"
        return [
            (n, describe(registry[n]) if n in registry else "" if "<name>" in n else later)
            for n in list_models()
        ]
    return [(n, describe(registry[n])) for n in registry.names()]


@app.command("list")
def list_command(
    kind: Annotated[
        str | None,
        typer.Argument(help=f"What to list: {', '.join(KINDS)}. Without it: the kinds."),
    ] = None,
) -> None:
    """The names semshift knows of one kind (plugins included), or the kinds."""
    if kind is None:
        table = Table(title="semshift list KIND")
        table.add_column("kind", no_wrap=True)
        table.add_column("registry")
        for name, (module, attr) in KINDS.items():
            table.add_row(name, f"{module}.{attr}")
        console.print(table)
        return
    rows = registry_names(kind)
    table = Table(title=f"{kind} ({len(rows)})")
    table.add_column("name", no_wrap=True)
    table.add_column("description")
    for name, text in rows:
        table.add_row(name, text)
    console.print(table)
