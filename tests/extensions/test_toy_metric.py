"""A toy metric added by one module (tests/extensions/toy_metric.py) is listed, validates in a
run config and a protocol's config, and its values appear in the results rows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest

from semshift.errors import DuplicateNameError, InputError
from semshift.metrics import get_metric, list_metrics
from semshift.run import load_config, run
from tests.extensions import toy_metric as toy
from tests.extensions.conftest import registration
from tests.run.conftest import base_config, build_stores


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return build_stores(tmp_path_factory.mktemp("toy_metric"))


@pytest.fixture
def registered() -> Iterator[None]:
    with registration(toy):
        yield


def test_listed_with_a_known_answer(registered: None) -> None:
    assert toy.NAME in list_metrics(inputs=("scores", "is_ood"))
    with pytest.raises(DuplicateNameError):
        toy.register()
    spec = get_metric(toy.NAME)
    assert spec.higher_is_better
    assert spec(np.array([3.0, 2.0, 1.0, 2.5]), np.array([False, False, True, True])) == 0.5


def test_without_it_a_config_naming_it_is_refused(stores, tmp_path) -> None:
    assert toy.NAME not in list_metrics()
    with pytest.raises(InputError, match=toy.NAME):
        load_config(base_config(stores, tmp_path / "o", metrics=["auroc", toy.NAME]))


def test_a_run_reports_it_per_detector_and_set(registered: None, stores, tmp_path) -> None:
    out = tmp_path / "out"
    cfg = base_config(stores, out, metrics=["auroc", toy.NAME], protocols={"osr": {}},
                      detectors=["msp"])  # fmt: skip
    assert load_config(cfg).metrics == ["auroc", toy.NAME]
    result = run(cfg, progress=False)
    assert not result.errors
    table = pd.read_parquet(out / "results.parquet")
    rows = table[(table["metric"] == toy.NAME) & (table["set"] == "easy")]
    id_scores = pd.read_parquet(out / "scores" / "id_test.parquet")["score:msp"].to_numpy()
    easy = pd.read_parquet(out / "scores" / "easy.parquet")["score:msp"].to_numpy()
    want = toy.ood_below_min_id(
        np.concatenate([id_scores, easy]), np.r_[np.zeros(len(id_scores)), np.ones(len(easy))]
    )
    assert len(rows) == 1 and rows["value"].item() == pytest.approx(want)
