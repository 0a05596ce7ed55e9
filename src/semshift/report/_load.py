"""Read a run's output directory (docs/design/run.md): the tidy results, provenance and scores.

The report reads only what ``semshift run`` writes: ``results.parquet`` (or ``results.csv``),
``results.json``, ``scores/<set>.parquet``, ``sanity/seed<k>/<set>.parquet`` and, after a
hyperparameter search, ``search.csv`` and ``search_sensitivity.csv``. It reads them only from
a committed folder (:mod:`._commit`): every file as ``commit.json`` records it. A folder of an
older semshift (no record) is read as it is, unless its ``results.json`` says the last run
failed.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from semshift.errors import InputError
from semshift.protocols.registry import report_rows
from semshift.protocols.tidy import RESULT_COLUMNS  # the one definition of the schema
from semshift.report._commit import CommitRecord, RunNotFinishedError, check_committed
from semshift.textio import read_csv, read_json

__all__ = [
    "PROTOCOLS",
    "RESULT_COLUMNS",
    "RunData",
    "as_results",
    "level_sort_key",
    "load_run",
    "ordered_unique",
    "read_search_table",
]

#: The ``protocol`` values of the shipped protocols' rows, in the order the report shows them
#: (from the protocol registry when this module was imported; :meth:`RunData.protocols` reads
#: the registry as it is, protocols registered later included).
PROTOCOLS: tuple[str, ...] = tuple(report_rows())

_STRING_COLUMNS = ("protocol", "set", "split", "semantic_level", "covariate_level", "detector")
_FLOAT_COLUMNS = ("value", "ci_low", "ci_high")
_SPLIT_ORDER = {"easy": 0, "medium": 1, "hard": 2}


def _clean_str(value: Any) -> str | None:
    """A string cell, or None for null / NaN / empty."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if value is pd.NA:
        return None
    text = str(value)
    return text if text != "" else None


