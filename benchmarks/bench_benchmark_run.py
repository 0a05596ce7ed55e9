"""`semshift benchmark run` against `semshift run` on the config it writes: the overhead of the
benchmark layer (reading the shipped lists, building and validating the config, writing
config.json / benchmark.json).

A sampled ``ssb-imagenet`` tree is generated (``--sample`` images per set, 64x64 JPEGs, only the
sampled files), the model is torchvision's ResNet-18 with seeded random weights saved to a file,
detectors MSP and KNN (so the training set is extracted too). Each command runs in its own
process with ``--force`` (every stage recomputed), alternately, ``--repeats`` times; the best
of each is printed with their ratio. Everything written is deleted.

    python benchmarks/bench_benchmark_run.py              # 250 images per set
    python benchmarks/bench_benchmark_run.py --sample 50  # quick
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from semshift.catalog import published_split, ssb_imagenet21k_val_files
from semshift.taxonomy import load_classlist


def _evenly(items: list[str], n: int) -> list[str]:
    items = sorted(items)
    return [items[int(i)] for i in np.floor(np.linspace(0, len(items) - 1, min(n, len(items))))]


def generate(root: Path, n: int) -> dict[str, Path]:
    """The sampled files of ssb-imagenet (train_per_class=1) as 64x64 JPEGs."""
    from PIL import Image

    rng = np.random.default_rng(0)
    wnids = load_classlist("imagenet1k").ids

    def image(path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 255, (64, 64, 3)).astype(np.uint8)).save(path)

    for k in np.floor(np.linspace(0, 999, n)).astype(int).tolist():
        image(root / "in1k" / "train" / wnids[k] / f"{wnids[k]}_0.JPEG")
    for name in _evenly([f"ILSVRC2012_val_{k:08d}.JPEG" for k in range(1, 50_001)], n):
        k = int(name[15:23])
        image(root / "in1k" / "val" / wnids[k % 1000] / name)
    files, bins = ssb_imagenet21k_val_files(), published_split("ssb-imagenet").bins
    for b in ("easy", "hard"):
        for rel in _evenly([f"{w}/{f}" for w in bins[b] for f in files[w]], n):
            image(root / "p21k" / "imagenet21k_val" / rel)
    return {"imagenet1k": root / "in1k", "imagenet21k": root / "p21k"}


def timed(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path("/tmp/semshift_bench_benchmark_run"))
    ap.add_argument("--sample", type=int, default=250)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    import torch
    import torchvision

    root: Path = args.root
    if root.exists():
        shutil.rmtree(root)
    try:
        roots = generate(root, args.sample)
        torch.manual_seed(0)
        weights = root / "resnet18.pt"
        torch.save(torchvision.models.resnet18(num_classes=1000).state_dict(), weights)
        exe = str(Path(sys.executable).with_name("semshift"))
        out = root / "out"
        bench = [exe, "benchmark", "run", "ssb-imagenet", "--model", "resnet18", "--weights",
                 str(weights), "--out", str(out), "--sample", str(args.sample),
                 "--train-per-class", "1", "-d", "msp", "-d", "knn", "--bootstrap", "0",
                 "--force", "--quiet"]  # fmt: skip
        for key, path in roots.items():
            bench += ["--root", f"{key}={path}"]
        plain = [exe, "run", str(out / "config.json"), "--force", "--quiet"]
        timed(bench)  # writes config.json; warms the page cache and the model
        b_s, r_s = [], []
        for _ in range(args.repeats):
            b_s.append(timed(bench))
            r_s.append(timed(plain))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    b, r = min(b_s), min(r_s)
    images = 4 * args.sample
    print(f"semshift run (its config.json): {r:7.2f} s  ({images} images, every stage)")
    print(f"semshift benchmark run        : {b:7.2f} s")
    print(f"overhead                      : {100 * (b / r - 1):+6.1f} %   (target < 5 %)")


if __name__ == "__main__":
    main()
