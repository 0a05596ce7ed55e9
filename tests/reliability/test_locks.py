"""Concurrent runs into one output folder, or extractions into one store (issue 20, defect 4).

Two ``evaluate`` runs with different detectors into one ``--out`` used to both exit 0 with
the results of one and ``results.json`` of the other. Each folder is now locked: the second
process waits (or exits 2 with ``--no-wait``), and a dead holder's lock is taken over.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from semshift.locking import LOCK_NAME, LockedError, folder_lock, lock_holder
from tests.run.conftest import build_stores

EXE = shutil.which("semshift") or str(Path(sys.executable).parent / "semshift")


def _holder(folder: Path, seconds: float) -> subprocess.Popen[str]:
    """A process that takes the lock on ``folder``, says so, and holds it for ``seconds``."""
    code = textwrap.dedent(f"""
        import time
        from semshift.locking import folder_lock
        with folder_lock({str(folder)!r}):
            print("locked", flush=True)
            time.sleep({seconds})
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def test_the_lock_is_exclusive_and_names_its_holder(tmp_path) -> None:
    with folder_lock(tmp_path / "out") as root:
        holder = lock_holder(root)
        assert holder["pid"] == os.getpid() and holder["host"]
        with pytest.raises(LockedError, match=rf"output folder {tmp_path}/out is in use by pid "
                           rf"{os.getpid()} on "):  # fmt: skip
            with folder_lock(tmp_path / "out", wait=False):
                pass  # pragma: no cover - never entered
    with folder_lock(tmp_path / "out", wait=False):  # released: free again
        pass


def test_a_second_process_waits_for_the_first(tmp_path) -> None:
    proc = _holder(tmp_path, 1.5)
    told: list[str] = []
    t0 = time.monotonic()
    with folder_lock(tmp_path, announce=told.append, poll=0.05):
        waited = time.monotonic() - t0
    proc.wait(timeout=30)
    assert waited > 0.5
    assert len(told) == 1 and f"in use by pid {proc.pid}" in told[0]
    with pytest.raises(LockedError, match="in use by"):
        p2 = _holder(tmp_path, 5)
        try:
            with folder_lock(tmp_path, timeout=0.3, poll=0.05, announce=told.append):
                pass  # pragma: no cover
        finally:
            p2.kill()
            p2.wait()


def test_the_lock_of_a_killed_process_is_taken_over(tmp_path) -> None:
    proc = _holder(tmp_path, 60)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert (tmp_path / LOCK_NAME).exists()  # the file stays, the kernel's lock does not
    with folder_lock(tmp_path, wait=False):
        assert lock_holder(tmp_path)["pid"] == os.getpid()


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return build_stores(tmp_path_factory.mktemp("lock_stores"))


def _evaluate(stores: dict, out: Path, detector: str, *extra: str) -> list[str]:
    return [EXE, "evaluate", "--train", str(stores["train"]), "--test", str(stores["test"]),
            "--ood", f"ood={stores['ood']}", "--detector", detector, "--bootstrap", "0",
            "--no-report", "--quiet", "--out", str(out), *extra]  # fmt: skip


def test_no_wait_exits_2_while_another_run_holds_the_folder(stores, tmp_path) -> None:
    out = tmp_path / "out"
    proc = _holder(out, 60)
    try:
        res = subprocess.run(_evaluate(stores, out, "msp", "--no-wait"), capture_output=True,
                             text=True, timeout=120)  # fmt: skip
    finally:
        proc.kill()
        proc.wait()
    assert res.returncode == 2 and "Traceback" not in res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: output folder ")
    assert f"in use by pid {proc.pid}" in " ".join(res.stderr.split())
    assert not (out / "results.json").exists()


def test_two_concurrent_runs_into_one_folder_do_not_tear_it(stores, tmp_path) -> None:
    out = tmp_path / "out"
    procs = [
        subprocess.Popen(
            _evaluate(stores, out, det), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for det in ("msp", "energy")
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    # whichever finished last: its results, its config and its scores agree
    config = json.loads((out / "results.json").read_text())["config"]
    results = pd.read_parquet(out / "results.parquet")
    assert set(results["detector"].dropna()) == {d["name"] if isinstance(d, dict) else d
                                        for d in config["detectors"]}  # fmt: skip


def test_an_extraction_into_a_locked_store_exits_2(tmp_path) -> None:
    from PIL import Image

    (tmp_path / "imgs" / "a").mkdir(parents=True)
    Image.new("RGB", (8, 8)).save(tmp_path / "imgs" / "a" / "x.png")
    store = tmp_path / "store"
    proc = _holder(store, 60)
    try:
        res = subprocess.run(
            [EXE, "extract", "--model", "resnet18", "--random-init", "--num-classes", "2",
             "--data", str(tmp_path / "imgs"), "--out", str(store), "--no-wait",
             "--no-progress", "--preset", "resize8-crop8", "--workers", "0"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        proc.kill()
        proc.wait()
    assert res.returncode == 2, res.stderr
    assert "error: feature store " in res.stderr and "in use by pid" in res.stderr
    assert not (store / "run.json").exists()


def test_a_folder_only_the_lock_created_is_removed_again(tmp_path) -> None:
    """An error before any output leaves no empty folder behind; written output stays."""
    with pytest.raises(RuntimeError), folder_lock(tmp_path / "new"):
        raise RuntimeError("before any output")
    assert not (tmp_path / "new").exists()
    with folder_lock(tmp_path / "kept") as root:
        (root / "x.txt").write_text("1")
    assert (tmp_path / "kept" / "x.txt").read_text() == "1"
