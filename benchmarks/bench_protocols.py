"""Benchmark the protocol functions on a synthetic ImageNet-scale study.

The evaluation of issue 6: 50,000 ID test scores against 64 graded-grid cells of 5,000 OOD
scores each (two OSR splits of 32 cells), two covariate sets, for 24 detectors, with
1,000-resample bootstrap CIs; plus the random-model sanity check on ``--sanity-seeds`` copies of
the same sets. Scores are synthetic (normal, shifted per cell; one detector per ten with
rounded, tied scores). Prints the seconds of every protocol (wall and process CPU) and the peak
resident memory.

Reference in the same run: :func:`semshift.metrics.bootstrap_ci` (its vectorised AUROC path)
on one (detector, cell) pair, times the number of (detector, cell) pairs of the grid, which is
what a per-pair loop would cost for the graded AUROC CIs alone.

Usage::

    python benchmarks/bench_protocols.py [--n-id 50000] [--cells 64] [--cell-size 5000]
        [--detectors 24] [--resamples 1000] [--sanity-seeds 1]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from semshift.metrics import bootstrap_ci
from semshift.protocols import (
    Bootstrap,
    ScoredSet,
    generalisation,
    graded,
    newclass_failure,
    osr,
    sanity,
)


def make_sets(
    n_id: int, cells: int, cell_size: int, n_det: int, n_classes: int, seed: int
) -> tuple[ScoredSet, list[ScoredSet]]:
    """ID test set, one OOD set per grid cell (set-level levels), two covariate sets."""
    rng = np.random.default_rng(seed)
    side = int(np.sqrt(cells) + 0.5)
    dets = [f"det{k:02d}" for k in range(n_det)]

    def scores(n: int, shift: float) -> dict[str, np.ndarray]:
        out = {}
        for k, d in enumerate(dets):
            s = rng.normal(shift * (0.5 + k / n_det), 1.0, n)
            out[d] = np.round(s, 2) if k % 10 == 0 else s  # some detectors with ties
        return out

    labels = rng.integers(0, n_classes, n_id)
    preds = np.where(rng.random(n_id) < 0.8, labels, rng.integers(0, n_classes, n_id))
    idt = ScoredSet("id_test", "id_test", labels, preds, scores(n_id, 1.0))
    sets: list[ScoredSet] = []
    for c in range(cells):
        i, j = divmod(c, side)
        sets.append(
            ScoredSet(
                f"cell{c:02d}",
                "ood",
                np.full(cell_size, -1),
                rng.integers(0, n_classes, cell_size),
                scores(cell_size, -0.1 * (i + j) / side),
                split="easy" if i >= side // 2 else "hard",
                semantic_level=i + 1,
                covariate_level=j + 1,
            )
        )
    for name, acc in (("easy_cov", 0.7), ("hard_cov", 0.5)):
        n = n_id // 5
        y = rng.integers(0, n_classes, n)
        p = np.where(rng.random(n) < acc, y, rng.integers(0, n_classes, n))
        sets.append(ScoredSet(name, "covariate", y, p, scores(n, 0.5), split=name[:4]))
    return idt, sets


def timed(name: str, f: Callable[[], Any], log: list[tuple[str, float, float, int]]) -> Any:
    w0, c0 = time.perf_counter(), time.process_time()
    out = f()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    log.append((name, wall, cpu, len(out)))
    print(f"  {name:<16} {wall:8.1f} s wall {cpu:8.1f} s cpu  {len(out):7d} rows", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-id", type=int, default=50_000)
    parser.add_argument("--cells", type=int, default=64)
    parser.add_argument("--cell-size", type=int, default=5_000)
    parser.add_argument("--detectors", type=int, default=24)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--sanity-seeds", type=int, default=1)
    parser.add_argument("--classes", type=int, default=1000)
    args = parser.parse_args()
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()[0]:.2f}; numpy {np.__version__}"
    )
    print(
        f"study: {args.n_id} ID vs {args.cells} cells x {args.cell_size} OOD, "
        f"{args.detectors} detectors, {args.resamples} resamples, "
        f"{args.sanity_seeds} sanity seed(s)"
    )
    t0 = time.perf_counter()
    idt, sets = make_sets(args.n_id, args.cells, args.cell_size, args.detectors, args.classes, 0)
    print(f"  {'(build sets)':<16} {time.perf_counter() - t0:8.1f} s")
    boot = Bootstrap(args.resamples, 0.95, 0)
    log: list[tuple[str, float, float, int]] = []
    timed("osr", lambda: osr(idt, sets, bootstrap=boot), log)
    timed("newclass_failure", lambda: newclass_failure(idt, sets, bootstrap=boot), log)
    timed("graded", lambda: graded(idt, sets, bootstrap=boot), log)
    timed("generalisation", lambda: generalisation(idt, sets, bootstrap=boot), log)
    runs = {
        k: [idt, *sets] for k in range(args.sanity_seeds)
    }  # same sizes as a random-init model would score
    if runs:
        timed("sanity", lambda: sanity(runs, bootstrap=boot), log)
    total_wall = sum(x[1] for x in log)
    total_cpu = sum(x[2] for x in log)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    print(f"  {'total':<16} {total_wall:8.1f} s wall {total_cpu:8.1f} s cpu; peak {peak:.2f} GB")

    # reference: bootstrap_ci per (detector, cell) pair, extrapolated to the grid
    a, b = idt.scores["det01"], sets[0].scores["det01"]
    s = np.concatenate((a, b))
    y = np.r_[np.zeros(a.size, bool), np.ones(b.size, bool)]
    w0 = time.perf_counter()
    bootstrap_ci("auroc", s, y, n_resamples=args.resamples, seed=0)
    one = time.perf_counter() - w0
    pairs = args.detectors * args.cells
    graded_wall = next(x[1] for x in log if x[0] == "graded")
    print(
        f"reference: bootstrap_ci(auroc) on one pair {one:.2f} s x {pairs} pairs = "
        f"{one * pairs:.0f} s for the grid's AUROC CIs alone; graded (auroc + fpr95 CIs, "
        f"aupr_in points, level means and trends) {graded_wall:.1f} s "
        f"({one * pairs / graded_wall:.1f}x faster)"
    )
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
