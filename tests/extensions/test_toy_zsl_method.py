"""A toy zero-shot method added by one module (tests/extensions/toy_zsl_method.py) is listed
in the paper's order, checks its hyperparameters and runs the whole zero-shot protocol
(selection on val, refit, ZSL and GZSL scores) through ``evaluate_zsl``."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from semshift.errors import DuplicateNameError, ParamError
from semshift.training.zsl import evaluate_zsl, get_zsl_method, list_zsl_methods
from tests.extensions import toy_zsl_method as toy
from tests.extensions.conftest import registration
from tests.training.planted import planted


@pytest.fixture(scope="module")
def planted_data():
    return planted()


@pytest.fixture
def registered() -> Iterator[None]:
    with registration(toy):
        yield


def test_listed_last_and_checked(registered: None) -> None:
    assert list_zsl_methods()[-1] == toy.NAME  # order 99: after the paper's eight
    with pytest.raises(DuplicateNameError):
        toy.register()
    with pytest.raises(ParamError, match=r"^toy_ridge: lam must be a number > 0, got 0$"):
        get_zsl_method(toy.NAME)().set_params(lam=0)


def test_runs_the_zero_shot_protocol(registered: None, planted_data) -> None:
    out = evaluate_zsl(planted_data, toy.NAME)
    assert [p.params for p in out.grid] == [{"lam": 0.1}, {"lam": 10.0}]
    assert out.scores.shape[0] == out.labels.shape[0]
    pred = out.scores[:, out.unseen].argmax(1)
    unseen_rows = np.isin(out.labels, out.unseen)
    accuracy = (out.unseen[pred[unseen_rows]] == out.labels[unseen_rows]).mean()
    assert accuracy > 1.5 / len(out.unseen)  # well above chance on the planted data
