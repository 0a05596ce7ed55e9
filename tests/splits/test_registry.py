"""The split-builder registry: every builder reachable by name from a run config, the same
manifest as its function, errors that name the config key."""

from __future__ import annotations

import doctest
import inspect
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pydantic import ConfigDict

from semshift.errors import InputError, UnknownNameError
from semshift.splits import registry
from semshift.splits.check import check_split
from semshift.splits.cleaning import build_cleaning_split
from semshift.splits.graded import LAID, build_graded_split, graded_grid
from semshift.splits.registry import (
    BuildContext,
    BuilderParams,
    build_split,
    get_builder,
    list_builders,
    register_builder,
    validate_params,
)
from semshift.splits.sample import build_sample_split
from semshift.splits.ssb import build_ssb_split
from semshift.splits.superclass import build_score_split, build_superclasses, split_by_scores
from semshift.splits.zsl import build_zsl_split

WHERE = "run.yaml: splits.mine"

TOY = """id,parent,name
entity,,entity
vehicle,entity,vehicle
car,vehicle,car
sedan,car,sedan
coupe,car,coupe
convertible,car,convertible
boat,vehicle,boat
canoe,boat,canoe
kayak,boat,kayak
animal,entity,animal
dog,animal,dog
puppy,dog,puppy
hound,dog,hound
beagle,hound,beagle
device,entity,device
phone,device,phone
smartphone,phone,smartphone
radio,device,radio
"""
LEAVES = ["sedan", "coupe", "convertible", "canoe", "kayak", "puppy", "beagle", "smartphone"]
LEAVES += ["radio"]


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """A config folder: the taxonomy, a class list and a name list under relative paths."""
    (tmp_path / "lists").mkdir()
    (tmp_path / "toy.csv").write_text(TOY)
    (tmp_path / "lists" / "known.txt").write_text("sedan\ncanoe  # a comment\nbeagle\n")
    (tmp_path / "lists" / "names.txt").write_text("vehicle\nanimal\ndevice\n")
    return tmp_path


@pytest.fixture
def ctx(base: Path) -> BuildContext:
    return BuildContext(taxonomy=str(base / "toy.csv"), base_dir=base, where=WHERE)


# ---------------------------------------------------------------- registry contract

#: per builder: its public function, params renamed on the way (param -> function argument),
#: params that belong to another function, and the documented default departures
FUNCTIONS = {
    "ssb": (build_ssb_split, {}, {}, {"pool": None}),
    "cleaning": (build_cleaning_split, {}, {}, {}),
    "superclass": (
        build_superclasses,
        {},
        {"scores": None, "image_store": None, "text_embeddings": None}
        | {"iqr_factor": split_by_scores, "easy": split_by_scores}
        | {"iid": split_by_scores, "score_over": split_by_scores},
        {"allow_empty": True},
    ),
    "graded": (build_graded_split, {"levels": "n_levels"}, {}, {}),
    "zsl": (build_zsl_split, {}, {}, {"seed": None}),
    "sample": (build_sample_split, {}, {}, {"pool": None}),
}


