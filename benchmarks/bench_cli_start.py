"""Start-up time of the light ``semshift`` commands (issue 33: under 0.3 s each), against a bare
interpreter start measured in the same run.

Each command runs in a fresh process (``python -m semshift.cli ARGS``, the console script's
code), ``--repeats`` times, interleaved with the references so that a change of machine load
hits all alike; the best wall time and the best CPU time (user + system: what a loaded
machine inflates least) of each are printed, with their ratios to ``python -c "import typer"``
(the least any typer command can take), beside ``python -c pass``; ``import pandas``,
``import numpy`` and ``import semshift.detectors`` are timed beside them, and the help page of
a two-command typer app (``tiny app --help``: what typer and rich take to print any help). The
files the commands read (a split manifest, an image table, a store of 6 rows) are written to a
temporary folder and deleted.

``--base SRC`` runs every command a second time, interleaved, with ``PYTHONPATH=SRC`` (an older
tree's ``src``: ``git archive 5233a45 | tar -x -C /tmp/base``), and prints its CPU time and the
ratio beside. ``--bytecode`` lets the children write and read bytecode (in a temporary
``PYTHONPYCACHEPREFIX``, one warm-up run first), as an installed package has it; by default
they run as this environment does, with ``PYTHONDONTWRITEBYTECODE=1`` when it is set: every
semshift module compiled from source at every start.

    python benchmarks/bench_cli_start.py               # best of 5
    python benchmarks/bench_cli_start.py --repeats 9 --base /tmp/base/src --bytecode
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


#: a typer app of two commands: its --help is what typer and rich take to print a help page
_TINY = """
import typer
app = typer.Typer(help="A tiny app.", add_completion=False)
@app.command()
def hello(name: str, count: int = 1) -> None:
    \"\"\"Say hello.\"\"\"
@app.command()
def bye(name: str) -> None:
    \"\"\"Say bye.\"\"\"
app()
"""


def commands(f: dict[str, str]) -> dict[str, list[str]]:
    """label -> argv; the references first."""
    cli = [sys.executable, "-m", "semshift.cli"]
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        'python -c "import typer"': [sys.executable, "-c", "import typer"],
        # what the light commands no longer import (every command imported both before)
        'python -c "import pandas"': [sys.executable, "-c", "import pandas"],
        'python -c "import numpy"': [sys.executable, "-c", "import numpy"],
        "tiny typer app --help": [sys.executable, "-c", _TINY, "--help"],
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


def _time(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(argv, capture_output=True, env=env, check=False)
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise SystemExit(f"{argv}: exit {res.returncode}: {res.stderr.decode()}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--base", help="src folder of an older tree, timed beside (PYTHONPATH)")
    parser.add_argument("--bytecode", action="store_true", help="children keep bytecode")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    root = Path(tempfile.mkdtemp(prefix="semshift-bench-start-"))
    try:
        cmds = commands(fixtures(root))
        env = {**os.environ, "COLUMNS": "100"}
        if args.bytecode:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
        sides = {"new": env}
        if args.base:
            sides["base"] = {**env, "PYTHONPATH": args.base}
            if args.bytecode:
                sides["base"]["PYTHONPYCACHEPREFIX"] = str(root / "pycache-base")
        best = {(side, label): (float("inf"), float("inf")) for side in sides for label in cmds}
        if args.bytecode:  # one warm-up run of each: the bytecode is written
            for side_env in sides.values():
                for argv in cmds.values():
                    _time(argv, side_env)
        for _ in range(args.repeats):
            for label, argv in cmds.items():
                for side, side_env in sides.items():
                    if side == "base" and label.startswith("python -c"):
                        continue  # the references run once per round
                    w, c = _time(argv, side_env)
                    old = best[side, label]
                    best[side, label] = (min(old[0], w), min(old[1], c))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ref = 'python -c "import typer"'
    wall = {k: v[0] for k, v in best.items()}
    cpu = {k: v[1] for k, v in best.items()}
    print(
        f"best of {args.repeats}; load average {load:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end ({os.cpu_count()} cores); bytecode "
        f"{'kept' if args.bytecode else 'as the environment says'}"
        f" (PYTHONDONTWRITEBYTECODE={env.get('PYTHONDONTWRITEBYTECODE', '')!r})"
    )
    head = "| command | wall (s) | x import typer | CPU (s) | x import typer | wall < 0.3 s |"
    rule = "| --- | ---: | ---: | ---: | ---: | --- |"
    if args.base:
        head += " base CPU (s) | new / base |"
        rule += " ---: | ---: |"
    print(head)
    print(rule)
    for label in cmds:
        w, c = wall["new", label], cpu["new", label]
        met = "yes" if w < 0.3 else "no"
        line = (
            f"| `{label}` | {w:.3f} | {w / wall['new', ref]:.2f} | {c:.3f} | "
            f"{c / cpu['new', ref]:.2f} | {met} |"
        )
        if args.base:
            b = cpu["base", label]
            line += " - | - |" if b == float("inf") else f" {b:.3f} | {c / b:.2f} |"
        print(line)


if __name__ == "__main__":
    main()
