"""A toy split builder added by one module (tests/extensions/toy_split_builder.py) is listed,
validates its params through its model (in the registry and in a run config) and builds a
manifest."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from semshift.errors import DuplicateNameError, InputError
from semshift.splits.registry import BuildContext, build_split, list_builders, validate_params
from tests.extensions import toy_split_builder as toy
from tests.extensions.conftest import registration

TOY = """id,parent,name
entity,,entity
vehicle,entity,vehicle
car,vehicle,car
sedan,car,sedan
coupe,car,coupe
boat,vehicle,boat
canoe,boat,canoe
"""


@pytest.fixture
def registered() -> Iterator[None]:
    with registration(toy):
        yield


@pytest.fixture
def ctx(tmp_path: Path) -> BuildContext:
    (tmp_path / "toy.csv").write_text(TOY)
    return BuildContext(taxonomy="toy.csv", base_dir=tmp_path, where="run.yaml: splits.mine")


def test_listed_validated_and_built(registered: None, ctx: BuildContext) -> None:
    assert toy.NAME in list_builders()
    with pytest.raises(DuplicateNameError):
        toy.register()
    params = validate_params(toy.NAME, {"classes": ["sedan", "coupe", "canoe"]}, where="x")
    assert params.n_known == 1  # the default, declared once in the model
    with pytest.raises(InputError, match=r"^x\.params\.n_known: "):
        validate_params(toy.NAME, {"classes": ["sedan", "coupe"], "n_known": 0}, where="x")
    with pytest.raises(InputError, match=r"^x\.params\.clases: unknown parameter; did you mean"):
        validate_params(toy.NAME, {"clases": ["sedan"]}, where="x")
    manifest = build_split(toy.NAME, {"classes": ["sedan", "coupe", "canoe"]}, ctx)
    assert manifest.known == ["sedan"]
    assert manifest.bins == {"d2": ["coupe"], "d4": ["canoe"]}  # sister leaves: 2 edges apart


def test_a_run_config_validates_its_params(registered: None, tmp_path: Path) -> None:
    from semshift.run import load_config
    from tests.run.conftest import base_config, build_stores

    stores = build_stores(tmp_path / "stores")
    (tmp_path / "toy.csv").write_text(TOY)
    cfg = base_config(stores, tmp_path / "out")
    cfg["taxonomy"] = str(tmp_path / "toy.csv")
    cfg["splits"] = {"mine": {"builder": toy.NAME, "params": {"classes": ["sedan", "coupe"]}}}
    assert load_config(cfg).splits["mine"].builder == toy.NAME
    cfg["splits"]["mine"]["params"]["n_known"] = 0
    with pytest.raises(InputError, match=r"splits\.mine\.params\.n_known"):
        load_config(cfg)