def test_importing_the_registry_registers_every_builder_in_a_fresh_interpreter():
    code = "import semshift.splits.registry as r; print(','.join(r.list_builders()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "cleaning,graded,sample,ssb,superclass,zsl"
    assert list_builders() == ["cleaning", "graded", "sample", "ssb", "superclass", "zsl"]
    # light: no torch or sentence model is imported to register them
    code = "import sys, semshift.splits.registry; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_registry_docstring_examples_run():
    result = doctest.testmod(registry, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 6 and result.failed == 0


def test_every_registered_builder_has_a_direct_call_test():
    assert sorted(FUNCTIONS) == list_builders()


@pytest.mark.parametrize("name", list_builders())
def test_params_defaults_are_the_function_defaults(name):
    spec = get_builder(name)
    function, renamed, elsewhere, departures = FUNCTIONS[name]
    assert spec.name == name and spec.summary.strip() and "\n" not in spec.summary
    assert spec.params.model_config["extra"] == "forbid"
    for field, info in spec.params.model_fields.items():
        if field in departures:
            assert info.default == departures[field], field
            continue
        other = elsewhere.get(field, function)
        if other is None:  # a parameter of the registry adapter alone
            continue
        arg = inspect.signature(other).parameters[renamed.get(field, field)]
        if arg.default is inspect.Parameter.empty:
            assert info.is_required(), field
        else:
            assert info.default == arg.default, field


@pytest.mark.parametrize("name", list_builders())
def test_unknown_param_lists_the_accepted_keys(name):
    accepted = ", ".join(get_builder(name).params.model_fields)
    with pytest.raises(InputError) as info:
        validate_params(name, {"no_such_key": 1}, where=WHERE)
    assert str(info.value) == (
        f"{WHERE}.params.no_such_key: unknown parameter; accepted: {accepted}"
    )


def test_unknown_builder_lists_close_matches_and_every_name(ctx):
    with pytest.raises(UnknownNameError) as info:
        get_builder("cleanin")
    assert str(info.value) == (
        "unknown split builder 'cleanin'. Did you mean 'cleaning'? "
        "Known: cleaning, graded, sample, ssb, superclass, zsl"
    )
    with pytest.raises(UnknownNameError, match=rf"^{WHERE}\.builder: .*'ssb'"):
        build_split("sbb", {}, ctx)
    with pytest.raises(UnknownNameError, match=rf"^{WHERE}\.builder: unknown split builder 7"):
        validate_params(7, {}, where=WHERE)  # type: ignore[arg-type]


def test_registration_checks():
    class Loose(BuilderParams):
        model_config = ConfigDict(extra="ignore")

    with pytest.raises(ValueError, match="must set extra='forbid'"):
        register_builder("loose", Loose, "one line")
    with pytest.raises(ValueError, match="already registered"):
        register_builder("ssb", BuilderParams, "one line")
    with pytest.raises(ValueError, match="one non-empty line"):
        register_builder("two", BuilderParams, "two\nlines")
    assert list_builders() == ["cleaning", "graded", "sample", "ssb", "superclass", "zsl"]


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("ssb", {"bin_sise": 5}, "bin_sise: unknown parameter; did you mean 'bin_size'? accepted"),
        ("ssb", {"bin_size": [1, 2]}, "bin_size: expected a positive integer or three"),
        ("ssb", {"bin_size": True}, "bin_size: expected a positive integer or three"),
        ("ssb", {"quantiles": [0.7, 0.3]}, "quantiles: expected two increasing fractions"),
        ("ssb", {"quantiles": "a"}, "quantiles: should be a list, got 'a'"),
        ("ssb", {"preset": "ssbb"}, "preset: unknown preset 'ssbb'; choose one of ssb, nearest"),
        ("ssb", {"graph": "tree"}, "graph: should be 'induced-tree' or 'dag', got 'tree'"),
        ("ssb", {"known": 3}, "known: expected a class list name, a file of ids or a list"),
        ("ssb", {"known": []}, "known: expected a non-empty list of class ids"),
        ("ssb", {"bin_size": 3, "quantiles": [0.2, 0.4]}, "quantiles: give bin_size or"),
        ("ssb", {"preset": "hierarchy", "bin_size": 3}, "bin_size: does not apply to measure"),
        ("ssb", {"gap_bins": {"hard": 1}}, "gap_bins: applies to measure 'gap' only, not 'path'"),
        ("ssb", {"measure": "gap", "gap_bins": {"far": 3}}, "gap_bins: bin 'far' is not one of"),
        ("cleaning", {"sisters_only": "maybe"}, "sisters_only: should be a valid boolean, unable"),
        ("superclass", {"easy": 30}, "easy: applies only with 'scores'"),
        ("superclass", {"scores": "s.csv", "easy": 50}, "iid: must exceed easy (50.0), got 40.0"),
        ("superclass", {"levels": 0}, "levels: should be greater than or equal to 1, got 0"),
        ("graded", {}, "id_features: required with test_features, laid"),
        ("graded", {"sem_distances": "d.npy"}, "cov_distances: required with sem_distances"),
        ("graded", {"laid": "w.npz", "cov_distances": "d.npy"}, "laid: give id_features + "),
        ("graded", {"sem_distances": "a", "cov_distances": "b", "method": "exact"}, "method: "),
        ("graded", {"sem_distances": "a", "cov_distances": "b", "policy": "fixed"}, "sem_edges"),
        ("graded", {"sem_distances": "a", "cov_distances": "b", "sem_edges": [0, 1]}, "sem_edg"),
        ("graded", {"sem_distances": "a", "cov_distances": "b", "method": "hnsw"}, "method: "),
        ("zsl", {"images": "i.txt"}, "classes: required, not given"),
        ("zsl", {"classes": "c.txt", "images": 3}, "images: expected a file path, got 3"),
        ("zsl", {"classes": "c", "images": "i", "max_hops": 2}, "max_hops: needs not_unseen"),
        (
            "zsl",
            {"classes": "c", "images": "i", "val_fraction": 1.5},
            "val_fraction: val_fraction must be in (0, 1), got 1.5",
        ),
        (
            "zsl",
            {"classes": "c", "images": "i", "unseen": ["a"], "seed": "x"},
            "seed: should be a valid integer",
        ),
    ],
)
def test_bad_params_give_one_line_naming_the_key(name, params, message):
    with pytest.raises(InputError) as info:
        validate_params(name, params, where=WHERE)
    text = str(info.value)
    assert text.startswith(f"{WHERE}.params.{message}"), text
    assert "\n" not in text


