"""Failures that ended in a traceback (issue 27, parts 12-14): one ``error:`` line, exit 2.

- Out of memory in ``semshift evaluate`` (the score files' writer refused a thread: results.json
  held the reason, the command re-raised), ``semshift train`` and ``semshift extract`` (torch's
  CPU allocator): the line says what needed how much memory and which option lowers it, and
  what was computed before stays (the run's cache, the shards, the checkpoints).
- Files that are not UTF-8 where no shared reader was used: ``zsl.json``, a store's
  ``skipped.csv`` (and a sample id that is not an integer), a run's ``results.json`` and
  ``results.csv`` read by ``semshift report``, an unfinished store's ``run.json``; and an empty
  ``.mat`` file.
- A full disk: ``write()`` raises ``OSError(ENOSPC)`` without a file name, which printed
  ``error: : No space left on device``; the line names the file now, and ``semshift ensemble``
  leaves no partial CSV. The full disk is simulated (a file object whose writes fail, under the
  output folder only) and, for the ensemble, produced for real with a file-size limit
  (``RLIMIT_FSIZE``: the same failing ``write()``, with ``EFBIG``) on the installed command.

The failures are raised where they happen for real (a thread pool's writer, torch's allocator,
the optimiser step, a file's ``write``), by monkeypatching that spot.
"""

from __future__ import annotations

import errno
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.features.test_ensemble import member_store
from tests.reliability.conftest import extract_args
from tests.run.conftest import build_stores

#: What torch's CPU allocator raises (its own words; 784 MiB asked for).
TORCH_OOM = (
    "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: you "
    "tried to allocate 822083584 bytes. Error code 12 (Cannot allocate memory)"
)


def one_error(res: subprocess.CompletedProcess[str], *needles: str) -> str:
    """The command's only stderr line, checked: exit 2, ``error:`` first, each needle in it."""
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return build_stores(tmp_path_factory.mktemp("tb_stores"))


def test_a_real_torch_allocation_failure_reads_as_what_it_needed() -> None:
    import torch

    from semshift.errors import out_of_memory

    with pytest.raises(RuntimeError) as info:
        torch.empty(1 << 50, dtype=torch.uint8)  # 1 PiB: refused by the allocator
    assert out_of_memory(info.value).startswith(
        "out of memory: an allocation of 1 PiB failed (torch CPU allocator)"
    )
    assert out_of_memory(RuntimeError(TORCH_OOM)).startswith(
        "out of memory: an allocation of 784 MiB failed"
    )
    gpu = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 ...")
    assert out_of_memory(gpu).startswith(
        "out of memory: an allocation of 2.00 GiB failed on the GPU"
    )
    assert out_of_memory(RuntimeError("can't start new thread")).startswith(
        "out of memory: the system refused a new thread"
    )
    assert out_of_memory(RuntimeError("shape mismatch")) is None


def test_evaluate_whose_score_writer_cannot_start_a_thread_is_one_line(
    stores, tmp_path, monkeypatch, cli
) -> None:
    from semshift.run import evaluate as evaluate_mod

    def refused(*args, **kwargs):  # what a thread pool's submit raises at a 2 GB limit
        raise RuntimeError("can't start new thread")

    out = tmp_path / "ev"
    args = [
        "evaluate",
        "--train",
        stores["train"],
        "--test",
        stores["test"],
        "--ood",
        f"far={stores['ood']}",
        "-d",
        "msp",
        "-d",
        "knn",
        "--bootstrap",
        "0",
        "--no-report",
        "--quiet",
        "--out",
        out,
    ]
    monkeypatch.setattr(evaluate_mod, "_write_score_files", refused)
    line = one_error(
        cli(args),
        "out of memory: the system refused a new thread",
        "evaluating",
        "SEMSHIFT_THREADS=1",
        str(out),
    )
    assert "Traceback" not in line
    notes = json.loads((out / "results.json").read_text())["notes"]
    assert "refused a new thread" in notes["failed"]  # the run's record says the same
    monkeypatch.undo()
    again = cli(args)  # the scores computed before are reused from the cache
    assert again.returncode == 0, again.stderr
    record = json.loads((out / "results.json").read_text())
    assert "failed" not in record["notes"]
    reused = record["stages"]["score"]["reused"]  # every detector's scores of every set
    assert sorted(reused) == sorted(
        f"main/{d}/{s}" for d in ("msp", "knn") for s in ("id_test", "far")
    )


