"""Benchmark the demo's data build (render + train) against bare PIL / PyTorch loops, same run.

``build_demo_data`` with the default sizes in a fresh temporary folder: seconds per step
(glyphs, split, images, train), peak memory (ru_maxrss), closed-set accuracy, then the second,
cached call. References measured in the same process, so a busy machine shows in both:

- **images**: a bare loop of ``ImageDraw.text`` + ``Image.save(PNG)`` per image (no centring,
  no augmentation) over the same number of images;
- **train**: a bare loop of forward + backward + AdamW step of GlyphNet over random tensors with
  the same number of batches, batch size and thread count (the build trains in a child process
  with one thread and pinned kernels, ``train_numerics`` in ``demo.json``; the reference runs
  in this process with one thread and the CPU's own kernels, so the ratio includes the cost of
  the pinning and of starting the child).

Ratios = demo step / reference. Usage::

    python benchmarks/bench_demo.py            # default sizes (48 classes x 60 training images)
    python benchmarks/bench_demo.py --keep /tmp/demo   # keep the built folder
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn


def bare_images(n: int) -> float:
    from PIL import Image, ImageDraw, ImageFont

    from semshift.demo.fonts import FAMILIES

    font = ImageFont.truetype(str(FAMILIES["dejavu-sans"][0].path), 22)
    t0 = time.perf_counter()
    for k in range(n):
        img = Image.new("L", (32, 32), 255)
        ImageDraw.Draw(img).text((6, 2), chr(ord("A") + k % 26), font=font, fill=0)
        img.save(io.BytesIO(), format="PNG")
    return time.perf_counter() - t0


def bare_train(steps: int, batch: int, classes: int, threads: int) -> float:
    from semshift.demo.model import GlyphNet

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    net = GlyphNet(classes)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    x = torch.randn(batch, 3, 32, 32)
    y = torch.randint(0, classes, (batch,))
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = nn.functional.cross_entropy(net(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="build here and keep the folder")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    t_import = time.perf_counter()
    from semshift.demo import DemoParams, build_demo_data

    t_import = time.perf_counter() - t_import
    work = args.keep or Path(tempfile.mkdtemp(prefix="semshift-bench-demo-"))
    params = DemoParams()
    try:
        t0 = time.perf_counter()
        data = build_demo_data(work, seed=args.seed, params=params, progress=False)
        total = time.perf_counter() - t0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        t1 = time.perf_counter()
        again = build_demo_data(work, seed=args.seed, params=params, progress=False)
        cached = time.perf_counter() - t1
        n_images = sum(s.n_images for s in data.sets.values())
        n_train = data.sets["id_train"].n_images
        steps = params.epochs * -(-n_train // params.batch_size)
        ref_img = bare_images(n_images)
        import json

        threads = json.loads((data.root / "demo.json").read_text())["train_numerics"]["threads"]
        ref_train = bare_train(steps, params.batch_size, data.num_classes, threads)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}, "
          f"load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")  # fmt: skip
    print(f"import semshift.demo: {t_import:.2f} s")
    print(f"build (fresh): {total:.1f} s, peak RSS {rss:.0f} MB, {n_images} images, "
          f"{data.num_classes} classes, {len(data.homoglyphs)} homoglyphs excluded")  # fmt: skip
    for step, sec in data.timings.items():
        print(f"  {step:<7} {sec:7.2f} s")
    t_img, t_train = data.timings["images"], data.timings["train"]
    print(f"  images vs bare PIL draw+PNG loop ({n_images} images): "
          f"{t_img:.2f} s / {ref_img:.2f} s = {t_img / ref_img:.2f}x")  # fmt: skip
    print(f"  train vs bare GlyphNet loop ({steps} steps of {params.batch_size}, "
          f"{threads} threads): {t_train:.2f} s / {ref_train:.2f} s = "
          f"{t_train / ref_train:.2f}x")  # fmt: skip
    print(f"second call (cached={again.cached}): {cached:.3f} s")
    print(f"closed-set accuracy on id_test: {100 * data.test_accuracy:.2f} % "
          f"({data.sets['id_test'].n_images} images)")  # fmt: skip
    print("accuracy in other fonts: "
          + ", ".join(f"{k} {100 * v:.1f} %" for k, v in data.font_accuracy.items()))  # fmt: skip
    print("validation accuracy per epoch: "
          + ", ".join(f"{100 * h['val_accuracy']:.1f}" for h in data.history))  # fmt: skip


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