def test_params_must_be_a_mapping():
    with pytest.raises(InputError, match=rf"^{WHERE}\.params: expected a mapping .*, got list$"):
        validate_params("ssb", [1], where=WHERE)  # type: ignore[arg-type]


# ---------------------------------------------------------------- each builder, by name = direct


def test_ssb_by_name_equals_the_function_and_the_hierarchy_rules(ctx, base):
    params = {"known": "lists/known.txt", "preset": "hierarchy"}
    m = build_split("ssb", params, ctx)
    direct = build_ssb_split(
        str(base / "lists" / "known.txt"), None, taxonomy=base / "toy.csv", preset="hierarchy"
    ).manifest
    assert m.to_dict() == direct.to_dict()
    # gap from each leaf up to the deepest node it shares with sedan, canoe or beagle
    assert m.known == ["sedan", "canoe", "beagle"]
    assert m.bins == {
        "easy": ["smartphone"],  # gap 3 (meets the known classes at entity)
        "medium": ["radio"],  # gap 2
        "hard": ["convertible", "coupe", "kayak", "puppy"],  # gap 1, ties by id
    }
    assert m.params["known"] == str(base / "lists" / "known.txt")


def test_ssb_pool_defaults_to_imagenet21k_p_under_wordnet_only(ctx, monkeypatch, base):
    import semshift.splits.ssb as ssb

    seen: list[object] = []

    def fake(known, pool, **kwargs):
        seen.append(pool)
        return build_ssb_split(known, pool, **kwargs)

    monkeypatch.setattr(ssb, "build_ssb_split", fake)
    build_split("ssb", {"known": ["sedan"], "preset": "nearest", "bin_size": 1}, ctx)
    assert seen == [None]  # a custom taxonomy: every leaf that is not known

    class WordNetContext(BuildContext):
        def load_taxonomy(self):  # the toy stands in for WordNet
            return BuildContext(str(base / "toy.csv"), base).load_taxonomy()

    wn_ctx = WordNetContext(taxonomy="wordnet", base_dir=base, where=WHERE)
    with pytest.raises(InputError, match=rf"^{WHERE}: unknown toy node 'n"):
        build_split("ssb", {"known": ["sedan"], "bin_size": 1}, wn_ctx)
    assert seen[1] == "imagenet21k-p"


