"""Zero-shot methods at AWA2's size (issue 32): fit + scoring of each method, default
hyperparameters, beside ESZSL's closed form measured in the same run.

Planted data: 23,527 training images x 2,048 features (non-negative, ResNet-like), 85-d class
embeddings (unit rows), 40 seen classes; the fitted model scores 7,913 test images against all
50 classes (the GZSL score matrix). Target: each method under 60 s on this machine.

Run: ``.venv/bin/python benchmarks/bench_zsl_awa2.py [--methods dap iap ...] [--repeats 1]``.
Nothing is written to disk.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from semshift.training.zsl import get_zsl_method

NEW = ("dap", "iap", "cmt", "cmt_star", "sse", "gfzsl")


def awa2_like(seed: int = 0):
    """Training (seen) and test (seen + unseen) images of a planted linear compatibility."""
    rng = np.random.default_rng(seed)
    n_seen, n_unseen, a, d = 40, 10, 85, 2048
    S = np.abs(rng.standard_normal((n_seen + n_unseen, a)))
    S /= np.linalg.norm(S, axis=1, keepdims=True)
    A = rng.standard_normal((a, d)) / np.sqrt(a)
    y = rng.integers(n_seen, size=23_527)
    y[:n_seen] = np.arange(n_seen)
    X = np.maximum(S[y] @ A * 4 + rng.standard_normal((y.size, d)), 0.0)
    yt = rng.integers(n_seen + n_unseen, size=7_913)
    Xt = np.maximum(S[yt] @ A * 4 + rng.standard_normal((yt.size, d)), 0.0)
    return X, y, S, Xt, yt, n_seen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--methods", nargs="*", default=list(NEW))
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    X, y, S, Xt, yt, n_seen = awa2_like()
    print(f"AWA2-like: {X.shape[0]:,} x {X.shape[1]:,} training features, {S.shape[1]}-d "
          f"embeddings, {n_seen} seen / {S.shape[0] - n_seen} unseen classes, {Xt.shape[0]:,} "
          f"test images; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    print("| method | fit s | scoring s | total s | / ESZSL | unseen top-1 | target |")
    print("|---|---:|---:|---:|---:|---:|---|")

    def measure(name: str) -> tuple[float, float, float]:
        best = (np.inf, np.inf)
        acc = np.nan
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            model = get_zsl_method(name)().fit(X, y, S[:n_seen])
            t1 = time.perf_counter()
            scores = model.decision_function(Xt, S)
            t2 = time.perf_counter()
            best = min(best, (t1 - t0, t2 - t1), key=sum)
            unseen = yt >= n_seen
            acc = float((scores[unseen][:, n_seen:].argmax(1) + n_seen == yt[unseen]).mean())
        return best[0], best[1], acc

    ref_fit, ref_score, ref_acc = measure("eszsl")
    ref = ref_fit + ref_score
    print(f"| eszsl (reference) | {ref_fit:.1f} | {ref_score:.1f} | {ref:.1f} | 1.0 | "
          f"{ref_acc:.3f} | |")  # fmt: skip
    for name in args.methods:
        fit, score, acc = measure(name)
        total = fit + score
        ok = "ok" if total < 60 else "MISSED (60 s)"
        print(f"| {name} | {fit:.1f} | {score:.1f} | {total:.1f} | {total / ref:.1f} | "
              f"{acc:.3f} | {ok} |")  # fmt: skip


if __name__ == "__main__":
    main()
