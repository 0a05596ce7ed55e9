"""A run's outputs are committed at once; readers refuse a torn folder (issue 27, item 8).

``kill -9`` during the final writes of ``semshift evaluate`` left ``results.parquet`` of the new
run beside ``results.csv``, ``results.json`` and ``config.json`` of the old one, and
``semshift report`` rendered the mixture with exit 0. A run now writes into ``.staging/`` and
only a finished run moves its files into place, ``commit.json`` (every file's checksum) last:
a run killed before that leaves the previous run committed and readable; one killed while it
moves its files leaves a folder that readers refuse (one line, exit 2) until a run finishes.

The kills are real: the ``semshift`` command runs in a child process whose ``os.replace``
sends the process SIGKILL just before a chosen file is renamed into place.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
import yaml

from semshift.report import (
    COMMIT_FILE,
    STAGING_DIR,
    RunNotFinishedError,
    check_committed,
    load_run,
    read_commit,
)
from semshift.report._load import as_results
from semshift.run import run
from tests.run.conftest import base_config, build_stores

#: ``semshift ARGS`` in this interpreter; SIGKILL just before ``os.replace`` puts a file at
#: TARGET (``name:<file name>``: the first file of that name anywhere; ``path:<path>``: that path)
_KILLER = textwrap.dedent("""
    import os, signal, sys
    how, _, target = sys.argv[1].partition(":")
    real = os.replace
    def replace(src, dst, *args, **kwargs):
        dst_path = os.path.abspath(os.fspath(dst))
        hit = os.path.basename(dst_path) == target if how == "name" else dst_path == target
        if hit:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(src, dst, *args, **kwargs)
    os.replace = replace
    from semshift.cli import main
    main(sys.argv[2:])
