"""Search spaces declared beside the parameters: valid for every detector, checked at
registration, checked again for user candidates, and stated in docs/methods.md."""

from __future__ import annotations

import re
from numbers import Integral
from pathlib import Path
from typing import ClassVar

import pytest

from semshift import detectors
from semshift.detectors import Interval
from semshift.detectors._base import Detector
from semshift.detectors._params import ParamConstraints, SearchSpace
from semshift.errors import InputError
from semshift.protocols.search import format_value

METHODS = Path(__file__).resolve().parents[2] / "docs" / "methods.md"


@pytest.mark.parametrize("name", detectors.list_detectors(level="post_hoc"))
def test_every_candidate_is_a_value_the_detector_accepts(name):
    cls = detectors.get_class(name)
    for param, candidates in cls.search_space.items():
        assert param in cls.param_names()
        assert isinstance(candidates, tuple) and candidates
        assert len({repr(c) for c in candidates}) == len(candidates), f"{name}.{param} repeats"
        for value in candidates:
            detectors.check_params(name, {param: value})  # raises on a bad candidate
            assert detectors.get(name, **{param: value}).get_params()[param] == value


@pytest.mark.parametrize("name", detectors.list_detectors(level="model"))
def test_model_level_detectors_have_no_space_and_refuse_a_search(name):
    assert detectors.get_search_space(name) == {}
    with pytest.raises(InputError, match=rf"^{name} is a model-level detector: it is computed"):
        detectors.check_search_space(name)


def test_the_tunable_detectors_declare_a_space():
    tunable = {"knn", "react", "ash_b", "ash_p", "ash_s", "scale", "dice", "vim", "gen"}
    declared = {n for n in detectors.list_detectors() if detectors.get_search_space(n)}
    assert tunable <= declared
    assert detectors.get_search_space("knn") == {"k": (1, 10, 20, 50, 100, 200, 500, 1000)}
    assert detectors.get_search_space("msp") == {}
    # a copy: changing it leaves the class's declaration alone
    detectors.get_search_space("knn")["k"] = (3,)
    assert detectors.get_class("knn").search_space["k"][0] == 1


def _class(space: SearchSpace, level: str = "post_hoc") -> type[Detector]:
    class Probe(Detector):
        name = "search_space_probe"
        _parameter_constraints: ClassVar[ParamConstraints] = {
            "k": [Interval(Integral, 1, None, closed="left")]
        }
        search_space: ClassVar[SearchSpace] = space

        def __init__(self, *, k: int = 1) -> None:
            self.k = k

    Probe.level = level  # type: ignore[assignment]
    return Probe


@pytest.mark.parametrize(
    ("space", "level", "message"),
    [
        ({"k": (1, 0)}, "post_hoc", "k must be an integer >= 1, got 0"),
        ({"k": (1, 1)}, "post_hoc", "candidate 1 of k is given twice"),
        ({"k": [1, 2]}, "post_hoc", "must be a non-empty tuple"),
        ({"k": ()}, "post_hoc", "must be a non-empty tuple"),
        ({"alpha": (1,)}, "post_hoc", "search_space['alpha'] is not a hyperparameter"),
        ({"k": (1, 2)}, "model", "a model-level detector"),
    ],
)
def test_registration_refuses_a_bad_declaration(space, level, message):
    with pytest.raises(TypeError, match=re.escape(message)):
        detectors.register_detector(_class(space, level))
    assert "search_space_probe" not in detectors.list_detectors()


def test_user_candidates_are_checked_before_any_work():
    assert detectors.check_search_space("knn", {"k": [1, 10, 50]}) == {"k": (1, 10, 50)}
    assert detectors.check_search_space("knn", {"k": 7}) == {"k": (7,)}
    # the declared space less what the caller fixes
    assert detectors.check_search_space("nnguide", fixed={"k": 5}) == {"alpha": (0.01, 0.1, 1.0)}
    cases = [
        ("knn", {"kk": [1]}, None, "knn has no hyperparameter kk; accepted: k, backend"),
        ("knn", {"k": [0, 10]}, None, "knn: k must be an integer >= 1, got 0"),
        ("knn", {"k": [5, 5]}, None, "knn: candidate 5 of k is given twice"),
        ("knn", {"k": []}, None, "knn: k has no candidate; give one or more values"),
        ("react", {"percentile": [101.0]}, None, "react: percentile must be a number in [0, 100]"),
        ("knn", {"k": [1, 2]}, {"k": 3}, "knn: k is both fixed (k=3) and searched"),
        ("msp", None, None, "msp has nothing to search (no space)"),
        ("react", None, {"percentile": 90.0}, "react has nothing to search (its searched"),
    ]
    for name, space, fixed, message in cases:
        with pytest.raises(InputError, match=f"^{re.escape(message)}"):
            detectors.check_search_space(name, space, fixed=fixed)


def _doc_spaces() -> dict[str, str]:
    text = METHODS.read_text(encoding="utf-8")
    start = text.index('<a id="hyperparameter-search"></a>')
    section = text[start : text.index("\n<a id=", start + 10)]
    return dict(re.findall(r"^\| `(\w+)` \| (.+) \|$", section, flags=re.M))


def test_the_methods_doc_states_every_declared_space():
    doc = _doc_spaces()
    declared = {n: detectors.get_search_space(n) for n in detectors.list_detectors()}
    expected = {
        name: "; ".join(f"`{k}`: {', '.join(format_value(v) for v in c)}" for k, c in sp.items())
        for name, sp in declared.items()
        if sp
    }
    assert doc == expected
