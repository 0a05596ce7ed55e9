"""A toy detector added by one module (tests/extensions/toy_detector.py), or by an installed
package's entry point, reaches every place a detector appears: the detector list, parameter and
search-space checks, run-config validation, ``semshift evaluate --help``, the scores and the
results, with no edit to semshift."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from semshift import detectors
from semshift.cli import app
from semshift.errors import DuplicateNameError, InputError, UnknownNameError
from semshift.run import load_config, run
from tests.extensions import toy_detector as toy
from tests.extensions.conftest import registration
from tests.run.conftest import base_config, build_stores


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return build_stores(tmp_path_factory.mktemp("toy_detector"))


@pytest.fixture
def registered() -> Iterator[None]:
    with registration(toy):
        yield


def test_listed_checked_and_known_answer(registered: None) -> None:
    assert toy.NAME in detectors.list_detectors(level="post_hoc")
    with pytest.raises(DuplicateNameError, match="already registered"):
        toy.register()
    detectors.check_params(toy.NAME, {"scale": 2.0})
    with pytest.raises(InputError, match=r"toy_margin: scale must be a number > 0, got 0"):
        detectors.check_params(toy.NAME, {"scale": 0})
    assert detectors.get_search_space(toy.NAME) == {"scale": (0.5, 1.0)}
    z = np.array([[3.0, 1.0, 0.0], [1.0, 1.0, 0.5]])
    got = detectors.get(toy.NAME, scale=2.0).fit().score(logits=z)
    np.testing.assert_array_equal(got, [4.0, 0.0])


def test_unknown_after_cleanup() -> None:
    assert toy.NAME not in detectors.list_detectors()
    with pytest.raises(UnknownNameError, match="unknown detector 'toy_margin'"):
        detectors.get_class(toy.NAME)


def test_ranks_a_shifted_set_as_ood(registered: None) -> None:
    rng = np.random.default_rng(0)
    id_logits = rng.normal(size=(200, 5))
    id_logits[:, 0] += 4.0  # confident
    ood_logits = rng.normal(size=(200, 5))
    det = detectors.get(toy.NAME).fit()
    assert det.score(logits=id_logits).mean() > det.score(logits=ood_logits).mean()


def test_validates_in_a_run_config_and_runs(registered: None, stores, tmp_path) -> None:
    out = tmp_path / "out"
    cfg = base_config(stores, out, detectors=["msp", {"name": toy.NAME, "params": {"scale": 2}}],
                      protocols={"osr": {}})  # fmt: skip
    loaded = load_config(cfg)
    assert [getattr(d, "name", d) for d in loaded.detectors] == ["msp", toy.NAME]
    bad = base_config(stores, out, detectors=[{"name": toy.NAME, "params": {"scale": -1}}])
    with pytest.raises(InputError, match="toy_margin: scale must be a number > 0"):
        load_config(bad)
    result = run(cfg, progress=False)
    assert not result.errors
    table = pd.read_parquet(out / "results.parquet")
    assert toy.NAME in set(table["detector"])
    scores = pd.read_parquet(out / "scores" / "id_test.parquet")
    assert f"score:{toy.NAME}" in scores.columns


def test_semshift_evaluate_lists_and_runs_it(registered: None, stores, tmp_path) -> None:
    runner = CliRunner()
    help_text = runner.invoke(app, ["evaluate", "--help"], env={"COLUMNS": "400"}).output
    assert toy.NAME in help_text
    out = tmp_path / "ev"
    args = [
        "evaluate", "--train", str(stores["train"]), "--test", str(stores["test"]),
        "--ood", f"easy={stores['ood']}", "--select", "easy:split=easy",
        "-d", toy.NAME, "--bootstrap", "0", "--out", str(out),
    ]  # fmt: skip
    done = runner.invoke(app, args)
    assert done.exit_code == 0, done.output
    assert toy.NAME in set(pd.read_parquet(out / "results.parquet")["detector"])


def test_an_installed_plugin_registers_it_through_its_entry_point(monkeypatch, tmp_path) -> None:
    """A distribution on sys.path whose ``semshift.detectors`` entry point names the class."""
    info = tmp_path / "toy_detector_plugin-0.1.dist-info"
    info.mkdir()
    meta = "Metadata-Version: 2.1\nName: toy-detector-plugin\nVersion: 0.1\n"
    (info / "METADATA").write_text(meta)
    entry = f"[semshift.detectors]\n{toy.NAME} = tests.extensions.toy_detector:ToyMargin\n"
    (info / "entry_points.txt").write_text(entry)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        detectors.DETECTORS.refresh()
        assert detectors.get_class(toy.NAME) is toy.ToyMargin
    finally:
        toy.unregister()
