"""Benchmarks of ``semshift.study`` (issue 29).

1. **Aggregation**: a study table of 13 models x 40 detectors x 6 sets x 2 protocols x 4 ranking
   metrics (plus accuracy rows), aggregated over models with 1,000 bootstrap resamples, ranked,
   and related to accuracy. Target: under 5 s. Reference in the same run: a plain pandas
   ``groupby().agg(["mean", "std"])`` over the same table (no bootstrap, no ranks).
2. **Overhead**: a study against the same runs made one by one with :func:`semshift.run.run`
   (same configurations, fresh folders, interleaved twice: study, runs, study, runs). Target:
   the study costs the runs plus under 2 %. ``--demo`` measures it on the demo study (four
   GlyphNet widths on the full glyph data, ``semshift demo --study``); without it, on M tiny
   CNNs over generated images (cells of a second or two: there the study's fixed cost, the
   aggregation and its report, is visible).

Usage::

    nice -n 5 .venv/bin/python benchmarks/bench_study.py [--models 3] [--images 400]

Everything it writes lives in a temporary folder removed at the end.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.tiny_model


def _study_table(n_models: int = 13, n_det: int = 40, n_sets: int = 6, seed: int = 0):
    rng = np.random.default_rng(seed)
    metrics = ("auroc", "fpr95", "aupr_in", "aupr_out")
    protocols = ("osr", "newclass_failure")
    det = np.array([f"det{k}" for k in range(n_det)], dtype=object)
    sets = np.array([f"set{k}" for k in range(n_sets)], dtype=object)
    m, p, s, d, mt = np.meshgrid(np.arange(n_models), np.arange(2), np.arange(n_sets),
                                 np.arange(n_det), np.arange(4), indexing="ij")  # fmt: skip
    n = m.size
    frame = pd.DataFrame({
        "model": np.array([f"m{k:02d}" for k in range(n_models)], dtype=object)[m.ravel()],
        "dataset": "imagenet", "seed": 0,
        "protocol": np.array(protocols, dtype=object)[p.ravel()],
        "set": sets[s.ravel()], "split": None, "semantic_level": None, "covariate_level": None,
        "detector": det[d.ravel()], "metric": np.array(metrics, dtype=object)[mt.ravel()],
        "value": rng.uniform(0.5, 0.95, n), "error": None,
    })  # fmt: skip
    acc = pd.DataFrame({
        "model": [f"m{k:02d}" for k in range(n_models)], "dataset": "imagenet", "seed": 0,
        "protocol": "osr", "set": "id_test", "split": None, "semantic_level": None,
        "covariate_level": None, "detector": None, "metric": "accuracy",
        "value": rng.uniform(0.6, 0.85, n_models), "error": None,
    })  # fmt: skip
    return pd.concat([frame, acc], ignore_index=True)


def bench_aggregate() -> None:
    from semshift.study import accuracy_relation, aggregate_over_models, detector_ranks

    table = _study_table()
    t = time.perf_counter()
    summary = aggregate_over_models(table, n_resamples=1000)
    t_agg = time.perf_counter() - t
    t = time.perf_counter()
    detector_ranks(table)
    t_rank = time.perf_counter() - t
    t = time.perf_counter()
    relation, _ = accuracy_relation(table, n_resamples=1000)
    t_rel = time.perf_counter() - t
    t = time.perf_counter()
    keys = ["dataset", "protocol", "set", "detector", "metric"]
    table.groupby(keys, dropna=False)["value"].agg(["mean", "std"])
    t_ref = time.perf_counter() - t
    total = t_agg + t_rank + t_rel
    print(f"aggregation: {len(table):,} rows, {len(summary):,} groups, {len(relation)} relation "
          f"groups, 1,000 resamples")  # fmt: skip
    print(f"  aggregate_over_models {t_agg:.2f} s, detector_ranks {t_rank:.2f} s, "
          f"accuracy_relation {t_rel:.2f} s: total {total:.2f} s (target < 5 s)")  # fmt: skip
    print(f"  reference pandas groupby mean/std {t_ref:.3f} s: ratio {total / t_ref:.0f}x")


def _images(root: Path, n: int) -> None:
    from tests.training.images import write_class_images

    per = max(1, n // 3)
    write_class_images(root / "train", {"r": per, "g": per, "b": per}, seed=0)
    write_class_images(root / "test", {"r": per, "g": per, "b": per}, seed=1)
    write_class_images(root / "ood", {"x": per, "y": per}, seed=2)
    (root / "classes.txt").write_text("r\ng\nb\n")


def bench_overhead(n_models: int, n_images: int) -> None:
    from tests.study.conftest import study_dict

    torch.set_num_threads(1)
    root = Path(tempfile.mkdtemp(prefix="bench_study_"))
    try:
        _images(root / "img", n_images)
        base = study_dict(root)
        base["models"] = (base["models"] * ((n_models + 2) // 3))[:n_models]
        for k, m in enumerate(base["models"]):
            base["models"][k] = {**m, "label": f"tiny{k}"}
        base["detectors"] = ["msp", "energy", "mls", {"name": "knn", "params": {"k": 5}}, "vim"]
        base["run"] = {"bootstrap": {"n_resamples": 200}}
        _time_pair(base, root, f"{n_models} tiny CNNs x {n_images} images per set, 5 detectors")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _time_pair(base: dict, root: Path, label: str) -> None:
    """Study (with and without its report) vs the same runs one by one, twice interleaved;
    prints the best of each."""
    from semshift.run import load_config, run
    from semshift.study import load_study, run_study

    times: dict[str, list[float]] = {"study": [], "study, no report": [], "runs": []}
    for rep in range(2):
        for key, report in (("study", True), ("study, no report", False)):
            t = time.perf_counter()
            out = str(root / f"{key.replace(', ', '-').replace(' ', '')}{rep}")
            res = run_study(load_study({**base, "output": out}, base_dir=root), report=report)
            times[key].append(time.perf_counter() - t)
            assert not res.failed, [o.reason for o in res.failed]
        st = load_study({**base, "output": str(root / f"runs{rep}")}, base_dir=root)
        t = time.perf_counter()
        for cell in st.cells:
            run(load_config(cell.config, base_dir=root), progress=False)
        times["runs"].append(time.perf_counter() - t)
    r = min(times["runs"])
    print(f"overhead: {label}")
    print(f"  the same runs one by one {r:.2f} s ({[round(x, 2) for x in times['runs']]})")
    for key in ("study", "study, no report"):
        s = min(times[key])
        print(f"  {key} {s:.2f} s ({[round(x, 2) for x in times[key]]}): / runs = {s / r:.3f} "
              f"(+{s - r:.2f} s; target < 1.02)")  # fmt: skip


def bench_demo_overhead() -> None:
    from semshift.demo.build import build_demo_data
    from semshift.demo.study import STUDY_WIDTHS, _variant, demo_study_config

    root = Path(tempfile.mkdtemp(prefix="bench_study_demo_"))
    try:
        t = time.perf_counter()
        data = build_demo_data(root, seed=0, progress=False)
        weights = {k: _variant(data, root / "models", k, w, print) for k, w in STUDY_WIDTHS.items()}
        print(f"demo data and {len(weights)} variants in {time.perf_counter() - t:.1f} s")
        base = demo_study_config(data, root / "unused", weights)
        _time_pair(base, root, f"the demo study ({len(weights)} GlyphNet widths x the glyphs' "
                   "open-set bins, every post-hoc detector, osr, 1,000 resamples)")  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=3)
    parser.add_argument("--images", type=int, default=600, help="images per set")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--demo", action="store_true", help="overhead on the demo study")
    args = parser.parse_args()
    bench_aggregate()
    if args.demo:
        bench_demo_overhead()
    elif not args.skip_overhead:
        bench_overhead(args.models, args.images)


if __name__ == "__main__":
    main()
