"""Benchmark nci, vra, weighted_ebo, gmm, pnml and mcm against pytorch-ood 0.4.0, on the CPU.

Synthetic ImageNet-like data (as ``bench_detectors.py``): non-negative features
``relu(mu_y + 0.3 + noise)`` with sparse class means, the LDA head of the means, ID test samples
from the known classes and 20% OOD test samples from new class means. Every detector is fitted on
the training features (with the labels, head or logits it needs) and scores the test features,
once with semshift and once with pytorch-ood's detector on the very same arrays
(``torch.from_numpy``, no copy; its ``fit_features``/``predict_features`` entry points, test rows
in batches of 4,096 as a data loader would give them; torch's default thread count). Each run is
its own subprocess, so the peak resident memory (``ru_maxrss``, which includes the input arrays)
belongs to one implementation; the two implementations run alternately ``--repeat`` times and
the faster run of each is kept (the machine's load varies). The table gives fit + score seconds
of each, the ratio pytorch-ood / semshift (> 1: semshift faster), the Spearman correlation
between semshift's score and minus pytorch-ood's (which are outlier scores) and both peaks.

pytorch-ood's GMM keeps C precision matrices of D x D (33.5 GB in float64 for 1,000 classes at
D = 2,048) and scores with n C D^2 operations, so it is timed on a smaller configuration
(``--gmm-classes`` classes with as many training samples per class as the full run, and
``--gmm-test`` test rows), on which semshift is timed as well for the ratio; semshift's GMM is
also timed at full size. The weighted-energy class weights are uniform on [0, 1) (the
initialisation of VOS's weight layer). semshift's GMM scores with n D sum_c r_c float64
operations (about 4e13 at full size); ``--gmm-score-rows N`` scores only the first N test rows
of the full-size run and extrapolates the score time linearly to all of them (marked ``*``;
scoring is linear in the rows, one chunk after another). The MCM text embeddings are the
normalised head rows and the head is 100 times them (a CLIP zero-shot head, s = 100).

Usage::

    nice python benchmarks/bench_detectors2_pood.py            # full size: 100,000 x 2,048
    python benchmarks/bench_detectors2_pood.py --small         # quick check
    python benchmarks/bench_detectors2_pood.py --detectors nci,mcm

Temporary score files go to a temporary folder that is deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np
import scipy.stats
from _synthetic import draw, lda_head, logits, sparse_means

DETECTORS = ("nci", "vra", "weighted_ebo", "gmm", "pnml", "mcm")
BATCH = 4096
Array = np.ndarray


# -- data --------------------------------------------------------------------------------------
def make_data(cfg: dict[str, Any], need_logits: bool) -> dict[str, Any]:
    """Deterministic synthetic features, labels, head and (optionally) test logits, float32."""
    rng = np.random.default_rng(cfg["seed"])
    c, d = cfg["classes"], cfg["dim"]
    means = sparse_means(rng, c, d)
    w, b = lda_head(means[:c].astype(np.float32))
    y_train = np.repeat(np.arange(c), cfg["n_train"] // c)
    y_train = np.concatenate([y_train, rng.integers(0, c, cfg["n_train"] - y_train.size)])
    n_test = cfg["n_test"]
    is_ood = np.arange(n_test) >= n_test - n_test // 5
    y_test = rng.integers(0, c, n_test) + np.where(is_ood, c, 0)
    out = {
        "h_train": draw(rng, means, y_train),
        "y_train": y_train,
        "h_test": draw(rng, means, y_test),
        "w": w,
        "b": b,
        "is_ood": is_ood,
    }
    if need_logits:
        out["z_test"] = logits(out["h_test"], w, b)
    return out


def class_weights(n_classes: int) -> Array:
    return np.random.default_rng(7).random(n_classes)


# -- the two implementations -----------------------------------------------------------------
def run_semshift(name: str, data: dict[str, Any]) -> tuple[float, float, Array]:
    from semshift import detectors

    w, b = data["w"], data["b"]
    fit: dict[str, Any] = {"features": data["h_train"], "labels": data["y_train"], "head": (w, b)}
    score: dict[str, Any] = {"features": data["h_test"], "logits": data.get("z_test")}
    params: dict[str, Any] = {}
    if name == "weighted_ebo":
        params = {"weights": class_weights(w.shape[0])}
    if name == "mcm":
        text = w / np.linalg.norm(w, axis=1, keepdims=True)
        fit["head"] = (100.0 * text, np.zeros(w.shape[0], dtype=np.float32))
    det = detectors.get(name, **params)
    fit = {k: v for k, v in fit.items() if k in det.fit_requires}
    score = {k: v for k, v in score.items() if k in det.score_requires}
    t0 = time.perf_counter()
    det.fit(**fit)
    t1 = time.perf_counter()
    scores = det.score(**score)
    return t1 - t0, time.perf_counter() - t1, scores


def run_pytorch_ood(name: str, data: dict[str, Any]) -> tuple[float, float, Array]:
    import pytorch_ood.detector as pood
    import torch

    h_train, h_test = torch.from_numpy(data["h_train"]), torch.from_numpy(data["h_test"])
    y_train = torch.from_numpy(data["y_train"])
    w, b = data["w"], data["b"]
    head = torch.nn.Linear(w.shape[1], w.shape[0])
    with torch.no_grad():
        head.weight.copy_(torch.from_numpy(w))
        head.bias.copy_(torch.from_numpy(b))
    batch = BATCH
    t0 = time.perf_counter()
    if name == "nci":
        det: Any = pood.NCI(None, head).fit_features(h_train)
        predict, rows = det.predict_features, h_test
    elif name == "vra":
        det = pood.VRA(None, head).fit_feature_maps(h_train, y_train)
        predict, rows = det.predict_feature_maps, h_test
    elif name == "weighted_ebo":
        det = pood.WeightedEBO(None, torch.from_numpy(class_weights(w.shape[0])))
        predict, rows = det.predict_logits, torch.from_numpy(data["z_test"])
    elif name == "gmm":
        det = pood.GMM(None).fit_features(h_train, y_train)
        predict, rows, batch = det.predict_features, h_test, 512  # (C, batch, D) float64
    elif name == "pnml":
        det = pood.PNML(None, head).fit_features(h_train, y_train)
        predict, rows = det.predict_features, h_test
    elif name == "mcm":
        text = torch.from_numpy(w / np.linalg.norm(w, axis=1, keepdims=True))
        det = pood.MCM(None, text)
        predict, rows = det.predict_features, h_test
    else:
        raise ValueError(name)
    t1 = time.perf_counter()
    with torch.no_grad():
        parts = [predict(rows[s : s + batch]) for s in range(0, rows.shape[0], batch)]
    scores = torch.cat(parts).double().numpy()
    return t1 - t0, time.perf_counter() - t1, scores


def worker(name: str, impl: str, cfg: dict[str, Any], out: str) -> None:
    data = make_data(cfg, need_logits=name in ("nci", "weighted_ebo"))
    rows = cfg.get("score_rows") or cfg["n_test"]
    data["h_test"] = data["h_test"][:rows]
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    run = run_semshift if impl == "semshift" else run_pytorch_ood
    fit_s, score_s, scores = run(name, data)
    np.save(out + ".npy", scores)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with open(out + ".json", "w", encoding="utf-8") as f:
        extrapolate = cfg["n_test"] / rows
        json.dump(
            {"fit": fit_s, "score": score_s * extrapolate, "peak_kb": peak, "data_kb": rss0}, f
        )


# -- driver ------------------------------------------------------------------------------------
def _spawn(name: str, impl: str, cfg: dict[str, Any], tmp: str) -> dict[str, Any] | None:
    out = os.path.join(tmp, f"{name}-{impl}-{cfg['n_test']}-{cfg['classes']}")
    cmd = [sys.executable, __file__, "--worker", name, impl, json.dumps(cfg), out]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"  {name} / {impl} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None
    with open(out + ".json", encoding="utf-8") as f:
        res: dict[str, Any] = json.load(f)
    res["scores"] = np.load(out + ".npy")
    return res


def _best(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
    """The run with the smaller fit + score time (either may be None: failed)."""
    if a is None or b is None:
        return a or b
    return a if a["fit"] + a["score"] <= b["fit"] + b["score"] else b


def _gb(kb: float) -> str:
    return f"{kb / 2**20:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", action="store_true", help="10,000 x 512, 100 classes")
    ap.add_argument("--n-train", type=int, default=100_000)
    ap.add_argument("--n-test", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=2048)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--gmm-classes", type=int, default=100, help="pytorch-ood GMM: classes")
    ap.add_argument("--gmm-test", type=int, default=2000, help="pytorch-ood GMM: test rows")
    ap.add_argument(
        "--gmm-score-rows",
        type=int,
        default=10_000,
        help="semshift GMM at full size: rows scored (time extrapolated); 0 = all",
    )
    ap.add_argument("--detectors", default=",".join(DETECTORS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--repeat", type=int, default=2, help="runs of each implementation (alternating); best"
    )
    args = ap.parse_args()
    if args.small:
        args.n_train, args.n_test, args.dim, args.classes = 10_000, 10_000, 512, 100
        args.gmm_classes, args.gmm_test, args.gmm_score_rows = 20, 1000, 0
    cfg = {k: getattr(args, k) for k in ("n_train", "n_test", "dim", "classes", "seed")}
    per_class = args.n_train // args.classes
    gmm_cfg = {
        **cfg,
        "classes": min(args.gmm_classes, args.classes),
        "n_train": per_class * min(args.gmm_classes, args.classes),
        "n_test": min(args.gmm_test, args.n_test),
    }
    import torch

    print(
        f"{args.n_train:,} train x {args.n_test:,} test features, D = {args.dim:,}, "
        f"{args.classes:,} classes; {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, torch {torch.__version__} with {torch.get_num_threads()} threads"
    )
    header = (
        f"{'detector':<26} {'semshift s':>11} {'pytorch-ood s':>14} {'ratio':>7} "
        f"{'spearman':>9} {'peak GB ours/theirs':>20}"
    )
    print(header)
    print("-" * len(header))
    rows: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any] | None]] = []
    with tempfile.TemporaryDirectory(prefix="bench_pood_") as tmp:
        for name in args.detectors.split(","):
            runs = [(name, cfg, True)]
            if name == "gmm":
                label = f"gmm ({gmm_cfg['classes']} cl., {gmm_cfg['n_test']:,} test)"
                rows_scored = args.gmm_score_rows or args.n_test
                full = {**cfg, "score_rows": min(rows_scored, args.n_test)}
                mark = "*" if rows_scored < args.n_test else ""
                runs = [(label, gmm_cfg, True), (f"gmm (full size){mark}", full, False)]
            for label, c, with_ref in runs:
                ours = theirs = None
                for _ in range(args.repeat if with_ref else 1):  # alternate, keep the best
                    ours = _best(ours, _spawn(name, "semshift", c, tmp))
                    if with_ref:
                        theirs = _best(theirs, _spawn(name, "pytorch-ood", c, tmp))
                if ours is None:
                    continue
                t_ours = ours["fit"] + ours["score"]
                if theirs is not None:
                    t_ref = theirs["fit"] + theirs["score"]
                    rho = scipy.stats.spearmanr(ours["scores"], -theirs["scores"]).statistic
                    ref_s, ratio, rho_s = f"{t_ref:.2f}", f"{t_ref / t_ours:.2f}", f"{rho:.6f}"
                    peaks = f"{_gb(ours['peak_kb'])} / {_gb(theirs['peak_kb'])}"
                else:
                    ref_s, ratio, rho_s = "-", "-", "-"
                    peaks = f"{_gb(ours['peak_kb'])} / -"
                print(
                    f"{label:<26} {t_ours:>11.2f} {ref_s:>14} {ratio:>7} {rho_s:>9} {peaks:>20}",
                    flush=True,
                )
                rows.append((label, c, ours, theirs))
    if any(label.endswith("*") for label, *_ in rows):
        print(f"* score time of {args.gmm_score_rows:,} rows extrapolated to {args.n_test:,}")
    print("\nfit / score seconds:")
    for label, _, ours, theirs in rows:
        ref = f"{theirs['fit']:.2f} / {theirs['score']:.2f}" if theirs else "-"
        print(f"  {label:<26} semshift {ours['fit']:.2f} / {ours['score']:.2f}; pytorch-ood {ref}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), sys.argv[5])
    else:
        main()
