"""Benchmark the semshift detectors against plain implementations of the same formulas.

Synthetic ImageNet-like data: non-negative (post-ReLU) features ``relu(mu_y + 0.3 + noise)``
with sparse class means (unit Gaussian noise), the linear LDA head of the class means (about
98% top-1 accuracy at 1,000 classes and D = 2,048), ID test samples from the known classes and
OOD test samples (20 %) from new class means. Each detector runs in its own subprocess (clean
peak memory); the same subprocess then runs a straightforward NumPy/scipy/scikit-learn version
of the formula and compares the scores.

Reported per detector: fit and score time; peak resident memory of the process
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``, so it includes the input arrays) and the
detector's own share (that peak minus the resident size just before ``fit``); the baseline's
time; the ratio baseline / ours; the max absolute score difference (and the score scale); the
AUROC of ID vs OOD. Slow baselines are timed on a subset of test rows and their score time is
extrapolated linearly to the full test set (marked ``*``).

Usage::

    nice python benchmarks/bench_detectors.py                      # full size, all detectors
    python benchmarks/bench_detectors.py --n-train 20000 --dim 512 --classes 100 --n-test 5000
    python benchmarks/bench_detectors.py --detectors knn,vim --write benchmarks/RESULTS_x.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.optimize
import scipy.special
import scipy.stats
from _synthetic import draw, lda_head, logits, sparse_means
from sklearn.covariance import EmpiricalCovariance
from sklearn.metrics import roc_auc_score
from sklearn.neighbors import NearestNeighbors
from sklearn.preprocessing import normalize

from semshift import detectors

Array = np.ndarray


# -- data ------------------------------------------------------------------------------------
class Data:
    """Synthetic features, head and logits, generated in blocks (float32)."""

    def __init__(self, args: argparse.Namespace, need_logits: bool) -> None:
        rng = np.random.default_rng(args.seed)
        c, d = args.classes, args.dim
        # Sparse class means against unit noise: about 98% top-1 accuracy with 1000 classes
        # and D = 2048, so the validation set has errors and every class has correct samples.
        means = sparse_means(rng, c, d)
        self.mu, mu_new = means[:c].astype(np.float32), means[c:].astype(np.float32)
        self.w, self.b = lda_head(self.mu)  # LDA head of the pre-ReLU Gaussians
        self.y_train = rng.integers(0, c, args.n_train)
        self.h_train = self._draw(rng, self.mu, self.y_train)
        self.y_val = rng.integers(0, c, args.n_val)
        h_val = self._draw(rng, self.mu, self.y_val)
        n_ood = args.n_test // 5
        self.is_ood = np.r_[np.zeros(args.n_test - n_ood, bool), np.ones(n_ood, bool)]
        y_test = np.r_[rng.integers(0, c, args.n_test - n_ood), rng.integers(0, c, n_ood)]
        centres = np.concatenate([self.mu, mu_new])
        self.h_test = self._draw(rng, centres, np.where(self.is_ood, y_test + c, y_test))
        self.z_val = self.logits(h_val)
        self.z_train = self.logits(self.h_train) if need_logits else None
        self.z_test = self.logits(self.h_test)

    @staticmethod
    def _draw(rng: np.random.Generator, centres: Array, labels: Array) -> Array:
        return draw(rng, centres, labels)

    def logits(self, h: Array) -> Array:
        return logits(h, self.w, self.b)


# -- plain baselines -------------------------------------------------------------------------
# Each returns (fit_seconds, score_fn); score_fn(rows) scores test rows `rows` (a slice).
def _softmax(z: Array) -> Array:
    return scipy.special.softmax(z.astype(np.float64), axis=1)


def _class_means(h: Array, y: Array, c: int) -> Array:
    return np.stack([h[y == k].mean(0, dtype=np.float64) for k in range(c)])


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def baseline(name: str, data: Data, det: detectors.Detector) -> tuple[float, Callable, int | None]:
    """Plain implementation: (fit time, score function on a row slice, rows to time or None)."""
    ht, zt, c = data.h_test, data.z_test, data.w.shape[0]
    w64, b64 = data.w.astype(np.float64), data.b.astype(np.float64)

    def lse(z: Array) -> Array:
        return scipy.special.logsumexp(z, axis=1)

    if name == "msp":
        return 0.0, lambda r: _softmax(zt[r]).max(1), None
    if name == "mls":
        return 0.0, lambda r: zt[r].max(1).astype(np.float64), None
    if name == "energy":
        return 0.0, lambda r: lse(zt[r].astype(np.float64)), None
    if name == "entropy":
        return 0.0, lambda r: -scipy.stats.entropy(_softmax(zt[r]), axis=1), None
    if name == "gen":

        def gen(r: slice) -> Array:
            p = np.sort(_softmax(zt[r]), axis=1)[:, -100:]
            return -np.sum(p**0.1 * (1 - p) ** 0.1, axis=1)

        return 0.0, gen, None
    if name == "temp_scaling":
        yv, zv = data.y_val, data.z_val.astype(np.float64)

        def nll(t: float) -> float:
            return -scipy.special.log_softmax(zv / t, axis=1)[np.arange(len(yv)), yv].mean()

        fit_s, res = _timed(lambda: scipy.optimize.minimize_scalar(nll, bounds=(0.01, 100),
                                                                   method="bounded"))  # fmt: skip
        return fit_s, lambda r: _softmax(zt[r] / res.x).max(1), None
    if name == "klm":

        def fit_klm() -> Array:
            pv, pred = _softmax(data.z_val), data.z_val.argmax(1)
            return np.stack([pv[pred == k].mean(0) for k in range(c) if (pred == k).any()])

        fit_s, tmpl = _timed(fit_klm)

        def klm(r: slice) -> Array:
            p = _softmax(zt[r])
            out = [scipy.special.rel_entr(p[i : i + 20, None, :], tmpl[None]).sum(-1).min(1)
                   for i in range(0, p.shape[0], 20)]  # fmt: skip
            return -np.concatenate(out)

        return fit_s, klm, 500
    if name == "openmax":

        def fit_openmax() -> tuple[Array, Array]:
            z, y = data.z_train.astype(np.float64), data.y_train
            ok = z.argmax(1) == y
            mav = np.stack([z[ok & (y == k)].mean(0) for k in range(c)])
            params = []
            for k in range(c):
                dist = np.sort(np.linalg.norm(z[ok & (y == k)] - mav[k], axis=1))[-20:]
                params.append(scipy.stats.weibull_min.fit(dist, floc=0))
            return mav, np.array(params)

        fit_s, (mav, prm) = _timed(fit_openmax)

        def openmax(r: slice) -> Array:
            out = []
            for z in zt[r].astype(np.float64):  # per sample, as the original code
                w = np.ones(c)
                for rank, k in enumerate(np.argsort(-z)[:3], start=1):
                    cdf = scipy.stats.weibull_min.cdf(np.linalg.norm(z - mav[k]), prm[k, 0],
                                                      prm[k, 1], prm[k, 2])  # fmt: skip
                    w[k] = 1 - (3 - rank + 1) / 3 * cdf
                full = np.r_[z * w, np.sum(z * (1 - w))]
                out.append(-scipy.special.softmax(full)[-1])
            return np.array(out)

        return fit_s, openmax, 2000
    if name == "max_cosine":
        wn = normalize(w64)
        return 0.0, lambda r: (normalize(ht[r].astype(np.float64)) @ wn.T).max(1), None
    if name in ("mahalanobis", "rmd"):

        def fit_maha() -> tuple[Array, Array, Array, Array]:
            h, y = data.h_train, data.y_train
            mu = _class_means(h, y, c)
            prec = EmpiricalCovariance().fit(h - mu[y]).precision_
            if name == "rmd":
                glob = EmpiricalCovariance().fit(h)
                return mu, prec, glob.location_, glob.precision_
            return mu, prec, np.zeros(0), np.zeros(0)

        fit_s, (mu, prec, mu0, prec0) = _timed(fit_maha)

        def maha(r: slice) -> Array:
            x = ht[r].astype(np.float64)
            md = np.stack([((x - mu[k]) @ prec * (x - mu[k])).sum(1) for k in range(c)], 1)
            if name == "rmd":
                md = md - (((x - mu0) @ prec0) * (x - mu0)).sum(1)[:, None]
            return (-md).max(1)

        return fit_s, maha, 200
    if name == "knn":
        k = det.get_params()["k"]

        def fit_knn() -> NearestNeighbors:
            bank = data.h_train / (np.linalg.norm(data.h_train, axis=1, keepdims=True) + 1e-10)
            return NearestNeighbors(n_neighbors=k, algorithm="brute").fit(bank.astype(np.float64))

        fit_s, nn = _timed(fit_knn)

        def knn(r: slice) -> Array:
            q = ht[r].astype(np.float64)
            dist, _ = nn.kneighbors(q / (np.linalg.norm(q, axis=1, keepdims=True) + 1e-10))
            return -dist[:, -1]

        return fit_s, knn, 1000
    if name in ("vim", "residual"):
        dim = det.dim_  # type: ignore[attr-defined]

        def fit_vim() -> tuple[Array, Array, float]:
            u = -np.linalg.pinv(w64) @ b64
            h = data.h_train.astype(np.float64) - u
            cov = EmpiricalCovariance(assume_centered=True).fit(h).covariance_
            vals, vecs = np.linalg.eigh(cov)
            ns = vecs[:, np.argsort(-vals)[dim:]]
            alpha = (h @ w64.T + (u @ w64.T + b64)).max(1).mean() / np.linalg.norm(
                h @ ns, axis=1
            ).mean()
            return u, ns, alpha

        fit_s, (u, ns, alpha) = _timed(fit_vim)

        def vim(r: slice) -> Array:
            resid = np.linalg.norm((ht[r].astype(np.float64) - u) @ ns, axis=1)
            if name == "residual":
                return -resid
            return lse(zt[r].astype(np.float64)) - alpha * resid

        return fit_s, vim, None
    if name == "react":
        fit_s, thr = _timed(lambda: np.percentile(data.h_train.flatten(), 90))
        return fit_s, lambda r: lse(np.minimum(ht[r], thr).astype(np.float64) @ w64.T + b64), None
    if name in ("ash_b", "ash_p", "ash_s", "scale"):
        p = det.get_params()["percentile"]

        def ash(r: slice) -> Array:
            x = ht[r].astype(np.float64)
            d = x.shape[1]
            k = d - int(np.round(d * p / 100.0))
            idx = np.argpartition(-x, k - 1, axis=1)[:, :k]
            kept = np.zeros_like(x)
            np.put_along_axis(kept, idx, np.take_along_axis(x, idx, 1), 1)
            s, s_kept = x.sum(1, keepdims=True), kept.sum(1, keepdims=True)
            if name == "ash_b":
                kept = np.zeros_like(x)
                np.put_along_axis(kept, idx, np.broadcast_to(s / k, idx.shape), 1)
            elif name == "ash_s":
                kept = kept * np.exp(s / s_kept)
            elif name == "scale":
                kept = x * np.exp(s / s_kept)
            return lse(kept @ w64.T + b64)

        return 0.0, ash, None
    if name == "dice":

        def fit_dice() -> Array:
            contrib = w64 * data.h_train.mean(0, dtype=np.float64)
            return np.where(contrib > np.percentile(contrib, 90), w64, 0.0)

        fit_s, wm = _timed(fit_dice)
        return fit_s, lambda r: lse(ht[r].astype(np.float64) @ wm.T + b64), None
    if name == "she":

        def fit_she() -> Array:
            ok = data.z_train.argmax(1) == data.y_train
            return _class_means(data.h_train[ok], data.y_train[ok], c)

        fit_s, pat = _timed(fit_she)
        return fit_s, lambda r: (ht[r] * pat[zt[r].argmax(1)]).sum(1), None
    if name == "gradnorm":

        def gradnorm(r: slice) -> Array:
            return np.abs(ht[r]).sum(1, dtype=np.float64) * np.abs(c * _softmax(zt[r]) - 1).sum(1)

        return 0.0, gradnorm, None
    if name == "nnguide":
        prm = det.get_params()

        def fit_nng() -> Array:
            m = int(np.ceil(prm["alpha"] * len(data.h_train)))
            x = data.h_train[:m].astype(np.float64)
            conf = lse(data.z_train[:m].astype(np.float64))
            return x / (np.linalg.norm(x, axis=1, keepdims=True) + 1e-10) * conf[:, None]

        fit_s, bank = _timed(fit_nng)

        def nng(r: slice) -> Array:
            q = ht[r].astype(np.float64)
            sims = (q / (np.linalg.norm(q, axis=1, keepdims=True) + 1e-10)) @ bank.T
            top = np.sort(sims, axis=1)[:, -prm["k"] :]
            return top.mean(1) * lse(zt[r].astype(np.float64))

        return fit_s, nng, None
    if name == "fdbd":

        def fit_fdbd() -> tuple[Array, Array]:
            den = np.zeros((c, c))
            for k in range(c):  # as OpenOOD's postprocessor
                d = np.linalg.norm(w64 - w64[k], axis=1)
                d[k] = 1.0
                den[k] = d
            return den, data.h_train.mean(0, dtype=np.float64)

        fit_s, (den, mean) = _timed(fit_fdbd)

        def fdbd(r: slice) -> Array:
            z = zt[r].astype(np.float64)
            pred = z.argmax(1)
            gaps = np.abs(z - z.max(1, keepdims=True))
            num = (gaps / den[pred]).sum(1) / (c - 1)
            return num / np.linalg.norm(ht[r].astype(np.float64) - mean, axis=1)

        return fit_s, fdbd, None
    raise KeyError(name)


# -- worker ----------------------------------------------------------------------------------
def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def run_worker(name: str, args: argparse.Namespace) -> dict[str, Any]:
    cls = detectors.get_class(name)
    t0 = time.perf_counter()
    data = Data(args, need_logits="logits" in cls.fit_requires)
    gen_s = time.perf_counter() - t0
    inputs = {
        "features": data.h_train,
        "logits": data.z_train,
        "labels": data.y_train,
        "head": (data.w, data.b),
        "val_logits": data.z_val,
        "val_labels": data.y_val,
    }
    fit_in = {k: v for k, v in inputs.items() if k in cls.fit_requires}
    score_in = {k: v for k, v in (("features", data.h_test), ("logits", data.z_test))
                if k in cls.score_requires}  # fmt: skip
    det = detectors.get(name)
    rss_before = _rss_mb()
    fit_s, _ = _timed(lambda: det.fit(**fit_in))
    score_s, scores = _timed(lambda: det.score(**score_in))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result: dict[str, Any] = {
        "name": name,
        "feature_based": "features" in cls.requires,
        "gen_s": gen_s,
        "fit_s": fit_s,
        "score_s": score_s,
        "rss_before_mb": rss_before,
        "peak_rss_mb": peak,
        "auroc": float(roc_auc_score(~data.is_ood, scores)),
        "backend": getattr(det, "backend_", ""),
    }
    if args.no_baseline:
        return result
    base_fit_s, base_score, rows = baseline(name, data, det)
    n_test = data.h_test.shape[0]
    if rows is not None and rows < n_test:
        # Subset spread over ID and OOD rows: the first `rows` of a shuffled copy would cost a
        # copy; a strided slice keeps both kinds.
        sl = slice(0, n_test, n_test // rows)
    else:
        sl = slice(0, n_test)
    base_s, base_scores = _timed(lambda: base_score(sl))
    n_rows = len(range(*sl.indices(n_test)))
    ours = scores[sl]
    result |= {
        "base_fit_s": base_fit_s,
        "base_score_s": base_s * n_test / n_rows,
        "base_rows": n_rows,
        "extrapolated": n_rows < n_test,
        "max_abs_diff": float(np.max(np.abs(ours - base_scores))),
        "score_scale": float(np.max(np.abs(ours))),
    }
    return result


# -- driver ----------------------------------------------------------------------------------
def _row(r: dict[str, Any]) -> str:
    ours = r["fit_s"] + r["score_s"]
    own = r["peak_rss_mb"] - r["rss_before_mb"]
    cells = [
        r["name"] + (f" ({r['backend']})" if r["backend"] else ""),
        f"{r['fit_s']:.2f}",
        f"{r['score_s']:.2f}",
        f"{r['peak_rss_mb'] / 1024:.2f}",
        f"{max(own, 0) / 1024:.2f}",
    ]
    if "base_fit_s" in r:
        base = r["base_fit_s"] + r["base_score_s"]
        star = "*" if r["extrapolated"] else ""
        cells += [
            f"{base:.2f}{star}",
            f"{base / ours:.1f}x" if ours > 0 else "-",
            f"{r['max_abs_diff']:.1e}",
            f"{r['score_scale']:.1e}",
        ]
    else:
        cells += ["-"] * 4
    cells.append(f"{r['auroc']:.3f}")
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| detector | fit s | score s | peak RSS GB | own GB | plain s | plain/ours | max abs diff "
    "| score scale | AUROC |\n|---|---|---|---|---|---|---|---|---|---|"
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n-train", type=int, default=100_000)
    ap.add_argument("--n-test", type=int, default=50_000)
    ap.add_argument("--n-val", type=int, default=10_000)
    ap.add_argument("--dim", type=int, default=2048)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--detectors", default=",".join(detectors.list_detectors(level="post_hoc")))
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--write", default="", help="write the markdown table to this file")
    ap.add_argument("--worker", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(run_worker(args.worker, args)))
        return
    niceness = os.nice(0)
    cmd = (f"nice -n {niceness} " if niceness else "") + "python "
    cmd += " ".join([os.path.relpath(__file__), *sys.argv[1:]])
    size = (
        f"train {args.n_train:,} x {args.dim:,}, {args.classes:,} classes, test {args.n_test:,} "
        f"(20% OOD), val {args.n_val:,}"
    )
    load_before = os.getloadavg()
    print(f"# {size}\n{HEADER}", flush=True)
    results = []
    t_all = time.perf_counter()
    for name in args.detectors.split(","):
        worker = [sys.executable, __file__, "--worker", name, *sys.argv[1:]]
        proc = subprocess.run(worker, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print(f"| {name} | FAILED: {proc.stderr.strip().splitlines()[-1]} |", flush=True)
            continue
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(_row(results[-1]), flush=True)
    feat = [r for r in results if r["feature_based"]]
    total = sum(r["fit_s"] + r["score_s"] for r in feat)
    peak = max((r["peak_rss_mb"] for r in feat), default=0.0) / 1024
    logit_total = sum(r["fit_s"] + r["score_s"] for r in results if not r["feature_based"])
    summary = (
        f"Feature-based detectors ({len(feat)}): fit + score {total:.1f} s in total "
        f"(budget 300 s), max peak RSS {peak:.2f} GB including inputs (budget 8 GB).\n"
        f"Logit-only detectors ({len(results) - len(feat)}): {logit_total:.1f} s in total.\n"
        f"Wall time of the whole benchmark (data generation and baselines included): "
        f"{time.perf_counter() - t_all:.0f} s. Load average (1 min) before / after: "
        f"{load_before[0]:.2f} / {os.getloadavg()[0]:.2f} (the machine is shared)."
    )
    print(summary)
    if args.write:
        machine = f"{platform.machine()}, {os.cpu_count()} cores, numpy {np.__version__}"
        with open(args.write, "w") as f:
            f.write(
                "## Detectors\n\n"
                f"Command: `{cmd}`  \nData: {size}; machine: {machine}; faiss "
                f"{'installed' if detectors.faiss_available() else 'not installed'}.\n\n"
                "Peak RSS from `getrusage(RUSAGE_SELF).ru_maxrss` of a fresh subprocess per "
                "detector (includes the input arrays); *own* = peak minus the resident size just "
                "before `fit`. *plain* = a straightforward NumPy/scipy/scikit-learn version of "
                "the same formula, fit + score; `*` = score time measured on an evenly strided "
                "subset of test rows and extrapolated linearly. max abs diff is over the rows "
                "both scored.\n\n"
                f"{HEADER}\n" + "\n".join(_row(r) for r in results) + f"\n\n{summary}\n"
            )


if __name__ == "__main__":
    main()