""")


def _killed(target: str, args: list[str]) -> None:
    """Run ``semshift args`` in a child process killed at ``target``; it must have been."""
    res = subprocess.run([sys.executable, "-c", _KILLER, target, *args], capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert res.returncode == -signal.SIGKILL, (res.returncode, res.stderr[-2000:])


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return build_stores(tmp_path_factory.mktemp("commit_stores"))


def _evaluate(stores: dict, out: Path, detector: str, *extra: str) -> list[str]:
    return ["evaluate", "--train", str(stores["train"]), "--test", str(stores["test"]),
            "--ood", f"ood={stores['ood']}", "--detector", detector, "--bootstrap", "0",
            "--quiet", "--out", str(out), *extra]  # fmt: skip


def _run_yaml(stores: dict, out: Path, detector: str, report: bool) -> Path:
    cfg = base_config(stores, out, detectors=[detector], protocols={"osr": {}},
                      bootstrap={"n_resamples": 0},
                      report={"formats": ["md"]} if report else None)  # fmt: skip
    path = out.parent / f"{out.name}-{detector}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _command(kind: str, stores: dict, out: Path, detector: str, report: bool) -> list[str]:
    if kind == "evaluate":
        return _evaluate(stores, out, detector, "--report" if report else "--no-report")
    return ["run", str(_run_yaml(stores, out, detector, report)), "--quiet"]


def _snapshot(out: Path) -> dict[str, bytes]:
    """The bytes of every committed file."""
    rec = read_commit(out)
    assert rec is not None
    return {rel: (out / rel).read_bytes() for rel in rec.files()}


def _detectors(out: Path) -> set[str]:
    return set(load_run(out).results["detector"].dropna())


def _one_error_line(res) -> str:
    assert res.returncode == 2, (res.returncode, res.stdout[-400:], res.stderr)
    assert "Traceback" not in res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.mark.parametrize("kind", ["evaluate", "run"])
def test_a_rerun_killed_while_writing_its_results_leaves_the_previous_run_committed(
    stores, tmp_path, cli, kind
) -> None:
    out = tmp_path / "out"
    res = cli(_command(kind, stores, out, "msp", report=True))
    assert res.returncode == 0, res.stderr
    before = _snapshot(out)
    assert {"results.parquet", "results.csv", "results.json", "report.md"} <= set(before)
    assert ("config.json" in before) == (kind == "evaluate")
    # the re-run with another detector dies just before its results.csv is renamed into place
    _killed("name:results.csv", _command(kind, stores, out, "energy", report=True))
    assert _snapshot(out) == before  # every committed file as it was, the record too
    assert check_committed(out) is not None and _detectors(out) == {"msp"}
    res = cli(["report", str(out), "--format", "md"])
    assert res.returncode == 0 and "warning" not in res.stdout, res.stderr
    assert "| msp" in (out / "report.md").read_text()
    # the same re-run, not killed: committed, its staging folder gone
    res = cli(_command(kind, stores, out, "energy", report=True))
    assert res.returncode == 0, res.stderr
    assert _detectors(out) == {"energy"} and not (out / STAGING_DIR).exists()
    provenance = json.loads((out / "results.json").read_text())
    assert [d if isinstance(d, str) else d["name"]
            for d in provenance["config"]["detectors"]] == ["energy"]  # fmt: skip
    if kind == "evaluate":  # the config of the run whose results these are
        config = json.loads((out / "config.json").read_text())
        assert config["detectors"] == [{"name": "energy", "params": {}}]
    assert "| energy" in (out / "report.md").read_text()


def test_a_rerun_killed_while_moving_its_outputs_into_place_is_refused_until_run_again(
    stores, tmp_path, cli
) -> None:
    out = tmp_path / "out"
    assert cli(_evaluate(stores, out, "msp", "--no-report")).returncode == 0
    # killed in the middle of the renames (config.json and results.csv moved, the rest not)
    _killed(f"path:{out / 'results.json'}", _evaluate(stores, out, "energy", "--no-report"))
    res = cli(["report", str(out)])
    line = _one_error_line(res)
    assert line.startswith(f"error: output folder {out}: the run did not finish (")
    assert "does not match its checksum in commit.json" in line and "run it again" in line
    assert not (out / "report.html").exists()
    with pytest.raises(RunNotFinishedError, match="the run did not finish"):
        as_results(out / "results.parquet")  # the table alone is refused too
    assert cli(_evaluate(stores, out, "energy", "--no-report")).returncode == 0
    assert _detectors(out) == {"energy"}
    res = cli(["report", str(out)])
    assert res.returncode == 0, res.stderr


def test_a_first_run_killed_before_its_commit_is_refused(stores, tmp_path, cli) -> None:
    out = tmp_path / "out"
    _killed("name:results.parquet", _evaluate(stores, out, "msp", "--no-report"))
    assert not (out / COMMIT_FILE).exists() and (out / STAGING_DIR).is_dir()
    line = _one_error_line(cli(["report", str(out)]))
    assert line == (
        f"error: output folder {out} holds no finished run: its outputs were never committed "
        f"(the run was stopped before its end); run it again (the semshift run / semshift "
        f"evaluate command that writes {out}) to write a whole one"
    )
    assert cli(_evaluate(stores, out, "msp", "--no-report")).returncode == 0
    assert _detectors(out) == {"msp"} and not (out / STAGING_DIR).exists()


def test_a_committed_file_that_changed_or_went_missing_is_named(stores, tmp_path) -> None:
    out = tmp_path / "out"
    run(base_config(stores, out, detectors=["msp"], protocols={"osr": {}},
                    bootstrap={"n_resamples": 0}), progress=False)  # fmt: skip
    rec = check_committed(out)
    assert rec is not None and "scores/id_test.parquet" in rec.results
    assert set(load_run(out).score_files) == {"id_test", "easy", "hard", "cov"}
    scores = out / "scores" / "easy.parquet"
    scores.write_bytes(scores.read_bytes()[:-1] + b"\0")
    with pytest.raises(RunNotFinishedError, match=r"\(scores/easy\.parquet does not match its "):
        load_run(out)
    scores.unlink()
    with pytest.raises(RunNotFinishedError, match=r"\(scores/easy\.parquet is missing in commit"):
        load_run(out)


def test_an_unchanged_rerun_links_the_committed_score_tables(stores, tmp_path) -> None:
    out = tmp_path / "out"
    cfg = base_config(stores, out, detectors=["msp"], protocols={"osr": {}},
                      bootstrap={"n_resamples": 0}, report={"formats": ["md"]})  # fmt: skip
    run(cfg, progress=False)
    inode = {p: (out / p).stat().st_ino for p in ("scores/id_test.parquet", "report.md")}
    again = run(cfg, progress=False)
    assert again.stages["evaluate"].cached and again.stages["report"].cached
    assert {p: (out / p).stat().st_ino for p in inode} == inode  # not written again
    assert again.report is not None and again.report.md == out / "report.md"
    assert check_committed(out) is not None
    # a run without a report: the committed report of the previous run goes with it
    run({**cfg, "report": None}, progress=False)
    assert not (out / "report.md").exists() and check_committed(out) is not None
    assert not any(r.startswith("figures/") for r in read_commit(out).files())  # type: ignore[union-attr]


def test_a_failed_rerun_keeps_the_committed_run(stores, tmp_path) -> None:
    from semshift.errors import InputError

    out = tmp_path / "out"
    good = base_config(stores, out, detectors=["msp"], protocols={"osr": {}},
                       bootstrap={"n_resamples": 0})  # fmt: skip
    run(good, progress=False)
    before = _snapshot(out)
    bad = json.loads(json.dumps(good))
    (tmp_path / "not-a-store").mkdir()  # found when the run opens it, after staging began
    bad["data"]["sets"]["easy"]["store"] = str(tmp_path / "not-a-store")
    with pytest.raises(InputError, match="not a feature store"):
        run(bad, progress=False)
    assert _snapshot(out) == before and not (out / STAGING_DIR).exists()
    assert _detectors(out) == {"msp"}
    # into a folder without a committed run, the failure is recorded and readers say why
    fresh = tmp_path / "fresh"
    with pytest.raises(InputError):
        run({**bad, "output": str(fresh)}, progress=False)
    failed = json.loads((fresh / "results.json").read_text())["notes"]["failed"]
    with pytest.raises(RunNotFinishedError, match="the last run into it stopped with an error"):
        load_run(fresh)
    assert failed


def test_a_folder_of_an_older_semshift_is_read_with_a_warning(stores, tmp_path, cli) -> None:
    out = tmp_path / "out"
    run(base_config(stores, out, detectors=["msp"], protocols={"osr": {}},
                    bootstrap={"n_resamples": 0}), progress=False)  # fmt: skip
    (out / COMMIT_FILE).unlink()  # what older versions wrote: no record, no staging folder
    res = cli(["report", str(out), "--format", "md"])
    assert res.returncode == 0, res.stderr
    assert f"warning: {out} has no commit record (written by an older semshift)" in " ".join(
        res.stdout.split()
    )
    assert not (out / COMMIT_FILE).exists()  # not adopted: nothing says it is whole
    # one whose results.json says its last run failed (old versions wrote that over the results)
    prov = json.loads((out / "results.json").read_text())
    prov["notes"]["failed"] = "data.id_test: something went wrong"
    (out / "results.json").write_text(json.dumps(prov))
    line = _one_error_line(cli(["report", str(out)]))
    assert "the last run into it stopped with an error (data.id_test: something" in line


def test_semshift_report_records_the_report_it_rewrites(stores, tmp_path, cli) -> None:
    out = tmp_path / "out"
    run(base_config(stores, out, detectors=["msp"], protocols={"osr": {}},
                    bootstrap={"n_resamples": 0}), progress=False)  # fmt: skip
    assert read_commit(out).report == {}  # type: ignore[union-attr]  # no report configured
    res = cli(["report", str(out), "--format", "md", "--title", "again"])
    assert res.returncode == 0, res.stderr
    rec = read_commit(out)
    assert rec is not None and "report.md" in rec.report
    from semshift.features.store import file_checksum

    assert rec.report["report.md"] == file_checksum(out / "report.md")
    assert check_committed(out) is not None
    assert pd.read_parquet(out / "results.parquet").shape[0] == len(load_run(out).results)
    assert not os.path.exists(out / STAGING_DIR)
