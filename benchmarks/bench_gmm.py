"""Micro benchmark of gmm's own work on the blocks of the shared scan (issue 33 item 1).

bench_run.py's data at a smaller scale: class means relu(N(0.3, 1)), training rows relu(mu_y +
noise), ``--per-class`` rows per class (10: every class has fewer rows than dimensions, so gmm
reads the shared scan); test rows half ID (relu(mu_y + noise)), half from the grid's mixtures
((1 - s/8) mu_y + s/8 mu_new + noise growing with the covariate level, over every cell).

Each tree (the old one, ``--old``, and this one) runs in its own subprocess, alternately, one
BLAS thread, and reports CPU seconds (user + sys of the process, ``time.process_time``) of:
fit; the scan's float32 product (shared with knn and grood, the same code in both trees);
gmm's own reduction of the product (``GMM._reduce``), and of that the float64 recomputation of
the classes near each row's best; the (row, class) pairs recomputed per row. Then the largest
score difference old vs new and each against a plain float64 evaluation of the mixture
(the eigenpairs of each class's Gram matrix: no SVD, no float32).

Usage::

    nice -n 5 .venv/bin/python benchmarks/bench_gmm.py             # small: 200 classes, D = 512
    nice -n 5 .venv/bin/python benchmarks/bench_gmm.py --classes 1000 --dim 2048 --test 4096
        # bench_run.py's shapes (10,000 training rows), about 2 minutes
    ... --old 5233a45   # the reference: a git revision (its src/ extracted to a temporary
                        # directory, deleted at the end) or a path to a src/ directory

Writes nothing outside a temporary directory, which it deletes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LEVELS = 8


def generate(classes: int, dim: int, per_class: int, n_test: int) -> tuple[Any, Any, Any]:
    rng = np.random.default_rng(0)
    mu = np.maximum(rng.normal(0.3, 1.0, (classes, dim)), 0).astype(np.float32)
    new_mu = np.maximum(rng.normal(0.3, 1.0, (200, dim)), 0).astype(np.float32)
    r = np.random.default_rng([1, 0])
    y = (np.arange(classes * per_class) % classes).astype(np.int64)
    x = np.maximum(mu[y] + r.standard_normal((y.size, dim), dtype=np.float32), 0)
    r = np.random.default_rng([2, 0])
    n_id = n_test // 2
    h_id = mu[r.integers(0, classes, n_id)] + r.standard_normal((n_id, dim), dtype=np.float32)
    np.maximum(h_id, 0, out=h_id)
    r = np.random.default_rng([7, 0])
    n_grid = n_test - n_id
    cell = np.arange(n_grid) % (LEVELS * LEVELS)
    sem, cov = cell // LEVELS + 1, cell % LEVELS + 1
    a = (sem / LEVELS).astype(np.float32)[:, None]
    h = (1 - a) * mu[r.integers(0, classes, n_grid)] + a * new_mu[r.integers(0, 200, n_grid)]
    noise = (1.0 + 0.25 * (cov - 1)).astype(np.float32)[:, None]
    h += r.standard_normal((n_grid, dim), dtype=np.float32) * noise
    np.maximum(h, 0, out=h)
    return x, y, np.concatenate([h_id, h])


def child(args: argparse.Namespace) -> None:
    """In a subprocess with PYTHONPATH at one tree: fit, score, print the CPU seconds."""
    from threadpoolctl import threadpool_limits

    from semshift import detectors
    from semshift.detectors import gmm

    x, y, h = generate(args.classes, args.dim, args.per_class, args.test)
    cpu = {"reduce": 0.0, "recompute": 0.0, "wall": 0.0}
    pairs, depth = [0], {"reduce": 0, "recompute": 0}

    def timed(name: str, fn: Any, count: Any = None) -> Any:
        def wrapper(*a: Any) -> Any:  # the outermost call of each name counts
            depth[name] += 1
            t, w = time.process_time(), time.perf_counter()
            try:
                return fn(*a)
            finally:
                depth[name] -= 1
                if depth[name] == 0:
                    cpu[name] += time.process_time() - t
                    if name == "reduce":
                        cpu["wall"] += time.perf_counter() - w
                    if count is not None:
                        pairs[0] += count(*a)

        return wrapper

    cls = gmm.GMM
    cls._recompute = timed(  # type: ignore[method-assign]
        "recompute", cls._recompute, lambda s, hb, sq, ld, mask, a, b: int(mask[:, a:b].sum())
    )
    if hasattr(cls, "_recompute_pairs"):  # this tree: pairs straight from the first pass
        cls._recompute_pairs = timed(  # type: ignore[attr-defined]
            "recompute", cls._recompute_pairs, lambda s, hb, sq, c, m: int(c.size)
        )
    with threadpool_limits(limits=1):
        t = time.process_time()
        det = detectors.get("gmm").fit(features=x, labels=y)
        fit = time.process_time() - t
        det._reduce = timed("reduce", det._reduce)  # type: ignore[method-assign]
        t = time.process_time()
        scores = det.score(features=h)
        total = time.process_time() - t
    np.save(args.out, scores)
    print(json.dumps({"fit": fit, "scan": total - cpu["reduce"], "reduce": cpu["reduce"],
                      "wall": cpu["wall"], "recompute": cpu["recompute"],
                      "pairs": pairs[0] / h.shape[0]}))  # fmt: skip


def plain_float64(x: Any, y: Any, h: Any, reg: float) -> Any:
    """log sum_c pi_c N(h | mu_c, Sigma_c + reg I) in float64 from the eigenpairs of each
    class's Gram matrix A A^T (A the centred rows): Sigma_c's eigenvectors A^T w / sqrt(l),
    eigenvalues l / n_c, so MD = ||d||^2 / reg - sum_k (A d . w_k)^2 / l_k (1 / reg - 1 /
    (l_k / n_c + reg)), d = h - mu_c."""
    import scipy.special
    from threadpoolctl import threadpool_limits

    n, d = x.shape
    classes = int(y.max()) + 1
    h = h.astype(np.float64)
    out = np.empty((h.shape[0], classes))
    with threadpool_limits(limits=1):
        means = np.stack([x[y == c].astype(np.float64).mean(axis=0) for c in range(classes)])
        h_sq = np.einsum("ij,ij->i", h, h)
        h_mu = h @ means.T
        for c in range(classes):
            xc = x[y == c].astype(np.float64)
            mu, n_c = means[c], xc.shape[0]
            a = xc - mu
            lam, w = np.linalg.eigh(a @ a.T)
            keep = lam > lam.max() * max(n_c, d) * np.finfo(np.float64).eps
            lam, w = lam[keep], w[:, keep]
            proj = ((h @ a.T) - (a @ mu)) @ (w / np.sqrt(lam))  # (h - mu) . eigenvectors
            d_sq = h_sq - 2.0 * h_mu[:, c] + mu @ mu
            coef = 1.0 / reg - 1.0 / (lam / n_c + reg)
            md = d_sq / reg - (proj**2) @ coef
            log_det = np.log(lam / n_c + reg).sum() + (d - lam.size) * math.log(reg)
            out[:, c] = math.log(n_c / n) - 0.5 * (md + log_det + d * math.log(2 * math.pi))
    return scipy.special.logsumexp(out, axis=1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--classes", type=int, default=200)
    p.add_argument("--dim", type=int, default=512)
    p.add_argument("--per-class", type=int, default=10)
    p.add_argument("--test", type=int, default=2048)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--old", default="5233a45", help="git revision or path to a src/ directory")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
        return
    with tempfile.TemporaryDirectory(prefix="bench_gmm_") as tmp:
        old_src = Path(args.old)
        if not old_src.is_dir():
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.old, "src"],
                                     check=True, capture_output=True).stdout  # fmt: skip
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
            old_src = Path(tmp) / "src"
        trees = {"old": old_src, "new": ROOT / "src"}
        shape = ["--classes", str(args.classes), "--dim", str(args.dim),
                 "--per-class", str(args.per_class), "--test", str(args.test)]  # fmt: skip
        rows: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
        for _ in range(args.reps):
            for name, src in trees.items():
                env = {**os.environ, "PYTHONPATH": str(src)}
                out = Path(tmp) / f"{name}.npy"
                cmd = [sys.executable, __file__, "--child", "--out", str(out), *shape]
                res = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if res.returncode:
                    sys.exit(f"{name} tree failed:\n{res.stderr}")
                rows[name].append(json.loads(res.stdout.strip().splitlines()[-1]))
        old, new = np.load(Path(tmp) / "old.npy"), np.load(Path(tmp) / "new.npy")
        x, y, h = generate(args.classes, args.dim, args.per_class, args.test)
        t = time.process_time()
        ref = plain_float64(x, y, h, 1e-6)
        t_ref = time.process_time() - t
    print(f"gmm (reg 1e-6): {args.classes} classes x {args.per_class} rows, D = {args.dim}, "
          f"{args.test} test rows; CPU seconds (wall: gmm own's), one BLAS thread")  # fmt: skip
    print(f"{'tree':5} {'fit':>7} {'scan':>7} {'gmm own':>8} {'(wall)':>8} {'recompute':>10} "
          f"{'pairs/row':>10}")  # fmt: skip
    for name in ("old", "new"):
        for r in rows[name]:
            print(f"{name:5} {r['fit']:7.2f} {r['scan']:7.2f} {r['reduce']:8.3f} {r['wall']:8.3f} "
                  f"{r['recompute']:10.3f} {r['pairs']:10.3f}")  # fmt: skip
    med = {k: float(np.median([r["reduce"] for r in v])) for k, v in rows.items()}
    wall = {k: float(np.median([r["wall"] for r in v])) for k, v in rows.items()}
    scan = float(np.median([r["scan"] for v in rows.values() for r in v]))
    print(f"gmm own, median CPU: old {med['old']:.3f} s, new {med['new']:.3f} s "
          f"(x{med['new'] / med['old']:.3f}); wall old {wall['old']:.3f} s, new "
          f"{wall['new']:.3f} s (x{wall['new'] / wall['old']:.3f}); the scan's product "
          f"{scan:.3f} s CPU")  # fmt: skip
    scale = np.abs(ref).max()
    print(f"max |score difference| (scores up to {scale:.3g}): old vs new "
          f"{np.abs(old - new).max():.3g} (relative {np.max(np.abs(old - new) / np.abs(old)):.2g}, "
          f"{int((old != new).sum())} rows differ), "
          f"new vs plain float64 {np.abs(new - ref).max():.3g} "
          f"(relative {np.max(np.abs(new - ref) / np.abs(ref)):.2g}), old vs plain float64 "
          f"{np.abs(old - ref).max():.3g}; plain float64 took {t_ref:.1f} s")  # fmt: skip


if __name__ == "__main__":
    main()
