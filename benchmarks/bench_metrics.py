"""Benchmark the metrics package against references measured in the same run.

1. AUROC + FPR@95 + AUPR-In + AUPR-Out (plus detection error) on 10,000,000 scores through
   ``ranking_metrics`` (one shared sort), against one ``np.sort`` of the same array.
   Target: at most 3x. Also the per-function times and two tie-heavy variants.
2. ``evaluate_many`` with 50,000 ID scores against 64 subsets of 20,000 OOD scores, against a
   loop calling sklearn's ``roc_auc_score`` and ``average_precision_score`` per subset, with the
   largest difference of the numbers. Target: at least 10x.

Timing: one warm-up call, then the best (and median) of ``--repeat`` calls, interleaving the
candidate and its reference so that both see the same machine load. Both wall-clock time and
process CPU time are recorded (everything here is single-threaded); on a shared machine the CPU
time is the steadier figure, since a longer call is preempted more often by other processes.

Usage::

    python benchmarks/bench_metrics.py [--n 10000000] [--repeat 5] [--skip-sklearn-10m]
                                       [--ranking-only] [--baseline-rankcore FILE]

``--ranking-only`` runs only the three ``ranking_metrics`` cases of part 1 (continuous,
rounded, float32 precision) and the sklearn check, without the per-function times and part 2.

``--baseline-rankcore FILE`` also times, in the same interleaved rounds, what
``ranking_metrics`` computes (``RankCore.from_scores`` and AUROC, FPR@95, AUPR-In, AUPR-Out,
detection error) with an older ``rankcore.py`` saved to FILE (e.g. ``git show
5233a45:src/semshift/metrics/rankcore.py > /tmp/rankcore_old.py``), and checks that the five
values are bitwise those of the current code.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.metrics import average_precision_score, roc_auc_score

from semshift.metrics import (
    aupr_in,
    aupr_out,
    auroc,
    evaluate_many,
    fpr_at_tpr,
    rankcore,
    ranking_metrics,
)

Times = dict[str, list[float]]


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - w0, time.process_time() - c0, out


def compare(
    candidate: Callable[[], Any], reference: Callable[[], Any], repeat: int
) -> tuple[Times, Times, Any, Any]:
    """Warm up both, then alternate them ``repeat`` times; return both timings and results."""
    *_, cand_out = timed(candidate)
    *_, ref_out = timed(reference)
    cand_t: Times = {"wall": [], "cpu": []}
    ref_t: Times = {"wall": [], "cpu": []}
    for _ in range(repeat):
        w, c, cand_out = timed(candidate)
        cand_t["wall"].append(w)
        cand_t["cpu"].append(c)
        w, c, ref_out = timed(reference)
        ref_t["wall"].append(w)
        ref_t["cpu"].append(c)
    return cand_t, ref_t, cand_out, ref_out


def fmt(t: Times) -> str:
    w, c = t["wall"], t["cpu"]
    return (
        f"wall best {min(w):7.4f} s median {statistics.median(w):7.4f} s | "
        f"cpu best {min(c):7.4f} s median {statistics.median(c):7.4f} s"
    )


def ratio(a: Times, b: Times) -> str:
    """a / b for best and median, wall and cpu."""
    parts = []
    for kind in ("wall", "cpu"):
        best = min(a[kind]) / min(b[kind])
        med = statistics.median(a[kind]) / statistics.median(b[kind])
        parts.append(f"{kind} best {best:5.2f}x median {med:5.2f}x")
    return " | ".join(parts)


def load_rankcore(path: str) -> Any:
    """A saved copy of ``semshift/metrics/rankcore.py``, imported as its own module."""
    spec = importlib.util.spec_from_file_location("rankcore_baseline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def five_values(module: Any, scores: np.ndarray, is_ood: np.ndarray) -> tuple[float, ...]:
    """What ranking_metrics computes, through ``module``'s RankCore (default arguments)."""
    core = module.RankCore.from_scores(scores, is_ood, "ranking_metrics")
    return (
        core.auroc(),
        core.fpr(0.95, "id_recall"),
        core.ap_in(),
        core.ap_out(),
        core.detection_error(),
    )


