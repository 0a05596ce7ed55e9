"""Benchmark neco, relation, cadref, caref, cfood and grood against ports of the released code.

Synthetic ImageNet-like data (as ``bench_detectors.py``): non-negative features
``relu(mu_y + 0.3 + noise)`` with sparse class means, the LDA head of the class means and its
logits; 100,000 training features of dimension 2,048 over 1,000 classes, and 10,000 test
features (20 % from new class means). relation and cfood compare every test sample with the
training (reference) set, so their cost is n_test x n_train; the test set is kept at 10,000.

For each detector the same process times semshift's ``fit`` + ``score`` and a straightforward
reference: the port of the released scoring code written for the agreement tests
(tests/detectors/test_<name>.py), run as released (sklearn / float32 torch on the CPU), and
reports the Spearman correlation of the two score vectors. The cfood reference loops over
samples in Python (one row of distances at a time): at full size its fit and score loops are
timed on their first ``--ref-rows`` rows and extrapolated linearly (marked ``*``); its score is
then computed with the reference's radii for those rows and semshift's for the others, so the
agreement column checks both halves. grood's reference back-propagates one sample at a time
(batches of 32): its gradient loops are timed on their first ``--ref-rows`` training and test
rows and extrapolated (``*``), semshift's gradients stand in for the other rows, and the
released search (faiss ``IndexIVFFlat``, nprobe 4, trained on the first 600 batches) runs in
full; the Spearman of semshift against the same bank searched exactly is printed beside it.
Nothing is written to disk.

Usage::

    python benchmarks/bench_detectors2_openood.py            # full size (3 minutes, 2 cores)
    python benchmarks/bench_detectors2_openood.py --small    # quick check
    python benchmarks/bench_detectors2_openood.py --only grood
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import scipy.stats
import torch
from _synthetic import draw, lda_head, logits, sparse_means

from semshift import detectors

Array = np.ndarray
TESTS = Path(__file__).resolve().parents[1] / "tests" / "detectors"
NAMES = ("neco", "relation", "cadref", "caref", "cfood", "grood")


def _load(name: str) -> ModuleType:
    """A test module by file (its reference port), without importing the tests package."""
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", TESTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Data:
    """Synthetic float32 features, LDA head and logits, generated in blocks."""

    def __init__(self, n_train: int, n_test: int, dim: int, classes: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        means = sparse_means(rng, classes, dim)
        self.w, self.b = lda_head(means[:classes].astype(np.float32))
        self.y_train = rng.integers(0, classes, n_train)
        self.h_train = draw(rng, means, self.y_train)
        n_ood = n_test // 5
        y_test = np.r_[rng.integers(0, classes, n_test - n_ood),
                       classes + rng.integers(0, classes, n_ood)]  # fmt: skip
        self.is_ood = y_test >= classes
        self.h_test = draw(rng, means, y_test)
        self.z_train = self.logits(self.h_train)
        self.z_test = self.logits(self.h_test)

    def logits(self, h: Array) -> Array:
        return logits(h, self.w, self.b)


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def run_semshift(
    name: str, params: dict[str, Any], data: Data
) -> tuple[float, Array, detectors.Detector]:
    cls = detectors.get_class(name)
    fit = {"features": data.h_train, "logits": data.z_train, "head": (data.w, data.b),
           "labels": data.y_train}  # fmt: skip
    det = detectors.get(name, **params)
    given = {"features": data.h_test, "logits": data.z_test}
    t_fit, _ = _timed(lambda: det.fit(**{k: v for k, v in fit.items() if k in cls.fit_requires}))
    t_score, scores = _timed(
        lambda: det.score(**{k: v for k, v in given.items() if k in cls.score_requires})
    )
    return t_fit + t_score, scores, det


# -- references: the ports of the released code from the agreement tests ----------------------
def ref_neco(data: Data) -> tuple[float, Array, bool]:
    port = _load("test_neco").reference_neco
    seconds, out = _timed(lambda: port(data.h_train, data.h_test, data.z_test, "vit", 100))
    return seconds, out, False


def ref_relation(data: Data) -> tuple[float, Array, bool]:
    port = _load("test_relation").reference_relation
    seconds, out = _timed(lambda: port(data.h_train, data.z_train, data.h_test, data.z_test, 1))
    return seconds, out, False


def ref_cadref(name: str, data: Data) -> tuple[float, Array, bool]:
    port = _load("test_cadref").reference_scores
    h_train, z_train = data.h_train.astype(np.float64), data.z_train.astype(np.float64)
    h, z = data.h_test.astype(np.float64), data.z_test.astype(np.float64)
    w = data.w.astype(np.float64)
    seconds, out = _timed(lambda: port(h_train, z_train, w, h, z, name, "Energy"))
    return seconds, out, False


def ref_cfood(data: Data, ours: detectors.Detector, rows: int) -> tuple[float, Array, bool]:
    """OpenOOD's cfood setup and postprocess loops (float32 torch), alpha = 0.1, k = 0.01.

    The loops are those of ``reference_cfood`` in tests/detectors/test_cfood.py, inlined so
    that a prefix of each can be timed; the subset is semshift's evenly spaced rows.
    """
    alpha, k = 0.1, 0.01
    t0 = time.perf_counter()
    feats = torch.from_numpy(data.h_train)
    feats = feats / (torch.norm(feats, dim=1, keepdim=True) + 1e-10)
    n_all = feats.size(0)
    n = int(alpha * n_all)
    ref = feats[torch.from_numpy((np.arange(n) * n_all) // n)].contiguous()
    kval = np.concatenate(
        (np.linspace(0.001, 0.1, 100), np.linspace(0.105, 0.5, 81), np.linspace(0.51, 0.99, 49))
    )
    kpos = np.array(kval * n - 1, dtype=int)
    keep = np.concatenate(([True], kpos[:-1] < kpos[1:]))
    kval, kpos = kval[keep], kpos[keep]
    fit_rows = min(rows, n)
    knndst = torch.from_numpy(ours.radii_.T.copy())  # rows past fit_rows: semshift's radii
    t1 = time.perf_counter()
    for i in range(fit_rows):
        dst = torch.sum((ref[i] - ref) ** 2, dim=1)
        dst_sorted = torch.sort(dst, dim=0).values
        knndst[i, :] = dst_sorted[kpos + 1]
    t_loop = (time.perf_counter() - t1) * n / fit_rows
    t_fit = (t1 - t0) + t_loop
    n_test = data.h_test.shape[0]
    score_rows = min(rows, n_test)
    t2 = time.perf_counter()
    feat = torch.from_numpy(data.h_test[:score_rows])
    feat = feat / (torch.norm(feat, dim=1, keepdim=True) + 1e-10)
    kval_t = torch.from_numpy(kval)
    scores = []
    for v in feat:
        dst = torch.sum((v - ref) ** 2, dim=1)
        count = (knndst >= dst.view(n, 1)).sum(dim=0).float() / float(n)
        pos = torch.nonzero(count >= k, as_tuple=False)
        scores.append(kval_t[pos[0, 0]] if pos.numel() > 0 else torch.tensor(1.0))
    t_score = (time.perf_counter() - t2) * n_test / score_rows
    out = -torch.stack(scores).double().numpy()
    return t_fit + t_score, out, fit_rows < n or score_rows < n_test


def ref_grood(data: Data, ours: detectors.Detector, rows: int) -> tuple[float, Array, bool]:
    """OpenOOD's GrOOD (``use_proto_mean``) from the ports in tests/detectors/test_grood.py,
    with its faiss ``IndexIVFFlat`` search; also prints the agreement with an exact search."""
    import faiss

    port = _load("test_grood")
    batch = 32
    y_train = data.y_train
    t0 = time.perf_counter()
    protos, noise = port.reference_prototypes(data.h_train, y_train, data.w.shape[0], batch)
    t_proto = time.perf_counter() - t0
    correct = np.flatnonzero(np.argmax(data.z_train, axis=1) == y_train)
    bank = ours.gradients(data.h_train[correct]).astype(np.float32)  # untimed rows: semshift's
    test = ours.gradients(data.h_test).astype(np.float32)
    n_train, n_test = data.h_train.shape[0], data.h_test.shape[0]
    r_train, r_test = min(rows, n_train), min(rows, n_test)
    t1 = time.perf_counter()
    head = port.reference_gradients(protos, noise, data.h_train[:r_train],
                                    data.z_train[:r_train], y_train[:r_train], batch)  # fmt: skip
    t_train = (time.perf_counter() - t1) * n_train / r_train
    t2 = time.perf_counter()
    zeros = np.zeros((r_test, data.w.shape[0]), dtype=np.float32)
    head_test = port.reference_gradients(protos, noise, data.h_test[:r_test], zeros, None, batch)
    t_test = (time.perf_counter() - t2) * n_test / r_test
    bank[: head.shape[0]] = head.numpy()
    test[:r_test] = head_test.numpy()
    # index_grads: IVF over the first min(600, 0.8 n_batches) batches' gradients, then the rest
    t3 = time.perf_counter()
    n_batches = -(-n_train // batch)
    train_batches = min(600, int(n_batches * 0.8))
    n_first = int(np.searchsorted(correct, train_batches * batch))
    dim = bank.shape[1]
    index = faiss.IndexIVFFlat(faiss.IndexFlatL2(dim), dim, int(4 * np.sqrt(train_batches)),
                               faiss.METRIC_L2)  # fmt: skip
    index.train(bank[:n_first])
    index.add(bank)
    index.nprobe = 4
    dists, _ = index.search(test, 1)
    t_search = time.perf_counter() - t3
    exact = faiss.IndexFlatL2(dim)
    exact.add(bank)
    ref_exact = -exact.search(test, 1)[0][:, 0].astype(np.float64)
    ref = -dists[:, 0].astype(np.float64)
    ours_s = ours.score(features=data.h_test)
    rho = scipy.stats.spearmanr(ours_s, ref_exact).statistic
    print(f"# grood: reference prototypes {t_proto:.1f} s, gradients {t_train + t_test:.0f} s* "
          f"(train {t_train:.0f}, test {t_test:.0f}), IVF index + search {t_search:.1f} s; "
          f"Spearman against the same bank searched exactly {rho:.6f}")  # fmt: skip
    return t_proto + t_train + t_test + t_search, ref, r_train < n_train or r_test < n_test


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small", action="store_true", help="20,000 x 256, 100 classes")
    parser.add_argument("--n-train", type=int, default=100_000)
    parser.add_argument("--n-test", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=2048)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--ref-rows", type=int, default=1000, help="cfood reference loop rows")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--only",
        nargs="+",
        default=NAMES,
        choices=NAMES,
        metavar="NAME",
        help=f"detectors to run (default: all of {', '.join(NAMES)})",
    )
    args = parser.parse_args()
    if args.small:
        args.n_train, args.n_test, args.dim, args.classes = 20_000, 2_000, 256, 100
    t, data = _timed(lambda: Data(args.n_train, args.n_test, args.dim, args.classes, args.seed))
    print(
        f"# {args.n_train:,} x {args.dim:,} training features, {args.classes:,} classes, "
        f"{args.n_test:,} test features (data {t:.1f} s); {platform.processor() or 'cpu'}, "
        f"torch {torch.__version__} with {torch.get_num_threads()} threads, numpy "
        f"{np.__version__}, python {sys.version.split()[0]}"
    )
    print(f"{'detector':10} {'semshift s':>11} {'reference s':>12} {'ratio':>7} {'spearman':>9}")
    for name in args.only:
        params: dict[str, Any] = {}
        if name == "neco" and args.dim <= 100:
            params = {"dim": args.dim // 2}
        ours_s, ours, det = run_semshift(name, params, data)
        if name == "neco":
            ref_s, ref, extrapolated = ref_neco(data)
        elif name == "relation":
            ref_s, ref, extrapolated = ref_relation(data)
        elif name in ("cadref", "caref"):
            ref_s, ref, extrapolated = ref_cadref(name, data)
        elif name == "cfood":
            ref_s, ref, extrapolated = ref_cfood(data, det, args.ref_rows)
        else:
            ref_s, ref, extrapolated = ref_grood(data, det, args.ref_rows)
        rho = scipy.stats.spearmanr(ours[: ref.size], ref).statistic
        mark = "*" if extrapolated else " "
        print(f"{name:10} {ours_s:11.2f} {ref_s:11.2f}{mark} {ref_s / ours_s:7.2f} {rho:9.6f}")
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"# ratio = reference / semshift; * extrapolated from {args.ref_rows:,} rows of each "
          f"loop; peak resident memory {peak_gb:.1f} GB")  # fmt: skip


if __name__ == "__main__":
    main()
