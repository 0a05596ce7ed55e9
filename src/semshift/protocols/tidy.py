"""The tidy results table every protocol returns (schema of ``docs/design/run.md``)."""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from semshift.errors import InputError

__all__ = ["RESULT_COLUMNS", "error_row", "results_frame"]

RESULT_COLUMNS: tuple[str, ...] = (
    "protocol",
    "set",
    "split",
    "semantic_level",
    "covariate_level",
    "detector",
    "metric",
    "value",
    "ci_low",
    "ci_high",
    "n_id",
    "n_ood",
    "error",
)
_STRINGS = (
    "protocol",
    "set",
    "split",
    "semantic_level",
    "covariate_level",
    "detector",
    "metric",
    "error",
)
_FLOATS = ("value", "ci_low", "ci_high")
_COUNTS = ("n_id", "n_ood")


def _string(x: Any) -> str | None:
    if x is None or (isinstance(x, float | np.floating) and np.isnan(x)) or x is pd.NA:
        return None
    return str(x)


def _float(x: Any) -> float:
    if x is None or x is pd.NA:
        return float("nan")
    return float(x)


def _count(x: Any) -> Any:
    if x is None or x is pd.NA or (isinstance(x, float | np.floating) and np.isnan(x)):
        return pd.NA
    return int(x)


def results_frame(rows: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """Build the results table from row dicts: fixed columns, order and dtypes.

    Parameters
    ----------
    rows : iterable of mapping
        One dict per result row, keyed by names in :data:`RESULT_COLUMNS`; a missing key means
        null (NaN for ``value`` / ``ci_low`` / ``ci_high``).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`RESULT_COLUMNS` in that order. String columns are ``object`` holding
        ``str`` or ``None``; ``value``, ``ci_low``, ``ci_high`` are float64 (NaN = not
        available); ``n_id``, ``n_ood`` are nullable ``Int64``. An empty input gives an empty
        frame with the same columns and dtypes.

    Raises
    ------
    InputError
        A row with a key that is not a result column, or without ``protocol``.

    Examples
    --------
    >>> df = results_frame([{"protocol": "osr", "metric": "accuracy", "value": 0.5, "n_id": 4}])
    >>> df[["protocol", "detector", "value", "n_id"]].to_dict("records")
    [{'protocol': 'osr', 'detector': None, 'value': 0.5, 'n_id': 4}]
    >>> str(df["n_ood"].dtype), str(df["ci_low"].dtype)
    ('Int64', 'float64')
    """
    known = set(RESULT_COLUMNS)
    cols: dict[str, list[Any]] = {c: [] for c in RESULT_COLUMNS}
    for i, row in enumerate(rows):
        extra = sorted(set(row) - known)
        if extra:
            raise InputError(
                f"result row {i} has unknown column(s) {extra}; columns are {RESULT_COLUMNS}"
            )
        if row.get("protocol") is None:
            raise InputError(f"result row {i} has no protocol")
        for c in _STRINGS:
            cols[c].append(_string(row.get(c)))
        for c in _FLOATS:
            cols[c].append(_float(row.get(c)))
        for c in _COUNTS:
            cols[c].append(_count(row.get(c)))
    data: dict[str, Any] = {}
    for c in RESULT_COLUMNS:
        if c in _FLOATS:
            data[c] = pd.Series(cols[c], dtype=np.float64)
        elif c in _COUNTS:
            data[c] = pd.Series(cols[c], dtype="Int64")
        else:
            data[c] = pd.Series(cols[c], dtype=object)
    return pd.DataFrame(data, columns=list(RESULT_COLUMNS))


def error_row(
    protocol: str,
    *,
    set: str | None = None,
    detector: str | None = None,
    error: str,
    **levels: Any,
) -> dict[str, Any]:
    """A result row for something that could not be computed: value NaN and the error text.

    Parameters
    ----------
    protocol : str
        Protocol name.
    set : str, optional
        Set name.
    detector : str, optional
        Detector name.
    error : str
        One-line error message; only its first line is kept.
    **levels
        Other result columns (``split``, ``semantic_level``, ``covariate_level``, ``metric``,
        ``n_id``, ``n_ood``).

    Returns
    -------
    dict

    Raises
    ------
    InputError
        A key that is not a result column, or ``value`` / ``ci_*`` given.

    Examples
    --------
    >>> r = error_row("osr", set="easy", detector="knn", error="faiss failed", metric="auroc")
    >>> r["value"], r["error"], r["metric"]
    (nan, 'faiss failed', 'auroc')
    """
    allowed = builtins.set(RESULT_COLUMNS) - {"value", "ci_low", "ci_high", "error"}
    bad = sorted(builtins.set(levels) - allowed)
    if bad:
        raise InputError(f"error_row: {bad} cannot be set; allowed: split, levels, metric, n_*")
    msg = str(error).strip().splitlines()
    nan = float("nan")
    return {
        "protocol": protocol,
        "set": set,
        "detector": detector,
        **levels,
        "value": nan,
        "ci_low": nan,
        "ci_high": nan,
        "error": msg[0] if msg else "error",
    }
