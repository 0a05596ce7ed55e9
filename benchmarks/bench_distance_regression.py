"""Benchmark the distance regression's pieces against references measured in the same run.

1. ``auroc_by_group``: 50,000 ID scores against one side of 30,000 images cut into 100
   equal-count subsets (ImageNet-1K val vs ImageNet-OOD's size), all subsets at once, against
   ``evaluate_many(..., ["auroc"], groups=...)`` (one sort of the ID scores, a rank core per
   subset) and a loop of sklearn's ``roc_auc_score`` per subset; largest difference reported.
2. ``kth_neighbour_distance`` (k = 1, L2-normalised): ``--queries`` images against
   ``--reference`` ID rows of ``--dims`` features, against sklearn's brute-force
   ``NearestNeighbors`` on the same normalised rows; largest difference reported.

Timing: one warm-up call, then the best of ``--repeat`` calls, candidate and reference
interleaved so that both see the same machine load.

Usage::

    python benchmarks/bench_distance_regression.py [--repeat 3] [--queries 10000]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score
from sklearn.neighbors import NearestNeighbors

from semshift.metrics import evaluate_many
from semshift.metrics.distance import auroc_by_group, equal_count_bins, kth_neighbour_distance


def _best(fns: dict[str, Callable[[], Any]], repeat: int) -> tuple[dict[str, float], dict]:
    out: dict[str, Any] = {}
    times: dict[str, list[float]] = {k: [] for k in fns}
    for name, fn in fns.items():
        out[name] = fn()  # warm-up
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {k: min(v) for k, v in times.items()}, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--reference", type=int, default=20_000)
    ap.add_argument("--dims", type=int, default=256)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"load average {os.getloadavg()}")

    ids = rng.normal(1.0, 1.0, 50_000)
    ood = rng.normal(0.0, 1.0, 30_000)
    groups = equal_count_bins(rng.uniform(0, 1, 30_000), 100)

    def loop() -> np.ndarray:
        res = []
        for g in range(100):
            sub = ood[groups == g]
            y = np.r_[np.ones(ids.size), np.zeros(sub.size)]
            res.append(roc_auc_score(y, np.r_[ids, sub]))
        return np.asarray(res)

    t, out = _best(
        {
            "auroc_by_group": lambda: auroc_by_group(ids, ood, groups, 100),
            "evaluate_many": lambda: evaluate_many(ids, ood, ["auroc"], groups=groups)[
                "value"
            ].to_numpy(),
            "sklearn loop": loop,
        },
        args.repeat,
    )
    diff = max(
        np.abs(out["auroc_by_group"] - out[k]).max() for k in ("evaluate_many", "sklearn loop")
    )
    print("1. AUROC of 50,000 ID scores vs 100 subsets of 30,000 scores")
    for k, v in t.items():
        print(f"   {k:16s} {1000 * v:9.1f} ms")
    print(f"   max |difference| {diff:.2e}")

    q = rng.normal(size=(args.queries, args.dims)).astype(np.float32)
    r = rng.normal(size=(args.reference, args.dims)).astype(np.float32)
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    rn = r / np.linalg.norm(r, axis=1, keepdims=True)

    def sk() -> np.ndarray:
        nn = NearestNeighbors(n_neighbors=1, algorithm="brute").fit(rn.astype(np.float64))
        return nn.kneighbors(qn.astype(np.float64))[0][:, 0]

    t, out = _best(
        {"kth_neighbour_distance": lambda: kth_neighbour_distance(q, r), "sklearn brute": sk},
        args.repeat,
    )
    diff = float(np.abs(out["kth_neighbour_distance"] - out["sklearn brute"]).max())
    print(f"2. nearest-ID distance, {args.queries} x {args.reference} rows, {args.dims} dims")
    for k, v in t.items():
        print(f"   {k:24s} {v:7.2f} s")
    print(f"   max |difference| {diff:.2e}")
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
