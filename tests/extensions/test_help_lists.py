"""Every toy registered in this process shows in the ``--help`` of the option that takes its
kind, and leaves it when unregistered; a registry not yet imported shows its plugins once an
installed package has an entry point in its group."""

from __future__ import annotations

import sys
import types
from types import ModuleType

import pytest
import typer

from semshift.cli import _choices, app
from tests.extensions import (
    toy_benchmark,
    toy_metric,
    toy_protocol,
    toy_training_method,
    toy_zsl_method,
)
from tests.extensions.conftest import registration


def _help(path: list[str], option: str) -> str:
    cmd = typer.main.get_command(app)
    for name in path:
        cmd = cmd.commands[name]  # type: ignore[attr-defined]
    param = next(p for p in cmd.params if option in getattr(p, "opts", ()) or p.name == option)
    return param.help or ""


CASES = [
    (toy_metric, ["evaluate"], "--metric"),
    (toy_metric, ["evaluate"], "--search-objective"),
    (toy_protocol, ["evaluate"], "--protocol"),
    (toy_training_method, ["train"], "--method"),
    (toy_zsl_method, ["zsl", "run"], "--method"),
    (toy_benchmark, ["benchmark", "run"], "name"),
]


@pytest.mark.parametrize(("toy", "path", "option"), CASES, ids=lambda c: getattr(c, "NAME", c))
def test_a_registered_toy_is_in_its_options_help(toy: ModuleType, path, option) -> None:
    with registration(toy):
        assert toy.NAME in _help(path, option)
    assert toy.NAME not in _help(path, option)


def test_a_plugin_of_an_unimported_registry_is_listed(monkeypatch, tmp_path) -> None:
    """The registry module is imported for the list only when its group has an entry point."""
    fake = types.ModuleType("fake_registry_for_help")
    fake.names = lambda: ["shipped", "plugged"]  # type: ignore[attr-defined]
    source = _choices._Source(("shipped",), fake.__name__, lambda m: m.names(), "semshift.fake")
    monkeypatch.setitem(_choices._SOURCES, "fake", source)
    imported: list[str] = []

    def spy(name: str) -> ModuleType:
        imported.append(name)
        return fake

    monkeypatch.setattr(_choices.importlib, "import_module", spy)
    _choices._plugin_groups.cache_clear()
    assert _choices.names("fake") == ("shipped",) and imported == []  # no plugin: no import
    info = tmp_path / "fake_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[semshift.fake]\nplugged = fake_plugin:thing\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    _choices._plugin_groups.cache_clear()  # a package installed while the process runs
    try:
        assert _choices.names("fake") == ("shipped", "plugged") and imported == [fake.__name__]
    finally:
        _choices._plugin_groups.cache_clear()
    monkeypatch.setitem(sys.modules, fake.__name__, fake)  # imported already: listed from it
    assert _choices.listed_names("fake") == "shipped or plugged"
