"""The split stage reaches every registered builder from a config, checked when it is loaded."""

from __future__ import annotations

import re

import pytest
from tests.run.conftest import base_config, build_stores

from semshift.errors import InputError
from semshift.run import load_config, run
from semshift.splits.manifest import SplitManifest
from semshift.splits.registry import list_builders
from semshift.splits.ssb import build_ssb_split


def test_every_registered_builder_is_a_valid_config_builder():
    assert set(list_builders()) == {"ssb", "cleaning", "superclass", "graded", "zsl", "sample"}


def test_a_builder_split_is_built_cached_and_filters_a_set(tmp_path, aircraft_csv):
    stores = build_stores(tmp_path / "stores")
    (tmp_path / "known.txt").write_text("737-300\n737-400\na319\n")
    cfg = base_config(stores, tmp_path / "out", detectors=["msp"])
    cfg.update(
        taxonomy=str(aircraft_csv),
        splits={"air": {"builder": "ssb", "params": {"known": "known.txt", "preset": "hierarchy"}}},
    )
    first = run(cfg, progress=False, base_dir=tmp_path)
    written = SplitManifest.read(tmp_path / "out" / "splits" / "air" / "split.json")
    direct = build_ssb_split(str(tmp_path / "known.txt"), None, taxonomy=aircraft_csv,
                             preset="hierarchy").manifest  # fmt: skip
    assert written.bins == direct.bins and list(written.known) == list(direct.known)
    assert first.stages["split"].computed == ["air"]
    again = run(cfg, progress=False, base_dir=tmp_path)
    assert again.stages["split"].reused == ["air"]
    # an edited file the params name rebuilds the split
    (tmp_path / "known.txt").write_text("737-300\na319\n")
    third = run(cfg, progress=False, base_dir=tmp_path)
    assert third.stages["split"].computed == ["air"]


@pytest.mark.parametrize(
    ("split", "message"),
    [
        ({"builder": "sbb"},
         "splits.air.builder: unknown split builder 'sbb' (did you mean 'ssb'?)"),
        ({"builder": "ssb", "params": {"presett": "ssb"}}, "splits.air.params.presett"),
        ({"builder": "cleaning", "params": {"sisters_only": "maybe"}},
         "splits.air.params.sisters_only"),
    ],
)  # fmt: skip
def test_bad_builder_or_params_fail_when_the_config_is_loaded(tmp_path, split, message):
    stores = build_stores(tmp_path / "stores")
    cfg = base_config(stores, tmp_path / "out", detectors=["msp"], splits={"air": split})
    with pytest.raises(InputError, match=re.escape(message)) as info:
        load_config(cfg, base_dir=tmp_path)
    assert "\n" not in str(info.value)
