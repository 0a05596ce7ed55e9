"""`semshift benchmark check` on a generated tree of empty files vs a bare ``os.scandir`` walk.

The tree is what ``ssb-imagenet`` reads: ImageNet-1K ``train/<wnid>/`` (the bulk of the files),
the 50,000 ``val/<wnid>/ILSVRC2012_val_N.JPEG`` files and SSB's 99,000 ImageNet-21K-P winter21
val files. The check
(:func:`semshift.catalog.check_benchmark`, ``train_per_class=50``) lists every folder and
verifies every listed file; the reference walks the same tree with ``os.scandir`` alone
(recursion, ``DirEntry.is_dir``, a count). Both are timed twice, alternately, on a warm page
cache; the best of each is printed with their ratio.

    python benchmarks/bench_check.py --files 200000
    python benchmarks/bench_check.py            # 1.3M files, as ImageNet-1K train
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

from semshift.catalog import check_benchmark, ssb_imagenet21k_val_files
from semshift.taxonomy import load_classlist

VAL_IMAGES = 50_000


def _touch_all(folder: Path, names: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for n in names:
        os.close(os.open(folder / n, os.O_CREAT | os.O_WRONLY, 0o644))


def generate(root: Path, files: int) -> int:
    """Write the tree; return the number of files written."""
    wnids = load_classlist("imagenet1k").ids
    ssb = ssb_imagenet21k_val_files()
    n_ssb = sum(len(v) for v in ssb.values())
    per_class = max(50, (files - n_ssb - VAL_IMAGES) // len(wnids))
    val: dict[str, list[str]] = {w: [] for w in wnids}
    for k in range(1, VAL_IMAGES + 1):  # image k in class folder k mod 1000, as released names
        val[wnids[(k - 1) % len(wnids)]].append(f"ILSVRC2012_val_{k:08d}.JPEG")
    for w in wnids:
        _touch_all(root / "imagenet1k" / "train" / w, [f"{w}_{k}.JPEG" for k in range(per_class)])
        _touch_all(root / "imagenet1k" / "val" / w, val[w])
    for w, names in ssb.items():
        _touch_all(root / "p21k" / "imagenet21k_val" / w, names)
    return len(wnids) * per_class + VAL_IMAGES + n_ssb


def bare_walk(root: Path) -> int:
    """Files under ``root``: ``os.scandir`` recursion, nothing else."""
    count = 0
    stack = [str(root)]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for e in entries:
                if e.is_dir():
                    stack.append(e.path)
                else:
                    count += 1
    return count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path("/tmp/semshift_bench_check"))
    ap.add_argument("--files", type=int, default=1_300_000)
    ap.add_argument("--keep", action="store_true", help="Keep the generated tree.")
    args = ap.parse_args()
    root: Path = args.root
    t0 = time.perf_counter()
    marker = root / ".bench_check_tree"
    if marker.is_file() and marker.read_text() == str(args.files):
        n = bare_walk(root) - 1
        print(f"reusing {root} ({n:,} files)")
    else:
        if root.exists():
            shutil.rmtree(root)
        n = generate(root, args.files)
        marker.write_text(str(args.files))
        print(f"generated {n:,} empty files under {root} in {time.perf_counter() - t0:.1f} s")
    roots = {"imagenet1k": root / "imagenet1k", "imagenet21k": root / "p21k"}
    walk_s, check_s = [], []
    try:
        bare_walk(root)  # warm the page cache for both
        for _ in range(2):
            t = time.perf_counter()
            seen = bare_walk(root)
            walk_s.append(time.perf_counter() - t)
            t = time.perf_counter()
            result = check_benchmark("ssb-imagenet", roots, train_per_class=50)
            check_s.append(time.perf_counter() - t)
    finally:
        if not args.keep:
            shutil.rmtree(root)
    w, c = min(walk_s), min(check_s)
    print(f"bare os.scandir walk : {w:7.2f} s  ({seen:,} entries)")
    print(f"benchmark check      : {c:7.2f} s  ({result.counts})")
    print(f"ratio check / walk   : {c / w:7.2f}x   (target <= 2x, < 30 s at 1.3M files)")


if __name__ == "__main__":
    main()
