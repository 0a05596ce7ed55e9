"""The zero-shot methods declare their constraints with semshift.params, like the detectors."""

from __future__ import annotations

import pytest

from semshift.errors import DuplicateNameError, InputError, ParamError
from semshift.params import Constraint
from semshift.training.zsl import ZSL_METHODS, get_zsl_method, list_zsl_methods


@pytest.mark.parametrize("name", list_zsl_methods())
def test_every_method_declares_params_constraints(name):
    cls = get_zsl_method(name)
    for key, rules in cls.constraints.items():
        assert rules and all(r is None or isinstance(r, Constraint) for r in rules), key


def test_a_bad_value_is_a_param_error_naming_method_and_parameter():
    with pytest.raises(ParamError, match=r"^eszsl: gamma must be a number > 0, got -1\.0$") as e:
        get_zsl_method("eszsl")().set_params(gamma=-1.0)
    assert e.value.key == "gamma" and isinstance(e.value, InputError)
    with pytest.raises(
        ParamError, match=r"^eszsl: targets must be one of 'onehot', 'signed', got 'both'$"
    ):
        get_zsl_method("eszsl")().set_params(targets="both")
    with pytest.raises(ParamError, match=r"^conse: top must be an integer >= 1, got 0$"):
        get_zsl_method("conse")().set_params(top=0)


def test_the_registry_is_the_one_registry_type():
    assert ZSL_METHODS.names() == list_zsl_methods()
    with pytest.raises(DuplicateNameError):
        ZSL_METHODS.add("eszsl", get_zsl_method("eszsl"))


def test_the_old_constraint_classes_still_import_with_a_warning():
    from semshift.training.zsl import registry

    with pytest.warns(DeprecationWarning, match="semshift.params"):
        interval = registry.Interval
    with pytest.raises(InputError, match="x must be > 0"):
        interval(0.0).check("x", -1)
    with pytest.raises(AttributeError):
        registry.NoSuchName  # noqa: B018
