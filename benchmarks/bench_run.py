"""Benchmark of ``semshift run``'s score + evaluate stages on a synthetic ImageNet-scale study.

Issue 6 target: features already stored; 50,000 ID test, 64 grid cells of 5,000 OOD each
(320,000 rows), 2,048-d features, 1,000 classes, all 24 feature/logit detectors, every protocol
(OSR, new-class vs failure with the decomposition, graded grid, random-model sanity check,
generalisation, GZSL), bootstrap CIs (1,000 resamples): under 10 minutes and 12 GB peak.
Issue 16: every registered post-hoc detector (the list comes from
``semshift.detectors.list_detectors(level="post_hoc")``, named one by one in the config, so a
detector the stores cannot feed fails loudly instead of being left out): under 15 minutes; the
script prints each detector's fit and score seconds and its share of the detector time.

The stores are generated once (float32, written shard by shard so generation never holds them
all): class means mu_c (non-negative, like pooled ReLU features); ID features relu(mu_y + noise);
the grid cell (s, v) mixes each sample's class mean with a new-class mean, weight s/8 (semantic
level 1 = closest to ID), with noise growing with v (covariate level); a covariate set of ID
classes with doubled noise; logits from a head W built from the class means. The sanity check
reads stores of a "random model" (features without class structure through a random head) for
id_train, id_test and the covariate set. GZSL reads a 50,000-row prediction CSV.

The run itself happens in a fresh subprocess, so its peak RSS (``ru_maxrss``) counts only the
runner (inputs included), not the data generation. Reference in the same process: reading
every stored array once (the I/O floor of one pass over the data).

Usage::

    nice -n 5 .venv/bin/python benchmarks/bench_run.py --root /tmp/bench_run [--train 10000]
        [--clean]   # the generated stores (about 5 GB) are kept for the next run unless --clean
    .venv/bin/python benchmarks/bench_run.py --root /tmp/bench_small --scale 0.05 --clean
        # quick check: test, grid cells and covariate set at 5% of their rows
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

C, D = 1000, 2048
N_TEST, CELL, LEVELS, N_COV = 50_000, 5_000, 8, 5_000
SHARD = 25_000


def _writer(path: Path, n: int, arrays: dict[str, tuple[int, ...]]) -> Any:
    from semshift.features import StoreWriter

    return StoreWriter(path, arrays=arrays, run={"source": "bench_run", "n": n}, fsync=False)


def _write(path: Path, n: int, make: Any, head: tuple[np.ndarray, np.ndarray], meta: dict) -> None:
    """Write ``n`` rows produced by ``make(start, stop) -> (features, index frame)``."""
    if (path / "meta.json").is_file():
        return
    w, b = head
    writer = _writer(path, n, {"logits": (w.shape[0],), "features": (w.shape[1],)})
    for k, start in enumerate(range(0, n, SHARD)):
        stop = min(n, start + SHARD)
        feats, index = make(start, stop)
        logits = feats @ w.T + b
        writer.write_shard(k, {"logits": logits, "features": feats}, index)
    writer.finalize(meta, head=head, n_shards=-(-n // SHARD))


def generate(root: Path, n_train: int) -> dict[str, Path]:
    """The synthetic stores under ``root`` (skipped when already there)."""
    rng = np.random.default_rng(0)
    mu = np.maximum(rng.normal(0.3, 1.0, (C, D)), 0).astype(np.float32)
    new_mu = np.maximum(rng.normal(0.3, 1.0, (200, D)), 0).astype(np.float32)
    centred = mu - mu.mean(0)
    w = (centred / np.linalg.norm(centred, axis=1, keepdims=True)).astype(np.float32) * 2.0
    b = np.zeros(C, np.float32)
    ids = [f"c{k:04d}" for k in range(C)]
    meta = {"model": "synthetic", "classes": {"name": "synthetic", "ids": ids}}

    def id_rows(seed: int, noise: float):
        def make(start: int, stop: int):
            r = np.random.default_rng([seed, start])
            y = (np.arange(start, stop) % C).astype(np.int64)
            h = mu[y] + r.standard_normal((stop - start, D), dtype=np.float32) * noise
            np.maximum(h, 0, out=h)
            idx = pd.DataFrame({"sample_id": np.arange(start, stop), "path": "", "label": y})
            return h, idx

        return make

    def grid_rows(start: int, stop: int):
        r = np.random.default_rng([7, start])
        i = np.arange(start, stop)
        cell = i // CELL
        sem, cov = cell // LEVELS + 1, cell % LEVELS + 1
        y = r.integers(0, C, stop - start)
        new = r.integers(0, len(new_mu), stop - start)
        a = (sem / LEVELS).astype(np.float32)[:, None]
        h = (1 - a) * mu[y] + a * new_mu[new]
        noise = (1.0 + 0.25 * (cov - 1)).astype(np.float32)[:, None]
        h += r.standard_normal((stop - start, D), dtype=np.float32) * noise
        np.maximum(h, 0, out=h)
        idx = pd.DataFrame({"sample_id": i, "path": "", "label": -1, "sem_level": sem,
                            "cov_level": cov})  # fmt: skip
        return h, idx

    rw = (rng.standard_normal((C, D)) / np.sqrt(D)).astype(np.float32)
    rhead = (rw, np.zeros(C, np.float32))

    def random_rows(seed: int, n_labels: bool):
        def make(start: int, stop: int):
            r = np.random.default_rng([seed, 99, start])
            h = np.maximum(r.standard_normal((stop - start, D), dtype=np.float32), 0)
            y = (np.arange(start, stop) % C).astype(np.int64)
            idx = pd.DataFrame({"sample_id": np.arange(start, stop), "path": "", "label": y})
            return h, idx

        return make

    out = {
        "train": root / "train",
        "test": root / "test",
        "cov": root / "cov",
        "grid": root / "grid",
        "r_train": root / "random0" / "train",
        "r_test": root / "random0" / "test",
        "r_cov": root / "random0" / "cov",
    }
    t0 = time.perf_counter()
    _write(out["train"], n_train, id_rows(1, 1.0), (w, b), meta)
    _write(out["test"], N_TEST, id_rows(2, 1.0), (w, b), meta)
    _write(out["cov"], N_COV, id_rows(3, 2.0), (w, b), meta)
    _write(out["grid"], LEVELS * LEVELS * CELL, grid_rows, (w, b), meta)
    _write(out["r_train"], n_train, random_rows(1, True), rhead, meta)
    _write(out["r_test"], N_TEST, random_rows(2, True), rhead, meta)
    _write(out["r_cov"], N_COV, random_rows(3, True), rhead, meta)
    preds = root / "gzsl.csv"
    if not preds.is_file():
        r = np.random.default_rng(5)
        label = r.integers(0, 200, 50_000)
        pred = np.where(r.random(50_000) < 0.6, label, r.integers(0, 200, 50_000))
        pd.DataFrame({"label": label, "pred": pred, "seen": label < 150}).to_csv(preds, index=False)
    out["gzsl"] = preds
    print(f"stores ready under {root} ({time.perf_counter() - t0:.1f} s to generate)")
    return out


def config(paths: dict[str, Path], out: Path, n_resamples: int) -> dict[str, Any]:
    return {
        "name": "bench-imagenet-scale",
        "output": str(out),
        "data": {
            "id_train": {"store": str(paths["train"])},
            "id_test": {"store": str(paths["test"])},
            "sets": {
                "grid": {"role": "ood", "split": "grid", "store": str(paths["grid"]),
                         "grid": {"semantic": "sem_level", "covariate": "cov_level"}},
                "cov": {"role": "covariate", "split": "noise", "covariate_level": 2,
                        "store": str(paths["cov"])},
            },
        },
        "detectors": post_hoc_detectors(),
        "protocols": {
            "osr": {}, "newclass_failure": {}, "graded": {"min_count": 10},
            "generalisation": {}, "gzsl": {"predictions": str(paths["gzsl"])},
            "sanity": {"delta": 0.05, "stores": {0: {"id_train": str(paths["r_train"]),
                                                     "id_test": str(paths["r_test"]),
                                                     "cov": str(paths["r_cov"])}}},
        },
        "metrics": ["auroc", "fpr95", "aupr_in", "aupr_out"],
        "bootstrap": {"n_resamples": n_resamples, "level": 0.95, "seed": 0},
    }  # fmt: skip


def post_hoc_detectors() -> list[str]:
    """Every registered post-hoc (array-level) detector, from the registry."""
    from semshift.detectors import list_detectors

    return list(list_detectors(level="post_hoc"))


def evaluate(cfg_file: Path) -> None:
    """Child process: run the config, print one JSON line with the figures."""
    from semshift.run import run

    cfg = json.loads(cfg_file.read_text())
    t0 = time.perf_counter()
    result = run(cfg, progress=False)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    prov = result.provenance
    print(
        json.dumps(
            {
                "wall": wall,
                "peak_gb": peak,
                "stages": {k: v.seconds for k, v in result.stages.items()},
                "cpu": {k: v.cpu_seconds for k, v in result.stages.items()},
                "cached": {k: v.cached for k, v in result.stages.items()},
                "detectors": prov["detectors"],
                "protocols": prov["notes"].get("protocol_seconds", {}),
                "train_rows": prov["notes"].get("train_rows"),
                "rows": len(result.results),
                "errors": result.errors,
                "left_out": prov["notes"].get("detectors_left_out", {}),
            }
        )
    )


def _child(cfg_file: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(cfg_file)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the run failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def read_floor(paths: dict[str, Path]) -> float:
    """Seconds to read every logits/features array of the evaluated stores once."""
    from semshift.features import open_store

    t0 = time.perf_counter()
    total = 0.0
    for key in ("train", "test", "cov", "grid"):
        for block in open_store(paths[key]).blocks("logits", "features", rows=16_384):
            total += float(block["features"][:, 0].sum())
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", type=Path, default=Path("/tmp/semshift_bench_run"))
    ap.add_argument("--train", type=int, default=10_000, help="id_train rows (10 per class)")
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument(
        "--scale", type=float, default=1.0, help="fraction of the test, cell and covariate rows"
    )
    ap.add_argument(
        "--clean", action="store_true", help="delete --root at the end (default: keep the data)"
    )
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        evaluate(args.child)
        return
    global N_TEST, CELL, N_COV
    if args.scale != 1.0:
        N_TEST, CELL, N_COV = (max(C, round(v * args.scale)) for v in (N_TEST, CELL, N_COV))
    args.root.mkdir(parents=True, exist_ok=True)
    paths = generate(args.root, args.train)
    t_start = time.perf_counter()
    out = args.root / f"out-train{args.train}"
    cfg_file = args.root / "config.json"
    cfg_file.write_text(json.dumps(config(paths, out, args.resamples)))
    load_before = os.getloadavg()[0]
    floor = read_floor(paths)
    print(
        f"data: id_train {args.train:,} x {D:,} ({C:,} classes, {args.train // C} per class), "
        f"id_test {N_TEST:,}, grid {LEVELS}x{LEVELS} cells x {CELL:,} = {LEVELS**2 * CELL:,} OOD, "
        f"covariate {N_COV:,}; sanity: 1 random-model copy of id_train, id_test, covariate; "
        f"bootstrap {args.resamples} resamples"
    )
    print(f"reference: reading every stored logits/features array once: {floor:.1f} s")
    import shutil

    shutil.rmtree(out, ignore_errors=True)
    first = _child(cfg_file)
    second = _child(cfg_file)
    load_after = os.getloadavg()[0]
    print(f"load average (1 min) before / after: {load_before:.2f} / {load_after:.2f}")
    print(f"first run: {first['wall']:.1f} s wall, peak RSS {first['peak_gb']:.2f} GB, "
          f"{first['rows']:,} result rows, train rows {first['train_rows']}")  # fmt: skip
    for stage, sec in first["stages"].items():
        cpu = first.get("cpu", {}).get(stage, float("nan"))
        print(f"  {stage:9s} {sec:8.1f} s wall {cpu:8.1f} s CPU (all threads)")
    print(
        "  detectors (fit s / score s over id_test + every set / share of the detector time; "
        "main model only; each in its worker thread, so they add up to more than the wall time; "
        "a computation several detectors share, such as the scan of the training rows of knn, "
        "grood and gmm, counts for the detector that ran it):"
    )
    det_total = sum(sum(v.values()) for v in first["detectors"].values()) or 1.0
    for name, info in sorted(first["detectors"].items(), key=lambda kv: -sum(kv[1].values())):
        fit_s, score_s = info.get("fit_seconds", 0), info.get("score_seconds", 0)
        print(f"    {name:13s} {fit_s:7.2f} {score_s:8.2f} {(fit_s + score_s) / det_total:6.1%}")
    registered = post_hoc_detectors()
    missing = [n for n in registered if n not in first["detectors"]]
    print(
        f"  post-hoc detectors run: {len(registered) - len(missing)} of {len(registered)} "
        "registered" + (f"; missing: {missing}" if missing else "")
    )
    print("  protocols: " + ", ".join(f"{k} {v:.1f} s" for k, v in first["protocols"].items()))
    if first["errors"]:
        print("  errors: " + " | ".join(first["errors"]))
    if first["left_out"]:
        print(
            "  left out of 'all': " + ", ".join(f"{k} ({v})" for k, v in first["left_out"].items())
        )
    print(
        f"second run (every stage cached: {all(second['cached'].values())}): "
        f"{second['wall']:.1f} s wall, peak RSS {second['peak_gb']:.2f} GB"
    )
    score_eval = first["stages"]["score"] + first["stages"]["evaluate"]
    print(f"score + evaluate: {score_eval:.1f} s (target 600 s), peak {first['peak_gb']:.2f} GB "
          f"(target 12 GB); {score_eval / floor:.1f}x the read floor")  # fmt: skip
    print(f"script wall time (generation excluded): {time.perf_counter() - t_start:.1f} s; "
          f"first run {first['wall']:.1f} s (issue 16 target: 15 minutes)")  # fmt: skip
    if args.clean:
        shutil.rmtree(args.root, ignore_errors=True)
        print(f"deleted {args.root}")
    else:
        size = sum(f.stat().st_size for f in args.root.rglob("*") if f.is_file())
        print(f"kept {args.root} ({size / 1e9:.1f} GB) for the next run; --clean deletes it")


if __name__ == "__main__":
    main()
