"""Zero-shot methods: closed-form fit time at CUB scale and vectorised vs per-sample SGD epochs.

1. ESZSL and SAE fit on 20,000 x 2,048 features of 200 classes with 312-dimensional class
   embeddings (CUB's attribute count), each beside a textbook reference in the same run:
   ESZSL against the explicit-inverse formula with a dense (n, C) target matrix, SAE against
   ``scipy.linalg.solve_sylvester`` (Bartels-Stewart) on the same equation. The largest
   relative difference of the learned maps is printed next to the times.
2. One SGD epoch of ALE, DEVISE, SJE and LATEM (batch 64, vectorised over samples and classes)
   against the papers' per-sample SGD (:meth:`BilinearRanking.per_sample_epoch`, a Python loop
   over samples) on the same 4,000 images, in the same run, each at 1 and at every BLAS
   thread, ratios of each side at its faster thread count. Two per-sample loops: the plain
   NumPy update ``W -= lr x^T (g S)`` (a C-ordered W), and the same loop with semshift's
   in-place BLAS step (a Fortran-ordered W: one rank-1 ``dgemm`` into W, no temporary).

Run: ``.venv/bin/python benchmarks/bench_zsl.py`` (3-6 minutes on 2 cores: the references are
slow); ``--only closed`` / ``--only sgd`` runs one part, ``--quick`` shrinks everything for a
smoke test.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np
import scipy.linalg as sla
from threadpoolctl import threadpool_limits

from semshift.training.zsl import ALE, DEVISE, ESZSL, LATEM, SAE, SJE


def _data(n: int, d: int, n_cls: int, a: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    S = rng.standard_normal((n_cls, a))
    S /= np.linalg.norm(S, axis=1, keepdims=True)
    y = rng.integers(n_cls, size=n)
    y[:n_cls] = np.arange(n_cls)  # every class present
    X = np.maximum(S[y] @ rng.standard_normal((a, d)) + rng.standard_normal((n, d)), 0.0)
    return X, y, S


def _best(fn, repeats: int):
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def closed_form(n: int, d: int, n_cls: int, a: int, repeats: int) -> None:
    X, y, S = _data(n, d, n_cls, a)
    print(f"\nclosed form: {n:,} x {d:,} features, {n_cls} classes, {a}-d embeddings "
          f"(best of {repeats}; BLAS threads {os.cpu_count()})")  # fmt: skip
    print("| method | semshift fit s | reference s | ratio | max rel. diff |")
    print("|---|---|---|---|---|")

    def eszsl_ref():
        Y = np.zeros((n, n_cls))
        Y[np.arange(n), y] = 1.0
        return np.linalg.inv(X.T @ X + np.eye(d)) @ X.T @ Y @ S @ np.linalg.inv(S.T @ S + np.eye(a))

    t_ours, model = _best(lambda: ESZSL(gamma=1.0, lam=1.0).fit(X, y, S), repeats)
    t_ref, V = _best(eszsl_ref, 1)
    diff = np.abs(model.V_ - V).max() / np.abs(V).max()
    print(f"| ESZSL | {t_ours:.2f} | {t_ref:.2f} (explicit inverses) | {t_ref / t_ours:.1f}x "
          f"| {diff:.1e} |")  # fmt: skip

    def sae_ref():
        Sy = S[y]
        return sla.solve_sylvester(Sy.T @ Sy, 0.2 * X.T @ X, 1.2 * Sy.T @ X)

    t_ours, model = _best(lambda: SAE(lam=0.2).fit(X, y, S), repeats)
    t_ref, W = _best(sae_ref, 1)
    diff = np.abs(model.W_ - W).max() / np.abs(W).max()
    print(f"| SAE | {t_ours:.2f} | {t_ref:.2f} (solve_sylvester) | {t_ref / t_ours:.1f}x "
          f"| {diff:.1e} |")  # fmt: skip


def sgd_epochs(n: int, d: int, n_cls: int, a: int, batch: int, threads: tuple[int, ...]) -> None:
    X, y, S = _data(n, d, n_cls, a, seed=1)
    X /= np.linalg.norm(X, axis=1).mean()
    print(f"\nSGD epoch: {n:,} x {d:,} features, {n_cls} classes, {a}-d embeddings, batch "
          f"{batch}; seconds at {' / '.join(map(str, threads))} BLAS threads")  # fmt: skip
    print("| method | vectorised | per sample, plain NumPy | per sample, in-place BLAS "
          "| ratio to plain | ratio to in-place |")  # fmt: skip
    print("|---|---|---|---|---|---|")

    def cell(times: dict[int, float]) -> str:
        return " / ".join(f"{v:.2f}" for v in times.values()) if times else "-"

    def timed(fn: Any, W: np.ndarray, t: int) -> float:
        with threadpool_limits(limits=t, user_api="blas"):
            t0 = time.perf_counter()
            fn(W, X, y, S, order, draws)
            return time.perf_counter() - t0

    for cls in (ALE, DEVISE, SJE, LATEM):
        model = cls(batch_size=batch, lr=0.1)
        rng = np.random.default_rng(0)
        W0 = model.init_weights(rng, d, a)
        order = rng.permutation(n)
        draws = model.draws(rng, y[order], n_cls)
        # LATEM's per-sample loop takes minutes: one thread count, plain only
        ts = threads if cls is not LATEM else threads[:1]
        vec = {t: timed(model.sgd_epoch, np.asfortranarray(W0), t) for t in ts}
        # a C-ordered W takes the plain update W -= lr x^T (g S); a Fortran one the dgemm
        plain = {t: timed(model.per_sample_epoch, np.ascontiguousarray(W0), t) for t in ts}
        inplace = (
            {t: timed(model.per_sample_epoch, np.asfortranarray(W0), t) for t in ts}
            if cls is not LATEM
            else {}
        )

        best = min(vec.values())
        to_inplace = f"{min(inplace.values()) / best:.0f}x" if inplace else "-"
        print(f"| {cls.title} | {cell(vec)} | {cell(plain)} | {cell(inplace)} "
              f"| {min(plain.values()) / best:.0f}x | {to_inplace} |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    ap.add_argument("--only", choices=("closed", "sgd"), help="run one of the two parts")
    args = ap.parse_args()
    try:
        print(f"load average at start: {os.getloadavg()[0]:.2f}")
    except OSError:  # pragma: no cover
        pass
    if args.quick:
        closed_form(2_000, 256, 40, 32, repeats=1)
        sgd_epochs(400, 256, 40, 32, batch=64, threads=(1, 2))
    else:
        if args.only != "sgd":
            closed_form(20_000, 2_048, 200, 312, repeats=3)
        if args.only != "closed":
            sgd_epochs(4_000, 2_048, 150, 312, batch=64, threads=(1, os.cpu_count() or 1))


if __name__ == "__main__":
    main()
