"""Benchmark `detectors.fit_many` against fitting each detector alone, in the same run.

The four detectors whose fits share their main computation (mahalanobis and rmd: the class
means and within-class covariance; vim and residual: the principal subspace) are fitted on
synthetic ImageNet-scale training features, two ways, alternating for ``--rounds`` rounds:

* reference: each detector's own ``fit``, one after the other, with the process's usual BLAS
  threads (no sharing);
* ``fit_many(threads=2)``: side by side in two threads, shared statistics computed once.

Printed: wall and CPU times of both, their ratio, and two checks: the scores of both on 2,000
held-out rows agree (the bases of eigen-subspaces differ with the BLAS threads, the scores only
by rounding), and the fitted states equal those of each detector's own ``fit`` with one BLAS
thread, which is what each ``fit_many`` worker uses.

Usage::

    nice python benchmarks/bench_fit_many.py                 # 10,000 x 2,048, 1,000 classes
    python benchmarks/bench_fit_many.py --n-train 2000 --dim 256 --classes 100 --rounds 1
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from threadpoolctl import threadpool_limits

from semshift import detectors

NAMES = ("mahalanobis", "rmd", "vim", "residual")
STATE = ("means_", "center_", "projection_", "origin_", "null_space_", "alpha_")


def make_inputs(n: int, d: int, c: int, seed: int) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    y = np.arange(n) % c
    means = rng.normal(0, 1, (c, d)).astype(np.float32)
    x = (means[y] + rng.normal(0, 1, (n, d))).astype(np.float32)
    w = rng.normal(0, 0.02, (c, d)).astype(np.float32)
    b = np.zeros(c, np.float32)
    return {"features": x, "labels": y, "head": (w, b)}


def timed(fn: object) -> tuple[float, float, object]:
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()  # type: ignore[operator]
    return time.perf_counter() - t0, time.process_time() - c0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n-train", type=int, default=10_000)
    ap.add_argument("--dim", type=int, default=2048)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    inputs = make_inputs(args.n_train, args.dim, args.classes, args.seed)
    held_out = make_inputs(2000, args.dim, args.classes, args.seed + 1)["features"]
    w, b = inputs["head"]  # type: ignore[misc]
    test = {"features": held_out, "logits": held_out @ w.T + b}
    print(
        f"fit {', '.join(NAMES)} on {args.n_train:,} x {args.dim:,} features, "
        f"{args.classes:,} classes; {args.rounds} alternating rounds"
    )

    def alone() -> dict[str, detectors.Detector]:
        out = {}
        for n in NAMES:
            det = detectors.get(n)
            out[n] = det.fit(**{k: v for k, v in inputs.items() if k in det.fit_requires})
        return out

    def together() -> dict[str, detectors.Detector]:
        res = detectors.fit_many({n: detectors.get(n) for n in NAMES}, inputs, threads=2)
        if res.errors:
            raise SystemExit(f"fit_many failed: {res.errors}")
        return res.fitted

    ref_wall, many_wall = [], []
    worst = 0.0
    for r in range(args.rounds):
        w0, c0, ref = timed(alone)
        w1, c1, many = timed(together)
        ref_wall.append(w0)
        many_wall.append(w1)
        for n in NAMES:
            s_ref = ref[n].score(**test)  # type: ignore[index]
            s_many = many[n].score(**test)  # type: ignore[index]
            rel = np.abs(s_ref - s_many) / (np.abs(s_ref) + 1e-12)
            worst = max(worst, float(rel.max()))
        print(
            f"  round {r + 1}: each alone {w0:6.2f} s wall ({c0:6.2f} s CPU) | "
            f"fit_many {w1:6.2f} s wall ({c1:6.2f} s CPU) | ratio {w1 / w0:.2f}x"
        )
    with threadpool_limits(limits=1):
        single = alone()
    for n in NAMES:
        for attr in STATE:
            if hasattr(single[n], attr):
                if not np.array_equal(getattr(single[n], attr), getattr(many[n], attr)):
                    raise SystemExit(f"{n}.{attr} differs from a one-BLAS-thread fit")
    a, m = statistics.median(ref_wall), statistics.median(many_wall)
    print(f"median: each alone {a:.2f} s, fit_many {m:.2f} s, ratio {m / a:.2f}x")
    print(
        f"scores on held-out rows: largest relative difference {worst:.1e}; fitted states "
        "identical to one-BLAS-thread fits"
    )


if __name__ == "__main__":
    main()
