"""The README's demo results equal a fresh ``semshift demo`` run's (issue 27: reproducible).

A full default demo (about 1.5 minutes on two cores) is run in a temporary folder and
``scripts/readme_demo.py --check`` compares every generated figure of the README with it: the
table, the accuracies, the homoglyphs and the findings. The demo's training runs with pinned
numerics, so this holds whatever the thread count or the machine's load.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "readme_demo.py"


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT
    )


def test_readme_demo_results_equal_a_fresh_demo(tmp_path):
    demo = tmp_path / "demo"
    cmd = "import sys; from semshift.cli import main; main(sys.argv[1:])"
    run = subprocess.run(
        [sys.executable, "-c", cmd, "demo", "--out", str(demo), "--quiet"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    check = _script("--run", str(demo), "--check")
    assert check.returncode == 0, check.stdout[-4000:] + check.stderr[-2000:]
    assert "match the run" in check.stdout

    # the check does see a change: one table cell off by 0.1 fails with a diff naming it
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    row = next(ln for ln in readme.splitlines() if ln.startswith("| msp |"))
    cells = row.split(" | ")
    value, rest = cells[2].split(" ", 1)
    cells[2] = f"{float(value) + 0.1:.1f} {rest}"
    changed = tmp_path / "README.md"
    changed.write_text(readme.replace(row, " | ".join(cells)), encoding="utf-8")
    bad = _script("--run", str(demo), "--check", "--readme", str(changed))
    assert bad.returncode == 1
    assert "-" + " | ".join(cells) in bad.stdout and "+" + row in bad.stdout
