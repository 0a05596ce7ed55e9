"""The ``zsl`` protocol of a run configuration, end to end: results, report tables, errors."""

from __future__ import annotations

import pytest

from semshift.errors import InputError
from semshift.metrics import gzsl
from semshift.run import run
from semshift.training.zsl import evaluate_zsl, read_xlsa, write_xlsa

from ..run.conftest import base_config, build_stores
from .planted import planted


@pytest.fixture(scope="module")
def mat_dir(tmp_path_factory):
    data = planted(n_seen=12, n_unseen=4, dim=16, att=8, per_class=12, seed=5)
    return write_xlsa(data, tmp_path_factory.mktemp("mat") / "P")


def test_a_run_with_the_zsl_protocol_reports_tables_1_and_2(mat_dir, tmp_path):
    stores = build_stores(tmp_path / "stores")
    zsl = {"features": str(mat_dir / "res101.mat"), "splits": str(mat_dir / "att_splits.mat"),
           "methods": ["eszsl", "sje"], "versions": ["v1", "v2"]}  # fmt: skip
    out = tmp_path / "out"
    cfg = base_config(stores, out, protocols={"zsl": zsl}, report={"formats": ["md"]})
    cfg["detectors"] = ["msp"]
    result = run(cfg, progress=False)
    rows = result.results[result.results["protocol"] == "gzsl"]
    assert set(rows["detector"]) == {"eszsl", "sje"} and set(rows["set"]) == {"P"}
    assert len(rows) == 2 * 2 * 4
    o = evaluate_zsl(read_xlsa(mat_dir), "sje", split="v2")
    want = gzsl(o.scores, o.labels, o.seen, o.unseen)
    got = rows[(rows["detector"] == "sje") & (rows["split"] == "v2")].set_index("metric")["value"]
    assert got.to_dict() == pytest.approx(want.as_dict())
    md = next(out.rglob("*.md")).read_text()
    assert "Zero-shot learning (proposed splits V1 vs V2)" in md
    assert md.index("proposed splits V1 vs V2") < md.index("Generalised zero-shot learning (GBU)")


def test_a_zsl_protocol_naming_a_missing_file_is_refused_before_work(tmp_path):
    stores = build_stores(tmp_path / "stores")
    zsl = {"features": str(tmp_path / "none.mat"), "splits": str(tmp_path / "none2.mat")}
    cfg = base_config(stores, tmp_path / "out", protocols={"zsl": zsl})
    with pytest.raises(InputError, match=r"protocols.zsl.features: file .*none.mat does not exist"):
        run(cfg, progress=False)


def test_a_list_of_datasets_runs_each_with_relative_paths_resolved(mat_dir, tmp_path):
    stores = build_stores(tmp_path / "stores")
    other = write_xlsa(read_xlsa(mat_dir), tmp_path / "cfg" / "Q")
    zsl = {"datasets": [{"features": str(mat_dir / "res101.mat"),
                         "splits": str(mat_dir / "att_splits.mat")},
                        {"features": "Q/res101.mat", "splits": "Q/att_splits.mat"}],
           "methods": ["eszsl"]}  # fmt: skip
    cfg = base_config(stores, tmp_path / "out", protocols={"zsl": zsl})
    cfg["detectors"] = ["msp"]
    result = run(cfg, progress=False, base_dir=other.parent)
    rows = result.results[result.results["protocol"] == "gzsl"]
    assert set(rows["set"]) == {"P", "Q"} and len(rows) == 2 * 4
    p = rows[rows["set"] == "P"].set_index("metric")["value"]
    q = rows[rows["set"] == "Q"].set_index("metric")["value"]
    assert p.to_dict() == q.to_dict()  # the same data under two names


@pytest.mark.parametrize(
    ("zsl", "match"),
    [
        ({"datasets": [{"features": "none.mat", "splits": "none2.mat"}]},
         r"protocols.zsl.datasets.0.features: file .*none.mat does not exist"),
        ({"features": "a.mat", "splits": "b.mat", "datasets": [{"features": "a.mat",
                                                                 "splits": "b.mat"}]},
         "not both"),
        ({"features": "a.mat"}, "give 'features' and 'splits'"),
        ({"datasets": [{"features": "a.mat", "splits": "b.mat", "nmae": "x"}]}, "nmae"),
    ],
)  # fmt: skip
def test_a_bad_dataset_list_is_refused_before_work(tmp_path, zsl, match):
    stores = build_stores(tmp_path / "stores")
    cfg = base_config(stores, tmp_path / "out", protocols={"zsl": zsl})
    with pytest.raises(InputError, match=match) as err:
        run(cfg, progress=False, base_dir=tmp_path)
    assert "\n" not in str(err.value)


def test_two_datasets_of_one_name_are_refused_before_work(mat_dir, tmp_path):
    stores = build_stores(tmp_path / "stores")
    entry = {"features": str(mat_dir / "res101.mat"), "splits": str(mat_dir / "att_splits.mat")}
    zsl = {"datasets": [entry, entry], "methods": ["eszsl"]}
    cfg = base_config(stores, tmp_path / "out", protocols={"zsl": zsl})
    with pytest.raises(InputError, match=r"protocols\.zsl: two datasets named 'P'") as err:
        run(cfg, progress=False)
    assert "\n" not in str(err.value) and not (tmp_path / "out").exists()
    renamed = {"datasets": [entry, {**entry, "name": "P2"}], "methods": ["eszsl"]}
    cfg = base_config(stores, tmp_path / "out", protocols={"zsl": renamed}, detectors=["msp"])
    rows = run(cfg, progress=False).results
    assert set(rows.loc[rows["protocol"] == "gzsl", "set"]) == {"P", "P2"}
