"""Benchmark store verification (every run hashes every store it reads) against a plain read.

A store of N rows x 1,000 logits and 2,048 features (default N = 131,072: 1.6 GB in 32 files)
is written to a temporary folder; :func:`semshift.features.store.verify_store` (every file
``meta.json`` records hashed with XXH3-128, commit records, index, ``skipped.csv``) is timed
against reading the same files into a buffer without hashing, warm (files in the page cache)
and cold (page cache dropped with ``posix_fadvise(DONTNEED)``, where the OS honours it),
alternating, three rounds each. The store is deleted at the end.

Usage::

    python benchmarks/bench_verify.py
    python benchmarks/bench_verify.py --rows 400000 --dir /data/tmp
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from semshift.features.store import verify_store, write_store


def _plain_read(files: list[Path]) -> None:
    buf = memoryview(bytearray(8 << 20))
    for p in files:
        with open(p, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass


def _drop(files: list[Path]) -> None:
    for p in files:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=131_072)
    ap.add_argument("--dir", type=Path, default=None, help="where to write the store")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(dir=args.dir, prefix="bench_verify-"))
    try:
        rng = np.random.default_rng(0)
        n = args.rows
        idx = pd.DataFrame({"path": [f"img/{i:07d}.JPEG" for i in range(n)],
                            "label": np.arange(n) % 1000})  # fmt: skip
        arrays = {"logits": rng.standard_normal((n, 1000), dtype=np.float32),
                  "features": rng.standard_normal((n, 2048), dtype=np.float32)}  # fmt: skip
        write_store(tmp / "s", index=idx, arrays=arrays, shard_size=20_000, fsync=False)
        del arrays
        files = [p for p in (tmp / "s").rglob("*") if p.is_file()]
        gb = sum(p.stat().st_size for p in files) / 1e9
        print(f"store: {n:,} rows, {gb:.2f} GB in {len(files)} files; {os.cpu_count()} CPUs")
        for cold in (False, True):
            for _ in range(3):
                if cold:
                    _drop(files)
                t = time.perf_counter()
                assert verify_store(tmp / "s") == []
                verify = time.perf_counter() - t
                if cold:
                    _drop(files)
                t = time.perf_counter()
                _plain_read(files)
                read = time.perf_counter() - t
                print(f"{'cold' if cold else 'warm'}: verify_store {verify:.2f} s "
                      f"({gb / verify:.1f} GB/s), plain read {read:.2f} s, "
                      f"ratio {verify / read:.2f}")  # fmt: skip
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
