"""The one registry type every kind of extension uses (semshift.registry)."""

from __future__ import annotations

import sys
import types
import warnings
from importlib import metadata

import pytest

from semshift.errors import DuplicateNameError, InputError, UnknownNameError
from semshift.registry import PluginWarning, Registry


def test_add_lookup_list_and_remove():
    reg: Registry[int] = Registry("toy thing")
    assert reg.add("b", 2) == 2
    reg.add("a", 1)
    assert reg["a"] == 1 and "b" in reg and "c" not in reg
    assert reg.names() == ["a", "b"] and list(reg) == ["a", "b"] and len(reg) == 2
    assert dict(reg.items()) == {"a": 1, "b": 2}
    assert reg.get("c") is None  # a mapping's get
    assert reg.names(where=lambda name, value: value > 1) == ["b"]
    assert reg.remove("a") == 1 and reg.names() == ["b"]


def test_a_duplicate_name_is_one_error_type():
    reg: Registry[int] = Registry("toy duplicate")
    reg.add("x", 1)
    with pytest.raises(DuplicateNameError, match="toy duplicate name 'x' is already registered"):
        reg.add("x", 2)
    assert issubclass(DuplicateNameError, InputError) and issubclass(DuplicateNameError, ValueError)
    reg.add("x", 3, replace=True)
    assert reg["x"] == 3
    with pytest.raises(InputError, match="needs a non-empty name"):
        reg.add("", 4)


def test_an_unknown_name_says_did_you_mean_and_lists_the_known():
    reg: Registry[int] = Registry("toy colour")
    reg.add("red", 1)
    reg.add("green", 2)
    with pytest.raises(UnknownNameError) as info:
        reg["gren"]
    assert str(info.value) == "unknown toy colour 'gren'. Did you mean 'green'? Known: green, red"
    assert isinstance(info.value, KeyError)
    with pytest.raises(UnknownNameError):
        reg.remove("blue")


def test_order_and_loader():
    calls = []
    reg: Registry[int] = Registry(
        "toy ordered", order=lambda name, value: -value, loader=lambda: calls.append(1)
    )
    reg.add("one", 1)
    reg.add("three", 3)
    assert reg.names() == ["three", "one"]
    reg.names()
    assert calls == [1]  # the loader runs once


class _EntryPoint:
    def __init__(self, name, value, obj=None, error=None):
        self.name, self.value, self._obj, self._error = name, value, obj, error

    def load(self):
        if self._error is not None:
            raise self._error
        return self._obj


def test_entry_points_register_plugins_and_a_broken_one_only_warns(monkeypatch):
    reg: Registry[object] = Registry("toy plugin", entry_points="semshift.toy_plugins")
    module = types.ModuleType("toy_plugin_module")  # importing it registers its own entries
    module_ep = _EntryPoint("mod", "toy_plugin_module", obj=module)
    thing = object()
    eps = [
        _EntryPoint("thing", "pkg:thing", obj=thing),
        module_ep,
        _EntryPoint("broken", "pkg:broken", error=ImportError("no module named pkg")),
    ]
    seen = []

    def fake(group):
        seen.append(group)
        return eps

    monkeypatch.setattr(metadata, "entry_points", fake)
    monkeypatch.setitem(sys.modules, "toy_plugin_module", module)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        names = reg.names()
    assert seen == ["semshift.toy_plugins"]
    assert names == ["thing"] and reg["thing"] is thing
    (w,) = [w for w in caught if issubclass(w.category, PluginWarning)]
    assert "'broken'" in str(w.message) and "ImportError: no module named pkg" in str(w.message)
    reg.names()
    assert seen == ["semshift.toy_plugins"]  # loaded once


def test_adopt_validates_a_plugin_object(monkeypatch):
    adopted = []
    reg: Registry[object] = Registry(
        "toy adopted", entry_points="semshift.toy_adopted",
        adopt=lambda name, obj: adopted.append((name, obj)),
    )  # fmt: skip
    monkeypatch.setattr(metadata, "entry_points", lambda group: [_EntryPoint("k", "p:k", obj=int)])
    assert reg.names() == [] and adopted == [("k", int)]


def test_refresh_picks_up_a_plugin_installed_later(monkeypatch, tmp_path):
    """A real distribution on sys.path (dist-info with entry_points.txt), found by importlib."""
    reg: Registry[object] = Registry("toy installed", entry_points="semshift.toy_installed")
    assert reg.names() == []
    pkg = tmp_path / "toy_installed_plugin.py"
    pkg.write_text("VALUE = 42\n")
    info = tmp_path / "toy_installed_plugin-0.1.dist-info"
    info.mkdir()
    meta = "Metadata-Version: 2.1\nName: toy-installed-plugin\nVersion: 0.1\n"
    (info / "METADATA").write_text(meta)
    points = "[semshift.toy_installed]\nanswer = toy_installed_plugin:VALUE\n"
    (info / "entry_points.txt").write_text(points)
    monkeypatch.syspath_prepend(str(tmp_path))
    reg.refresh()
    assert reg.names() == ["answer"] and reg["answer"] == 42
