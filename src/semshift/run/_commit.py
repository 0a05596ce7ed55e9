"""Writing a run's outputs aside and committing them (the reader's side: :mod:`semshift.report`).

:func:`start_staging` gives the run an empty ``<output>/.staging/``, where every stage writes
(``RunContext.out``); :func:`carry` links unchanged committed files into it; :func:`publish`
moves the staged files into the output folder and writes ``commit.json`` last
(:data:`semshift.report.COMMIT_FILE`, its format in :mod:`semshift.report._commit`).
:func:`record_report` records the report files that ``semshift report`` rewrote.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from semshift.features.store import atomic_write, file_checksum
from semshift.report import (
    COMMIT_FILE,
    STAGING_DIR,
    CommitRecord,
    RunNotFinishedError,
    is_report_file,
    read_commit,
)

__all__ = ["carry", "committed_files", "publish", "record_report", "start_staging"]


def start_staging(root: str | os.PathLike[str]) -> Path:
    """An empty staging folder in ``root`` (what a killed run left there is removed)."""
    staging = Path(root) / STAGING_DIR
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    return staging


def _staged_files(staging: Path) -> list[str]:
    """Files under ``staging`` (POSIX relative paths, sorted), temporary ``.*`` files left out."""
    out = []
    for dirpath, dirnames, filenames in os.walk(staging):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in filenames:
            if not name.startswith("."):
                out.append((Path(dirpath) / name).relative_to(staging).as_posix())
    return sorted(out)


def _write_record(root: Path, rec: CommitRecord) -> None:
    data = (json.dumps(rec.to_json(), indent=1, sort_keys=True) + "\n").encode()
    atomic_write(root / COMMIT_FILE, lambda f: f.write(data), fsync=False)


def _remove(root: Path, rel: str) -> None:
    """Remove a file of the folder and the folders it leaves empty (not ``root``)."""
    path = root / rel
    path.unlink(missing_ok=True)
    parent = path.parent
    while parent != root and parent.is_dir() and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent


def publish(root: str | os.PathLike[str], staging: str | os.PathLike[str]) -> CommitRecord:
    """Move every staged output into ``root`` and commit them (``commit.json`` last).

    A staged file that is a hard link of the committed file at its place (carried over
    unchanged, :func:`carry`) keeps its recorded checksum; the others are hashed. Files of the
    previous record that this run did not write are removed after the commit, and so are
    figures of an older report that the new one does not list.

    Returns
    -------
    CommitRecord
        The new record.
    """
    root, staging = Path(root), Path(staging)
    try:
        old = read_commit(root)
    except RunNotFinishedError:
        old = None
    known = old.files() if old is not None else {}
    rec = CommitRecord()
    for rel in _staged_files(staging):
        src, dst = staging / rel, root / rel
        same = rel in known and dst.is_file() and os.path.samefile(src, dst)
        checksum = known[rel] if same else file_checksum(src)
        (rec.report if is_report_file(rel) else rec.results)[rel] = checksum
    for rel in [*rec.results, *rec.report]:  # the results first: a kill from here on tears them
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / rel, root / rel)
    rec.committed = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    _write_record(root, rec)
    for rel in sorted(set(known) - set(rec.files())):
        _remove(root, rel)
    if rec.report and (root / "figures").is_dir():  # an older report's figures (no record)
        for path in sorted((root / "figures").rglob("*")):
            rel = path.relative_to(root).as_posix()
            if path.is_file() and not path.name.startswith(".") and rel not in rec.report:
                _remove(root, rel)
    shutil.rmtree(staging, ignore_errors=True)
    return rec


def carry(root: str | os.PathLike[str], staging: str | os.PathLike[str], rels: list[str]) -> bool:
    """Link committed files of ``root`` into ``staging`` (unchanged outputs a run reuses).

    Returns
    -------
    bool
        True when every one of ``rels`` is in the commit record and was linked (copied where
        the file system has no hard links); False, with nothing linked, otherwise.
    """
    root, staging = Path(root), Path(staging)
    try:
        rec = read_commit(root)
    except RunNotFinishedError:
        return False
    have = rec.files() if rec is not None else {}
    if not rels or any(r not in have or not (root / r).is_file() for r in rels):
        return False
    for rel in rels:
        dst = staging / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.unlink(missing_ok=True)
        try:
            os.link(root / rel, dst)
        except OSError:
            shutil.copy2(root / rel, dst)
    return True


def committed_files(root: str | os.PathLike[str], prefixes: tuple[str, ...]) -> list[str]:
    """Files of the commit record under any of ``prefixes`` (none without a record)."""
    try:
        rec = read_commit(root)
    except RunNotFinishedError:
        return []
    if rec is None:
        return []
    return [rel for rel in rec.files() if rel.startswith(prefixes)]


def record_report(root: str | os.PathLike[str]) -> None:
    """Record the report files now in a committed folder (after ``semshift report`` rewrote
    them); a folder without a record is left as it is."""
    folder = Path(root)
    rec = read_commit(folder)
    if rec is None:
        return
    report: dict[str, str] = {}
    for name in ("report.html", "report.md"):
        if (folder / name).is_file():
            report[name] = file_checksum(folder / name)
    if (folder / "figures").is_dir():
        for path in sorted((folder / "figures").rglob("*")):
            if path.is_file() and not path.name.startswith("."):
                report[path.relative_to(folder).as_posix()] = file_checksum(path)
    rec.report = report
    _write_record(folder, rec)
