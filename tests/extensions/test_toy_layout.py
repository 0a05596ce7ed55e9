"""A toy dataset layout added by one module (tests/extensions/toy_layout.py) is listed, reads a
release the test writes (whole or sampled), and validates in a run config."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from semshift.catalog.layouts import layout_parameters, list_layouts, open_layout
from semshift.errors import DuplicateNameError, InputError
from tests.extensions import toy_layout as toy
from tests.extensions.conftest import registration


@pytest.fixture
def registered() -> Iterator[None]:
    with registration(toy):
        yield


def test_listed_and_reads_a_release(registered: None, release: Path) -> None:
    assert toy.NAME in list_layouts()
    with pytest.raises(DuplicateNameError):
        toy.register()
    assert layout_parameters(toy.NAME) == ["split", "sample"]
    src = open_layout(toy.NAME, release, split="test")
    assert src.names == ["0.png", "1.png", "2.png", "3.png"] and src.labels.tolist() == [1, 0, 1, 0]
    sampled = open_layout(toy.NAME, release, split="test", sample=2)
    assert sampled.names == ["0.png", "3.png"]
    with pytest.raises(InputError, match=r"layout 'toy_csv_release' takes no parameter splt"):
        open_layout(toy.NAME, release, splt="test")


def test_validates_in_a_run_config(registered: None, release: Path, tmp_path: Path) -> None:
    from semshift.run import load_config
    from tests.run.conftest import base_config, build_stores

    stores = build_stores(tmp_path / "stores")
    cfg = base_config(stores, tmp_path / "out")
    layout = {"name": toy.NAME, "root": str(release), "params": {"split": "test"}}
    weights = tmp_path / "w.pt"
    weights.write_bytes(b"")  # only its existence is checked when the config is loaded
    cfg["model"] = {"name": "resnet18", "num_classes": 2, "weights": str(weights)}
    cfg["data"]["sets"]["toy"] = {"role": "ood", "split": "toy", "layout": layout}
    assert load_config(cfg).data.sets["toy"].layout.name == toy.NAME
    cfg["data"]["sets"]["toy"]["layout"]["params"] = {"splt": "test"}
    with pytest.raises(InputError, match=r"data\.sets\.toy\.layout\.params: layout "
                                         r"'toy_csv_release' takes no parameter splt"):  # fmt: skip
        load_config(cfg)
