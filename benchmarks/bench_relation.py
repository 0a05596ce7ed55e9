"""Micro benchmark of the relation detector on ``bench_run``-like data: this tree, an old tree,
and the bare dense computation, interleaved, one BLAS thread.

Data as ``benchmarks/bench_run.py``'s ``generate()`` (same recipe and seeds): class means
``relu(N(0.3, 1))`` (1,000 classes, D = 2,048), training rows ``relu(mu_y + noise)`` (10 per
class), logits from its head; the test rows are the bench's, in its proportions: ID test rows
(50/375), covariate rows with doubled noise (5/375) and grid rows (the rest) spread evenly over
the 64 cells. ``--random-model``: the random-model rows of ``bench_run``'s sanity check
(``relu(N(0, 1))`` features through a random head) instead. The arrays are written once to a
temporary folder (deleted at the end); every measurement runs in a fresh subprocess with one
BLAS thread (threadpoolctl) and reports CPU seconds (``time.process_time``) of ``fit`` and
``score``, the part of them spent in the softmax and the normalisation of the rows, and wall
seconds of ``score``. The rounds interleave the implementations, so machine load falls on all
alike; the minimum over rounds is reported. Scores are compared with this tree's: max absolute
difference and whether they are bitwise equal.

Implementations:

- ``new``: this tree (``src``);
- ``old``: another tree's ``src`` (``--old``, e.g. an unpacked ``git archive`` of a commit);
- ``dense``: the bare computation of every edge (the two float32 products of each block of
  512 test rows with every training row, the threshold, float64 sums), NumPy only: what
  relation costs without skipping.

Usage::

    git -C . archive 5233a45 | tar -x -C /tmp/base   # an old tree
    nice -n 5 .venv/bin/python benchmarks/bench_relation.py --old /tmp/base/src
    .venv/bin/python benchmarks/bench_relation.py --test 1024 --train 2000 --rounds 1  # quick
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

C, D = 1000, 2048
CELL, LEVELS = 5000, 8
N_TEST_ALL, N_ID, N_COV = 375_000, 50_000, 5_000
SRC = Path(__file__).resolve().parents[1] / "src"


def generate(n_train: int, n_test: int, random_model: bool) -> dict[str, np.ndarray]:
    """Training and test features and logits, float32, as ``bench_run.generate`` makes them."""
    rng = np.random.default_rng(0)
    mu = np.maximum(rng.normal(0.3, 1.0, (C, D)), 0).astype(np.float32)
    new_mu = np.maximum(rng.normal(0.3, 1.0, (200, D)), 0).astype(np.float32)
    centred = mu - mu.mean(0)
    w = (centred / np.linalg.norm(centred, axis=1, keepdims=True)).astype(np.float32) * 2.0
    if random_model:  # the sanity check's stores: no class structure, a random head
        rw = (rng.standard_normal((C, D)) / np.sqrt(D)).astype(np.float32)
        h_train, h = (
            np.maximum(np.random.default_rng([seed, 99, 0]).standard_normal((n, D), np.float32), 0)
            for seed, n in ((1, n_train), (2, n_test))
        )
        return {"h_train": h_train, "z_train": h_train @ rw.T, "h": h, "z": h @ rw.T}

    def id_rows(seed: int, noise: float, n: int) -> np.ndarray:
        r = np.random.default_rng([seed, 0])
        y = (np.arange(n) % C).astype(np.int64)
        h = mu[y] + r.standard_normal((n, D), dtype=np.float32) * noise
        return np.maximum(h, 0)

    def grid_rows(i: np.ndarray) -> np.ndarray:
        r = np.random.default_rng([7, int(i[0])])
        cell = i // CELL
        sem, cov = cell // LEVELS + 1, cell % LEVELS + 1
        y = r.integers(0, C, i.size)
        new = r.integers(0, len(new_mu), i.size)
        a = (sem / LEVELS).astype(np.float32)[:, None]
        h = (1 - a) * mu[y] + a * new_mu[new]
        noise = (1.0 + 0.25 * (cov - 1)).astype(np.float32)[:, None]
        h += r.standard_normal((i.size, D), dtype=np.float32) * noise
        return np.maximum(h, 0)

    n_id = round(n_test * N_ID / N_TEST_ALL)
    n_cov = round(n_test * N_COV / N_TEST_ALL)
    n_grid = n_test - n_id - n_cov
    cells = LEVELS * LEVELS * CELL
    h_train = id_rows(1, 1.0, n_train)
    h = np.concatenate(
        [
            id_rows(2, 1.0, n_id),
            id_rows(3, 2.0, n_cov),
            grid_rows(np.arange(n_grid, dtype=np.int64) * cells // n_grid),
        ]
    ).astype(np.float32)
    return {"h_train": h_train, "z_train": h_train @ w.T, "h": h, "z": h @ w.T}


def dense(data: dict[str, np.ndarray], power: float, threshold: float) -> np.ndarray:
    """Every edge: float32 products of blocks of 512 test rows with all training rows."""

    def unit(x: np.ndarray) -> np.ndarray:
        x64 = x.astype(np.float64)
        return (x64 / np.sqrt(np.einsum("ij,ij->i", x64, x64) + 1e-10)[:, None]).astype(np.float32)

    def prob(z: np.ndarray) -> np.ndarray:
        e = np.exp(z.astype(np.float64) - z.max(axis=1, keepdims=True))
        e /= e.sum(axis=1, keepdims=True)
        e[e < 2.0**-63] = 0.0  # subnormal float32 products run far slower
        return e.astype(np.float32)

    f_train, p_train = unit(data["h_train"]), prob(data["z_train"])
    f, p = unit(data["h"]), prob(data["z"])
    out = np.zeros(f.shape[0])
    for r0 in range(0, f.shape[0], 512):
        rel = f[r0 : r0 + 512] @ f_train.T
        rel *= p[r0 : r0 + 512] @ p_train.T
        kept = rel > np.float32(threshold)
        if power != 1:
            rel **= np.float32(power)
        out[r0 : r0 + 512] = np.add.reduce(rel, axis=1, where=kept, dtype=np.float64)
    return out


def child(folder: Path, impl: str, src: str, power: float) -> None:
    """Subprocess: one measurement; prints a JSON line, writes the scores to ``folder``."""
    from threadpoolctl import threadpool_limits

    data = dict(np.load(folder / "data.npz"))
    info: dict[str, Any] = {"impl": impl}
    with threadpool_limits(limits=1, user_api="blas"):
        if impl == "dense":
            t0, w0 = time.process_time(), time.perf_counter()
            scores = dense(data, power, 0.03)
            info |= {"score_cpu": time.process_time() - t0, "score_wall": time.perf_counter() - w0}
        else:
            sys.path.insert(0, src)
            import semshift.detectors.relation as rel
            from semshift import detectors

            assert Path(rel.__file__).resolve().is_relative_to(Path(src).resolve()), rel.__file__
            spent = {"prepare": 0.0}
            for name in ("probabilities", "unit_rows"):
                fn = getattr(rel, name)

                def timed(x: np.ndarray, _fn: Any = fn) -> np.ndarray:
                    t = time.process_time()
                    try:
                        return np.asarray(_fn(x))
                    finally:
                        spent["prepare"] += time.process_time() - t

                setattr(rel, name, timed)
            det = detectors.get("relation", power=power)
            t0 = time.process_time()
            det.fit(features=data["h_train"], logits=data["z_train"])
            info |= {"fit_cpu": time.process_time() - t0, "fit_prepare": spent["prepare"]}
            spent["prepare"] = 0.0
            t0, w0 = time.process_time(), time.perf_counter()
            scores = det.score(features=data["h"], logits=data["z"])
            info |= {"score_cpu": time.process_time() - t0, "score_wall": time.perf_counter() - w0}
            info["score_prepare"] = spent["prepare"]
    np.save(folder / f"scores_{impl}.npy", scores)
    print(json.dumps(info))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", help="the src folder of an old tree (left out: new and dense only)")
    ap.add_argument("--train", type=int, default=10_000, help="training rows (10 per class)")
    ap.add_argument("--test", type=int, default=4096, help="test rows")
    ap.add_argument("--power", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument(
        "--random-model", action="store_true", help="the sanity check's random-model data instead"
    )
    ap.add_argument("--no-dense", action="store_true", help="leave the dense computation out")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        folder, impl, src = args.child
        child(Path(folder), impl, src, args.power)
        return
    impls = {"new": str(SRC)}
    if args.old:
        impls["old"] = str(Path(args.old).resolve())
    if not args.no_dense:
        impls["dense"] = ""
    folder = Path(tempfile.mkdtemp(prefix="bench_relation_"))
    try:
        t0 = time.perf_counter()
        np.savez(folder / "data.npz", **generate(args.train, args.test, args.random_model))
        kind = (
            "the random model of the sanity check (relu(N(0, 1)) features, random head)"
            if args.random_model
            else "ID, covariate, 64 grid cells in bench_run's proportions"
        )
        print(
            f"data: {args.train:,} training rows x {D:,} ({C:,} classes), {args.test:,} test rows "
            f"({kind}); power {args.power:g}, threshold 0.03; one BLAS thread; "
            f"{time.perf_counter() - t0:.1f} s to generate"
        )
        runs: dict[str, list[dict[str, Any]]] = {k: [] for k in impls}
        for _ in range(args.rounds):
            for impl, src in impls.items():
                cmd = [sys.executable, __file__, "--power", str(args.power)]
                cmd += ["--child", str(folder), impl, src]
                done = subprocess.run(cmd, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    raise SystemExit(f"{impl} failed:\n{done.stderr[-3000:]}")
                runs[impl].append(json.loads(done.stdout.strip().splitlines()[-1]))
        ref = np.load(folder / "scores_new.npy")
        print(
            "impl   | fit CPU s (softmax+normalise) | score CPU s (softmax+normalise) | "
            "score wall s | max |score - new| | bitwise equal to new"
        )
        for impl, rs in runs.items():
            best = min(rs, key=lambda r: r["score_cpu"])
            scores = np.load(folder / f"scores_{impl}.npy")
            diff = float(np.abs(scores - ref).max())
            if "fit_cpu" in best:
                best_fit = min(rs, key=lambda r: r["fit_cpu"])
                fit = f"{best_fit['fit_cpu']:8.2f} ({best_fit['fit_prepare']:.2f})"
            else:
                fit = "       -"
            prep = f" ({best['score_prepare']:.2f})" if "score_prepare" in best else ""
            print(
                f"{impl:6s} | {fit} | {best['score_cpu']:8.2f}{prep} | {best['score_wall']:8.2f} "
                f"| {diff:.3g} | {np.array_equal(scores, ref)}"
            )
        every = {k: [round(r["score_cpu"], 2) for r in v] for k, v in runs.items()}
        print(f"score CPU s of every round: {every}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