def as_results(
    results: pd.DataFrame | str | os.PathLike[str], where: str = "results"
) -> pd.DataFrame:
    """Validate a tidy results table and normalise its dtypes.

    Parameters
    ----------
    results : DataFrame or path
        The tidy table (columns :data:`RESULT_COLUMNS`), or a run's output directory, or a
        ``results.parquet`` / ``results.csv`` file.
    where : str
        Named in error messages.

    Returns
    -------
    DataFrame
        A copy with string columns as Python ``str`` or ``None``, ``value``/``ci_*`` float64,
        ``metric`` str and ``error`` str or ``None``.

    Raises
    ------
    InputError
        A column is missing, or a row has no protocol or metric; or the file is the results
        table of a run folder that holds no finished run (:class:`RunNotFinishedError`).
    """
    if not isinstance(results, pd.DataFrame):
        path = Path(results)
        if path.is_dir():
            return load_run(path).results
        if path.name in ("results.parquet", "results.csv"):
            check_committed(path.parent)
        frame = _read_table(path)
        where = str(path)
    else:
        frame = results
    missing = [c for c in RESULT_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(
            f"{where}: missing column(s) {missing}; a results table has the columns "
            f"{list(RESULT_COLUMNS)} (docs/design/run.md)"
        )
    out = pd.DataFrame(index=pd.RangeIndex(len(frame)))
    for col in (*_STRING_COLUMNS, "metric", "error"):
        out[col] = pd.Series([_clean_str(v) for v in frame[col].tolist()], dtype=object)
    for col in _FLOAT_COLUMNS:
        try:
            out[col] = pd.to_numeric(frame[col], errors="raise").astype(np.float64).to_numpy()
        except (TypeError, ValueError) as exc:
            raise InputError(f"{where}: column {col!r} is not numeric ({exc})") from None
    for col in ("n_id", "n_ood"):
        out[col] = pd.to_numeric(frame[col], errors="coerce").to_numpy()
    no_protocol = out["protocol"].isna().to_numpy()
    # An error row may leave the metric null (protocols.tidy.error_row): it then stands for
    # every metric of its detector / set.
    no_metric = out["metric"].isna().to_numpy() & out["error"].isna().to_numpy()
    for col, bad_mask in (("protocol", no_protocol), ("metric", no_metric)):
        bad = np.flatnonzero(bad_mask)
        if bad.size:
            raise InputError(
                f"{where}: {bad.size} row(s) have no {col}, first at row {int(bad[0])}; "
                f"every results row names its {col} (error rows may leave the metric null)"
            )
    return out[list(RESULT_COLUMNS)]


def _read_table(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise InputError(
            f"{path}: file not found; pass a run's output directory or its results.parquet"
        )
    if path.suffix == ".csv":  # UTF-8 checked, a malformed line named
        return read_csv(path, "results table", keep_default_na=True)
    try:
        return pd.read_parquet(path)
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read as Parquet ({exc})") from None


@dataclass
class RunData:
    """Everything the report reads from one output directory.

    Attributes
    ----------
    root : Path
        The output directory.
    results : DataFrame
        The tidy results (see :func:`as_results`).
    provenance : dict
        The content of ``results.json`` (empty when the file is absent).
    score_files : dict of str to Path
        ``scores/<set>.parquet`` by set name (``id_test`` included), sorted by name.
    sanity_files : dict of str to dict of str to Path
        ``sanity/seed<k>/<set>.parquet`` by seed folder name, then set name.
    search, search_sensitivity : DataFrame or None
        ``search.csv`` (every combination a hyperparameter search tried) and
        ``search_sensitivity.csv`` (the objective per candidate, the other hyperparameters at
        their chosen values); None without a search.
    """

    root: Path
    results: pd.DataFrame
    provenance: dict[str, Any] = field(default_factory=dict)
    score_files: dict[str, Path] = field(default_factory=dict)
    sanity_files: dict[str, dict[str, Path]] = field(default_factory=dict)
    search: pd.DataFrame | None = None
    search_sensitivity: pd.DataFrame | None = None

    def protocols(self) -> list[str]:
        """The protocols present in the results, in the report's order."""
        present = set(self.results["protocol"])
        known = [p for p in report_rows() if p in present]
        return known + sorted(present - set(known))

    def read_scores(self, name: str, columns: Iterable[str] | None = None) -> pd.DataFrame:
        """Read ``scores/<name>.parquet``; with ``columns``, only those the file has."""
        path = self.score_files.get(name)
        if path is None:
            raise InputError(
                f"{self.root / 'scores'}: no score file for set {name!r}; "
                f"present: {sorted(self.score_files)}"
            )
        if columns is None:
            return pd.read_parquet(path)
        import pyarrow.parquet as pq

        have = set(pq.read_schema(path).names)
        return pd.read_parquet(path, columns=[c for c in columns if c in have])


def load_run(output_dir: str | os.PathLike[str]) -> RunData:
    """Read a run's output directory.

    Parameters
    ----------
    output_dir : path
        The ``output`` folder of a run (contains ``results.parquet``).

    Returns
    -------
    RunData

    Raises
    ------
    RunNotFinishedError
        The folder holds no finished run: its outputs were never committed, a file differs
        from its commit record (a run killed part-way), or (a folder without a record) its
        ``results.json`` says the last run failed.
    InputError
        The folder or its results table is missing, or ``results.json`` is not valid JSON.
    """
    root = Path(output_dir)
    if not root.is_dir():
        raise InputError(f"{root}: output directory not found; pass the `output` folder of a run")
    record = check_committed(root)
    provenance: dict[str, Any] = {}
    prov_path = root / "results.json"
    if prov_path.is_file():  # UTF-8 and JSON checked, the file named
        loaded = read_json(prov_path, "run record", hint="")
        if not isinstance(loaded, dict):
            raise InputError(f"{prov_path}: expected a JSON object, got {type(loaded).__name__}")
        provenance = loaded
    notes = provenance.get("notes")
    failed = notes.get("failed") if record is None and isinstance(notes, dict) else None
    if failed:
        raise RunNotFinishedError(
            f"output folder {root}: the last run into it stopped with an error ({failed}); run "
            "it again once that is fixed"
        )
    # the committed files only (with a record): the others belong to no finished run
    tables = [root / "results.parquet", root / "results.csv"]
    table = next((p for p in _listed(root, record, tables) if p.is_file()), None)
    if table is None:
        raise InputError(
            f"{root}: no results.parquet (or results.csv); run `semshift run CONFIG` to make one"
        )
    frame = _read_table(table)
    where = str(table)
    results = as_results(frame, where)
    scores = {p.stem: p for p in _listed(root, record, sorted((root / "scores").glob("*.parquet")))}
    sanity: dict[str, dict[str, Path]] = {}
    seed_dirs = [d for d in (root / "sanity").glob("seed*") if d.is_dir()]
    for seed_dir in sorted(seed_dirs, key=lambda d: level_sort_key(d.name)):
        files = {p.stem: p for p in _listed(root, record, sorted(seed_dir.glob("*.parquet")))}
        if files:
            sanity[seed_dir.name] = files
    search_files = _listed(root, record, [root / "search.csv", root / "search_sensitivity.csv"])
    search = read_search_table(root / "search.csv") if root / "search.csv" in search_files else None
    sensitivity = (
        read_search_table(root / "search_sensitivity.csv")
        if root / "search_sensitivity.csv" in search_files
        else None
    )
    return RunData(root, results, provenance, scores, sanity, search, sensitivity)


def _listed(root: Path, record: CommitRecord | None, paths: list[Path]) -> list[Path]:
    """The paths a committed folder's record lists (all of them without a record)."""
    if record is None:
        return paths
    return [p for p in paths if p.relative_to(root).as_posix() in record.results]


def read_search_table(path: Path) -> pd.DataFrame | None:
    """A search table written by the run (``search.csv`` / ``search_sensitivity.csv``).

    Candidates are kept as the text the run wrote (``None`` and ``NA`` are candidates, not
    missing values); ``value`` is float (NaN for a failed combination), ``chosen`` boolean and
    ``error`` str or None. None when the file is absent.

    Raises
    ------
    InputError
        The file lacks the columns every search table has.
    """
    if not path.is_file():
        return None
    frame = read_csv(path, "search table", dtype=str, keep_default_na=False)
    need = {"detector", "parameter", "candidate", "objective", "value", "chosen", "error"}
    missing = sorted(need - set(frame.columns))
    if missing:
        raise InputError(f"{path}: missing column(s) {missing}; rewrite it with the run")
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce").astype(np.float64)
    frame["chosen"] = frame["chosen"].str.lower().isin(("true", "1"))
    frame["error"] = frame["error"].map(lambda e: e or None).astype(object)
    return frame


def level_sort_key(label: str) -> tuple[int, str, float, str]:
    """Sort key for level / split labels: easy < medium < hard, then numbers, then text.

    A trailing number is compared numerically (``seed10`` after ``seed2``, ``"3"`` after
    ``"1"``).
    """
    low = label.lower()
    if low in _SPLIT_ORDER:
        return (0, "", float(_SPLIT_ORDER[low]), label)
    try:
        return (1, "", float(label), label)
    except ValueError:
        pass
    match = re.fullmatch(r"(.*?)(\d+(?:\.\d+)?)", label)
    if match:
        return (2, match.group(1), float(match.group(2)), label)
    return (3, label, 0.0, label)


def ordered_unique(values: Iterable[Any]) -> list[Any]:
    """Unique non-null values in order of first appearance."""
    seen: dict[Any, None] = {}
    for v in values:
        if v is not None:
            seen.setdefault(v, None)
    return list(seen)
