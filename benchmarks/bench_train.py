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

``--speed`` (issue 33): images/s of ``semshift train`` against a bare PyTorch loop of the same
model, images, batch size, threads, augmentation (torchvision's transforms), SGD and cosine
schedule, on (a) the demo's glyphs (GlyphNet, 32 x 32 grey PNGs rendered by the demo's
renderer) and (b) ResNet-18 (random init) on generated 224 px JPEGs (``imagenet`` preset: a
random 320 x 288 image resized to 256, cropped to 224). Two figures per workload, sides
alternating, fastest of ``--repeats``: the CLI as a user runs it (a fresh process each side:
``semshift train`` against ``python bench_train.py --bare ...``, imports included) and
in-process (``train()`` against the bare loop, setup included). Target: at most 1.5x::

    python benchmarks/bench_train.py --speed --glyph-images 1440 --jpeg-images 192 --epochs 2
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


def bare_loop(
    data: Path, recipe, seed: int, model_name: str = "demo-glyphnet", workers: int = 0
) -> float:
    """Seconds of a plain PyTorch training loop with the recipe's settings (CE label smoothing
    0.3, GlyphNet or torchvision's ResNet-18)."""
    from torch.utils.data import DataLoader
    from torchvision import datasets
    from torchvision import transforms as T

    from semshift.demo.model import MEAN, STD, GlyphNet

    t0 = time.perf_counter()
    torch.manual_seed(seed)
    resize, crop, mean, std = 32, 32, MEAN, STD
    if model_name == "resnet18":
        resize, crop, mean, std = 256, 224, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    tf = T.Compose([
        T.Resize(resize, interpolation=T.InterpolationMode.BILINEAR, antialias=True),
        T.RandomCrop(crop, padding=recipe.crop_padding), T.RandomHorizontalFlip(),
        T.RandAugment(recipe.randaugment_n, recipe.randaugment_m, num_magnitude_bins=31),
        T.ToTensor(), T.Normalize(list(mean), list(std)),
    ])  # fmt: skip
    ds = datasets.ImageFolder(str(data), transform=tf)
    loader = DataLoader(ds, batch_size=recipe.batch_size, shuffle=True, num_workers=workers)
    if model_name == "resnet18":
        from torchvision.models import resnet18

        model: nn.Module = resnet18(num_classes=len(ds.classes))
    else:
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


def semshift_loop(
    data: Path, recipe, seed: int, out: Path, method: str = "ce", model: str = "demo-glyphnet",
    workers: int = 0, cache_bytes: int = 1 << 30, **params,
):  # fmt: skip
    from semshift.training.loop import train
    from semshift.training.recipe import TrainConfig

    shutil.rmtree(out, ignore_errors=True)
    cfg = TrainConfig(model=model, data=str(data), method=method,
                      method_params=params, recipe=recipe, seed=seed)  # fmt: skip
    return train(cfg, out, threads=1, workers=workers, cache_bytes=cache_bytes)


def write_glyphs(root: Path, classes: int, per_class: int, seed: int = 0) -> Path:
    """``root/<char>/<i>.png``: 32 x 32 grey glyphs of Latin capitals in DejaVu Sans, drawn
    by the demo's renderer with random shifts, rotations and scales (as the demo's images)."""
    from PIL import Image

    from semshift.demo.fonts import get_family
    from semshift.demo.render import render_many

    rng = np.random.default_rng(seed)
    fonts = list(get_family("dejavu-sans"))
    chars = [chr(ord("A") + c) for c in range(classes)]
    for c, ch in enumerate(chars):
        params = np.column_stack([
            rng.integers(-2, 3, per_class), rng.integers(-2, 3, per_class),
            rng.uniform(-10, 10, per_class), rng.uniform(0.9, 1.1, per_class),
        ])  # fmt: skip
        imgs = render_many([ch] * per_class, [fonts[k % len(fonts)] for k in range(per_class)],
                           params)  # fmt: skip
        (root / f"c{c:02d}").mkdir(parents=True, exist_ok=True)
        for k, img in enumerate(imgs):
            Image.fromarray(img, mode="L").save(root / f"c{c:02d}" / f"{k:04d}.png")
    return root


