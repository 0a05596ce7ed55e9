"""A toy training method added by one module (tests/extensions/toy_training_method.py) is
listed, checks its hyperparameters, computes its loss and trains a model through
``semshift.training.train`` and ``semshift train``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from semshift.errors import DuplicateNameError, InputError
from semshift.training.loop import train
from semshift.training.methods import check_method_params, get_method, list_methods
from semshift.training.recipe import Recipe, TrainConfig
from tests.extensions import toy_training_method as toy
from tests.extensions.conftest import registration
from tests.training.images import write_class_images


@pytest.fixture
def registered() -> Iterator[None]:
    with registration(toy):
        yield


def test_listed_checked_and_its_loss_is_the_formula(registered: None) -> None:
    assert toy.NAME in list_methods()
    with pytest.raises(DuplicateNameError):
        toy.register()
    with pytest.raises(InputError, match="toy_logit_penalty: weight must be a number >= 0"):
        check_method_params(toy.NAME, {"weight": -1})
    z = torch.tensor([[2.0, 0.0], [0.0, 1.0]])
    y = torch.tensor([0, 1])
    got = get_method(toy.NAME, weight=0.5).loss(z, torch.zeros(2, 3), y, None)
    want = torch.nn.functional.cross_entropy(z, y) + 0.5 * (4.0 + 1.0) / 2
    assert torch.allclose(got, want)


def test_it_trains_a_model(registered: None, tmp_path: Path) -> None:
    data = write_class_images(tmp_path / "imgs", {"a": 4, "b": 4})
    recipe = Recipe(epochs=1, batch_size=4, lr=0.05, randaugment_n=0)
    config = TrainConfig(model="demo-glyphnet", data=str(data), recipe=recipe, method=toy.NAME,
                         method_params={"weight": 0.1})  # fmt: skip
    result = train(config, tmp_path / "out", threads=1)
    assert result.model_file.is_file() and len(result.history) == 1
    saved = json.loads((tmp_path / "out" / "train.json").read_text())["config"]
    assert saved["method"] == toy.NAME and saved["method_params"] == {"weight": 0.1}
