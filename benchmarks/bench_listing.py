"""Benchmark listing an image-folder tree against a bare directory scan, in the same run.

A tree of ``--classes`` class folders with ``--per-class`` empty ``.JPEG`` files each (listing
cost does not depend on file contents) is made in a temporary folder. Timed, alternating, for
``--repeats`` rounds:

* ``image_folder(root)``: the class folders, every image's path, name and label;
* ``source.fingerprint()``: SHA-256 over (name, size, label), one ``stat`` per file;
* reference: ``os.scandir`` of every folder (names only), then ``os.stat`` of every file.

ImageNet-1K's training set has 1,000 folders of about 1,281 images; the default tree is a
tenth of that.

Usage::

    python benchmarks/bench_listing.py
    python benchmarks/bench_listing.py --classes 1000 --per-class 1281 --repeats 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from semshift.features.data import image_folder


def make_tree(root: Path, classes: int, per_class: int) -> None:
    for c in range(classes):
        d = root / f"n{c:08d}"
        d.mkdir(parents=True)
        for i in range(per_class):
            (d / f"n{c:08d}_{i:06d}.JPEG").touch()


def bare_scan(root: Path) -> int:
    n = 0
    with os.scandir(root) as top:
        folders = sorted(e.path for e in top if e.is_dir())
    for folder in folders:
        with os.scandir(folder) as entries:
            for e in sorted(e.path for e in entries):
                os.stat(e)
                n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--classes", type=int, default=100)
    ap.add_argument("--per-class", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="semshift-listing-") as tmp:
        root = Path(tmp) / "tree"
        make_tree(root, args.classes, args.per_class)
        n = args.classes * args.per_class
        print(f"{args.classes:,} class folders x {args.per_class:,} files = {n:,} files")
        bare_scan(root)  # warm the dentry cache for every contender alike
        lists, prints, bares = [], [], []
        for r in range(args.repeats):
            t0 = time.perf_counter()
            src = image_folder(root)
            t1 = time.perf_counter()
            src.fingerprint()
            t2 = time.perf_counter()
            assert bare_scan(root) == len(src) == n
            t3 = time.perf_counter()
            lists.append(t1 - t0)
            prints.append(t2 - t1)
            bares.append(t3 - t2)
            print(
                f"  round {r + 1}: image_folder {t1 - t0:.2f} s, fingerprint {t2 - t1:.2f} s | "
                f"bare scandir + stat {t3 - t2:.2f} s"
            )
        li, fp, ba = (statistics.median(v) for v in (lists, prints, bares))
        print(
            f"median: image_folder {li:.2f} s + fingerprint {fp:.2f} s = {li + fp:.2f} s, "
            f"bare scandir + stat {ba:.2f} s: {(li + fp) / ba:.2f}x"
        )


if __name__ == "__main__":
    main()
