"""The registry and the public API surface of semshift.detectors."""

from __future__ import annotations

import numpy as np
import pytest

from semshift import detectors
from semshift.errors import InputError, SemshiftError, UnknownNameError

ISSUE_NAMES = {
    "msp", "mls", "energy", "entropy", "gen", "temp_scaling", "klm", "openmax", "max_cosine",
    "mahalanobis", "rmd", "knn", "vim", "residual", "react", "ash_b", "ash_p", "ash_s", "scale",
    "dice", "she", "gradnorm", "nnguide", "fdbd",
}  # fmt: skip
#: added by issue 16 (Detectors 2), post-hoc on stored arrays
ISSUE_16_NAMES = {
    "nci", "vra", "weighted_ebo", "gmm", "pnml", "mcm", "neco", "relation", "cadref", "caref",
    "cfood", "grood",
}  # fmt: skip
#: added by issue 17 (training-based open-set methods): the score of an ARPL-trained model
ISSUE_17_NAMES = {"arpl"}
#: issue 28: lts needs only the pooled features and the logits, so it is array-level
ISSUE_28_NAMES = {"lts"}


def test_list_detectors_is_sorted_and_covers_the_issues() -> None:
    names = detectors.list_detectors(level="post_hoc")
    assert names == sorted(names)
    assert set(names) == ISSUE_NAMES | ISSUE_16_NAMES | ISSUE_17_NAMES | ISSUE_28_NAMES


def test_one_registry_for_both_levels() -> None:
    post_hoc = detectors.list_detectors(level="post_hoc")
    model = detectors.list_detectors(level="model")
    # issue 16's model-level detectors (and those before it) are all registered entries
    assert set(model) >= {
        "adascale_a", "adascale_l", "gradnorm_kl", "gram", "iodin", "mahalanobis_odin",
        "mc_dropout", "mds_ensemble", "multi_mahalanobis", "nac", "odin", "rankfeat",
    }  # fmt: skip
    assert model == sorted(model)
    assert detectors.list_detectors() == sorted(post_hoc + model)
    assert not set(post_hoc) & set(model)
    for name in detectors.list_detectors():
        level = detectors.get_class(name).level
        assert level == ("model" if name in model else "post_hoc")
    assert detectors.LEVELS == ("post_hoc", "model")
    with pytest.raises(InputError, match=r"unknown detector level 'posthoc'; known: post_hoc"):
        detectors.list_detectors(level="posthoc")


def test_unknown_name_lists_known_ones_and_close_matches() -> None:
    with pytest.raises(UnknownNameError) as info:
        detectors.get("knnn")
    msg = str(info.value)
    assert "unknown detector 'knnn'" in msg
    assert "Did you mean 'knn'" in msg
    for name in detectors.list_detectors():
        assert name in msg
    assert isinstance(info.value, SemshiftError) and isinstance(info.value, KeyError)


def test_get_passes_hyperparameters_and_rejects_unknown_ones() -> None:
    det = detectors.get("knn", k=7)
    assert det.get_params() == {"k": 7, "backend": "auto"}
    assert repr(det) == "KNN(k=7, backend='auto')"
    with pytest.raises(InputError, match=r"no hyperparameter K; accepted: k, backend"):
        detectors.get("knn", K=7)


@pytest.mark.parametrize(
    ("name", "defaults"),
    [
        ("knn", {"k": 50, "backend": "auto"}),
        ("nnguide", {"k": 100, "alpha": 0.01, "backend": "auto"}),
        ("gen", {"gamma": 0.1, "M": 100}),
        ("temp_scaling", {}),
        ("openmax", {"alpha": 3, "tail_size": 20, "weibull": "libmr", "translate_amount": 1.0}),
        ("react", {"percentile": 90.0}),
        ("ash_b", {"percentile": 90.0}),
        ("ash_p", {"percentile": 90.0}),
        ("ash_s", {"percentile": 90.0}),
        ("scale", {"percentile": 85.0}),
        ("dice", {"percentile": 90.0}),
        ("vim", {"dim": None}),
        ("msp", {}),
        ("odin", {"temperature": 1000.0, "epsilon": 0.0014}),
        ("rankfeat", {}),
    ],
)
def test_reference_defaults(name: str, defaults: dict[str, object]) -> None:
    assert detectors.get(name).get_params() == defaults


@pytest.mark.parametrize("name", detectors.list_detectors(level="post_hoc"))
def test_requires_declaration(name: str) -> None:
    cls = detectors.get_class(name)
    assert cls.name == name
    assert cls.requires == cls.fit_requires | cls.score_requires
    assert cls.requires <= set(detectors.INPUT_NAMES)
    assert cls.score_requires and cls.score_requires <= {"logits", "features"}


def test_requires_of_selected_detectors() -> None:
    assert detectors.get_class("knn").requires == {"features"}
    assert detectors.get_class("vim").fit_requires == {"features", "head"}
    assert detectors.get_class("vim").score_requires == {"features", "logits"}
    assert detectors.get_class("temp_scaling").fit_requires == {"val_logits", "val_labels"}
    assert detectors.get_class("msp").fit_requires == frozenset()


def test_register_rejects_duplicate_names() -> None:
    class Dup(detectors.Detector):
        name = "msp"
        score_requires = frozenset({"logits"})

    with pytest.raises(ValueError, match="already registered"):
        detectors.register_detector(Dup)
    assert detectors.get_class("msp").__name__ == "MSP"


def test_bad_requires_declaration_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="bad requires"):

        class Bad(detectors.Detector):
            name = "bad"
            score_requires = frozenset({"images"})


def test_module_docstring_example() -> None:
    det = detectors.get("energy").fit()
    np.testing.assert_allclose(det.score(logits=np.zeros((1, 2))), [np.log(2.0)])