def test_cleaning_by_name_equals_the_function_and_the_rules(base):
    # the taxonomy itself given relative to the config's folder
    ctx = BuildContext(taxonomy="toy.csv", base_dir=base, where=WHERE)
    pool = ["convertible", "car", "kayak", "puppy", "smartphone", "radio"]
    params = {"id_classes": ["sedan", "coupe", "dog"], "pool": pool, "exclude_subtrees": "device"}
    m = build_split("cleaning", params, ctx)
    direct = build_cleaning_split(
        ["sedan", "coupe", "dog"], pool, taxonomy=base / "toy.csv", exclude_subtrees=["device"]
    ).manifest
    assert m.to_dict() == direct.to_dict()
    assert m.bins == {"kept": ["convertible"], "dropped": pool[1:]}
    assert m.extra["counts"] == {
        "id_related": 2,  # car (hypernym of sedan), puppy (hyponym of dog)
        "excluded_subtree": 2,  # smartphone, radio
        "covariate_shift": 0,
        "not_sister": 1,  # kayak
        "candidates": 6,
        "kept": 1,
        "after_rules_1_2": 2,
        "sisters_after_rules_1_2": 1,
    }
    with pytest.raises(InputError) as info:
        build_split("cleaning", {**params, "exclude_subtrees": ["devise"]}, ctx)
    assert str(info.value).startswith(f"{WHERE}.params.exclude_subtrees[0]: unknown toy node")
    assert "did you mean device" in str(info.value)


VEHICLES = ["car", "sedan", "coupe", "convertible", "boat", "canoe", "kayak"]
SUPER = {
    "names": "lists/names.txt",
    "pool": VEHICLES + ["dog", "puppy", "hound", "beagle"],  # noqa: RUF005
    "min_subclasses": 3,
}


def test_superclass_stage1_by_name_equals_the_function(ctx, base):
    m = build_split("superclass", SUPER, ctx)
    direct = build_superclasses(
        str(base / "lists" / "names.txt"),
        SUPER["pool"],
        taxonomy=base / "toy.csv",
        min_subclasses=3,
        allow_empty=True,
    ).manifest
    assert m.to_dict() == direct.to_dict()
    assert m.method == "superclass"
    assert m.bins == {
        "vehicle": ["boat", "canoe", "car", "convertible", "coupe", "kayak", "sedan"],
        "animal": ["dog", "hound", "puppy"],  # beagle is three levels below animal
    }
    assert m.extra["dropped"] == {"device": 0}
    with pytest.raises(InputError, match=r"super-class 'device' has no sub-class"):
        build_split("superclass", {**SUPER, "allow_empty": False}, ctx)


def _scores(base: Path) -> Path:
    rows = ["path,class,score"]
    for cls, score, n in (
        ("car", 0.9, 2),
        ("boat", 0.8, 2),
        ("canoe", 0.6, 2),
        ("kayak", 0.4, 2),
        ("sedan", 0.1, 2),
        ("dog", 0.9, 1),
        ("hound", 0.5, 1),
        ("puppy", 0.1, 1),
    ):
        rows += [f"img/{cls}/{k}.jpg,{cls},{score}" for k in range(n)]
    path = base / "scores" / "clip.csv"
    path.parent.mkdir()
    path.write_text("\n".join(rows) + "\n")
    return path


def test_superclass_with_scores_gives_iid_easy_hard_bins(ctx, base):
    path = _scores(base)
    m = build_split("superclass", {**SUPER, "scores": "scores/clip.csv"}, ctx)
    stage1 = build_superclasses(
        str(base / "lists" / "names.txt"),
        SUPER["pool"],
        taxonomy=base / "toy.csv",
        min_subclasses=3,
        allow_empty=True,
    )
    assert m.to_dict() == build_score_split(stage1, path).manifest.to_dict()
    # vehicle, min-max normalised: car 1, boat .875, canoe .625, kayak .375, sedan 0 (two images
    # each): P20 = .3, P40 = .525; animal: dog 1, hound .5, puppy 0: P20 = .2, P40 = .4
    assert m.method == "superclass:scores" and m.known == []
    assert m.bins == {
        "iid": ["boat", "canoe", "car", "dog", "hound"],
        "easy": ["kayak"],
        "hard": ["sedan", "puppy"],
    }
    assert m.extra["unscored"] == ["convertible", "coupe"]
    assert m.extra["superclass_of"]["hound"] == "animal"
    assert m.extra["subclass_scores"]["boat"] == pytest.approx(0.875)
    assert m.extra["counts"] == {
        "images": 13,
        "images_used": 13,
        "images_of_dropped_superclasses": 0,
        "outliers": 0,
        "bin_iid": 5,
        "bin_easy": 1,
        "bin_hard": 2,
    }
    assert m.params["scores"] == str(path) and m.params["iid"] == 40.0
    # other percentiles: vehicle P10 = 0, P30 = .375; animal P10 = .1, P30 = .3
    m2 = build_split("superclass", {**SUPER, "scores": str(path), "iid": 30, "easy": 10}, ctx)
    assert m2.bins == {
        "iid": ["boat", "canoe", "car", "kayak", "dog", "hound"],
        "easy": ["sedan"],
        "hard": ["puppy"],
    }


