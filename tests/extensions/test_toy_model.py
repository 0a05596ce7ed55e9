"""A toy model added by one module (tests/extensions/toy_model.py), or named by an installed
package's ``semshift.models`` entry point, is listed, builds, and extracts a feature store
through ``semshift extract``."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from semshift.cli import app
from semshift.errors import DuplicateNameError
from semshift.features.models import MODELS, list_models, load_model, register_model
from semshift.features.store import open_verified


@pytest.fixture
def fresh_plugin_import(monkeypatch: pytest.MonkeyPatch):
    """The toy module unimported and unregistered, so its entry point registers it."""
    monkeypatch.delitem(sys.modules, "tests.extensions.toy_model", raising=False)
    if "toy-two-conv" in MODELS:
        MODELS.remove("toy-two-conv")
    yield
    if "toy-two-conv" in MODELS:
        MODELS.remove("toy-two-conv")
    sys.modules.pop("tests.extensions.toy_model", None)


def _install_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = tmp_path / "toy_model_plugin-0.1.dist-info"
    info.mkdir()
    meta = "Metadata-Version: 2.1\nName: toy-model-plugin\nVersion: 0.1\n"
    (info / "METADATA").write_text(meta)
    entry = "[semshift.models]\ntoy-two-conv = tests.extensions.toy_model\n"
    (info / "entry_points.txt").write_text(entry)
    monkeypatch.syspath_prepend(str(tmp_path))


def test_one_module_registers_it(fresh_plugin_import) -> None:
    toy = importlib.import_module("tests.extensions.toy_model")

    assert toy.NAME in list_models()
    with pytest.raises(DuplicateNameError):
        register_model(toy.NAME)(toy.build)
    adapter = load_model(toy.NAME, random_init=True, num_classes=3)
    assert adapter.module[-1].out_features == 3


def test_an_entry_point_lists_it_and_extract_builds_it_on_first_use(
    fresh_plugin_import, monkeypatch, tmp_path, images
) -> None:
    _install_plugin(tmp_path, monkeypatch)
    assert "toy-two-conv" in list_models()  # listed from the entry point, not imported yet
    assert "tests.extensions.toy_model" not in sys.modules
    out = tmp_path / "store"
    args = [
        "extract", "--model", "toy-two-conv", "--random-init", "--data", str(images),
        "--out", str(out), "--num-classes", "2", "--preset", "resize32-crop32",
        "--batch-size", "2", "--workers", "0", "--device", "cpu", "--no-progress",
    ]  # fmt: skip
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    store = open_verified({"toy": out})["toy"]
    assert len(store) == 6 and "tests.extensions.toy_model" in sys.modules


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.training.images import write_class_images

    return write_class_images(tmp_path_factory.mktemp("images") / "imgs", {"a": 3, "b": 3})
