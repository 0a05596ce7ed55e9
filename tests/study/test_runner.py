"""A study end to end on generated images: every cell an ordinary cached run, the study's
files, a failing cell that does not stop the others, worker processes and Ray giving the same
numbers as one process, and the ``semshift study`` command."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from semshift.cli import main
from semshift.study import load_study, run_study
from tests.study.conftest import study_dict

NUMBERS = ["model", "dataset", "seed", "protocol", "set", "detector", "metric", "value"]


def _numbers(out: Path) -> pd.DataFrame:
    frame = pd.read_parquet(out / "results.parquet")[NUMBERS]
    return frame.sort_values(NUMBERS[:7], na_position="first").reset_index(drop=True)


def test_a_study_runs_every_cell_and_caches(study_root: Path, tmp_path: Path) -> None:
    d = study_dict(study_root, output=str(tmp_path / "s"))
    d["models"] = d["models"][:2]
    lines: list[str] = []
    first = run_study(load_study(d, base_dir=study_root), log=lines.append)
    assert [o.status for o in first.outcomes] == ["done", "done"]
    assert all("extract" in o.computed for o in first.outcomes)
    out = tmp_path / "s"
    written = (
        "results.parquet", "results.csv", "summary.csv", "models.csv", "ranks.csv",
        "mean_ranks.csv", "relation.csv", "study.json", "report.md", "report.html",
    )  # fmt: skip
    for name in written:
        assert (out / name).is_file(), name
    table = pd.read_parquet(out / "results.parquet")
    assert list(table.columns[:3]) == ["model", "dataset", "seed"]
    assert set(table["model"]) == {"tiny0", "tiny1"}
    cell = pd.read_parquet(out / "cells" / "colours" / "tiny1" / "seed0" / "results.parquet")
    mine = table[table["model"] == "tiny1"].drop(columns=["model", "dataset", "seed"])
    pd.testing.assert_frame_equal(mine.reset_index(drop=True), cell)  # the cell's own run
    summary = pd.read_csv(out / "summary.csv")
    msp = summary[(summary["detector"] == "msp") & (summary["metric"] == "auroc")]
    per = table[(table["detector"] == "msp") & (table["metric"] == "auroc")]["value"]
    assert msp["mean"].iloc[0] == pytest.approx(per.mean()) and msp["n_models"].iloc[0] == 2
    report = (out / "report.md").read_text()
    assert "colours: osr, mean over models" in report and "mean rank" in report
    assert "closed-set accuracy vs AUROC" in report
    assert (out / "figures" / "relation_colours_auroc.png").is_file()
    # a re-run computes nothing; an added model computes only its own cells
    again = run_study(load_study(d, base_dir=study_root))
    assert all(o.computed == () for o in again.outcomes)
    d["models"] = study_dict(study_root)["models"]
    more = run_study(load_study(d, base_dir=study_root))
    assert [bool(o.computed) for o in more.outcomes] == [False, False, True]
    record = json.loads((out / "study.json").read_text())
    assert [c["status"] for c in record["cells"]] == ["done"] * 3


def test_a_failing_cell_is_reported_and_the_others_finish(study_root, tmp_path) -> None:
    (study_root / "broken.pt").write_bytes(b"not a checkpoint")
    d = study_dict(study_root, output=str(tmp_path / "f"))
    d["models"][1]["weights"] = "broken.pt"
    path = study_root / "failing.yaml"
    path.write_text(yaml.safe_dump(d))
    res = run_study(path, report=True)
    assert [o.status for o in res.outcomes] == ["done", "failed", "done"]
    reason = res.failed[0].reason
    assert "\n" not in reason and "broken.pt" in reason
    assert set(res.results["model"]) == {"tiny0", "tiny2"}
    assert "## Failed cells" in (tmp_path / "f" / "report.md").read_text()
    with pytest.raises(SystemExit) as end:
        main(["study", "run", str(path), "--quiet"])
    assert end.value.code == 1


def test_worker_processes_give_the_same_numbers(study_root: Path, tmp_path: Path) -> None:
    serial = study_dict(study_root, output=str(tmp_path / "one"))
    run_study(load_study(serial, base_dir=study_root), report=False)
    pool = study_dict(study_root, output=str(tmp_path / "two"), jobs=2)
    res = run_study(load_study(pool, base_dir=study_root), report=False)
    assert [o.status for o in res.outcomes] == ["done"] * 3, [o.reason for o in res.outcomes]
    pd.testing.assert_frame_equal(_numbers(tmp_path / "one"), _numbers(tmp_path / "two"))
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "one" / "summary.csv"),
                                  pd.read_csv(tmp_path / "two" / "summary.csv"))  # fmt: skip


def test_ray_tasks_give_the_same_numbers(study_root: Path, tmp_path: Path) -> None:
    import tempfile

    import ray

    serial = study_dict(study_root, output=str(tmp_path / "one"))
    serial["models"] = serial["models"][:2]
    run_study(load_study(serial, base_dir=study_root), report=False)
    on_ray = {**serial, "output": str(tmp_path / "ray"), "executor": "ray"}
    ray_dir = tempfile.mkdtemp(prefix="ray-")  # short: Ray's socket paths have a length limit
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=ray_dir)
        res = run_study(load_study(on_ray, base_dir=study_root), report=False)
    finally:
        ray.shutdown()
        shutil.rmtree(ray_dir, ignore_errors=True)
    assert [o.status for o in res.outcomes] == ["done"] * 2, [o.reason for o in res.outcomes]
    pd.testing.assert_frame_equal(_numbers(tmp_path / "one"), _numbers(tmp_path / "ray"))


def test_the_command_checks_and_refuses_in_one_line(study_root, tmp_path, capsys) -> None:
    d = study_dict(study_root, output=str(tmp_path / "c"))
    path = study_root / "check.yaml"
    path.write_text(yaml.safe_dump(d))
    with pytest.raises(SystemExit) as end:
        main(["study", "check", str(path)])
    assert end.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "3 cells" in out and "tiny2" in out
    bad = study_root / "bad.yaml"
    bad.write_text(yaml.safe_dump({**d, "detectors": ["msp", "enrgy"]}))
    for args in (["study", "run", str(bad)], ["study", "run", str(path), "--jobs", "0"]):
        with pytest.raises(SystemExit) as end:
            main(args)
        assert end.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: "), err
    assert not (tmp_path / "c").exists()  # refused before anything ran
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_a_dataset_that_reproduces_ssb_gets_the_published_numbers_beside(study_root, tmp_path):
    d = study_dict(study_root, output=str(tmp_path / "p"), detectors=["mls", "msp"])
    ds = d["datasets"]["colours"]
    ds["data"]["sets"] = {
        split: {"role": "ood", "split": split, "images": "img/ood"} for split in ("easy", "hard")
    }
    ds["published"] = "ssb:cub"
    d["models"] = d["models"][:2]
    res = run_study(load_study(d, base_dir=study_root))
    assert not res.failed
    pub = pd.read_csv(tmp_path / "p" / "published.csv")
    mls = pub[(pub["detector"] == "mls") & (pub["metric"] == "auroc")]
    assert set(mls["split"]) == {"easy", "hard"} and mls["ours"].notna().all()
    assert set(mls["published"]) == {0.883, 0.793}
    acc = pub[pub["metric"] == "accuracy"]
    assert len(acc) == 1 and acc["published"].iloc[0] == 0.862 and acc["ours"].notna().all()
    assert pub.loc[pub["detector"] == "arpl", "ours"].isna().all()
    report = (tmp_path / "p" / "report.md").read_text()
    assert "SSB Table 1" in report and "MLS (published)" in report and "88.3" in report
    assert "colours: ssb as published and ours" in report


def test_the_models_of_a_dataset_share_its_decoded_images(study_root, tmp_path, monkeypatch):
    """Run one after another, the second model's cell reads the first one's decoded images."""
    from tests.features.conftest import count_decodes

    calls = count_decodes(monkeypatch)
    d = study_dict(study_root, output=str(tmp_path / "s"), jobs=1)
    d["models"] = d["models"][:2]
    result = run_study(load_study(d, base_dir=study_root), report=False)
    assert [o.status for o in result.outcomes] == ["done", "done"]
    images = 18 + 15 + 12  # train, test and ood (conftest's study_root)
    assert calls["n"] == images  # each image decoded once for the two models
