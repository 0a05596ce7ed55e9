"""Run configuration: validation errors name the key path; paths resolve against the file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from semshift.errors import InputError
from semshift.run.config import RunConfig, load_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "configs"


def _minimal(root: Path) -> dict:
    (root / "train").mkdir(exist_ok=True)
    (root / "test").mkdir(exist_ok=True)
    return {
        "output": "out",
        "data": {"id_train": {"store": "train"}, "id_test": {"store": "test"}},
        "detectors": ["msp", {"name": "knn", "params": {"k": 5}}],
    }


def _error(config, **kw) -> str:
    with pytest.raises(InputError) as info:
        load_config(config, **kw)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_yaml_paths_are_relative_to_the_config_file(tmp_path):
    cfg = _minimal(tmp_path)
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg))
    loaded = load_config(tmp_path / "run.yaml")
    assert isinstance(loaded, RunConfig)
    assert loaded.output == (tmp_path / "out").resolve()
    assert loaded.data.id_train.store == (tmp_path / "train").resolve()
    assert [(d.name, d.params) for d in loaded.detector_specs()] == [("msp", {}), ("knn", {"k": 5})]
    # defaults live in code
    assert loaded.metrics == ["auroc", "fpr95", "aupr_in", "aupr_out"]
    assert (loaded.bootstrap.n_resamples, loaded.bootstrap.level) == (1000, 0.95)


def test_dict_config_resolves_against_base_dir(tmp_path):
    loaded = load_config(_minimal(tmp_path), base_dir=tmp_path)
    assert loaded.data.id_test.store == (tmp_path / "test").resolve()
    assert loaded.source == "config"


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda c: c["data"].update(sets={"easy": {"role": "ood", "store": 3}}),
         "data.sets.easy.store: expected a path, got 3"),
        (lambda c: c["data"].update(sets={"easy": {"role": "odd", "store": "x"}}),
         "data.sets.easy.role: expected one of 'ood' or 'covariate', got 'odd'"),
        (lambda c: c["data"]["id_train"].update(stor="x"),
         "data.id_train.stor: unknown key (did you mean 'store'?)"),
        (lambda c: c.update(bootstrap={"n_resamples": "many"}),
         "bootstrap.n_resamples: expected an integer, got 'many'"),
        (lambda c: c.update(bootstrap={"level": 1.5}), "bootstrap.level: input should be less"),
        (lambda c: c["data"].pop("id_test"), "data.id_test: required key is missing"),
        (lambda c: c.update(detectors=["msp", "knnn"]),
         "detectors[1]: unknown detector 'knnn' (did you mean 'knn'?)"),
        (lambda c: c.update(detectors=[{"name": "knn", "params": {"kk": 1}}]),
         "detectors[0].params: knn has no hyperparameter kk; accepted: k, backend"),
        (lambda c: c.update(detectors=[{"name": "knn", "params": {"k": 0}}]),
         "detectors[0].params: knn: k must be an integer >= 1, got 0"),
        (lambda c: c.update(detectors=[{"name": "react", "params": {"percentile": 150}}]),
         "detectors[0].params: react: percentile must be"),
        (lambda c: c.update(detectors=["msp", "msp"]), "detectors: detector(s) msp listed twice"),
        (lambda c: c.update(metrics=["auroc", "fpr"]), "metrics[1]: unknown metric 'fpr'"),
        (lambda c: c.update(metrics=["accuracy"]),
         "metrics[0]: 'accuracy' is not a ranking metric"),
        (lambda c: c["data"]["id_test"].update(images="imgs"),
         "data.id_test: give exactly one of 'store'"),
        (lambda c: c.update(protocols={"sanity": {}}),
         "model: required by the sanity protocol without 'stores'"),
        (lambda c: c.update(protocols={"graded": {}}), "protocols.graded: no set has shift levels"),
        (lambda c: c.update(protocols={"osr": {}, "oscar": {}}), "protocols.oscar: unknown key"),
        (lambda c: c["data"].update(sets={"e": {"role": "ood", "store": "train",
                                                "classes_from": {"split": "ssb", "bin": "easy",
                                                                 "column": "wnid"}}}),
         "data.sets.e.classes_from.split: no split named 'ssb'"),
    ],
)  # fmt: skip
def test_errors_name_the_key_path(tmp_path, edit, expected):
    cfg = _minimal(tmp_path)
    edit(cfg)
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg))
    msg = _error(tmp_path / "run.yaml")
    assert msg.startswith(f"{tmp_path / 'run.yaml'}: ")
    assert expected in msg


def test_missing_files_are_named(tmp_path):
    cfg = _minimal(tmp_path)
    cfg["data"]["sets"] = {"easy": {"role": "ood", "store": "stores/nothing"}}
    msg = _error(cfg, base_dir=tmp_path)
    assert msg.startswith("config: data.sets.easy.store: feature store ")
    # a mapping built by a tool is named as the tool says
    msg = _error(cfg, base_dir=tmp_path, source="semshift evaluate")
    assert msg.startswith("semshift evaluate: data.sets.easy.store: feature store ")
    cfg["detectors"], cfg["data"]["sets"] = ["mps"], {}
    assert _error(cfg, base_dir=tmp_path, source="tool").startswith("tool: detectors[0]: ")
    assert str((tmp_path / "stores" / "nothing").resolve()) in msg
    assert "does not exist" in msg
    assert (
        _error(tmp_path / "absent.yaml") == f"config file {tmp_path / 'absent.yaml'} does not exist"
    )


def test_invalid_yaml_names_line_and_column(tmp_path):
    (tmp_path / "bad.yaml").write_text("output: out\ndata: [unclosed\n")
    msg = _error(tmp_path / "bad.yaml")
    assert msg.startswith(f"{tmp_path / 'bad.yaml'}, line 3, column 1: invalid YAML")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    assert "expected a mapping of keys at the top level" in _error(tmp_path / "list.yaml")


def test_images_need_a_model_with_weights(tmp_path):
    cfg = _minimal(tmp_path)
    (tmp_path / "imgs").mkdir()
    cfg["data"]["sets"] = {"easy": {"role": "ood", "images": "imgs"}}
    assert "model: required by an 'images' set" in _error(cfg, base_dir=tmp_path)
    cfg["model"] = {"name": "resnet18"}
    assert "model.weights: required to extract 'images' sets" in _error(cfg, base_dir=tmp_path)


def test_sanity_stores_name_known_sets(tmp_path):
    cfg = _minimal(tmp_path)
    cfg["protocols"] = {"sanity": {"stores": {0: {"id_train": "train", "id_tset": "test"}}}}
    msg = _error(cfg, base_dir=tmp_path)
    assert (
        "protocols.sanity.stores.0.id_tset: no set named 'id_tset' (did you mean 'id_test'?)" in msg
    )
    cfg["protocols"] = {"sanity": {"stores": {0: {"id_train": "train"}}}}
    assert "protocols.sanity.stores.0: needs a store for 'id_test'" in _error(
        cfg, base_dir=tmp_path
    )
    cfg["protocols"] = {"sanity": {"stores": {0: {"id_train": "train", "id_test": "test"}}}}
    loaded = load_config(cfg, base_dir=tmp_path)
    assert loaded.protocols.sanity is not None
    assert loaded.protocols.sanity.stores == {
        0: {"id_train": (tmp_path / "train").resolve(), "id_test": (tmp_path / "test").resolve()}
    }


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_examples_validate(path):
    cfg = load_config(path, check_files=False)
    assert cfg.output.is_absolute()
    assert cfg.protocols.enabled()
    assert all(
        (s.store or s.images) is not None and (s.store or s.images).is_absolute()  # type: ignore[union-attr]
        for s in cfg.sources().values()
    )
