"""Benchmark SOOD scores from a feature store (``score_store``) against the same cosines on
arrays already in memory.

A synthetic stage 1 (S super-classes of K sub-classes each, a custom taxonomy) and a store of
N rows x D image embeddings (default 100,000 x 512 float32, 205 MB, rows spread over the
sub-classes by folder name) are written to a temporary folder. Timed, alternating, three rounds
each (files in the page cache): :func:`semshift.splits.superclass.score_store` (class ids from
the index, the rows read in blocks, normalised and scored) against the reference: the whole
``features`` array gathered into memory, normalised and multiplied with the text rows (one
``einsum``), the class ids given. The two must agree to float32 rounding. The folder is deleted
at the end.

Usage::

    python benchmarks/bench_superclass_store.py
    python benchmarks/bench_superclass_store.py --rows 400000 --dim 768
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from semshift.features.store import open_store, write_store
from semshift.splits.superclass import build_superclasses, score_store


def _stage1(tmp: Path, n_super: int, n_sub: int):
    rows = ["id,parent,name", "entity,,entity"]
    names, pool = [], []
    for s in range(n_super):
        names.append(f"sc{s}")
        rows.append(f"sc{s},entity,sc{s}")
        for k in range(n_sub):
            pool.append(f"sc{s}_{k}")
            rows.append(f"sc{s}_{k},sc{s},sub {s} {k}")
    (tmp / "tax.csv").write_text("\n".join(rows) + "\n")
    return build_superclasses(names, pool, taxonomy=str(tmp / "tax.csv"), min_subclasses=2), pool


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--superclasses", type=int, default=50)
    ap.add_argument("--subclasses", type=int, default=20)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-sood-store-", dir=args.dir))
    try:
        stage1, pool = _stage1(tmp, args.superclasses, args.subclasses)
        rng = np.random.default_rng(0)
        cls = np.asarray(pool, dtype=object)[rng.integers(0, len(pool), args.rows)]
        emb = rng.normal(size=(args.rows, args.dim)).astype(np.float32)
        text = rng.normal(size=(args.superclasses, args.dim))
        index = pd.DataFrame({"path": [f"/d/{c}/{i}.JPEG" for i, c in enumerate(cls)]})
        write_store(tmp / "store", index=index, arrays={"features": emb}, fsync=False)
        del emb
        sc_of = {f"sc{s}_{k}": s for s in range(args.superclasses) for k in range(args.subclasses)}

        def reference() -> np.ndarray:
            store = open_store(tmp / "store")
            (f,) = store.arrays("features")
            f = f.astype(np.float64)
            f /= np.linalg.norm(f, axis=1, keepdims=True)
            t = text / np.linalg.norm(text, axis=1, keepdims=True)
            rows = pd.Series(cls).map(sc_of).to_numpy()
            return np.einsum("nd,nd->n", f, t[rows])

        def ours() -> pd.DataFrame:
            return score_store(stage1, open_store(tmp / "store"), text)

        times: dict[str, list[float]] = {"score_store": [], "reference": []}
        for _ in range(3):
            for name, fn in (("score_store", ours), ("reference", reference)):
                t0 = time.perf_counter()
                out = fn()
                times[name].append(time.perf_counter() - t0)
                if name == "score_store":
                    got = out
                else:
                    want = out
        by_path = pd.Series(want, index=index["path"])
        err = float(np.max(np.abs(got["score"].to_numpy() - by_path[got["path"]].to_numpy())))
        best = {k: min(v) for k, v in times.items()}
        print(f"{args.rows:,} rows x {args.dim}, {args.superclasses} super-classes x "
              f"{args.subclasses} sub-classes; max |difference| {err:.2e}")  # fmt: skip
        for k, v in times.items():
            print(f"{k:12s} best {best[k]:.3f} s  (rounds: {', '.join(f'{x:.3f}' for x in v)})")
        print(f"ratio score_store / reference: {best['score_store'] / best['reference']:.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
