"""`semshift benchmark run` against `semshift run` on the config it writes: the overhead of the
benchmark layer (reading the shipped lists, building and validating the config, writing
config.json / benchmark.json).

A sampled ``ssb-imagenet`` tree is generated (``--sample`` images per set, 64x64 JPEGs, only the
sampled files), the model is torchvision's ResNet-18 with seeded random weights saved to a file,
detectors MSP and KNN (so the training set is extracted too). Each command runs in its own
process with ``--force`` (every stage recomputed), alternately, ``--repeats`` times; the best
of each is printed with their ratio. The benchmark layer's own work (building the config from
the shipped lists, validating it, writing config.json and benchmark.json) is also timed alone,
in process, since on a busy machine the run-to-run noise of whole runs exceeds it. Everything
written is deleted.

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


def benchmark_layer(roots: dict[str, Path], weights: Path, out: Path) -> float:
    """Seconds of what `benchmark run` does before the run: config, validation, two files."""
    import json

    from semshift.catalog import benchmark_config, benchmark_record
    from semshift.run import load_config

    t = time.perf_counter()
    cfg = benchmark_config(
        "ssb-imagenet", roots=roots, model={"name": "resnet18", "weights": str(weights)},
        out=out, detectors=["msp", "knn"], sample=250, train_per_class=1,
    )  # fmt: skip
    load_config(cfg, source="bench")
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    record = benchmark_record("ssb-imagenet", "exact", 250)
    (out / "benchmark.json").write_text(json.dumps(record, indent=2) + "\n")
    return time.perf_counter() - t


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
        # in a fresh process, as `semshift benchmark run` does it (shipped lists not yet read),
        # after the imports `semshift run` needs as well (torch, the model registry, the runner)
        code = (
            "import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; "
            "import semshift.catalog, semshift.run, semshift.features.models; "
            "import bench_benchmark_run as b; "
            "print(b.benchmark_layer({'imagenet1k': Path(sys.argv[2]), "
            "'imagenet21k': Path(sys.argv[3])}, Path(sys.argv[4]), Path(sys.argv[5])))"
        )
        here = str(Path(__file__).resolve().parent)
        argv = [here, str(roots["imagenet1k"]), str(roots["imagenet21k"]), str(weights)]
        layer_s = min(
            float(subprocess.check_output([sys.executable, "-c", code, *argv, str(root / "l")]))
            for _ in range(3)
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    b, r = min(b_s), min(r_s)
    images = 4 * args.sample
    print(f"semshift run (its config.json): {r:7.2f} s  ({images} images, every stage)")
    print(f"semshift benchmark run        : {b:7.2f} s")
    print(f"overhead, whole runs          : {100 * (b / r - 1):+6.1f} %   (target < 5 %)")
    share = 100 * layer_s / r
    print(f"benchmark layer alone         : {layer_s:7.3f} s = {share:.2f} % of the run")


if __name__ == "__main__":
    main()