def test_train_out_of_memory_keeps_the_finished_epochs(images, tmp_path, monkeypatch, cli) -> None:
    import torch

    calls = {"n": 0}
    real = torch.optim.SGD.step

    def step(self, *args, **kwargs):  # the allocator gives up in the second epoch
        calls["n"] += 1
        if calls["n"] == 4:
            raise RuntimeError(TORCH_OOM)
        return real(self, *args, **kwargs)

    out = tmp_path / "run"
    args = [
        "train",
        "--model",
        "demo-glyphnet",
        "--data",
        images,
        "--out",
        out,
        "--epochs",
        "2",
        "--batch-size",
        "2",
        "--lr",
        "0.05",
        "--randaugment",
        "0",
        "9",
        "--threads",
        "1",
        "--no-progress",
    ]
    monkeypatch.setattr(torch.optim.SGD, "step", step)
    one_error(
        cli(args),
        "out of memory: an allocation of 784 MiB failed",
        "training demo-glyphnet (--batch-size 2",
        "--batch-size (e.g. 1)",
        f"stay in {out}",
        "--resume",
    )
    assert calls["n"] == 4 and (out / "metrics.csv").read_text().count("\n") == 2  # epoch 1
    monkeypatch.undo()
    resumed = cli([*args, "--resume"])
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed after epoch 1" in resumed.stdout


def test_extract_out_of_memory_keeps_the_written_shards(
    images, tiny, tmp_path, monkeypatch, cli
) -> None:
    from semshift.features import extract as extract_mod
    from semshift.features import open_store

    real = extract_mod.normalize_batch
    calls = {"n": 0}

    def normalize(*args, **kwargs):  # the third batch does not fit
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError(TORCH_OOM)
        return real(*args, **kwargs)

    out = tmp_path / "store"
    monkeypatch.setattr(extract_mod, "normalize_batch", normalize)
    one_error(
        cli(extract_args(images, tiny, out)),
        "out of memory: an allocation of 784 MiB",
        "(torch CPU allocator), extracting semshift-test-tiny-cnn (--batch-size 2",
        "smaller --batch-size (e.g. 1)",
        f"written to {out} are kept",
    )
    monkeypatch.undo()
    again = cli(extract_args(images, tiny, out))
    assert again.returncode == 0, again.stderr
    assert "6 of 6 images stored in 3 shards (2 resumed)" in again.stdout
    assert len(open_store(out)) == 6


# --------------------------------------------------------------------------- not UTF-8
def test_zsl_json_that_is_not_utf8(tmp_path, cli) -> None:
    spec = tmp_path / "zsl.json"
    spec.write_bytes(b'{"split": "sp\xe9cial", "store": "s", "embeddings": "e.csv"}')
    one_error(
        cli(["zsl", "run", "--data", tmp_path]),
        f"zero-shot data file {spec} is not UTF-8",
        "byte 0xe9",
    )
    spec.write_text('{"split": "s",\n "store": }')
    one_error(cli(["zsl", "run", "--data", tmp_path]), f"{spec}: not valid JSON (line 2, column 11")


def test_an_empty_mat_file(tmp_path, cli) -> None:
    (tmp_path / "res101.mat").write_bytes(b"")
    (tmp_path / "att_splits.mat").write_bytes(b"")
    one_error(cli(["zsl", "run", "--data", tmp_path]), f"{tmp_path / 'res101.mat'} is empty")
    (tmp_path / "res101.mat").write_bytes(b"MATLAB 5.0 MAT-file" + b"\0" * 20)
    one_error(
        cli(["zsl", "run", "--data", tmp_path]),
        f"{tmp_path / 'res101.mat'}: not a readable .mat file",
    )


def _store_without_skipped_checksum(store: Path, root: Path) -> Path:
    """A copy of ``store`` as an older semshift wrote it: no checksum of skipped.csv."""
    path = Path(shutil.copytree(store, root))
    meta = json.loads((path / "meta.json").read_text())
    meta.pop("skipped", None)
    (path / "meta.json").write_text(json.dumps(meta))
    return path


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b"sample_id,path,reason\n3,caf\xe9.png,unreadable\n", "not UTF-8 text (byte 0xe9"),
        (b"sample_id,path,reason\nabc,x.png,unreadable\n", "line 2: sample_id 'abc' is not an int"),
    ],
    ids=["not-utf8", "sample-id"],
)
def test_a_store_skipped_csv_that_cannot_be_read(
    stores, tmp_path, cli, body: bytes, needle: str
) -> None:
    bad = _store_without_skipped_checksum(stores["train"], tmp_path / "bad")
    (bad / "skipped.csv").write_bytes(body)
    res = cli(
        [
            "evaluate",
            "--train",
            bad,
            "--test",
            stores["test"],
            "--ood",
            f"far={stores['ood']}",
            "-d",
            "msp",
            "--bootstrap",
            "0",
            "--no-report",
            "--quiet",
            "--out",
            tmp_path / "o",
        ]
    )
    line = one_error(res, str(bad), needle)
    assert "skipped.csv" in line


