"""The training-method registry and each method's loss against its formula."""

from __future__ import annotations

import math

import pytest
import torch

from semshift.errors import InputError, UnknownNameError
from semshift.training.methods import (
    METHODS,
    TrainingMethod,
    check_method_params,
    get_method,
    list_methods,
    method_defaults,
    register_method,
)
from semshift.training.recipe import Recipe, TrainConfig

GEN = torch.Generator().manual_seed(0)
LOGITS = torch.randn(6, 4, generator=GEN, dtype=torch.float64).float()
LABELS = torch.tensor([0, 1, 2, 3, 0, 1])
FEATS = torch.zeros(6, 8)


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_declares_its_defaults_and_builds_with_them(name):
    method = get_method(name)
    assert method.get_params() == method_defaults(name)
    assert set(method.get_params()) == set(type(method)._parameter_constraints)
    assert type(method).__doc__ and "References" in type(method).__doc__


def test_registry_names_and_paper_defaults():
    assert list_methods() == ["arpl", "arpl_cs", "ce", "logitnorm", "oe"]
    assert method_defaults("ce") == {"label_smoothing": 0.3}
    assert method_defaults("logitnorm") == {"temperature": 0.04}
    assert method_defaults("oe") == {"weight": 0.5, "outlier_batch_ratio": 2.0}
    assert method_defaults("arpl") == {"weight_pl": 0.1, "temperature": 1.0}
    assert method_defaults("arpl_cs") == {
        "weight_pl": 0.1, "temperature": 1.0, "beta": 0.1, "gan_lr": 0.0002, "nz": 100,
        "ngf": 64, "ndf": 64,
    }  # fmt: skip


def test_unknown_names_and_bad_values_are_one_line_errors():
    known = r"unknown training method 'c'. Did you mean 'ce'\? Known: arpl, arpl_cs, ce"
    with pytest.raises(UnknownNameError, match=known):
        get_method("c")
    with pytest.raises(UnknownNameError, match="Did you mean 'temperature'"):
        check_method_params("logitnorm", {"temprature": 1.0})
    with pytest.raises(InputError, match="logitnorm: temperature must be a number > 0, got 0"):
        check_method_params("logitnorm", {"temperature": 0})
    with pytest.raises(InputError, match="recipe: randaugment_m must be an integer in"):
        Recipe(randaugment_m=31)
    with pytest.raises(UnknownNameError, match="Did you mean 'epochs'"):
        Recipe.from_dict({"epoch": 3})


def test_register_method_refuses_undeclared_hyperparameters():
    class Bad(TrainingMethod):
        name = "bad-method"

        def __init__(self, alpha: float = 1.0) -> None:
            super().__init__()
            self.alpha = alpha

    with pytest.raises(TypeError, match="must declare exactly"):
        register_method(Bad)
    assert "bad-method" not in METHODS


def test_cross_entropy_with_label_smoothing_matches_its_formula():
    eps = 0.3
    loss = get_method("ce", label_smoothing=eps).loss(LOGITS, FEATS, LABELS, None)
    logp = torch.log_softmax(LOGITS.double(), 1)
    q = torch.full_like(logp, eps / 4)
    q[torch.arange(6), LABELS] += 1 - eps
    assert float(loss) == pytest.approx(float(-(q * logp).sum(1).mean()), rel=1e-6)


def test_logitnorm_is_invariant_to_the_logits_scale_and_matches_its_formula():
    m = get_method("logitnorm", temperature=0.5)
    loss = m.loss(LOGITS, FEATS, LABELS, None)
    assert float(m.loss(7.0 * LOGITS, FEATS, LABELS, None)) == pytest.approx(float(loss), rel=1e-5)
    z = LOGITS.double()
    zn = z / (torch.linalg.vector_norm(z, dim=1, keepdim=True) * 0.5)
    ref = -torch.log_softmax(zn, 1)[torch.arange(6), LABELS].mean()
    assert float(loss) == pytest.approx(float(ref), rel=1e-5)


def test_outlier_exposure_adds_lambda_log_c_for_flat_outlier_logits():
    m = get_method("oe", weight=0.5)
    flat = torch.full((5, 4), 3.0)
    ce = get_method("ce", label_smoothing=0.0).loss(LOGITS, FEATS, LABELS, None)
    oe = m.loss(LOGITS, FEATS, LABELS, flat)
    assert float(oe - ce) == pytest.approx(0.5 * math.log(4), rel=1e-6)
    # peaked outlier logits cost more than flat ones
    assert float(m.loss(LOGITS, FEATS, LABELS, flat + 5 * torch.eye(5, 4))) > float(oe)
    with pytest.raises(InputError, match="needs an outlier batch"):
        m.loss(LOGITS, FEATS, LABELS, None)


def test_config_round_trips_through_json():
    cfg = TrainConfig(model="demo-glyphnet", data="x", recipe=Recipe(epochs=2), seed=4)
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(UnknownNameError, match="Did you mean 'seed'"):
        TrainConfig.from_dict(cfg.to_dict() | {"sed": 1})


@pytest.mark.parametrize("module", ["methods", "images", "distributed", "gan"])
def test_docstring_examples(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(f"semshift.training.{module}"))
    assert result.attempted > 0 and result.failed == 0
