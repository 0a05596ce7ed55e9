"""A toy benchmark added by one module (tests/extensions/toy_benchmark.py) is listed by
``semshift benchmark list``, checked by ``semshift benchmark check`` on a release the test
writes, and turned into a valid run configuration."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from semshift.catalog.benchmarks import benchmark_config, list_benchmarks, register_benchmark
from semshift.cli import app
from semshift.errors import DuplicateNameError, InputError
from tests.extensions import toy_benchmark as toy
from tests.extensions.conftest import registration


@pytest.fixture
def registered() -> Iterator[None]:
    with registration(toy):
        yield


def test_listed_and_checked_by_the_cli(registered: None, release: Path) -> None:
    assert toy.NAME in list_benchmarks()
    with pytest.raises(DuplicateNameError):
        register_benchmark(toy.BENCHMARK)
    runner = CliRunner()
    listed = runner.invoke(app, ["benchmark", "list"], env={"COLUMNS": "300"})
    assert listed.exit_code == 0 and toy.NAME in listed.output
    checked = runner.invoke(app, ["benchmark", "check", toy.NAME, "--root", f"release={release}"])
    assert checked.exit_code == 0, checked.output
    assert "10 images present" in checked.output
    (release / "images" / "9.png").unlink()
    broken = runner.invoke(app, ["benchmark", "check", toy.NAME, "--root", f"release={release}"])
    assert isinstance(broken.exception, InputError)  # semshift.cli.main prints it, exit 2
    assert "benchmark toy-release, set new: toy_csv_release: 1 listed image(s) missing" in str(
        broken.exception
    )


def test_its_run_configuration_validates(registered: None, release: Path, tmp_path: Path):
    from semshift.run import load_config

    weights = tmp_path / "w.pt"
    weights.write_bytes(b"")
    cfg = benchmark_config(toy.NAME, roots={"release": release}, out=tmp_path / "out",
                           model={"name": "resnet18", "weights": str(weights)})  # fmt: skip
    loaded = load_config(cfg)
    assert loaded.data.sets["new"].semantic_level == 1


def test_a_bad_benchmark_is_refused_before_it_joins() -> None:
    import dataclasses

    with pytest.raises(InputError, match="num_classes must be a positive integer"):
        register_benchmark(dataclasses.replace(toy.BENCHMARK, num_classes=0))
    with pytest.raises(InputError, match="lower-case name"):
        register_benchmark(dataclasses.replace(toy.BENCHMARK, name="Toy Release"))
    assert toy.NAME not in list_benchmarks()