def write_jpegs(root: Path, classes: int, per_class: int, seed: int = 0) -> Path:
    """``root/c<k>/<i>.jpg``: 320 x 288 RGB JPEGs (quality 90), smooth colour fields per class."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:288, 0:320].astype(np.float32)
    for c in range(classes):
        (root / f"c{c}").mkdir(parents=True, exist_ok=True)
        for k in range(per_class):
            f = rng.uniform(0.01, 0.08, 3)
            ph = rng.uniform(0, 6.3, 3)
            arr = np.stack([127 + 100 * np.sin(f[j] * (xx + 40 * c) + ph[j] + 0.02 * yy)
                            for j in range(3)], axis=2)  # fmt: skip
            arr += rng.normal(0, 12, arr.shape)
            img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
            img.save(root / f"c{c}" / f"{k:03d}.jpg", quality=90)
    return root


def _rate(x: float) -> str:
    return f"{x:.1f}" if x < 100 else f"{x:.0f}"


def _bare_cli(args) -> None:
    """``--bare DATA``: the bare loop in this process, its seconds on stdout."""
    from semshift.training.recipe import Recipe

    torch.set_num_threads(1)
    recipe = Recipe(epochs=args.epochs, batch_size=args.batch_size, lr=0.05)
    print(bare_loop(Path(args.bare), recipe, 0, args.model, args.workers))


def _speed(args) -> None:
    """The two workloads; each: CLI (fresh processes) and in-process images/s, both sides."""
    import subprocess
    import sys

    from semshift.training.recipe import Recipe

    torch.set_num_threads(1)
    recipe = Recipe(epochs=args.epochs, batch_size=args.batch_size, lr=0.05)
    py = sys.executable
    cli = str(Path(py).with_name("semshift"))
    print(f"load {os.getloadavg()[0]:.1f}; batch {args.batch_size}, {args.epochs} epochs, "
          f"RandAugment {recipe.randaugment_n} {recipe.randaugment_m}, 1 thread, "
          f"{args.workers} workers; fastest of {args.repeats}")  # fmt: skip
    print("| workload | images x epochs | how | semshift img/s | bare img/s | ratio |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="bench_train_") as tmp:
        work = {
            "glyphs, GlyphNet": ("demo-glyphnet",
                                 write_glyphs(Path(tmp) / "g", 12, args.glyph_images // 12)),
            "224 px JPEG, ResNet-18": ("resnet18",
                                       write_jpegs(Path(tmp) / "j", 4, args.jpeg_images // 4)),
        }  # fmt: skip
        for label, (model, data) in work.items():
            n = sum(1 for _ in data.rglob("*.*")) * args.epochs
            if n == 0:  # --glyph-images 0 or --jpeg-images 0: skipped
                continue
            cli_s, bare_cli_s, ours, bare, uncached = [], [], [], [], []
            for _ in range(args.repeats):
                out = Path(tmp) / "out"
                shutil.rmtree(out, ignore_errors=True)
                t0 = time.perf_counter()
                subprocess.run([cli, "train", "--model", model, "--data", str(data), "--out",
                                str(out), "--epochs", str(args.epochs), "--batch-size",
                                str(args.batch_size), "--lr", "0.05", "--threads", "1",
                                "--workers", str(args.workers), "--no-progress"],
                               check=True, stdout=subprocess.DEVNULL)  # fmt: skip
                cli_s.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                subprocess.run([py, __file__, "--bare", str(data), "--model", model, "--epochs",
                                str(args.epochs), "--batch-size", str(args.batch_size),
                                "--workers", str(args.workers)],
                               check=True, stdout=subprocess.DEVNULL)  # fmt: skip
                bare_cli_s.append(time.perf_counter() - t0)
                ours.append(semshift_loop(data, recipe, 0, out, model=model,
                                          workers=args.workers).seconds)  # fmt: skip
                bare.append(bare_loop(data, recipe, 0, model, args.workers))
                run = semshift_loop(data, recipe, 0, out, model=model, workers=args.workers,
                                    cache_bytes=0)  # fmt: skip
                uncached.append(run.seconds)
            for how, a, b in (("CLI (fresh process)", cli_s, bare_cli_s),
                              ("in-process", ours, bare),
                              ("in-process, --cache-mb 0", uncached, bare)):  # fmt: skip
                ra, rb = _rate(n / min(a)), _rate(n / min(b))
                print(f"| {label} | {n // args.epochs} x {args.epochs} | {how} | {ra} | {rb} | "
                      f"{min(a) / min(b):.2f}x |")  # fmt: skip
    print(f"load {os.getloadavg()[0]:.1f} at the end")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--classes", type=int, default=3)
    ap.add_argument("--images", type=int, default=64, help="images per class")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--speed", action="store_true", help="semshift train vs a bare loop")
    ap.add_argument("--glyph-images", type=int, default=1440)
    ap.add_argument("--jpeg-images", type=int, default=192)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--bare", help=argparse.SUPPRESS)
    ap.add_argument("--model", default="demo-glyphnet", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.bare:
        return _bare_cli(args)
    if args.speed:
        return _speed(args)

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
