"""A toy command group is added by one module (or an entry point) and appears in
``semshift --help`` and runs; ``docs/cli.md`` documents the shipped groups alone."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from semshift.cli import COMMAND_GROUPS, app, main, register_command_group
from semshift.errors import DuplicateNameError


@pytest.fixture
def toy() -> Iterator[str]:
    """The toy module imported (it registers ``toy``); the group removed afterwards."""
    if "tests.extensions.toy_command" in sys.modules:  # imported by an earlier test
        module = importlib.reload(sys.modules["tests.extensions.toy_command"])
    else:
        module = importlib.import_module("tests.extensions.toy_command")
    assert COMMAND_GROUPS["toy"].app is module.toy_app
    yield "toy"
    COMMAND_GROUPS.remove("toy")


def test_a_toy_group_added_by_one_module_is_in_help_and_runs(toy, capsys):
    runner = CliRunner()
    shown = runner.invoke(app, ["--help"])
    assert shown.exit_code == 0 and "toy" in shown.output
    assert "A toy command group" in shown.output
    done = runner.invoke(app, ["toy", "hello", "--name", "semshift"])
    assert done.exit_code == 0 and done.output == "hello semshift\n", done.output
    assert "toy" in COMMAND_GROUPS and not COMMAND_GROUPS["toy"].builtin
    assert COMMAND_GROUPS.names()[-1] == "toy"  # after the shipped groups, as registered
    with pytest.raises(SystemExit) as end:  # the command itself, as the shell runs it
        main(["toy", "hello"])
    assert end.value.code == 0 and capsys.readouterr().out == "hello world\n"


def test_the_toy_group_is_gone_once_removed(toy):
    COMMAND_GROUPS.remove("toy")
    try:
        shown = CliRunner().invoke(app, ["--help"])
        assert " toy " not in shown.output
        assert CliRunner().invoke(app, ["toy", "hello"]).exit_code == 2
    finally:
        importlib.reload(sys.modules["tests.extensions.toy_command"])  # for the fixture


def test_a_name_taken_is_refused():
    import typer

    with pytest.raises(DuplicateNameError, match="'splits'"):
        register_command_group("splits", typer.Typer())
    with pytest.raises(DuplicateNameError, match="is a command already"):
        register_command_group("evaluate", typer.Typer())


def test_a_toy_group_of_an_installed_plugin(monkeypatch, tmp_path):
    """An entry point of ``semshift.commands`` naming a typer app (a dist-info on sys.path)."""
    info = tmp_path / "toy_command_plugin-0.1.dist-info"
    info.mkdir()
    meta = "Metadata-Version: 2.1\nName: toy-command-plugin\nVersion: 0.1\n"
    (info / "METADATA").write_text(meta)
    points = "[semshift.commands]\ntoyplug = tests.extensions.toy_command_plugin:app\n"
    (info / "entry_points.txt").write_text(points)
    monkeypatch.syspath_prepend(str(tmp_path))
    COMMAND_GROUPS.refresh()
    try:
        assert "toyplug" in COMMAND_GROUPS
        runner = CliRunner()
        assert "toyplug" in runner.invoke(app, ["--help"]).output
        done = runner.invoke(app, ["toyplug", "ping"])
        assert done.exit_code == 0 and done.output == "pong\n", done.output
    finally:
        COMMAND_GROUPS.remove("toyplug")


def test_the_cli_reference_leaves_the_toy_out(toy):
    from tests.test_cli_docs import load_cli_docs

    text = load_cli_docs().render()
    assert "semshift toy" not in text and "### `semshift splits`" in text
