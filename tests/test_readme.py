"""The README documents every CLI command and its two set-up commands."""

from __future__ import annotations

import re
from pathlib import Path

import typer

from semshift.cli import app

README = Path(__file__).resolve().parents[1] / "README.md"


def _command_paths(group: typer.Typer, prefix: str = "semshift") -> list[str]:
    paths = []
    click_group = typer.main.get_command(group)
    for name, cmd in click_group.commands.items():  # type: ignore[attr-defined]
        sub = getattr(cmd, "commands", None)
        if sub:
            paths += [f"{prefix} {name} {s}" for s in sub]
        else:
            paths.append(f"{prefix} {name}")
    return paths


def test_every_cli_command_has_a_usage_example():
    text = README.read_text()
    paths = _command_paths(app)
    assert "semshift splits ssb" in paths and "semshift demo" in paths
    code = "\n".join(re.findall(r"```bash\n(.*?)```", text, flags=re.S))
    missing = [p for p in paths if not re.search(rf"^{re.escape(p)}\b", code, flags=re.M)]
    assert not missing, f"README lacks a usage example for {missing}"


def test_readme_gives_the_two_setup_commands():
    text = README.read_text()
    setup = re.search(r"## Set up\n(.*?)\n## ", text, flags=re.S)
    assert setup is not None
    commands = re.findall(r"^(make \w+)", setup.group(1), flags=re.M)
    assert commands == ["make demo", "make test"]
    ci = (README.parent / ".ci" / "run").read_text()
    assert "make test" in ci
