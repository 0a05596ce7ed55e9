"""Start-up time of the light ``semshift`` commands (issue 33: under 0.3 s each), against a bare
interpreter start measured in the same run.

Each command runs in a fresh process (``python -m semshift.cli ARGS``, the console script's
code), ``--repeats`` times, interleaved with the references so that a change of machine load
hits all alike; the best wall time and the best CPU time (user + system: what a loaded
machine inflates least) of each are printed, with their ratios to ``python -c "import typer"``
(the least any typer command can take), beside ``python -c pass``; ``import pandas`` and
``import semshift.detectors``, which every command paid before, are timed beside them. The
files the commands read (a split manifest, an image table, a store of 6 rows) are written to a
temporary folder and deleted.

    python benchmarks/bench_cli_start.py               # best of 5
    python benchmarks/bench_cli_start.py --repeats 9
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def fixtures(root: Path) -> dict[str, str]:
    """A published split as a manifest, a toy split with its image table, a 6-row store."""
    import numpy as np
    import pandas as pd

    from semshift.catalog import resolve_manifest
    from semshift.features.store import write_store
    from semshift.splits.manifest import SplitManifest

    resolve_manifest("published:ssb-cub").write(root / "cub")
    SplitManifest("toy", {}, "custom", ["a", "b"], {"far": ["c"]}).write(root / "toy")
    pd.DataFrame(
        {"path": ["a/1.png", "b/2.png", "c/3.png"], "set": ["known", "known", "far"],
         "class": ["a", "b", "c"]}
    ).to_csv(root / "images.csv", index=False)  # fmt: skip
    index = pd.DataFrame({"path": [f"im{i}.png" for i in range(6)], "label": [0, 1, 2] * 2})
    logits = np.arange(18, dtype=np.float32).reshape(6, 3)
    write_store(root / "store", index=index, arrays={"logits": logits}, shard_size=4)
    return {"cub": str(root / "cub"), "toy": str(root / "toy"), "store": str(root / "store"),
            "images": str(root / "images.csv")}  # fmt: skip


def commands(f: dict[str, str]) -> dict[str, list[str]]:
    """label -> argv; the references first."""
    cli = [sys.executable, "-m", "semshift.cli"]
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        'python -c "import typer"': [sys.executable, "-c", "import typer"],
        # what the light commands no longer import (every command imported both before)
        'python -c "import pandas"': [sys.executable, "-c", "import pandas"],
        'python -c "import semshift.detectors"': [
            sys.executable,
            "-c",
            "import semshift.detectors",
        ],
        "--help": [*cli, "--help"],
        "--version": [*cli, "--version"],
        "evaluate --help": [*cli, "evaluate", "--help"],
        "splits ssb --help": [*cli, "splits", "ssb", "--help"],
        "taxonomy show dog.n.01": [*cli, "taxonomy", "show", "dog.n.01"],
        "taxonomy distance dog.n.01 cat.n.01": [
            *cli,
            "taxonomy",
            "distance",
            "dog.n.01",
            "cat.n.01",
        ],
        "splits show CUB": [*cli, "splits", "show", f["cub"]],
        "splits compare CUB published:ssb-cub": [
            *cli,
            "splits",
            "compare",
            f["cub"],
            "published:ssb-cub",
        ],
        "splits check TOY --no-hash": [
            *cli,
            "splits",
            "check",
            f["toy"],
            "--images",
            f["images"],
            "--no-hash",
        ],
        "benchmark list": [*cli, "benchmark", "list"],
        "store verify (6 rows)": [*cli, "store", "verify", f["store"]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    root = Path(tempfile.mkdtemp(prefix="semshift-bench-start-"))
    try:
        cmds = commands(fixtures(root))
        wall = dict.fromkeys(cmds, float("inf"))
        cpu = dict.fromkeys(cmds, float("inf"))
        env = {**os.environ, "COLUMNS": "100"}
        for _ in range(args.repeats):
            for label, argv in cmds.items():
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                res = subprocess.run(argv, capture_output=True, env=env, check=False)
                elapsed = time.perf_counter() - t0
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                if res.returncode != 0:
                    raise SystemExit(f"{label}: exit {res.returncode}: {res.stderr.decode()}")
                wall[label] = min(wall[label], elapsed)
                used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
                cpu[label] = min(cpu[label], used)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ref = 'python -c "import typer"'
    print(
        f"best of {args.repeats}; load average {load:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end ({os.cpu_count()} cores)"
    )
    print("| command | wall (s) | x import typer | CPU (s) | x import typer | wall < 0.3 s |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for label in cmds:
        w, c = wall[label], cpu[label]
        met = "yes" if w < 0.3 else "no"
        print(
            f"| `{label}` | {w:.3f} | {w / wall[ref]:.2f} | {c:.3f} | {c / cpu[ref]:.2f} | {met} |"
        )


if __name__ == "__main__":
    main()
