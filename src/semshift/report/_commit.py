"""The commit record of a run's output folder: a reader tells a finished run from a torn one.

A run (``semshift run`` / ``semshift evaluate``) writes its outputs into ``<output>/.staging/``
(:data:`STAGING_DIR`), laid out as the output folder itself. Only when every stage has finished
are they moved into place (:func:`semshift.run._commit.publish`), one rename per file, and
``commit.json`` (:data:`COMMIT_FILE`) written last: every output file by its path relative to
the folder, with its XXH3-128 checksum. So:

- a run killed or failed before that point leaves the previous run's outputs as they were,
  still committed and readable (a failed run discards its staging folder and, into a folder
  without a committed run, writes its ``results.json`` saying why; a killed one leaves the
  staging folder, and the next run clears it);
- a run killed during the renames (milliseconds) leaves files that no longer match the record:
  :func:`check_committed` refuses the folder (:class:`RunNotFinishedError`) until a run
  finishes;
- a first run killed before its commit leaves no record, only the staging folder: refused as
  well.

``results`` in the record are what readers read (``results.parquet`` / ``.csv`` / ``.json``,
``scores/``, ``sanity/``, ``search*.csv``, ``splits/``, ``config.json``); ``report`` are
``report.html``, ``report.md`` and ``figures/``, views of the results that ``semshift report``
rewrites (so readers do not check them). A folder written by an older semshift has no record
and no staging folder: :func:`check_committed` returns None and readers take it as it is.

The renames guard against a process that is killed; nothing is flushed to disk (``fsync``), so
a power cut may still lose the newest files, which the record then shows as missing or torn.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from semshift import __version__
from semshift.errors import InputError

__all__ = [
    "COMMIT_FILE",
    "STAGING_DIR",
    "CommitRecord",
    "RunNotFinishedError",
    "check_committed",
    "is_report_file",
    "read_commit",
]

#: The commit record, written last.
COMMIT_FILE = "commit.json"
#: Where a run writes its outputs until they are committed.
STAGING_DIR = ".staging"
_FORMAT = 1


class RunNotFinishedError(InputError):
    """The output folder holds no finished run: never committed, or torn by a killed run."""


@dataclass
class CommitRecord:
    """What ``commit.json`` says.

    Attributes
    ----------
    results, report : dict of str to str
        Checksum (``"xxh3_128:<hex>"``) of each file by its POSIX path relative to the folder;
        ``report`` holds ``report.html``, ``report.md`` and ``figures/**``, ``results`` the rest.
    semshift : str
        The version that committed the folder.
    committed : str
        When (ISO 8601, local time).
    """

    results: dict[str, str] = field(default_factory=dict)
    report: dict[str, str] = field(default_factory=dict)
    semshift: str = __version__
    committed: str = ""

    def files(self) -> dict[str, str]:
        """Every file of the record, results then report."""
        return {**self.results, **self.report}

    def to_json(self) -> dict[str, Any]:
        return {"format": _FORMAT, "semshift": self.semshift, "committed": self.committed,
                "results": self.results, "report": self.report}  # fmt: skip


def is_report_file(rel: str) -> bool:
    """Whether a folder-relative POSIX path is part of the report (not of the results)."""
    return rel in ("report.html", "report.md") or rel.startswith("figures/")


def _checksum(path: Path) -> str:
    from semshift.features.store import file_checksum

    return file_checksum(path)


def _again(root: Path) -> str:
    return (
        f"run it again (the semshift run / semshift evaluate command that writes {root}) to "
        "write a whole one"
    )


def read_commit(root: str | os.PathLike[str]) -> CommitRecord | None:
    """The commit record of an output folder, or None when it has none (files not checked).

    Raises
    ------
    RunNotFinishedError
        ``commit.json`` exists but is not a commit record.
    """
    path = Path(root) / COMMIT_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        rec = CommitRecord(
            results={str(k): str(v) for k, v in data["results"].items()},
            report={str(k): str(v) for k, v in data["report"].items()},
            semshift=str(data.get("semshift", "")),
            committed=str(data.get("committed", "")),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise RunNotFinishedError(
            f"output folder {root}: its commit record {COMMIT_FILE} is unreadable ({err}); "
            f"{_again(Path(root))}"
        ) from None
    return rec


def check_committed(root: str | os.PathLike[str]) -> CommitRecord | None:
    """Check that an output folder holds a finished run, every result file as committed.

    Returns
    -------
    CommitRecord or None
        The record; None for a folder of an older semshift (no record, no staging folder),
        which cannot be checked.

    Raises
    ------
    RunNotFinishedError
        A result file is missing or differs from the record (a run was killed while it moved
        its outputs into place), or the folder was never committed (only a staging folder).
    """
    folder = Path(root)
    rec = read_commit(folder)
    if rec is None:
        if (folder / STAGING_DIR).is_dir():
            raise RunNotFinishedError(
                f"output folder {folder} holds no finished run: its outputs were never committed "
                f"(the run was stopped before its end); {_again(folder)}"
            )
        return None
    for rel, want in rec.results.items():
        path = folder / rel
        problem = None
        if not path.is_file():
            problem = "is missing"
        elif _checksum(path) != want:
            problem = "does not match its checksum"
        if problem is not None:
            raise RunNotFinishedError(
                f"output folder {folder}: the run did not finish ({rel} {problem} in "
                f"{COMMIT_FILE}: a run was stopped while writing its outputs); {_again(folder)}"
            )
    return rec
