"""Hyperparameter constraints: declared for every parameter, checked before any work.

The contract part is generated from the registry (both levels): a new detector gets its
checks for free, and one that leaves a parameter undeclared cannot even be registered.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from numbers import Integral, Real
from typing import Any

import numpy as np
import pytest

from semshift import detectors
from semshift.detectors import Boolean, Constraint, Interval, StrOptions
from semshift.detectors._params import describe, satisfies, validate_params
from semshift.errors import InputError, UnknownNameError

ALL = detectors.list_detectors()


def _outside(c: Constraint) -> list[Any]:
    """Values just outside ``c`` (bounds, wrong types), for the generated rejection tests."""
    if isinstance(c, Interval):
        integral = c.type is Integral
        step = 1 if integral else 0.5
        out: list[Any] = [math.nan, True, "1", [1]]
        if c.left is not None:
            out.append(c.left if c.closed in ("right", "neither") else c.left - step)
        if c.right is not None:
            out.append(c.right if c.closed in ("left", "neither") else c.right + step)
        if integral:
            out.append((c.left or 0) + 1.5)  # a float between two accepted integers
        else:
            out.append(math.inf)
        return out
    if isinstance(c, StrOptions):
        return [c.options[0].upper() + "_", 1, True]
    if isinstance(c, Boolean):
        return [1, 0, "true"]
    return c.examples_outside()  # a kind of constraint defined in a detector's module


def _bad_cases() -> list[Any]:
    cases = []
    for name in ALL:
        for param, constraints in detectors.get_class(name)._parameter_constraints.items():
            values = [v for c in constraints if c is not None for v in _outside(c)]
            values += [] if None in constraints else [None]
            for value in values:
                if not satisfies(constraints, value):  # another constraint may accept it
                    cases.append(pytest.param(name, param, value, id=f"{name}-{param}={value!r}"))
    return cases


BAD = _bad_cases()


@pytest.mark.parametrize("name", ALL)
def test_every_hyperparameter_declares_constraints(name: str) -> None:
    cls = detectors.get_class(name)
    declared = cls._parameter_constraints
    assert set(declared) == set(cls.param_names())
    for constraints in declared.values():
        assert constraints and all(c is None or isinstance(c, Constraint) for c in constraints)


@pytest.mark.parametrize("name", ALL)
def test_defaults_pass(name: str) -> None:
    defaults = detectors.get_class(name)().get_params()
    detectors.check_params(name, defaults)
    assert detectors.get(name, **defaults).get_params() == defaults


def test_every_parameter_has_generated_bad_values() -> None:
    """Nothing left out silently: each parameter of each detector is in the generated cases."""
    covered = {(p.values[0], p.values[1]) for p in BAD}
    for name in ALL:
        for param in detectors.get_class(name).param_names():
            assert (name, param) in covered


@pytest.mark.parametrize(("name", "param", "value"), BAD)
def test_bad_value_is_refused_before_any_fit(name: str, param: str, value: Any) -> None:
    cls = detectors.get_class(name)
    message = (
        f"{name}: {param} must be {describe(cls._parameter_constraints[param])}, got {value!r}"
    )
    with pytest.raises(InputError) as info:
        detectors.check_params(name, {param: value})
    assert str(info.value) == message
    with pytest.raises(InputError, match=f"^{re.escape(message)}$"):
        detectors.get(name, **{param: value})
    det = cls(**{param: value})  # __init__ only stores, like scikit-learn
    assert det.get_params()[param] is value
    if cls.level == "post_hoc":
        # fit checks the hyperparameters first: no input is even looked at
        with pytest.raises(InputError, match=f"^{re.escape(message)}$"):
            det.fit()


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("knn", {"k": 0}, "knn: k must be an integer >= 1, got 0"),
        ("knn", {"k": 2.5}, "knn: k must be an integer >= 1, got 2.5"),
        ("knn", {"k": np.int64(-3)}, "knn: k must be an integer >= 1, got -3"),
        ("knn", {"backend": "gpu"},
         "knn: backend must be one of 'auto', 'numpy', 'faiss', got 'gpu'"),
        ("ash_b", {"percentile": 100.0},
         "ash_b: percentile must be a number in [0, 100), got 100.0"),
        ("scale", {"percentile": 100}, "scale: percentile must be a number in [0, 100), got 100"),
        ("react", {"percentile": -1}, "react: percentile must be a number in [0, 100], got -1"),
        ("dice", {"percentile": "90"}, "dice: percentile must be a number in [0, 100], got '90'"),
        ("gen", {"gamma": 0.0}, "gen: gamma must be a number in (0, 1], got 0.0"),
        ("gen", {"M": 0}, "gen: M must be an integer >= 1, got 0"),
        ("nnguide", {"alpha": 2.0}, "nnguide: alpha must be a number in (0, 1], got 2.0"),
        ("openmax", {"tail_size": 1}, "openmax: tail_size must be an integer >= 2, got 1"),
        ("openmax", {"alpha": 0}, "openmax: alpha must be an integer >= 1, got 0"),
        ("vim", {"dim": 0}, "vim: dim must be an integer >= 1 or None, got 0"),
        ("residual", {"dim": 3.0}, "residual: dim must be an integer >= 1 or None, got 3.0"),
        ("odin", {"temperature": 0}, "odin: temperature must be a number > 0, got 0"),
        ("odin", {"epsilon": -0.1}, "odin: epsilon must be a number >= 0, got -0.1"),
        ("odin", {"epsilon": math.inf}, "odin: epsilon must be a number >= 0, got inf"),
    ],
)  # fmt: skip
def test_known_messages(name: str, params: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError) as info:
        detectors.check_params(name, params)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("knn", {"k": 1, "backend": "numpy"}),
        ("knn", {"k": np.int64(5)}),
        ("react", {"percentile": 0}),
        ("react", {"percentile": 100}),
        ("dice", {"percentile": np.float32(100.0)}),
        ("ash_p", {"percentile": 0.0}),
        ("scale", {"percentile": 99.9}),
        ("gen", {"gamma": 1, "M": 1}),
        ("nnguide", {"alpha": 1.0, "k": 1}),
        ("openmax", {"alpha": 1, "tail_size": 2}),
        ("vim", {"dim": None}),
        ("residual", {"dim": 1}),
        ("odin", {"temperature": 1e-3, "epsilon": 0}),
        ("msp", {}),
    ],
)
def test_boundary_values_are_accepted(name: str, params: dict[str, Any]) -> None:
    detectors.check_params(name, params)
    assert detectors.get(name, **params).get_params() == {
        **detectors.get_class(name)().get_params(),
        **params,
    }


def test_unknown_names_are_listed_with_the_accepted_ones() -> None:
    with pytest.raises(InputError) as info:
        detectors.check_params("knn", {"kk": 1, "k": 0})
    assert str(info.value) == "knn has no hyperparameter kk; accepted: k, backend"
    with pytest.raises(InputError, match=r"^msp has no hyperparameter T; accepted: \(none\)$"):
        detectors.check_params("msp", {"T": 1})
    with pytest.raises(
        InputError, match=r"^odin has no hyperparameter T; accepted: temperature, epsilon$"
    ):
        detectors.check_params("odin", {"T": 1})
    with pytest.raises(UnknownNameError, match=r"unknown detector 'knnn'\. Did you mean 'knn'"):
        detectors.check_params("knnn", {})
    detectors.check_params("knn", {})  # nothing given: the defaults, valid


def test_fit_checks_values_set_after_construction(problem: Any) -> None:
    det = detectors.get("knn", k=5)
    det.k = 0  # scikit-learn style: parameters may be set between get and fit
    with pytest.raises(InputError, match=r"^knn: k must be an integer >= 1, got 0$"):
        det.fit(features=problem.h_train)


def test_data_dependent_checks_stay_in_fit(problem: Any) -> None:
    detectors.check_params("knn", {"k": 10_000})  # valid until it meets 240 training rows
    with pytest.raises(InputError, match=r"k = 10000 neighbours requested but only 240"):
        detectors.get("knn", k=10_000).fit(features=problem.h_train)


# -- the constraint objects --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("constraint", "words"),
    [
        (Interval(Integral, 1, None, closed="left"), "an integer >= 1"),
        (Interval(Integral, 1, None, closed="neither"), "an integer > 1"),
        (Interval(Integral, None, 5, closed="right"), "an integer <= 5"),
        (Interval(Integral, None, None, closed="neither"), "an integer"),
        (Interval(Real, 0, 100, closed="left"), "a number in [0, 100)"),
        (Interval(Real, 0, 1, closed="right"), "a number in (0, 1]"),
        (Interval(Real, 0.5, 2.5, closed="both"), "a number in [0.5, 2.5]"),
        (Interval(Real, 0, None, closed="neither"), "a number > 0"),
        (Interval(Real, None, 0.0014, closed="neither"), "a number < 0.0014"),
        (Interval(Real, None, None, closed="neither"), "a finite number"),
        (StrOptions(("auto", "numpy", "faiss")), "one of 'auto', 'numpy', 'faiss'"),
        (StrOptions({"b", "a"}), "one of 'a', 'b'"),
        (Boolean(), "a boolean (true or false)"),
    ],
)
def test_constraints_describe_themselves(constraint: Constraint, words: str) -> None:
    assert str(constraint) == words


def test_describe_joins_alternatives() -> None:
    one = Interval(Integral, 1, None, closed="left")
    assert describe([one]) == "an integer >= 1"
    assert describe([one, None]) == "an integer >= 1 or None"
    assert describe([one, StrOptions(["auto"]), None]) == "an integer >= 1, one of 'auto' or None"


def test_interval_membership() -> None:
    ints = Interval(Integral, 1, 3, closed="both")
    assert [ints.is_satisfied_by(v) for v in (0, 1, 3, 4, np.int32(2), 2.0, True)] == [
        False, True, True, False, True, False, False
    ]  # fmt: skip
    reals = Interval(Real, 0, None, closed="left")
    assert [reals.is_satisfied_by(v) for v in (0, 0.0, np.float16(1), -1e-300, 1e300)] == [
        True, True, True, False, True
    ]  # fmt: skip
    # NaN is never inside; infinity only as an explicit closed bound
    assert not reals.is_satisfied_by(math.nan) and not reals.is_satisfied_by(math.inf)
    assert Interval(Real, 0, math.inf, closed="both").is_satisfied_by(math.inf)
    assert not Interval(Real, None, None, closed="neither").is_satisfied_by(math.nan)
    assert not reals.is_satisfied_by("1") and not reals.is_satisfied_by(None)
    assert Boolean().is_satisfied_by(np.bool_(True)) and not Boolean().is_satisfied_by(1)
    assert StrOptions(["a"]).is_satisfied_by("a") and not StrOptions(["a"]).is_satisfied_by("A")


def test_bad_constraint_declarations() -> None:
    with pytest.raises(TypeError, match=r"numbers\.Integral or numbers\.Real"):
        Interval(int, 0, 1, closed="both")
    with pytest.raises(ValueError, match="reversed"):
        Interval(Real, 1, 0, closed="both")
    with pytest.raises(ValueError, match="closed must be"):
        Interval(Real, 0, 1, closed="open")
    with pytest.raises(TypeError, match="one or more strings"):
        StrOptions([])


def test_validate_params_names_the_owner() -> None:
    declared = {"flag": [Boolean()], "k": [Interval(Integral, 1, None, closed="left")]}
    validate_params("thing", declared, {"flag": False, "k": 2, "other": object()})
    with pytest.raises(
        InputError, match=r"^thing: flag must be a boolean \(true or false\), got 1"
    ):
        validate_params("thing", declared, {"flag": 1})


# -- the declaration is enforced at registration -----------------------------------------------
def _define(constraints: Any, level: str = "post_hoc") -> type[detectors.Detector]:
    class Tmp(detectors.Detector):
        name = "tmp_params_test"
        score_requires = frozenset({"logits"})
        _parameter_constraints = constraints

        def __init__(self, *, a: int = 1) -> None:
            self.a = a

    Tmp.level = level
    return Tmp


@pytest.mark.parametrize(
    ("constraints", "level", "message"),
    [
        ({}, "post_hoc", r"missing \['a'\]"),
        ({"a": [None], "b": [None]}, "post_hoc", r"not a hyperparameter \['b'\]"),
        ({"a": []}, "post_hoc", r"non-empty list of Constraint or None"),
        ({"a": [int]}, "post_hoc", r"non-empty list of Constraint or None"),
        ({"a": [None]}, "posthoc", r"level must be one of"),
    ],
)
def test_registration_refuses_undeclared_parameters(constraints, level, message) -> None:
    with pytest.raises(TypeError, match=message):
        detectors.register_detector(_define(constraints, level))
    assert "tmp_params_test" not in detectors.list_detectors()


# -- model-level declarations ------------------------------------------------------------------
def test_model_level_declarations() -> None:
    odin, rankfeat = detectors.get("odin"), detectors.get("rankfeat")
    assert odin.get_params() == {"temperature": 1000.0, "epsilon": 0.0014}
    assert rankfeat.get_params() == {}
    assert isinstance(odin, detectors.ModelLevelDetector) and odin.level == "model"
    odin_cls, rankfeat_cls = detectors.get_class("odin"), detectors.get_class("rankfeat")
    assert odin_cls.needs_grad and not odin_cls.needs_feature_map
    assert rankfeat_cls.needs_feature_map and not rankfeat_cls.needs_grad
    assert detectors.get_class("odin").requires == frozenset()
    for name in ("odin", "rankfeat"):
        for call in (detectors.get(name).fit, detectors.get(name).score):
            with pytest.raises(InputError, match=rf"computed during feature extraction .*"
                               rf"semshift extract --score {name}"):  # fmt: skip
                call()


def test_declarations_import_no_torch() -> None:
    code = "import sys, semshift.detectors; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
