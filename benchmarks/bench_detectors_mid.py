"""Micro benchmark of the middle tier of post-hoc detectors on bench_run-like data (issue 33).

Data as :mod:`bench_run`'s ``generate()``: class means ``relu(N(0.3, 1))`` (C x D), rows
``relu(mu_y + noise)``, float32 logits from the head W built from the centred class means;
``--train`` training rows (fit), ``--test`` test rows (score). Each detector is fitted once and
scored alone (no shared intermediates, the worst case) with one BLAS thread (threadpoolctl);
the reported figure is the best of ``--repeat`` scorings, CPU seconds (user + sys of the
process) and wall seconds; then all of them together through ``score_many`` (shared
intermediates, one worker thread). Beside them, the FLOP floor measured in the same process:
the bare products a detector must do (float32 ``(n x D) @ (D x C)`` per head product; klm's
float64 ``(n x C) @ (C x C)``).

Old and new code are compared interleaved: each round runs one worker per tree (a subprocess
with ``PYTHONPATH=<tree>/src``), alternating. ``--base`` is a checkout of the reference commit,
e.g. ``git -C . archive 5233a45 | tar -x -C /tmp/base``. Nothing is written to disk.

Usage::

    nice -n 5 .venv/bin/python benchmarks/bench_detectors_mid.py [--base /tmp/base]
        [--test 8192] [--train 10000] [--rounds 2] [--repeat 2] [--only temp_scaling,lts]
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

C, D = 1000, 2048
DETECTORS = [
    "cfood", "klm", "ash_b", "nnguide", "ash_p", "react", "vra", "dice", "lts", "scale",
    "nci", "temp_scaling", "neco", "fdbd", "max_cosine", "ash_s", "caref", "cadref",
]  # fmt: skip
#: float32 products (n x D @ D x C) each detector must do at score time (cfood's is with its
#: n_ref = train / 10 references: C of them at the default --train)
PRODUCTS = {"ash_b": 1, "ash_p": 1, "ash_s": 1, "react": 1, "vra": 1, "dice": 1, "scale": 1}
PRODUCTS |= {"max_cosine": 1, "cfood": 1}
#: float64 products (n x C @ C x C): klm's softmax times its log templates
PRODUCTS64 = {"klm": 1}


def make_data(n_train: int, n_test: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    mu = np.maximum(rng.normal(0.3, 1.0, (C, D)), 0).astype(np.float32)
    centred = mu - mu.mean(0)
    w = (centred / np.linalg.norm(centred, axis=1, keepdims=True)).astype(np.float32) * 2.0
    b = np.zeros(C, np.float32)

    def rows(seed: int, n: int, noise: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r = np.random.default_rng([seed, 0])
        y = (np.arange(n) % C).astype(np.int64)
        h = mu[y] + r.standard_normal((n, D), dtype=np.float32) * np.float32(noise)
        np.maximum(h, 0, out=h)
        return h, h @ w.T + b, y

    h_tr, z_tr, y_tr = rows(1, n_train, 1.0)
    h_te, z_te, _ = rows(2, n_test, 1.5)
    return {"w": w, "b": b, "h_tr": h_tr, "z_tr": z_tr, "y_tr": y_tr, "h_te": h_te, "z_te": z_te}


def cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def worker(names: list[str], n_train: int, n_test: int, repeat: int) -> dict[str, Any]:
    from threadpoolctl import threadpool_limits

    from semshift import detectors

    data = make_data(n_train, n_test)
    fit_inputs = {
        "features": data["h_tr"],
        "logits": data["z_tr"],
        "labels": data["y_tr"],
        "val_logits": data["z_tr"],
        "val_labels": data["y_tr"],
        "head": (data["w"], data["b"]),
    }
    out: dict[str, Any] = {}
    with threadpool_limits(1):
        best = (np.inf, np.inf)
        for _ in range(repeat):
            c0, t0 = cpu(), time.perf_counter()
            _ = data["h_te"] @ data["w"].T
            best = min(best, (cpu() - c0, time.perf_counter() - t0))
        out["_floor_product"] = {"cpu": best[0], "wall": best[1]}
        p64 = data["z_te"].astype(np.float64)
        t64 = np.full((C, C), 0.5)  # (C x K) log templates, K = C
        best = (np.inf, np.inf)
        for _ in range(repeat):
            c0, t0 = cpu(), time.perf_counter()
            _ = p64 @ t64
            best = min(best, (cpu() - c0, time.perf_counter() - t0))
        out["_floor_product64"] = {"cpu": best[0], "wall": best[1]}
        fitted = {}
        for name in names:
            det = detectors.get(name)
            needs = det.fit_requires
            det.fit(**{k: v for k, v in fit_inputs.items() if k in needs})
            score_in = {"features": data["h_te"], "logits": data["z_te"]}
            score_in = {k: v for k, v in score_in.items() if k in det.score_requires}
            best = (np.inf, np.inf)
            s = None
            for _ in range(repeat):
                c0, t0 = cpu(), time.perf_counter()
                s = det.score(**score_in)
                best = min(best, (cpu() - c0, time.perf_counter() - t0))
            assert s is not None
            out[name] = {"cpu": best[0], "wall": best[1], "digest": _digest(s)}
            fitted[name] = det
        # all of them together, sharing intermediates (score_many, one worker thread)
        best = (np.inf, np.inf)
        for _ in range(repeat):
            c0, t0 = cpu(), time.perf_counter()
            detectors.score_many(fitted, features=data["h_te"], logits=data["z_te"], threads=1)
            best = min(best, (cpu() - c0, time.perf_counter() - t0))
        out["_together"] = {"cpu": best[0], "wall": best[1]}
    return out


def _digest(s: np.ndarray) -> str:
    import hashlib

    return hashlib.sha1(np.ascontiguousarray(s, dtype=np.float64).tobytes()).hexdigest()[:12]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=Path, help="a checkout of the reference commit")
    ap.add_argument("--test", type=int, default=8192)
    ap.add_argument("--train", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--only", default="", help="comma-separated detector names")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    names = [n for n in args.only.split(",") if n] or DETECTORS
    if args.worker:
        print(json.dumps(worker(names, args.train, args.test, args.repeat)))
        return
    here = Path(__file__).resolve().parents[1]
    trees = {"new": here} | ({"old": args.base.resolve()} if args.base else {})
    results: dict[str, list[dict[str, Any]]] = {k: [] for k in trees}
    for _ in range(args.rounds):
        for label, tree in trees.items():
            env = dict(os.environ, PYTHONPATH=str(tree / "src"), OMP_NUM_THREADS="1")
            cmd = [sys.executable, __file__, "--worker", "--test", str(args.test)]
            cmd += ["--train", str(args.train), "--repeat", str(args.repeat), "--only"]
            cmd += [",".join(names)]
            res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            results[label].append(json.loads(res.stdout.strip().splitlines()[-1]))

    def best(label: str, name: str, key: str) -> float:
        return min(r[name][key] for r in results[label])

    print(f"{args.test} test rows, {args.train} training rows, D = {D}, C = {C}, 1 BLAS thread;")
    print(
        "best of rounds x repeats, CPU s (wall s); floor = the bare products the detector must"
        " do (float32 n x D @ D x C; klm: float64 n x C @ C x C)"
    )
    floor = best("new", "_floor_product", "cpu")
    floor64 = best("new", "_floor_product64", "cpu")
    head = f"{'detector':<14}{'floor':>8}{'new':>16}"
    if "old" in trees:
        head += f"{'old':>16}{'old/new':>9}  same scores"
    print(head)
    for name in names:
        fl = floor * PRODUCTS.get(name, 0) + floor64 * PRODUCTS64.get(name, 0)
        line = f"{name:<14}{fl:8.3f}"
        line += f"{best('new', name, 'cpu'):8.3f} ({best('new', name, 'wall'):5.3f})"
        if "old" in trees:
            o, n = best("old", name, "cpu"), best("new", name, "cpu")
            same = {r[name]["digest"] for r in results["old"] + results["new"]}
            line += f"{o:8.3f} ({best('old', name, 'wall'):5.3f}){o / n:8.2f}x  "
            line += "bitwise" if len(same) == 1 else "DIFFER"
        print(line)
    together = f"all {len(names)} together (score_many, shared intermediates, 1 thread): new "
    together += f"{best('new', '_together', 'cpu'):.3f} s CPU"
    if "old" in trees:
        together += f", old {best('old', '_together', 'cpu'):.3f} s"
    print(together)
    fl_old = f", old {best('old', '_floor_product', 'cpu'):.3f}" if "old" in trees else ""
    print(f"floor product: new-worker {floor:.3f} s CPU{fl_old}; float64: {floor64:.3f} s")


if __name__ == "__main__":
    main()