def _old_run_folder(root: Path, stores: dict) -> Path:
    """A finished run's folder as an older semshift left it (no commit record)."""
    from semshift.run import run
    from tests.run.conftest import base_config

    out = root / "run"
    run(base_config(stores, out, detectors=["msp"], protocols={"osr": {}}), progress=False)
    (out / "commit.json").unlink(missing_ok=True)
    return out


def test_report_of_a_run_whose_results_are_not_utf8(stores, tmp_path, cli) -> None:
    out = _old_run_folder(tmp_path, stores)
    good = (out / "results.json").read_bytes()
    (out / "results.json").write_bytes(good.replace(b'"notes"', b'"n\xf6tes"', 1))
    one_error(cli(["report", out]), f"run record {out / 'results.json'} is not UTF-8")
    (out / "results.json").write_bytes(good)
    (out / "results.parquet").unlink()  # the CSV is read
    csv = (out / "results.csv").read_bytes()
    (out / "results.csv").write_bytes(csv.replace(b"msp", b"m\xe4p", 1))
    one_error(cli(["report", out]), f"results table {out / 'results.csv'} is not UTF-8")


def test_resuming_an_extraction_whose_run_json_is_not_utf8(images, tiny, tmp_path, cli) -> None:
    out = tmp_path / "store"
    (out / "shards").mkdir(parents=True)
    (out / "run.json").write_bytes(b'{"model": "r\xe9snet"}')
    line = one_error(
        cli(extract_args(images, tiny, out)),
        f"extraction record {out / 'run.json'} is not UTF-8 text (byte 0xe9",
        "extract into another output directory",
    )
    assert "save it as UTF-8" not in line  # semshift wrote it: no advice about saving it