def bench_baseline(module: Any, s: np.ndarray, is_ood: np.ndarray, repeat: int) -> None:
    """The baseline rankcore, the current one and np.sort, interleaved."""
    same = five_values(module, s, is_ood) == five_values(rankcore, s, is_ood)
    fns = {
        "np.sort": lambda: np.sort(s),
        "baseline": lambda: five_values(module, s, is_ood),
        "current": lambda: five_values(rankcore, s, is_ood),
    }
    times: dict[str, Times] = {k: {"wall": [], "cpu": []} for k in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            w, c, _ = timed(fn)
            times[name]["wall"].append(w)
            times[name]["cpu"].append(c)
    print(f"  baseline rankcore: the five values bitwise equal to the current ones: {same}")
    for name in ("baseline", "current"):
        print(f"  {name:8s} (from_scores + 5)  {fmt(times[name])}")
        print(f"  {'':8s} ratio to np.sort    {ratio(times[name], times['np.sort'])}")


def bench_ranking(
    n: int, repeat: int, sklearn_check: bool, singles: bool = True, baseline: Any = None
) -> None:
    rng = np.random.default_rng(0)
    is_ood = rng.random(n) < 0.5
    scores = rng.normal(size=n) + np.where(is_ood, 0.0, 1.0)
    print(
        f"\n## Ranking metrics on {n:,} scores ({int((~is_ood).sum()):,} ID, "
        f"{int(is_ood.sum()):,} OOD; float64, N(1,1) vs N(0,1))\n"
    )
    variants = [
        ("continuous", scores),
        ("ties: rounded to 3 decimals", np.round(scores, 3)),
        ("ties: float32 precision", scores.astype(np.float32).astype(np.float64)),
    ]
    for label, s in variants:
        cand_t, ref_t, res, _ = compare(
            lambda s=s: ranking_metrics(s, is_ood), lambda s=s: np.sort(s), repeat
        )
        print(f"[{label}]")
        print(f"  np.sort (same array)     {fmt(ref_t)}")
        print(f"  ranking_metrics (all 5)  {fmt(cand_t)}")
        print(f"  ratio to np.sort         {ratio(cand_t, ref_t)}  (target <= 3x)")
        print(
            f"  values: auroc={res.auroc:.6f} fpr95={res.fpr:.6f} aupr_in={res.aupr_in:.6f} "
            f"aupr_out={res.aupr_out:.6f} detection_error={res.detection_error:.6f}"
        )
        if baseline is not None:
            bench_baseline(baseline, s, is_ood, repeat)
    if singles:
        bench_singles(scores, is_ood, repeat)
    if sklearn_check:
        bench_sklearn(scores, is_ood)


def bench_singles(scores: np.ndarray, is_ood: np.ndarray, repeat: int) -> None:
    print("\n[continuous] one function per call (each sorts on its own)")
    singles = [
        ("auroc", lambda: auroc(scores, is_ood)),
        ("fpr_at_tpr(0.95)", lambda: fpr_at_tpr(scores, is_ood)),
        ("aupr_in", lambda: aupr_in(scores, is_ood)),
        ("aupr_out", lambda: aupr_out(scores, is_ood)),
    ]
    total_best = 0.0
    for name, fn in singles:
        cand_t, ref_t, _, _ = compare(fn, lambda: np.sort(scores), max(2, repeat // 2))
        total_best += min(cand_t["cpu"])
        print(f"  {name:17s} {fmt(cand_t)}")
        print(f"  {'':17s} ratio to np.sort {ratio(cand_t, ref_t)}")
    print(f"  sum of the four (cpu best) {total_best:7.4f} s")


def bench_sklearn(scores: np.ndarray, is_ood: np.ndarray) -> None:
    """sklearn's AUROC and both average precisions on the continuous and float32 cases."""
    for label, s in [
        ("continuous", scores),
        ("float32 precision", scores.astype(np.float32).astype(np.float64)),
    ]:
        t, _, (ref_auc, ref_ap, ref_apo) = timed(
            lambda s=s: (
                roc_auc_score(~is_ood, s),
                average_precision_score(~is_ood, s),
                average_precision_score(is_ood, -s),
            )
        )
        res = ranking_metrics(s, is_ood)
        diff = max(abs(res.auroc - ref_auc), abs(res.aupr_in - ref_ap), abs(res.aupr_out - ref_apo))
        print(
            f"\n  [{label}] sklearn roc_auc + 2 x average_precision (one run): {t:.3f} s; "
            f"max |difference| = {diff:.2e}"
        )


def bench_many(repeat: int) -> None:
    rng = np.random.default_rng(1)
    n_id, n_sub, m = 50_000, 64, 20_000
    ids = rng.normal(1.0, 1.0, n_id)
    sets = {f"cell{k:02d}": rng.normal(k / n_sub, 1.0, m) for k in range(n_sub)}
    y = np.r_[np.ones(n_id, bool), np.zeros(m, bool)]  # ID positive for sklearn

    def sk_loop() -> dict[str, tuple[float, float]]:
        out = {}
        for k, ood in sets.items():
            s = np.concatenate((ids, ood))
            out[k] = (roc_auc_score(y, s), average_precision_score(y, s))
        return out

    print(f"\n## evaluate_many: {n_id:,} ID scores vs {n_sub} subsets of {m:,} OOD scores\n")
    reps = max(2, repeat // 2)
    cand_t, ref_t, df, ref = compare(
        lambda: evaluate_many(ids, sets, ["auroc", "aupr_in"]), sk_loop, reps
    )
    table = df.pivot(index="subset", columns="metric", values="value")
    diff = max(
        max(abs(table.loc[k, "auroc"] - a), abs(table.loc[k, "aupr_in"] - p))
        for k, (a, p) in ref.items()
    )
    print(f"  sklearn loop (roc_auc_score + average_precision_score)  {fmt(ref_t)}")
    print(f"  evaluate_many(['auroc', 'aupr_in'])                     {fmt(cand_t)}")
    print(f"  speed-up (sklearn / evaluate_many) {ratio(ref_t, cand_t)}  (target >= 10x)")
    print(f"  max |difference| between the two = {diff:.2e}")
    full_t, _, _, _ = compare(lambda: evaluate_many(ids, sets), lambda: None, reps)
    print(f"  evaluate_many default (auroc, fpr95, aupr_in, aupr_out)  {fmt(full_t)}")
    print(f"  speed-up vs the 2-metric sklearn loop {ratio(ref_t, full_t)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip-sklearn-10m", action="store_true")
    parser.add_argument("--ranking-only", action="store_true")
    parser.add_argument("--baseline-rankcore", metavar="FILE")
    args = parser.parse_args()
    baseline = load_rankcore(args.baseline_rankcore) if args.baseline_rankcore else None
    print("# semshift.metrics benchmark")
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs visible"
    )
    bench_ranking(args.n, args.repeat, not args.skip_sklearn_10m, not args.ranking_only, baseline)
    if not args.ranking_only:
        bench_many(args.repeat)


if __name__ == "__main__":
    main()
