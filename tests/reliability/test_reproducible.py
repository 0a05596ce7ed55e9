"""Reproducible demo numbers (issue 27): GlyphNet's weights do not depend on the thread count,
the load or the CPU's kernels, and the README's demo results equal a fresh demo run's.

The README test runs a full default demo (about 1.5 minutes on two cores) in a temporary folder
and ``scripts/readme_demo.py --check`` compares every generated figure of the README with it:
the table, the accuracies, the homoglyphs and the findings.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from semshift.demo.model import PINNED_NUMERICS, train_pinned
from semshift.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "readme_demo.py"


def _weights(result):
    return {k: v.clone() for k, v in result.adapter.module.state_dict().items()}


def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_pinned_training_is_the_same_bits_whatever_the_threads_and_kernels(monkeypatch):
    """train_pinned: one child process with pinned kernels. Neither the parent's thread count
    nor capping MKL's and oneDNN's instruction sets (what a CPU without AVX-512 does) nor
    ATen's capability changes a bit; the numerics it ran with are recorded."""
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (96, 32, 32), dtype=np.uint8)
    y = np.arange(96) % 4
    seen = []
    kw = dict(epochs=2, batch_size=16, seed=3, progress=lambda d, n: seen.append((d, n)))
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        a = train_pinned(x, y, 4, val_images=x[:8], val_labels=y[:8], **kw)
        torch.set_num_threads(1)
        monkeypatch.setenv("MKL_ENABLE_INSTRUCTIONS", "AVX2")
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
        monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")  # overridden by the pin
        b = train_pinned(x, y, 4, val_images=x[:8], val_labels=y[:8], **kw)
    finally:
        torch.set_num_threads(old)
    assert _same(_weights(a), _weights(b))
    assert a.history == b.history and len(a.history) == 2
    assert seen[:12] == [(i, 12) for i in range(1, 13)]  # 2 epochs x 6 batches, reported live
    num = a.numerics
    assert num["threads"] == 1 and num["mkldnn"] is False
    assert num["mkl_cbwr"] == PINNED_NUMERICS["MKL_CBWR"]
    if num["machine"] == "x86_64":
        assert num["cpu_capability"] == "AVX2"
    with pytest.raises(InputError, match=r"labels must lie in \[0, 4\)"):
        train_pinned(x, y + 1, 4)


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