# --------------------------------------------------------------------------- disk full
class _FullDisk(io.FileIO):
    """A file on a full disk: opening works, every write fails as the kernel's does."""

    def write(self, data):  # type: ignore[override]
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.fixture
def full_disk(monkeypatch) -> callable:
    """``full_disk(folder)``: every file opened for writing under ``folder`` is on a full disk
    (``open``, ``io.open``, hence pathlib and pandas, numpy and json writes)."""
    import builtins

    real = builtins.open

    def install(folder: Path) -> None:
        top = str(folder.resolve())

        def fake(file, mode="r", *args, **kwargs):
            if isinstance(file, (str, os.PathLike)) and set(mode) & set("wax+"):
                path = os.path.abspath(os.fspath(file))
                if path.startswith(top + os.sep):
                    raw = _FullDisk(path, mode.replace("t", "").replace("b", "") or "w")
                    buffered = io.BufferedWriter(raw)
                    if "b" in mode:
                        return buffered
                    return io.TextIOWrapper(
                        buffered,
                        encoding=kwargs.get("encoding") or "utf-8",
                        newline=kwargs.get("newline"),
                    )
            return real(file, mode, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", fake)
        monkeypatch.setattr(io, "open", fake)

    return install


def _zsl_mat(root: Path) -> Path:
    from semshift.training.zsl import write_xlsa
    from tests.training.planted import planted

    return write_xlsa(planted(n_seen=6, n_unseen=3, dim=8, att=4, per_class=6), root / "DATA")


@pytest.mark.parametrize("command", ["ensemble", "zsl-run", "splits-zsl", "splits-ssb"])
def test_a_full_disk_names_the_file_being_written(
    stores, tmp_path, full_disk, cli, command: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    if command == "ensemble":
        a, b = member_store(tmp_path, "r18", 0), member_store(tmp_path, "r50", 1)
        args = ["ensemble", "--member", a, "--member", b, "--out", out / "scores.csv"]
        target = out / "scores.csv"
    elif command == "zsl-run":
        args = ["zsl", "run", "--data", _zsl_mat(tmp_path), "--method", "eszsl", "--out", out]
        target = out / "results.csv"
    elif command == "splits-zsl":
        ids = ["n01440764", "n01443537", "n01484850", "n01491361", "n01494475", "n01496331"]
        (tmp_path / "classes.txt").write_text("\n".join(ids) + "\n")
        (tmp_path / "images.txt").write_text(
            "".join(f"{c}_{k}.jpg {c}\n" for c in ids for k in range(5))
        )
        args = [
            "splits",
            "zsl",
            "--classes",
            tmp_path / "classes.txt",
            "--images",
            tmp_path / "images.txt",
            "--out",
            out,
        ]
        target = out / "images.csv"
    else:
        (tmp_path / "known.txt").write_text("n01440764\nn01443537\n")
        pool = ["n01484850", "n01491361", "n01494475", "n01496331", "n01498041", "n01514668"]
        (tmp_path / "pool.txt").write_text("\n".join(pool) + "\n")
        args = [
            "splits",
            "ssb",
            "--known",
            tmp_path / "known.txt",
            "--pool",
            tmp_path / "pool.txt",
            "--graph",
            "dag",
            "--bin-size",
            "2",
            "--out",
            out,
        ]
        target = None  # the manifest or a table, whichever is written first
    full_disk(out)
    line = one_error(cli(args), "No space left on device", "; free space there or write elsewhere")
    assert ": : " not in line
    named = line.removeprefix("error: cannot write ").split(": No space")[0]
    assert Path(named).parent == out, line
    if target is not None:
        assert Path(named) == target, line
    if command == "ensemble":  # written aside, renamed when complete: nothing partial
        assert not list(out.iterdir())


def _limited(size: int) -> callable:
    """A ``preexec_fn``: files of the child grow to ``size`` bytes; a write past it fails in
    the kernel (EFBIG: like ENOSPC, ``write()`` names no file) instead of killing it."""
    import resource
    import signal

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return limit


def _installed() -> str:
    exe = shutil.which("semshift", path=str(Path(sys.executable).parent))
    assert exe is not None
    return exe


def test_a_real_failing_write_leaves_no_partial_ensemble(tmp_path) -> None:
    """The installed command under a 2 KiB file-size limit: its CSV write fails in the kernel,
    the line names the file and no part of it is left."""
    out = tmp_path / "out"
    out.mkdir()
    a = member_store(tmp_path, "r18", 0, n=200)
    b = member_store(tmp_path, "r50", 1, n=200)
    exe = _installed()
    args = [exe, "ensemble", "--member", str(a), "--member", str(b), "--out", str(out / "s.csv")]
    res = subprocess.run(args, capture_output=True, text=True, preexec_fn=_limited(2048))
    one_error(res, f"cannot write {out / 's.csv'}: File too large")
    assert not list(out.iterdir())  # neither the CSV nor its temporary file
    ok = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert len(pd.read_csv(out / "s.csv")) == 200 and (out / "s.csv").stat().st_size > 2048


def test_a_real_failing_write_of_a_run_names_its_file(stores, tmp_path) -> None:
    """``semshift evaluate`` under a 3 KB file-size limit: the first file of the run that
    outgrows it is named (one of the cache's, written by NumPy)."""
    out = tmp_path / "ev"
    args = [_installed(), "evaluate", "--train", str(stores["train"]), "--test",
            str(stores["test"]), "--ood", f"far={stores['ood']}", "-d", "msp", "--bootstrap",
            "0", "--no-report", "--quiet", "--out", str(out)]  # fmt: skip
    res = subprocess.run(args, capture_output=True, text=True, preexec_fn=_limited(3000))
    line = one_error(res, f"cannot write {out}{os.sep}", ": File too large; free space there")
    assert Path(line.split("cannot write ")[1].split(": File too large")[0]).is_relative_to(out)


def test_a_full_disk_under_a_native_writer_names_the_checkpoint(
    images, tmp_path, monkeypatch, cli
) -> None:
    """safetensors writes in Rust: its error is no OSError (``... (os error 28)``)."""
    import safetensors.torch
    from safetensors import SafetensorError

    def full(tensors, filename, metadata=None):
        Path(filename).write_bytes(b"\x00" * 64)  # what a write cut short leaves
        raise SafetensorError(
            "Error while serializing: I/O error: No space left on device (os error 28)"
        )

    out = tmp_path / "run"
    monkeypatch.setattr(safetensors.torch, "save_file", full)
    args = ["train", "--model", "demo-glyphnet", "--data", images, "--out", out, "--epochs",
            "1", "--batch-size", "2", "--randaugment", "0", "9", "--threads", "1",
            "--no-progress"]  # fmt: skip
    one_error(cli(args), f"cannot write {out / 'checkpoint.safetensors'}: No space left on "
              "device; free space there or write elsewhere")  # fmt: skip
    assert sorted(p.name for p in out.iterdir() if p.name.endswith(".tmp")) == []  # no partial
