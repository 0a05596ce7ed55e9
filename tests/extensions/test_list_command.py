"""``semshift list KIND`` reads each registry: every toy extension, once registered, is listed
under its kind (and is gone once removed); the kinds are exactly the registries semshift has."""

from __future__ import annotations

import importlib

import pytest
from typer.testing import CliRunner

from semshift.cli import app
from semshift.cli.registries import KINDS, registry_names
from semshift.registry import Registry
from tests.extensions.conftest import registration

#: kind -> the toy module that registers one entry of it
TOYS = {
    "detectors": "toy_detector",
    "metrics": "toy_metric",
    "split-builders": "toy_split_builder",
    "training-methods": "toy_training_method",
    "zsl-methods": "toy_zsl_method",
    "layouts": "toy_layout",
    "benchmarks": "toy_benchmark",
    "protocols": "toy_protocol",
}


def _listed(kind: str) -> str:
    done = CliRunner().invoke(app, ["list", kind], env={"COLUMNS": "300"})
    assert done.exit_code == 0, done.output
    return done.output


@pytest.mark.parametrize("kind", sorted(TOYS))
def test_a_registered_toy_is_listed_under_its_kind(kind: str) -> None:
    toy = importlib.import_module(f"tests.extensions.{TOYS[kind]}")
    assert toy.NAME not in _listed(kind)
    with registration(toy):
        assert toy.NAME in _listed(kind)
        assert toy.NAME in [name for name, _ in registry_names(kind)]
    assert toy.NAME not in _listed(kind)


def test_the_toy_model_and_command_group_are_listed() -> None:
    import sys

    from semshift.cli import COMMAND_GROUPS
    from tests.extensions import toy_model

    toy_model.register()
    assert toy_model.NAME in _listed("models")
    toy_model.unregister()
    assert toy_model.NAME not in _listed("models")
    if "toy" in COMMAND_GROUPS:
        COMMAND_GROUPS.remove("toy")
    sys.modules.pop("tests.extensions.toy_command", None)
    importlib.import_module("tests.extensions.toy_command")  # importing it registers "toy"
    try:
        assert "A toy command group" in _listed("command-groups")
    finally:
        COMMAND_GROUPS.remove("toy")
        sys.modules.pop("tests.extensions.toy_command", None)


def test_every_kind_is_a_registry_and_every_entry_has_a_description() -> None:
    for kind, (module, attr) in KINDS.items():
        assert isinstance(getattr(importlib.import_module(module), attr), Registry), kind
        rows = registry_names(kind)
        assert rows, kind
        missing = [n for n, text in rows if not text and "<name>" not in n]
        assert not missing, (kind, missing)
    out = CliRunner().invoke(app, ["list"]).output
    assert all(kind in out for kind in KINDS)
