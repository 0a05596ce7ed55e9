"""The pure hyperparameter search: known answers, the tie rule, failures, the tidy tables, and
the leak check of validation OOD classes against test OOD classes."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from semshift import detectors
from semshift.errors import InputError
from semshift.protocols.search import (
    SEARCH_COLUMNS,
    SENSITIVITY_COLUMNS,
    SearchResult,
    best_index,
    check_val_ood_disjoint,
    grid,
    search_detector,
    search_frame,
    sensitivity_frame,
)
from semshift.splits.check import check_class_disjoint
from semshift.taxonomy import read_custom_taxonomy, wordnet


def _angles(deg: np.ndarray) -> np.ndarray:
    rad = np.deg2rad(deg)
    return np.c_[np.cos(rad), np.sin(rad)]


@pytest.fixture(scope="module")
def planted() -> dict[str, np.ndarray]:
    """ID features spread over -45..45 degrees and 3 stray training rows at 90 degrees, where
    the validation OOD rows lie: their single nearest neighbour is a stray ID row, closer than
    any ID row's (k = 1 calls them more ID than ID), their 10th is far (k >= 10 separates
    them perfectly)."""
    rng = np.random.default_rng(0)
    train = _angles(np.r_[rng.uniform(-45, 45, 100), [89.95, 90.0, 90.05]])
    val_id = _angles(rng.uniform(-45, 45, 60))
    val_ood = _angles(rng.uniform(89.95, 90.05, 60))
    return {"train": train, "val_id": val_id, "val_ood": val_ood}


def _knn(planted, ks):
    return search_detector(
        "knn",
        fit_inputs={"features": planted["train"]},
        id_val={"features": planted["val_id"]},
        val_ood={"features": planted["val_ood"]},
        space={"k": ks},
    )


def test_known_answer_the_planted_winner_is_chosen(planted):
    res = _knn(planted, [1, 10, 50])
    values = [t.value for t in res.trials]
    assert values[0] < 0.1  # k = 1: the stray rows make the OOD rows look ID
    assert values[1] == values[2] == 1.0  # a tie ...
    assert res.chosen == {"k": 10} and res.best == 1  # ... goes to the first
    assert res.params == {"k": 10} and res.value == 1.0
    assert (res.n_id, res.n_ood) == (60, 60)


def test_each_value_is_the_auroc_of_that_candidate_alone(planted):
    res = _knn(planted, [1, 3, 5])
    is_ood = np.r_[np.zeros(60, bool), np.ones(60, bool)]
    for t in res.trials:
        det = detectors.get("knn", **t.params).fit(features=planted["train"])
        s = np.r_[det.score(features=planted["val_id"]), det.score(features=planted["val_ood"])]
        assert t.value == pytest.approx(roc_auc_score(~is_ood, s), abs=1e-12)
    assert res.best == int(np.argmax([t.value for t in res.trials]))


def test_ties_go_to_the_first_combination_in_declared_order():
    rng = np.random.default_rng(1)
    z_id, z_ood = rng.normal(2, 1, (40, 4)), rng.normal(0, 1, (40, 4))
    kw = {"fit_inputs": {}, "id_val": {"logits": z_id}, "val_ood": {"logits": z_ood}}
    # gen with M >= C = 4 scores alike for every M: a tie
    up = search_detector("gen", space={"M": [5, 10, 20]}, fixed={"gamma": 0.1}, **kw)
    down = search_detector("gen", space={"M": [20, 10, 5]}, fixed={"gamma": 0.1}, **kw)
    assert len({t.value for t in up.trials}) == 1
    assert up.chosen == {"M": 5} and down.chosen == {"M": 20}
    assert up.params == {"gamma": 0.1, "M": 5}
    # the same data give the same answer twice (deterministic)
    again = search_detector("gen", space={"M": [5, 10, 20]}, fixed={"gamma": 0.1}, **kw)
    assert again.trials == up.trials


def test_best_index_rules():
    assert best_index([0.5, 0.9, 0.9]) == 1
    assert best_index([math.nan, 0.2, 0.7]) == 2
    assert best_index([0.3, 0.1, 0.1], higher_is_better=False) == 1
    with pytest.raises(InputError, match="no combination has a finite objective value"):
        best_index([math.nan, math.nan])


def test_a_lower_is_better_objective_is_minimised(planted):
    res = search_detector(
        "knn",
        fit_inputs={"features": planted["train"]},
        id_val={"features": planted["val_id"]},
        val_ood={"features": planted["val_ood"]},
        space={"k": [1, 10]},
        objective="fpr95",
    )
    assert res.chosen == {"k": 10} and res.trials[1].value < res.trials[0].value


def test_failed_combinations_are_recorded_and_never_chosen(planted):
    res = _knn(planted, [1, 10, 1000])
    assert res.chosen == {"k": 10}
    bad = res.trials[2]
    assert math.isnan(bad.value) and bad.error.startswith("knn.fit: k = 1000 neighbours")
    with pytest.raises(InputError, match=r"^search knn: every one of the 2 combination\(s\) fail"):
        _knn(planted, [1000, 2000])


def test_grid_order_and_the_size_limit(planted):
    assert grid({"a": (1, 2), "b": ("x", "y")}) == [
        {"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"}, {"a": 2, "b": "y"},
    ]  # fmt: skip
    assert grid({}) == [{}]
    with pytest.raises(InputError, match=r"^search nnguide: 24 combinations \(8 k x 3 alpha\) "):
        search_detector(
            "nnguide",
            fit_inputs={"features": planted["train"]},
            id_val={"features": planted["val_id"]},
            val_ood={"features": planted["val_ood"]},
            max_combinations=10,
        )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"space": {"k": [0]}}, "knn: k must be an integer >= 1, got 0"),
        ({"space": {"q": [1]}}, "knn has no hyperparameter q; accepted: k, backend"),
        ({"objective": "oscr"}, "objective 'oscr' is not a ranking metric of (scores, is_ood)"),
        ({"fixed": {"k": 0}}, "knn: k must be an integer >= 1, got 0"),
    ],
)
def test_bad_input_is_one_line(planted, kwargs, message):
    with pytest.raises(InputError, match="^" + re.escape(message)):
        search_detector(
            "knn",
            fit_inputs={"features": planted["train"]},
            id_val={"features": planted["val_id"]},
            val_ood={"features": planted["val_ood"]},
            **kwargs,
        )


def test_model_level_detectors_are_refused(planted):
    with pytest.raises(InputError, match=r"^odin is a model-level detector"):
        search_detector("odin", fit_inputs={}, id_val={}, val_ood={})


def test_tidy_tables_and_the_sensitivity_curves():
    rng = np.random.default_rng(2)
    h = np.abs(rng.normal(size=(200, 6)))
    w, b = rng.normal(size=(3, 6)), np.zeros(3)
    res = search_detector(
        "vra",
        fit_inputs={"features": h, "head": (w, b)},
        id_val={"features": np.abs(rng.normal(size=(50, 6)))},
        val_ood={"features": np.abs(rng.normal(0.5, 1.5, size=(50, 6)))},
        space={"lower_percentile": [1.0, 10.0], "upper_percentile": [90.0, 99.0, 99.5]},
    )
    trials = search_frame([res])
    assert list(trials.columns) == list(SEARCH_COLUMNS)
    assert len(trials) == 6 * 2  # 6 combinations x 2 hyperparameters
    assert trials["chosen"].sum() == 2 and set(trials["trial"][trials["chosen"]]) == {res.best}
    sens = sensitivity_frame(trials)
    assert list(sens.columns) == list(SENSITIVITY_COLUMNS)
    chosen = {k: str(v).removesuffix(".0") for k, v in res.chosen.items()}
    upper = sens[sens["parameter"] == "upper_percentile"]
    assert upper["candidate"].tolist() == ["90", "99", "99.5"]
    assert set(upper["others"]) == {f"lower_percentile={chosen['lower_percentile']}"}
    # each point is the trial with the other hyperparameter at its chosen value
    for cand, value in zip(upper["candidate"], upper["value"], strict=True):
        t = next(
            t for t in res.trials if t.params == {**res.chosen, "upper_percentile": float(cand)}
        )
        assert value == t.value
    assert upper["chosen"].sum() == 1 and sens["chosen"].sum() == 2
    # the JSON form (the run's cache) gives the same result back
    assert SearchResult.from_json(res.to_json()) == res


# ------------------------------------------------------------------------- leak check
CHIHUAHUA, DOG, TABLE = "n02085620", "n02084071", "n04379243"


def test_same_class_id_is_a_leak():
    with pytest.raises(InputError, match=r"^search: validation OOD set 'val' leaks into test OOD "
                       r"set 'far': class x is in both sets; the validation"):  # fmt: skip
        check_val_ood_disjoint({"val": ["a", "x"]}, {"near": ["b"], "far": ["x", "y"]})
    report = check_class_disjoint({"val": ["a", "x", "x"]}, {"far": ["x", "a"]})
    assert report.violations[["kind", "item"]].values.tolist() == [
        ["class_overlap", "a"], ["class_overlap", "x"],
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("val", "test", "kind", "detail"),
    [
        ([CHIHUAHUA], [DOG], "test_ancestor",
         f"test class {DOG} (dog) is an ancestor in wordnet-3.0 of validation class "
         f"{CHIHUAHUA} (Chihuahua)"),
        ([DOG], [CHIHUAHUA], "test_descendant",
         f"test class {CHIHUAHUA} (Chihuahua) is a descendant in wordnet-3.0 of validation "
         f"class {DOG} (dog)"),
        (["dog.n.01"], [DOG], "same_node",
         f"test class {DOG} (dog) is the same wordnet-3.0 node as validation class dog.n.01 "
         "(dog)"),
    ],
)  # fmt: skip
def test_wordnet_ancestor_descendant_and_same_synset_are_leaks(val, test, kind, detail):
    wn = wordnet()
    report = check_class_disjoint({"val": val}, {"far": test}, wn)
    assert report.violations["kind"].tolist() == [kind]
    assert report.violations["detail"].tolist() == [detail]
    message = f"search: validation OOD set 'val' leaks into test OOD set 'far': {detail}; "
    with pytest.raises(InputError, match="^" + re.escape(message)):
        check_val_ood_disjoint({"val": val}, {"far": test}, wn)
    # without a taxonomy only the ids are compared: no leak found
    assert check_class_disjoint({"val": val}, {"far": test}).ok


def test_unrelated_classes_pass_and_the_counts_say_what_was_checked():
    report = check_val_ood_disjoint(
        {"val": [CHIHUAHUA, CHIHUAHUA, "not_a_wnid"]}, {"far": [TABLE], "near": [TABLE]}, wordnet()
    )
    assert report.ok
    assert report.checked == {
        "val_classes": 2, "test_classes": 1, "val_classes_in_taxonomy": 1,
        "test_classes_in_taxonomy": 1,
    }  # fmt: skip


def test_a_custom_hierarchy_is_checked_the_same_way(aircraft_csv):
    tax = read_custom_taxonomy(aircraft_csv)
    assert check_class_disjoint({"val": ["737-300"]}, {"far": ["a320fam"]}, tax).ok
    report = check_class_disjoint({"val": ["737-300", "a320fam"]}, {"far": ["b737"]}, tax)
    assert report.violations[["kind", "item"]].values.tolist() == [["test_ancestor", "737-300"]]
    with pytest.raises(InputError, match=r"test class b737 .* is an ancestor in"):
        check_val_ood_disjoint({"val": ["737-300"]}, {"far": ["b737"]}, tax)
    with pytest.raises(InputError, match=r"\(1 more leak\(s\) found\)"):
        check_val_ood_disjoint({"val": ["737-300", "737-400"]}, {"far": ["b737"]}, tax)
