"""Benchmark ``semshift.training.loop.train`` against a bare PyTorch loop, and ARPL+CS against CE.

One run, the same process, one torch thread for every side (on this shared 2-core machine two
threads were ~20x slower than one), so a busy machine shows in both sides of each ratio:

- **overhead**: ``train`` with CE (label smoothing 0.3) on GlyphNet against a bare loop of the
  same model, images, augmentation (torchvision's transforms, without the per-sample seeding),
  batches, SGD (lr, momentum, weight decay) and cosine schedule; no checkpoints, no metrics, no
  deterministic mode. Target: at most 1.10x.
- **ARPL+CS / CE**: seconds per epoch of ``train`` with ``arpl_cs`` against ``ce`` on the same
  recipe, at the demo's GAN widths (ngf = ndf = 8) and at OpenOOD's (64). Target: at most 3x
  (for "small" G and D, i.e. small beside the classifier).

Each side runs ``--repeats`` times alternately; the figures are the fastest of each. Usage::

    python benchmarks/bench_train.py                 # 3 classes x 64 images, 3 epochs, batch 32
    python benchmarks/bench_train.py --images 128 --epochs 2
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn


def write_images(root: Path, classes: int, per_class: int, seed: int = 0) -> Path:
    """``root/c<k>/<i>.png``: 32 x 32 RGB noise around a colour per class."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for c in range(classes):
        (root / f"c{c}").mkdir(parents=True, exist_ok=True)
        colour = np.array([(60 * c) % 256, (255 - 70 * c) % 256, (40 + 90 * c) % 256])
        for k in range(per_class):
            arr = np.clip(colour + rng.integers(-60, 61, (32, 32, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(arr).save(root / f"c{c}" / f"{k:03d}.png")
    return root


def bare_loop(data: Path, recipe, seed: int) -> float:
    """Seconds of a plain PyTorch training loop with the recipe's settings (CE, GlyphNet)."""
    from torch.utils.data import DataLoader
    from torchvision import datasets
    from torchvision import transforms as T

    from semshift.demo.model import MEAN, STD, GlyphNet

    t0 = time.perf_counter()
    torch.manual_seed(seed)
    tf = T.Compose([
        T.Resize(32, interpolation=T.InterpolationMode.BILINEAR, antialias=True),
        T.RandomCrop(32, padding=recipe.crop_padding), T.RandomHorizontalFlip(),
        T.RandAugment(recipe.randaugment_n, recipe.randaugment_m, num_magnitude_bins=31),
        T.ToTensor(), T.Normalize(list(MEAN), list(STD)),
    ])  # fmt: skip
    ds = datasets.ImageFolder(str(data), transform=tf)
    loader = DataLoader(ds, batch_size=recipe.batch_size, shuffle=True, num_workers=0)
    model = GlyphNet(len(ds.classes))
    opt = torch.optim.SGD(model.parameters(), lr=recipe.lr, momentum=recipe.momentum,
                          weight_decay=recipe.weight_decay)  # fmt: skip
    sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(
        opt, T_0=recipe.cycle_epochs, eta_min=recipe.lr * 1e-3
    )
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.3)
    for _ in range(recipe.epochs):
        model.train()
        for x, y in loader:
            loss = loss_fn(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        sched.step()
    return time.perf_counter() - t0


def semshift_loop(data: Path, recipe, seed: int, out: Path, method: str = "ce", **params):
    from semshift.training.loop import train
    from semshift.training.recipe import TrainConfig

    shutil.rmtree(out, ignore_errors=True)
    cfg = TrainConfig(model="demo-glyphnet", data=str(data), method=method,
                      method_params=params, recipe=recipe, seed=seed)  # fmt: skip
    return train(cfg, out, threads=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--classes", type=int, default=3)
    ap.add_argument("--images", type=int, default=64, help="images per class")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()

    from semshift.training.recipe import Recipe

    torch.set_num_threads(1)
    recipe = Recipe(epochs=args.epochs, batch_size=args.batch_size, lr=0.05)
    n = args.classes * args.images
    print(f"load {os.getloadavg()[0]:.1f}; {n} images of 32 x 32, batch {args.batch_size}, "
          f"{args.epochs} epochs, RandAugment {recipe.randaugment_n} {recipe.randaugment_m}, "
          "1 thread")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench_train_") as tmp:
        data = write_images(Path(tmp) / "imgs", args.classes, args.images)
        bare, ours = [], []
        for _ in range(args.repeats):
            bare.append(bare_loop(data, recipe, 0))
            ours.append(semshift_loop(data, recipe, 0, Path(tmp) / "ce").seconds)
        print(f"\noverhead: train() {min(ours):.2f} s, bare loop {min(bare):.2f} s, "
              f"ratio {min(ours) / min(bare):.3f} (target <= 1.10)")  # fmt: skip

        print("\nper-epoch seconds (mean over epochs; fastest repeat):")
        print("| method | GAN widths | s / epoch | / CE |")
        print("|---|---|---|---|")
        ce = min(np.mean([h["seconds"] for h in semshift_loop(
            data, recipe, 0, Path(tmp) / "ce").history]) for _ in range(args.repeats))  # fmt: skip
        print(f"| ce | - | {ce:.3f} | 1.00 |")
        for width in (8, 64):
            cs = min(
                np.mean([h["seconds"] for h in semshift_loop(
                    data, recipe, 0, Path(tmp) / "cs", "arpl_cs", ngf=width, ndf=width).history])
                for _ in range(args.repeats)
            )  # fmt: skip
            print(f"| arpl_cs | ngf = ndf = {width} | {cs:.3f} | {cs / ce:.2f} |")
    print(f"load {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