def test_superclass_scores_of_an_unassigned_class_name_the_line(ctx, base):
    path = _scores(base)
    path.write_text(path.read_text() + "img/x.jpg,radio,0.3\n")
    with pytest.raises(InputError) as info:
        build_split("superclass", {**SUPER, "scores": "scores/clip.csv"}, ctx)
    assert str(info.value) == (
        f"{WHERE}: {path}, line 15: class 'radio' is not a sub-class of any super-class "
        "(1 such rows)"
    )


def test_graded_by_name_equals_the_function_and_graded_grid(ctx, base):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(50, 8)), rng.normal(size=(40, 8))
    (base / "emb").mkdir()
    np.save(base / "emb" / "id.npy", x)
    np.save(base / "emb" / "test.npy", y)
    w = np.linalg.qr(rng.normal(size=(8, 8)))[0]
    LAID(W=w).save(base / "emb" / "laid.npz")
    params = {
        "id_features": "emb/id.npy",
        "test_features": "emb/test.npy",
        "laid": "emb/laid.npz",
        "levels": 3,
        "min_count": 5,
        "method": "exact",
    }
    m = build_split("graded", params, ctx)
    files = {k: base / params[k] for k in ("id_features", "test_features", "laid")}
    direct = build_graded_split(**files, n_levels=3, min_count=5, method="exact").manifest
    assert m.to_dict() == direct.to_dict()
    # the bins are the cells of graded_grid, each holding its rows
    samples, cells = graded_grid(x, y, LAID(W=w), n_levels=3, min_count=5, method="exact")
    assert list(m.bins) == [f"sem{i}_cov{j}" for i in (1, 2, 3) for j in (1, 2, 3)]
    for name, rows in m.bins.items():
        i, j = int(name[3]), int(name[-1])
        expect = np.flatnonzero((samples.sem_level == i) & (samples.cov_level == j))
        assert [int(r) for r in rows] == expect.tolist()
    assert m.extra["valid_cells"] == [
        f"sem{r.sem_level}_cov{r.cov_level}" for r in cells.itertuples() if r.valid
    ]
    assert m.extra["counts"]["images"] == 40 and m.extra["search"]["method"] == "exact"
    assert m.params["laid"] == str(base / "emb" / "laid.npz")


def test_graded_from_distances_with_fixed_edges(ctx, base):
    np.save(base / "sem.npy", np.array([0.05, 0.15, 0.25, 0.35]))
    np.save(base / "cov.npy", np.array([0.3, 0.1, 0.2, 0.0]))
    edges = [0.0, 0.1, 0.2, 0.4]
    params = {"sem_distances": "sem.npy", "cov_distances": "cov.npy", "policy": "fixed"}
    params |= {"sem_edges": edges, "cov_edges": edges, "min_count": 1}
    m = build_split("graded", params, ctx)
    # levels: sem 1, 2, 3, 3 and cov 3, 2, 3, 1 (a value on an edge goes to the upper level)
    expect = {f"sem{i}_cov{j}": [] for i in (1, 2, 3) for j in (1, 2, 3)}
    expect |= {"sem1_cov3": ["0"], "sem2_cov2": ["1"], "sem3_cov3": ["2"], "sem3_cov1": ["3"]}
    assert m.bins == expect
    assert m.extra["valid_cells"] == ["sem1_cov3", "sem2_cov2", "sem3_cov1", "sem3_cov3"]
    assert m.extra["edges"] == {"sem": edges, "cov": edges} and m.extra["search"] is None
    direct = build_graded_split(
        sem_distances=base / "sem.npy",
        cov_distances=base / "cov.npy",
        policy="fixed",
        sem_edges=edges,
        cov_edges=edges,
        min_count=1,
    )
    assert m.to_dict() == direct.manifest.to_dict()


