"""Benchmark semshift's ViM (and residual) fit + score against pytorch-ood 0.4.0's ViM, on the CPU.

Synthetic data as ``bench_detectors2_pood.py`` (``_synthetic.py``): non-negative features
``relu(mu_y + 0.3 + noise)`` with sparse class means, the LDA head of the means, ID test samples
from the known classes and 20% OOD test samples from new class means. Default size: the issue's
20,000 training x 20,000 test features of D = 512, 100 classes, principal dimension
``default_vim_dim(512) = 256`` for both.

Both implementations run in this process on the very same arrays: semshift's
``vim.fit(features, head)`` + ``score(features, logits)`` and pytorch-ood's
``ViM(None, d, W, b).fit_features(features, labels)`` + ``predict_features`` over test batches of
4,096 (torch's default thread count, as a data loader would give them; ``torch.from_numpy``, no
copy). They alternate ``--repeat`` times (the machine's load varies: the ratio of each pair is
measured within seconds); the table gives the median, minimum and maximum of each and of the
per-pair ratio pytorch-ood / semshift (> 1: semshift faster). Also reported: the Spearman
correlation of semshift's score with minus pytorch-ood's (an outlier score), and the largest
difference of semshift's ViM score from a float64 NumPy reference of the same formula (scatter,
eigenvectors and projection in float64), relative to the largest score magnitude. ``residual``
(ViM without the logits; pytorch-ood has no such detector) is timed alone.

Usage::

    python benchmarks/bench_vim_pood.py                      # 20,000 x 512, 100 classes
    python benchmarks/bench_vim_pood.py --repeat 9 --dim 2048 --classes 1000
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.stats
from _synthetic import draw, lda_head, logits, sparse_means

Array = np.ndarray
BATCH = 4096


def make_data(n_train: int, n_test: int, dim: int, classes: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    means = sparse_means(rng, classes, dim)
    w, b = lda_head(means[:classes].astype(np.float32))
    y_train = np.arange(n_train) % classes
    is_ood = np.arange(n_test) >= n_test - n_test // 5
    y_test = rng.integers(0, classes, n_test) + np.where(is_ood, classes, 0)
    h_test = draw(rng, means, y_test)
    return {
        "h_train": draw(rng, means, y_train),
        "y_train": y_train,
        "h_test": h_test,
        "z_test": logits(h_test, w, b),
        "w": w,
        "b": b,
    }


def semshift_vim(data: dict[str, Any], name: str = "vim") -> Array:
    from semshift import detectors

    det = detectors.get(name).fit(features=data["h_train"], head=(data["w"], data["b"]))
    if name == "residual":
        return det.score(features=data["h_test"])
    return det.score(features=data["h_test"], logits=data["z_test"])


def pytorch_ood_vim(data: dict[str, Any], d: int) -> Array:
    import torch
    from pytorch_ood.detector import ViM

    w, b = torch.from_numpy(data["w"]), torch.from_numpy(data["b"])
    det = ViM(None, d=d, w=w, b=b).fit_features(
        torch.from_numpy(data["h_train"]), torch.from_numpy(data["y_train"])
    )
    h_test = torch.from_numpy(data["h_test"])
    with torch.no_grad():
        parts = [det.predict_features(h_test[s : s + BATCH]) for s in range(0, len(h_test), BATCH)]
    return torch.cat(parts).double().numpy()


def float64_reference(data: dict[str, Any], dim: int) -> Array:
    """ViM in float64 NumPy: u = -pinv(W) b, eigenvectors of the second moment of h - u."""
    w, b = data["w"].astype(np.float64), data["b"].astype(np.float64)
    u = -np.linalg.pinv(w) @ b
    x = data["h_train"].astype(np.float64) - u
    _, vecs = np.linalg.eigh(x.T @ x / x.shape[0])
    ns = vecs[:, : x.shape[1] - dim]
    alpha = (x @ w.T + (w @ u + b)).max(1).mean() / np.linalg.norm(x @ ns, axis=1).mean()
    z = data["z_test"].astype(np.float64)
    m = z.max(1)
    energy = np.log(np.exp(z - m[:, None]).sum(1)) + m
    resid = np.linalg.norm((data["h_test"].astype(np.float64) - u) @ ns, axis=1)
    return np.asarray(energy - alpha * resid)


def _timed(f: Callable[[], Array]) -> tuple[float, Array]:
    t0 = time.perf_counter()
    out = f()
    return time.perf_counter() - t0, out


def _spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):7.3f} [{min(xs):.3f}-{max(xs):.3f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-train", type=int, default=20_000)
    ap.add_argument("--n-test", type=int, default=20_000)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--classes", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=7, help="alternating runs of each")
    args = ap.parse_args()

    import torch

    from semshift.detectors.vim import default_vim_dim

    data = make_data(args.n_train, args.n_test, args.dim, args.classes, args.seed)
    dim = default_vim_dim(args.dim)
    load = os.getloadavg()[0]
    print(
        f"{args.n_train:,} train x {args.n_test:,} test features, D = {args.dim:,}, "
        f"{args.classes:,} classes, principal dimension {dim}; "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch "
        f"{torch.__version__} with {torch.get_num_threads()} threads; load {load:.2f}"
    )
    ours_s: list[float] = []
    theirs_s: list[float] = []
    resid_s: list[float] = []
    ratios: list[float] = []
    ours = theirs = np.empty(0)
    semshift_vim(data)  # import and warm up both once, untimed
    pytorch_ood_vim(data, dim)
    for _ in range(args.repeat):
        t_ours, ours = _timed(lambda: semshift_vim(data))
        t_theirs, theirs = _timed(lambda: pytorch_ood_vim(data, dim))
        t_resid, _ = _timed(lambda: semshift_vim(data, "residual"))
        ours_s.append(t_ours)
        theirs_s.append(t_theirs)
        resid_s.append(t_resid)
        ratios.append(t_theirs / t_ours)
    rho = scipy.stats.spearmanr(ours, -theirs).statistic
    ref = float64_reference(data, dim)
    dev = float(np.abs(ours - ref).max() / np.abs(ref).max())
    dev_pood = float(np.abs(-theirs - ref).max() / np.abs(ref).max())
    print(f"fit + score seconds, median [min-max] of {args.repeat} alternating runs:")
    print(f"  semshift vim        {_spread(ours_s)}")
    print(f"  pytorch-ood ViM     {_spread(theirs_s)}")
    print(f"  semshift residual   {_spread(resid_s)}")
    print(f"  ratio pytorch-ood / semshift vim, per pair: {_spread(ratios)}")
    print(f"spearman(semshift vim, -pytorch-ood ViM) = {rho:.6f}")
    print(
        f"max |score - float64 reference| / max |reference|: semshift {dev:.2e}, "
        f"pytorch-ood {dev_pood:.2e}; load after {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
