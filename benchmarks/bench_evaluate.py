"""Benchmark of ``semshift run``'s evaluate stage alone, on the cached score stage of a run.

The run's earlier stages (split, extract, search, score) come from the cache of a finished
``benchmarks/bench_run.py`` output folder, so only the protocols are timed: every configured
protocol over the scored sets and the per-sample score tables, as ``semshift run`` does
(``run_evaluate``, its cache entry ignored; the output goes to a temporary folder). The tidy
table goes to ``--results`` (Parquet), the wall and CPU seconds (whole stage and per protocol)
to stdout as one JSON line.

Compare two trees on the same cache, interleaved, with their tables compared cell by cell::

    nice -n 5 .venv/bin/python benchmarks/bench_evaluate.py --config /tmp/x/config.json \\
        --compare /tmp/base/src [--new /tmp/mine/src] --repeat 2

(``--compare SRC``: each round runs the old tree (``PYTHONPATH=SRC``) then the new one (this
checkout, or ``--new SRC``), in fresh subprocesses; the tables must be equal: same rows, same
values bit for bit, NaN where NaN.)

The config is ``bench_run.py``'s ``config.json`` (its ``output`` folder holds the cache); a copy
of a full-scale folder is what the issue 33 figures use (the score stage is read from ``.npy``
files, which the timing leaves out).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd


def child(cfg_file: Path, results: Path) -> None:
    """Load the cached stages, time the protocols, write the table, print one JSON line."""
    from semshift.run import score as score_module
    from semshift.run.config import load_config
    from semshift.run.context import RunContext
    from semshift.run.evaluate import run_evaluate
    from semshift.run.extract import run_extract
    from semshift.run.score import run_score
    from semshift.run.search import run_search
    from semshift.run.split import run_split

    def not_cached(*args: Any, **kwargs: Any) -> Any:
        raise SystemExit("the score stage is not cached for this tree: nothing timed")

    for cls in vars(score_module).values():  # a cache miss must not start hours of scoring
        if isinstance(cls, type) and hasattr(cls, "fit_all"):
            cls.fit_all = not_cached  # type: ignore[attr-defined]
            cls.score_set = not_cached  # type: ignore[attr-defined]
    cfg = load_config(json.loads(cfg_file.read_text()))
    ctx = RunContext(cfg, progress=False, force=False)
    with tempfile.TemporaryDirectory() as tmp:
        ctx.out = Path(tmp)
        extracted = run_extract(ctx, run_split(ctx))
        scored = run_score(ctx, extracted, run_search(ctx, extracted).chosen)
        ctx.force = True  # the evaluate stage alone is recomputed (its cache is not read)
        t0, c0 = time.perf_counter(), time.process_time()
        frame = run_evaluate(ctx, scored).results
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    frame.to_parquet(results)
    print(
        json.dumps(
            {
                "wall": wall,
                "cpu": cpu,
                "rows": len(frame),
                "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                "protocols": ctx.notes.get("protocol_seconds", {}),
                "errors": len(ctx.errors),
            }
        )
    )


def _run(cfg: Path, results: Path, src: str | None) -> dict[str, Any]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src
    cmd = [sys.executable, __file__, "--child", str(cfg), "--results", str(results)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the evaluate run failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def same_tables(a: pd.DataFrame, b: pd.DataFrame) -> str | None:
    """None when equal cell for cell (floats bitwise, NaN = NaN), else what differs."""
    if list(a.columns) != list(b.columns) or len(a) != len(b):
        return f"shape/columns differ: {a.shape} {list(a.columns)} vs {b.shape} {list(b.columns)}"
    for col in a.columns:
        x, y = a[col].to_numpy(), b[col].to_numpy()
        if x.dtype.kind == "f" and y.dtype.kind == "f":
            xb, yb = x.astype(np.float64).view(np.int64), y.astype(np.float64).view(np.int64)
            both_nan = np.isnan(x) & np.isnan(y)
            bad = np.flatnonzero((xb != yb) & ~both_nan)
        else:
            bad = np.flatnonzero(~pd.Series(x).eq(pd.Series(y)).to_numpy() & ~(
                pd.isna(pd.Series(x)).to_numpy() & pd.isna(pd.Series(y)).to_numpy()))  # fmt: skip
        if bad.size:
            i = int(bad[0])
            return f"column {col}: {bad.size} cells differ, first row {i}: {x[i]!r} vs {y[i]!r}"
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", type=Path, help="bench_run.py's config.json (a copy)")
    ap.add_argument("--compare", help="src folder of the old tree, run as the reference")
    ap.add_argument("--new", help="src folder of the new tree (default: this checkout's src)")
    ap.add_argument("--repeat", type=int, default=1, help="rounds (old, new) to run")
    ap.add_argument("--out", type=Path, default=None, help="folder for the result tables")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--results", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.child, args.results)
        return
    out = args.out or Path(tempfile.mkdtemp(prefix="bench_evaluate_"))
    out.mkdir(parents=True, exist_ok=True)
    here = args.new or str(Path(__file__).resolve().parents[1] / "src")
    print(f"load average (1 min) before: {os.getloadavg()[0]:.2f}")
    tables: dict[str, pd.DataFrame] = {}
    for k in range(args.repeat):
        trees = ([("old", args.compare)] if args.compare else []) + [("new", here)]
        for label, src in trees:
            path = out / f"{label}.parquet"
            r = _run(args.config, path, src)
            tables[label] = pd.read_parquet(path)
            per = ", ".join(f"{p} {s:.1f}" for p, s in r["protocols"].items())
            print(
                f"round {k + 1} {label}: {r['wall']:.1f} s wall, {r['cpu']:.1f} s CPU, "
                f"{r['rows']:,} rows, peak {r['peak_gb']:.2f} GB; protocols (s): {per}"
                + f"; {r['errors']} error line(s)"
            )
    if "old" in tables:
        diff = same_tables(tables["old"], tables["new"])
        print("tables identical (bitwise)" if diff is None else f"TABLES DIFFER: {diff}")
    print(f"load average (1 min) after: {os.getloadavg()[0]:.2f}; tables in {out}")


if __name__ == "__main__":
    main()