def _image_list(base: Path) -> Path:
    lines = [f"img/{c}/{k}.jpg {c}" for c in LEAVES for k in range(5)]
    path = base / "data" / "images.txt"
    path.parent.mkdir()
    path.write_text("\n".join(lines) + "\n")
    return path


def test_zsl_by_name_equals_the_function_with_the_image_table_inline(base):
    path = _image_list(base)
    ctx = BuildContext(taxonomy=str(base / "toy.csv"), base_dir=base, seed=3, where=WHERE)
    m = build_split("zsl", {"classes": LEAVES, "images": "data/images.txt"}, ctx)
    result = build_zsl_split(LEAVES, path, taxonomy=base / "toy.csv", seed=3)
    assert m.to_dict() == result.manifest_with_images().to_dict()
    unseen, seen = set(m.bins["unseen"]), set(m.known)
    assert len(unseen) == 2 and len(seen) == 7 and not unseen & seen
    assert len(m.bins["val"]) == 1 and set(m.bins["train"]) | set(m.bins["val"]) == seen
    table = pd.DataFrame(m.extra["images"])
    assert table.equals(result.images.astype(str).reset_index(drop=True))
    assert table["set"].value_counts().to_dict() == {
        "trainval": 28,
        "train": 24,
        "test_unseen": 10,
        "test_seen": 7,
        "val": 4,
    }
    assert m.extra["image_root"] == str(path.parent)
    # the inline table is a leak-free image table for the checker
    assert check_split(m, table, root=path.parent, hash_content=False).ok
    # seed: null takes the context's seed; an explicit seed wins
    other = BuildContext(taxonomy=str(base / "toy.csv"), base_dir=base, seed=4, where=WHERE)
    assert build_split("zsl", {"classes": LEAVES, "images": str(path)}, other).bins != m.bins
    pinned = {"classes": LEAVES, "images": str(path), "seed": 3}
    assert build_split("zsl", pinned, other).to_dict() == m.to_dict()


# ---------------------------------------------------------------- files and builder errors


def test_relative_paths_resolve_against_base_dir_and_must_exist(ctx, base):
    with pytest.raises(InputError) as info:
        build_split("zsl", {"classes": LEAVES, "images": "data/missing.txt"}, ctx)
    assert str(info.value) == (
        f"{WHERE}.params.images: file {base / 'data' / 'missing.txt'} "
        "(from 'data/missing.txt') does not exist"
    )
    # a class list file is a path too; a shipped list name is not
    with pytest.raises(InputError, match=rf"^{WHERE}\.params\.known: file .*lists/nope\.txt"):
        build_split("ssb", {"known": "lists/nope.txt"}, ctx)
    assert ctx.classes("known", "imagenet1k") == "imagenet1k"
    assert ctx.classes("known", "lists/known.txt") == str(base / "lists" / "known.txt")
    assert ctx.path("x", base / "toy.csv") == base / "toy.csv"


def test_builder_errors_are_input_errors_naming_the_split(ctx):
    with pytest.raises(InputError) as info:
        build_split("ssb", {"known": ["sedan", "sedna"], "bin_size": 1}, ctx)
    assert str(info.value).startswith(f"{WHERE}: unknown toy node 'sedna' (known list, item 2")
    assert "\n" not in str(info.value)
    with pytest.raises(InputError, match=rf"^{WHERE}: .*bin sizes \[5, 5, 5\] \(total 15\)"):
        build_split("ssb", {"known": ["sedan"], "bin_size": 5}, ctx)


def test_build_split_takes_a_validated_model(ctx, base):
    params = validate_params("ssb", {"known": ["sedan", "canoe", "beagle"]}, where=WHERE)
    params = params.model_copy(update={"preset": "hierarchy"})
    m = build_split("ssb", params, ctx)
    assert m.bins["medium"] == ["radio"]
    with pytest.raises(InputError, match=r"builder 'cleaning' takes CleaningParams, not SSBParams"):
        build_split("cleaning", params, ctx)
    assert registry.get_builder("ssb").params is type(params)
