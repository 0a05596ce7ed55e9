"""Benchmark feature extraction and the feature store against bare NumPy / PyTorch, same run.

1. **Extraction throughput**: :func:`semshift.features.extract.extract` (decode, preprocess,
   DataLoader, forward, atomic shard writes with checksums, index, progress bookkeeping) against
   a bare ``model(x)`` loop over the same images already decoded and preprocessed into tensors in
   memory, same batch size, same threads, on the CPU. Overhead = extract / bare - 1 (target: at
   most 15 %). The extraction decodes with ``--workers`` DataLoader processes, so on a machine
   with spare cores the decoding overlaps the forward pass.
2. **Store write / read** of an N x D float32 matrix (default 1,000,000 x 512, 2 GB) against
   ``np.save`` / ``np.load(mmap_mode="r")`` of the same array. Write: ``write_store`` (shards,
   XXH3-128 checksums while writing, Parquet index of N rows, meta) against ``np.save``, both
   with and without ``fsync``. Read: open, then one pass over every row in blocks (column
   sums), against ``np.load(mmap_mode="r")`` and the same blocked pass; the page cache is
   dropped between runs where possible (``posix_fadvise(DONTNEED)``). The reads alternate
   which goes first, after one untimed round; the ratio is the median of the per-repetition
   ratios. Target: within 1.5x.

Usage::

    nice python benchmarks/bench_extract.py
    python benchmarks/bench_extract.py --images 96 --rows 200000 --write benchmarks/RESULTS_x.md
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from semshift.features import open_store, write_store
from semshift.features.data import ImageDataset, image_folder
from semshift.features.extract import extract
from semshift.features.models import load_model


def _images(root: Path, n: int, size: int) -> None:
    from PIL import Image

    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:size, 0:size] / size
    for i in range(n):
        folder = root / f"c{i % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        base = np.stack([xx, yy, np.sin(7 * xx * (i % 5 + 1))], -1) * 120 + 60
        arr = np.clip(base + rng.normal(0, 25, base.shape), 0, 255).astype(np.uint8)
        Image.fromarray(arr).save(folder / f"{i:05d}.jpg", quality=90)


def _drop_cache(path: Path) -> None:
    for f in [path] if path.is_file() else path.rglob("*"):
        if f.is_file():
            fd = os.open(f, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def bench_extraction(args: argparse.Namespace, tmp: Path) -> list[str]:
    torch.set_num_threads(args.threads)
    data = tmp / "images"
    _images(data, args.images, args.image_size)
    model = load_model(args.model, random_init=True, num_classes=1000)
    src = image_folder(data)
    ds = ImageDataset(src, args.preset, model.mean, model.std)
    tensors = [ds[i][0] for i in range(len(ds))]
    batches = [
        torch.stack(tensors[i : i + args.batch_size])
        for i in range(0, len(tensors), args.batch_size)
    ]
    with torch.inference_mode():
        model(batches[0][:2])  # warm-up
    rows = []
    bare, ours = [], []
    for rep in range(args.repeats):
        t0 = time.perf_counter()
        with torch.inference_mode():
            for x in batches:
                model(x)
        bare.append(time.perf_counter() - t0)
        out = tmp / f"store{rep}"
        t0 = time.perf_counter()
        summary = extract(
            model, src, out, preset=args.preset, batch_size=args.batch_size,
            shard_size=args.shard_size, workers=args.workers, device="cpu", progress=False,
        )  # fmt: skip
        ours.append(time.perf_counter() - t0)
        assert summary.n_stored == args.images
        shutil.rmtree(out)
    b, o = min(bare), min(ours)
    rows.append(
        f"| extraction, {args.model} {args.preset}, {args.images} images, batch "
        f"{args.batch_size}, {args.threads} thread(s), workers {args.workers} | "
        f"{args.images / o:.1f} img/s ({o:.2f} s) | bare model(x): {args.images / b:.1f} img/s "
        f"({b:.2f} s) | overhead {100 * (o / b - 1):+.1f} % |"
    )
    return rows


def bench_store(args: argparse.Namespace, tmp: Path) -> list[str]:
    n, d = args.rows, args.dim
    rng = np.random.default_rng(0)
    arr = np.empty((n, d), np.float32)
    for s in range(0, n, 100_000):
        arr[s : s + 100_000] = rng.standard_normal((min(100_000, n - s), d), np.float32)
    index = pd.DataFrame({"path": [f"train/{i:08d}.JPEG" for i in range(n)]})
    gb = arr.nbytes / 1e9
    rows = []
    results: dict[str, float] = {}
    # interleaved and repeated (the minimum counts): the page cache and the disk's write-back
    # make the first large write of a run slower than the next ones
    for _rep in range(args.store_repeats):
        for fsync in (False, True):
            for what in ("np", "store"):
                p, sp = tmp / "plain.npy", tmp / "store"
                p.unlink(missing_ok=True)
                shutil.rmtree(sp, ignore_errors=True)
                os.sync()
                t0 = time.perf_counter()
                if what == "np":
                    with open(p, "wb") as f:
                        np.save(f, arr)
                        if fsync:
                            f.flush()
                            os.fsync(f.fileno())
                else:
                    write_store(sp, index=index, arrays={"features": arr},
                                shard_size=args.shard_rows, fsync=fsync)  # fmt: skip
                dt = time.perf_counter() - t0
                key = f"{what}_write_{fsync}"
                results[key] = min(results.get(key, np.inf), dt)
    np.save(tmp / "plain.npy", arr)
    # read: open + one blocked pass over all rows, cold; repeated, alternating which goes
    # first, each after a sync and a pause (this machine's virtual disk varies by 2-4x between
    # reads of the same file); the median and the minimum are reported
    reads: dict[str, list[float]] = {"np": [], "store": [], "open": []}

    def read_np() -> None:
        _drop_cache(tmp / "plain.npy")
        t0 = time.perf_counter()
        m = np.load(tmp / "plain.npy", mmap_mode="r")
        acc = np.zeros(d, np.float64)
        for s in range(0, n, args.block_rows):
            acc += m[s : s + args.block_rows].sum(axis=0, dtype=np.float64)
        reads["np"].append(time.perf_counter() - t0)
        sums["np"] = acc

    def read_store() -> None:
        _drop_cache(tmp / "store")
        t0 = time.perf_counter()
        st = open_store(tmp / "store")
        reads["open"].append(time.perf_counter() - t0)
        acc = np.zeros(d, np.float64)
        for block in st.blocks("features", rows=args.block_rows):
            acc += block["features"].sum(axis=0, dtype=np.float64)
        reads["store"].append(time.perf_counter() - t0)
        sums["store"] = acc

    sums: dict[str, np.ndarray] = {}
    # one untimed round first: the first cold reads after the writes above are slowed by the
    # disk still settling them, for whichever of the two comes first
    for rep in range(-1, args.store_repeats):
        for fn in (read_np, read_store) if rep % 2 == 0 else (read_store, read_np):
            os.sync()
            time.sleep(2.0)
            fn()
        if rep < 0:
            for v in reads.values():
                v.clear()
    assert np.allclose(sums["np"], sums["store"])
    results["np_read"] = float(np.median(reads["np"]))
    results["store_read"] = float(np.median(reads["store"]))
    # each repetition's two reads ran back to back: the median of their ratios is robust to the
    # disk's drift between repetitions
    results["read_ratio"] = float(np.median(np.array(reads["store"]) / np.array(reads["np"])))
    results["np_read_min"], results["store_read_min"] = min(reads["np"]), min(reads["store"])
    results["store_open"] = float(np.median(reads["open"]))
    st = open_store(tmp / "store")
    t0 = time.perf_counter()
    sel = st.select(np.arange(n) % 10 == 0).arrays("features")[0]
    results["store_select"] = time.perf_counter() - t0
    assert sel.shape == (n // 10 + (n % 10 > 0), d)
    for fsync in (False, True):
        w_np, w_st = results[f"np_write_{fsync}"], results[f"store_write_{fsync}"]
        rows.append(
            f"| write {n:,} x {d} float32 ({gb:.2f} GB), fsync {'on' if fsync else 'off'} | "
            f"store {w_st:.2f} s ({gb / w_st:.2f} GB/s) | np.save {w_np:.2f} s "
            f"({gb / w_np:.2f} GB/s) | {w_st / w_np:.2f}x |"
        )
    r_np, r_st = results["np_read"], results["store_read"]
    m_np, m_st = results["np_read_min"], results["store_read_min"]
    rows.append(
        f"| read (open + blocked pass over all rows, cold cache; median of "
        f"{args.store_repeats}, min in brackets; ratio: median of the paired ratios, ratio of "
        f"medians and of minima in brackets) | store {r_st:.2f} s ({m_st:.2f}; open "
        f"{1000 * results['store_open']:.0f} ms) | np.load(mmap) {r_np:.2f} s ({m_np:.2f}) | "
        f"{results['read_ratio']:.2f}x ({r_st / r_np:.2f}x, {m_st / m_np:.2f}x) |"
    )
    pairs = ", ".join(f"{a / b:.2f}" for a, b in zip(reads["store"], reads["np"], strict=True))
    rows.append(f"| read: the paired ratios, in order | {pairs} | | |")
    rows.append(
        f"| select every 10th row ({n // 10:,} rows, gathered) | "
        f"store {results['store_select']:.2f} s | - | - |"
    )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--preset", default="imagenet")
    ap.add_argument("--images", type=int, default=128)
    ap.add_argument("--image-size", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--shard-size", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--store-repeats", type=int, default=2)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--shard-rows", type=int, default=65_536)
    ap.add_argument("--block-rows", type=int, default=65_536)
    ap.add_argument("--no-extraction", action="store_true", help="Only the store figures.")
    ap.add_argument("--write", type=Path, help="Append the table to this Markdown file.")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="semshift-bench-", dir=os.environ.get("BENCH_TMP")))
    try:
        rows = [] if args.no_extraction else bench_extraction(args, tmp)
        rows += bench_store(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    head = [
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.2f}; torch {torch.__version__}, numpy {np.__version__}",
        "",
        "| what | semshift | reference | ratio / overhead |",
        "| --- | --- | --- | --- |",
    ]
    text = "\n".join(head + rows)
    print(text)
    if args.write:
        with open(args.write, "a") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
