"""``docs/cli.md`` is what ``scripts/cli_docs.py`` writes from the command now: a new or changed
command or option fails here until the reference is regenerated."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_cli_docs() -> ModuleType:
    """``scripts/cli_docs.py`` as a module."""
    spec = importlib.util.spec_from_file_location("cli_docs", ROOT / "scripts" / "cli_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("cli_docs", module)
    spec.loader.exec_module(module)
    return module


def test_the_cli_reference_is_current():
    text = load_cli_docs().render()
    current = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert current == text, (
        "docs/cli.md is out of date with the semshift command: run python scripts/cli_docs.py"
    )


def test_the_reference_covers_every_command_and_option():
    import typer

    from semshift.cli import app

    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    root = typer.main.get_command(app)
    for name, cmd in root.commands.items():  # type: ignore[attr-defined]
        subs = getattr(cmd, "commands", {"": cmd})
        for sub_name, sub in subs.items():
            path = " ".join(p for p in ("semshift", name, sub_name) if p)
            assert f"`{path}`" in text, path
            for p in sub.params:
                for opt in p.opts if p.param_type_name == "option" else ():
                    assert f"`{opt}`" in text, (path, opt)
