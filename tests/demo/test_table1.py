"""The demo's SSB Table 1: layout, CIs, DeLong tests, determinism, the outlier leak check and
config errors, on the tiny glyph data (1 epoch, 2 seeds, torch threads = 1)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from semshift.cli import main
from semshift.demo import DemoData
from semshift.demo.table1 import (
    RESULT_COLUMNS,
    ScoredRun,
    Table1Config,
    evaluate_table1,
    read_table1_config,
    ssb_table1,
)
from semshift.errors import InputError
from semshift.metrics import auroc, bootstrap_ci, delong_test
from semshift.splits.manifest import SplitManifest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "configs" / "demo" / "ssb_table1.yaml"
#: 1 epoch, 2 seeds, a GAN of 4 width units, 4 outlier classes x 3 images, 200 resamples
TINY_TABLE = {
    "seeds": (0, 1),
    "recipe": {"epochs": 1, "batch_size": 16},
    "method_params": {"arpl_cs": {"ngf": 4, "ndf": 4, "nz": 8}},
    "outlier_classes": 4,
    "outlier_images": 3,
    "n_resamples": 200,
}


@pytest.fixture(scope="module")
def table(tiny_demo: DemoData):
    out = tiny_demo.root.parent  # reuses the session's tiny glyph data
    return ssb_table1(out, config=Table1Config(**TINY_TABLE), params=tiny_demo.params,
                      progress=False)  # fmt: skip


def test_table_has_ssb_table1_layout_and_tidy_columns(table):
    t = table.table
    assert t.rows == ["CE + MLS", "ARPL+CS", "LogitNorm + MSP", "OE + MSP"]
    assert [c.full_label for c in t.columns] == [
        "Acc", "AUROC Easy", "AUROC Hard", "OSCR Easy", "OSCR Hard", "DeLong p Easy",
        "DeLong p Hard",
    ]  # fmt: skip
    res = table.results
    assert tuple(res.columns) == RESULT_COLUMNS
    assert dict(zip(res["method"], res["score"], strict=True)) == {
        "ce": "mls", "arpl_cs": "arpl", "logitnorm": "msp", "oe": "msp",
    }  # fmt: skip
    # 4 methods x (accuracy + 2 splits x 2 metrics) x (2 seeds + mean)
    assert len(res) == 4 * 5 * 3
    on_disk = pd.read_csv(table.files["csv"])
    assert len(on_disk) == len(res) and list(on_disk.columns) == list(RESULT_COLUMNS)
    md = table.files["md"].read_text(encoding="utf-8")
    assert "| Method | Acc | AUROC Easy | AUROC Hard | OSCR Easy | OSCR Hard |" in md
    assert table.files["html"].read_text(encoding="utf-8").count("<tr") == 2 + 4  # headers, rows
    assert table.trained == 8 and len(table.outlier_classes) == 4


def test_means_cis_and_delong_p_values(table):
    res = table.results
    mean = res[res["kind"] == "mean"]
    seeds = res[res["kind"] == "seed"]
    assert (mean["ci_low"] <= mean["value"]).all() and (mean["value"] <= mean["ci_high"]).all()
    for r in mean.itertuples():
        each = seeds[(seeds["method"] == r.method) & (seeds["split"] == r.split)
                     & (seeds["metric"] == r.metric)]["value"]  # fmt: skip
        assert len(each) == 2 and r.value == pytest.approx(each.mean(), abs=1e-12)
        assert r.seed_sd == pytest.approx(each.std(ddof=1), abs=1e-12)
    p = res["delong_p"].dropna()
    assert len(p) == 4 * 2 * 3 and ((p >= 0) & (p <= 1)).all()
    ce = res[(res["method"] == "ce") & (res["metric"] == "auroc")]
    assert (ce["delong_p"] == 1.0).all() and (ce["delong_z"] == 0.0).all()
    # OSCR (exact) is at most the closed-set accuracy, seed by seed
    acc = seeds[seeds["metric"] == "accuracy"].set_index(["method", "seed"])["value"]
    for r in seeds[seeds["metric"] == "oscr"].itertuples():
        assert r.value <= acc[(r.method, r.seed)] + 1e-12


def test_rerun_reuses_every_model_and_a_fresh_run_gives_the_same_numbers(table, tmp_path):
    again = ssb_table1(table.root.parent, config=Table1Config(**TINY_TABLE),
                       params=table.data.params, progress=False)  # fmt: skip
    assert again.trained == 0
    pd.testing.assert_frame_equal(again.results, table.results)
    # trained again from scratch in another folder: CE's numbers, bit for bit
    fresh = ssb_table1(tmp_path, config=Table1Config(**{**TINY_TABLE, "methods": ("ce",)}),
                       params=table.data.params, progress=False)  # fmt: skip
    assert fresh.trained == 2
    cols = ["kind", "seed", "split", "metric", "value", "ci_low", "ci_high"]
    old = table.results[table.results["method"] == "ce"][cols].reset_index(drop=True)
    pd.testing.assert_frame_equal(fresh.results[cols], old)


def test_outliers_that_are_test_classes_are_refused_before_training(tiny_demo, tmp_path):
    manifest = SplitManifest.read(tiny_demo.split_manifest)
    runs = tiny_demo.root.parent / "ssb_table1" / "runs"
    before = sorted(runs.iterdir()) if runs.is_dir() else []
    for leaked, where in ((manifest.bins["hard"][0], "hard"), (manifest.known[0], "known")):
        cfg = Table1Config(**{**TINY_TABLE, "outlier_classes": (leaked,)})
        with pytest.raises(InputError, match=rf"1 outlier classes leak .*{re.escape(leaked)}"
                                             rf".*:{where}"):  # fmt: skip
            ssb_table1(tiny_demo.root.parent, config=cfg, params=tiny_demo.params,
                       progress=False)  # fmt: skip
        assert (sorted(runs.iterdir()) if runs.is_dir() else []) == before  # nothing trained
    # the drawn outliers are disjoint from the ID classes and from every bin of the split
    drawn = ssb_table1(tiny_demo.root.parent, config=Table1Config(**TINY_TABLE),
                       params=tiny_demo.params, progress=False).outlier_classes  # fmt: skip
    tested = set(manifest.known).union(*manifest.bins.values())
    assert len(drawn) == 4 and not tested & set(drawn)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"seeds": [0, 0]}, "seeds must be distinct"),
        ({"seeds": [-1]}, "seeds must be a list of integers"),
        ({"methods": ["oe", "logitnorm"]}, "must include ce"),
        ({"methods": ["ce", "nope"]}, "unknown training method 'nope'"),
        ({"recipe": {"epochs": 0}}, "epochs must be"),
        ({"recipe": {"epoch": 3}}, "unknown recipe option"),
        ({"bootstrap": {"level": 1.5}}, "level has a bad value"),
        ({"bootstrap": {"n_resamples": 0}}, "n_resamples has a bad value"),
        ({"outliers": {"classes": 0}}, "outlier_classes must be"),
        ({"scores": {"ce": "knn"}}, "fits on"),
        ({"scores": {"ce": "nope"}}, "unknown detector"),
        ({"method_params": {"ce": {"label_smoothing": 2}}}, "label_smoothing must be"),
        ({"data": {"n_train": 0}}, "n_train must be a positive integer"),
        ({"threads": 0}, "threads has a bad value"),
        ({"colour": 1}, "unknown key 'colour'"),
    ],
)
def test_bad_config_values_are_one_line_input_errors(data, match):
    with pytest.raises(InputError, match=match) as info:
        Table1Config.from_dict(data, "t1.yaml")
    assert str(info.value).startswith("t1.yaml: ") and "\n" not in str(info.value)


def test_example_config_is_the_defaults_and_bad_files_fail_in_the_cli(tmp_path, capsys):
    cfg = read_table1_config(EXAMPLE)
    assert (
        cfg == Table1Config(recipe=cfg.recipe)
        and cfg.train_recipe() == Table1Config().train_recipe()
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text("seeds: [0]\nseeds: [1]\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"line 2.*given twice"):
        read_table1_config(bad)
    bad.write_text("recipe: {lr: -1}\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--ssb-table1", "--config", str(bad), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.startswith("error: ") and "lr must be" in err
    assert not (tmp_path / "o").exists()
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--config", str(EXAMPLE), "--out", str(tmp_path / "o")])
    assert exc.value.code == 2 and "only with --ssb-table1" in capsys.readouterr().err


def _runs(rng: np.random.Generator, n_seeds: int) -> list[ScoredRun]:
    runs = []
    for m, shift in (("ce", 1.0), ("oe", 1.5)):
        for s in range(n_seeds):
            runs.append(ScoredRun(
                m, s, "mls", rng.normal(shift, 1, 40), rng.random(40) < 0.8,
                {"easy": rng.normal(0, 1, 30), "hard": rng.normal(0.5, 1, 20)},
            ))  # fmt: skip
    return runs


def test_one_seed_gives_the_plain_bootstrap_ci_and_delong_test():
    runs = _runs(np.random.default_rng(0), 1)
    res = evaluate_table1(runs, n_resamples=300, seed=4)
    oe, ce = runs[1], runs[0]
    s = np.r_[oe.id_scores, oe.ood_scores["hard"]]
    is_ood = np.r_[np.zeros(40, bool), np.ones(20, bool)]
    ref = bootstrap_ci(auroc, s, is_ood, n_resamples=300, seed=4)
    row = res[(res["method"] == "oe") & (res["kind"] == "mean") & (res["split"] == "hard")
              & (res["metric"] == "auroc")].iloc[0]  # fmt: skip
    assert (row["value"], row["ci_low"], row["ci_high"]) == pytest.approx(
        (ref.estimate, ref.low, ref.high), abs=1e-12
    )
    dl = delong_test(s, np.r_[ce.id_scores, ce.ood_scores["hard"]], is_ood)
    assert (row["delong_z"], row["delong_p"]) == pytest.approx((dl.z, dl.p), abs=1e-12)


def test_evaluation_refuses_mismatched_runs():
    runs = _runs(np.random.default_rng(1), 2)
    with pytest.raises(InputError, match="reference 'ce' has no runs"):
        evaluate_table1([r for r in runs if r.method != "ce"], n_resamples=0)
    with pytest.raises(InputError, match="oe has seeds"):
        evaluate_table1(runs[:-1], n_resamples=0)
    runs[-1].ood_scores["hard"] = runs[-1].ood_scores["hard"][:5]
    with pytest.raises(InputError, match="other test images"):
        evaluate_table1(runs, n_resamples=0)


def test_a_damaged_cached_store_is_extracted_again_not_used(table):
    """A re-run reuses a cached feature store only when it verifies in full: a flipped byte in
    a shard makes it extract that store again, and the numbers are those of the intact run."""
    from semshift.features.store import verify_store

    shard = next(p for p in sorted(table.root.parent.rglob("eval/.cache/extract/*/shards/*.npy")))
    store = shard.parents[1]
    data = bytearray(shard.read_bytes())
    data[-5] ^= 0x10
    shard.write_bytes(bytes(data))
    assert verify_store(store)  # damaged
    again = ssb_table1(table.root.parent, config=Table1Config(**TINY_TABLE),
                       params=table.data.params, progress=False)  # fmt: skip
    assert again.trained == 0 and verify_store(store) == []
    pd.testing.assert_frame_equal(again.results, table.results)
