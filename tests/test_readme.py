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


def test_the_development_section_states_the_enforced_layers():
    """README's layer table is the one tests/test_layering.py enforces, and the extension guide
    it links to exists and names every kind of extension."""
    from .test_layering import LAYERS

    text = README.read_text()
    dev = text.split("## Development", 1)[1]
    rows = re.findall(r"^\| (\d+)(?: \(base\))? \| (.+?) \|$", dev, flags=re.M)
    stated = {}
    for level, parts in rows:
        for part in re.findall(r"`([^`]+)`", parts):
            stated[part] = int(level)
    if "the package root" in dev:
        stated["__init__"] = 0
    assert stated == {k: v for k, v in LAYERS.items() if k != "__main__"}
    guide = (README.parent / "docs" / "design" / "extending.md").read_text()
    kinds = ("detector", "metric", "protocol", "split builder", "training method",
             "zero-shot method", "model", "dataset layout", "benchmark", "command")  # fmt: skip
    for kind in kinds:
        assert f"| {kind}" in guide or f"| post-hoc {kind}" in guide, kind
