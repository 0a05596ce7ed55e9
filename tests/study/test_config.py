"""Study files: cells expanded from models, zoos, datasets and seeds; every bad input is one
line naming the key or the cell and the fix, before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from semshift.errors import InputError
from semshift.study import get_zoo, list_zoos, load_study
from tests.study.conftest import study_dict


def test_cells_are_models_x_datasets_x_seeds(study_root: Path) -> None:
    d = study_dict(study_root, seeds=[0, 1])
    d["datasets"]["again"] = d["datasets"]["colours"]
    st = load_study(d, base_dir=study_root)
    assert len(st.cells) == 3 * 2 * 2
    first = st.cells[0]
    assert (first.model, first.dataset, first.seed) == ("tiny0", "colours", 0)
    assert first.output == study_root / "out" / "cells" / "colours" / "tiny0" / "seed0"
    assert first.config["seed"] == 0 and first.config["model"]["weights"] == "tiny0.pt"
    assert first.config["bootstrap"] == {"n_resamples": 50}
    assert len({c.output for c in st.cells}) == len(st.cells)


def test_a_yaml_file_resolves_paths_against_its_folder(study_root: Path, tmp_path) -> None:
    d = study_dict(study_root)
    d["output"] = str(tmp_path / "o")
    path = study_root / "study.yaml"
    path.write_text(yaml.safe_dump(d))
    st = load_study(path)
    assert st.source == str(path) and st.base_dir == study_root.resolve()
    assert st.output == tmp_path / "o"


def test_zoos_are_listed_and_expand(study_root: Path) -> None:
    assert {"imagenet-ood-13", "sood-8"} <= set(list_zoos())
    zoo = get_zoo("imagenet-ood-13")
    assert len(zoo.members) == 13 and {m.weights for m in zoo.members} == {"IMAGENET1K_V1"}
    families = {"resnet", "densenet", "wide_resnet", "regnet", "resnext"}
    assert {f for f in families if any(m.name.startswith(f) for m in zoo.members)} == families
    sood = get_zoo("sood-8")
    assert len(sood.members) == 8 and all(m.weights is None for m in sood.members)
    d = study_dict(study_root)
    weights = {"resnet18": str(study_root / "tiny0.pt")}
    d["models"] = [{"zoo": "imagenet-ood-13", "only": ["resnet18", "densenet121"],
                    "weights": weights}]  # fmt: skip
    st = load_study(d, base_dir=study_root, check_files=False, check_weights=False)
    assert [m.key for m in st.models] == ["resnet18", "densenet121"]
    assert st.models[0].weights == weights["resnet18"]
    assert st.models[1].weights == "IMAGENET1K_V1"


BAD = [
    ({"modles": []}, "study: modles: unknown key (did you mean 'models'?)"),
    ({"models": [{"zoo": "imagenet-ood-31"}]}, "study: models[0].zoo: unknown zoo"),
    ({"models": [{"zoo": "sood-8", "only": ["resnet5"]}]},
     "study: models[0]: 'resnet5' is not a member of zoo 'sood-8' (did you mean 'resnet50'?)"),
    ({"models": [{"name": "resnet18", "wieghts": "x"}]},
     "study: models[0].wieghts: unknown key (did you mean 'weights'?)"),
    ({"seeds": [0, 0]}, "study: seeds: Value error, seeds repeat"),
    ({"jobs": 0}, "study: jobs"),
    ({"run": {"model": {"name": "x"}}}, "study: run.model: set by the study itself; use the "
                                        "study's 'models' key"),
    ({"datasets": {"x": {"benchmark": "ssb-cub", "data": {}}}},
     "study: datasets.x: give either 'benchmark' or 'data'"),
    ({"datasets": {"a b": {"data": {}}}}, "study: datasets.a b: a dataset name must be a folder"),
    ({"detectors": ["msp", "knnn"]}, "study: cell tiny0 / colours / seed 0: detectors[1]: "
                                     "unknown detector 'knnn'"),
    ({"plugins": ["no_such_module_x"]}, "study: plugins[0]: cannot import 'no_such_module_x'"),
    ({"models": [{"name": "resnet5", "weights": "tiny0.pt"}]},
     "study: models[0].name: unknown model 'resnet5' (did you mean 'resnet50'"),
    ({"datasets": {"cub": {"benchmark": "ssb-cbu"}}},
     "study: datasets.cub: unknown benchmark 'ssb-cbu'. Did you mean 'ssb-cub'"),
    ({"datasets": {"cub": {"benchmark": "ssb-cub", "roots": {"birds": "x"}}}},
     "study: datasets.cub: benchmark ssb-cub: unknown root 'birds'"),
]  # fmt: skip


@pytest.mark.parametrize(("over", "message"), BAD, ids=[m for _, m in BAD])
def test_bad_input_is_one_line(study_root: Path, over, message) -> None:
    with pytest.raises(InputError) as err:
        load_study(study_dict(study_root, **over), base_dir=study_root)
    text = str(err.value)
    assert "\n" not in text and text.startswith(message), text


def test_two_models_with_one_label_would_write_the_same_cells(study_root: Path) -> None:
    d = study_dict(study_root)
    d["models"][1]["label"] = "tiny0"
    with pytest.raises(InputError, match=r"two models are labelled 'tiny0' .*same folders"):
        load_study(d, base_dir=study_root)


def test_missing_weights_are_named_before_anything_runs(study_root, tmp_path, monkeypatch):
    d = study_dict(study_root)
    d["models"][2]["weights"] = "gone.pt"
    with pytest.raises(InputError, match=r"^study: model tiny2: weights file .*gone.pt does not"):
        load_study(d, base_dir=study_root)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))  # an empty cache
    d = study_dict(study_root, models=[{"zoo": "imagenet-ood-13", "only": ["resnet18"]}])
    with pytest.raises(InputError) as err:
        load_study(d, base_dir=study_root, check_files=False)
    text = str(err.value)
    assert text.startswith("study: model resnet18: weights IMAGENET1K_V1 are not in torch's cache")
    assert str(tmp_path / "torch") in text and "never downloads" in text
