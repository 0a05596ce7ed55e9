"""Input checks shared by every metric: one place for the error messages a user sees.

Every check raises :class:`semshift.errors.InputError` (a ``ValueError``) that says what was
wrong, where (count and first index) and what to do. Nothing here drops or reorders samples.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from semshift.errors import InputError

__all__ = [
    "as_bool",
    "as_labels",
    "as_scores",
    "check_both_classes",
    "check_finite",
    "check_same_length",
]


def check_finite(arr: NDArray[np.floating], name: str) -> None:
    """Raise if ``arr`` holds NaN or +-inf, naming the count and the first index.

    Parameters
    ----------
    arr : ndarray of float
        Array to check (any shape; indices are reported in flat C order).
    name : str
        Argument name used in the message.

    Raises
    ------
    InputError
        If any element is not finite.
    """
    # Fast path: the sum of finite values is finite unless it overflows; only then look closer.
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.add.reduce(arr, axis=None)
    if np.isfinite(total):
        return
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size == 0:
        return
    n_nan = int(np.count_nonzero(np.isnan(arr.ravel()[bad])))
    first = np.unravel_index(int(bad[0]), arr.shape) if arr.ndim > 1 else int(bad[0])
    raise InputError(
        f"{name} contains {bad.size} non-finite value(s) ({n_nan} NaN, {bad.size - n_nan} inf); "
        f"first at index {first}. Remove or impute them before computing metrics."
    )


def as_scores(x: ArrayLike, name: str = "scores", *, finite: bool = True) -> NDArray[np.floating]:
    """Validate a 1-D array of finite real scores.

    Parameters
    ----------
    x : array_like, shape (n,)
        Scores (higher = more in-distribution). Integer input is converted to float64;
        floating input keeps its dtype (no copy).
    name : str, default "scores"
        Argument name used in messages.
    finite : bool, default True
        Check that every score is finite (:func:`check_finite`). ``False`` leaves that check
        to the caller, who must make it before using the values.

    Returns
    -------
    ndarray of float, shape (n,)

    Raises
    ------
    InputError
        Non-numeric or boolean dtype, not 1-D, empty, or NaN/inf present.
    """
    arr = np.asarray(x)
    if arr.size == 0:
        raise InputError(f"{name} is empty: at least one sample is needed")
    if arr.dtype == np.bool_ or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    ):
        raise InputError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise InputError(f"{name} must be 1-D (one value per sample), got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    if finite:
        check_finite(arr, name)
    return arr


def as_bool(x: ArrayLike, name: str, n: int | None = None) -> NDArray[np.bool_]:
    """Validate a 1-D boolean mask (no implicit casting from 0/1 integers).

    Parameters
    ----------
    x : array_like of bool, shape (n,)
    name : str
        Argument name used in messages.
    n : int, optional
        Required length (the length of the score array it goes with).

    Returns
    -------
    ndarray of bool, shape (n,)

    Raises
    ------
    InputError
        Non-boolean dtype, not 1-D, empty, or length different from ``n``.
    """
    arr = np.asarray(x)
    if arr.size == 0:
        raise InputError(f"{name} is empty: at least one sample is needed")
    if arr.dtype != np.bool_:
        raise InputError(
            f"{name} must be a boolean array, got dtype {arr.dtype}; if 1 marks the positive "
            f"case pass {name}.astype(bool) (for is_ood, True = OOD/unknown)"
        )
    if arr.ndim != 1:
        raise InputError(f"{name} must be 1-D (one value per sample), got shape {arr.shape}")
    if n is not None and arr.size != n:
        raise InputError(f"shape mismatch: scores have {n} elements but {name} has {arr.size}")
    return arr


def as_labels(x: ArrayLike, name: str, *, allow_unknown: bool = False) -> NDArray[np.int64]:
    """Validate a 1-D array of integer class ids.

    Parameters
    ----------
    x : array_like of int, shape (n,)
    name : str
        Argument name used in messages.
    allow_unknown : bool, default False
        Accept ``-1`` (the package's marker for an unknown sample).

    Returns
    -------
    ndarray of int64, shape (n,)

    Raises
    ------
    InputError
        Non-integer dtype, not 1-D, empty, or ids below 0 (below -1 with ``allow_unknown``).
    """
    arr = np.asarray(x)
    if arr.size == 0:
        raise InputError(f"{name} is empty: at least one sample is needed")
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise InputError(f"{name} must hold integer class ids, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise InputError(f"{name} must be 1-D (one id per sample), got shape {arr.shape}")
    arr = arr.astype(np.int64, copy=False)
    low = -1 if allow_unknown else 0
    bad = np.flatnonzero(arr < low)
    if bad.size:
        hint = " (-1 marks an unknown sample)" if allow_unknown else ""
        raise InputError(
            f"{name} has {bad.size} id(s) below {low}{hint}; first at index {bad[0]} "
            f"(value {arr[bad[0]]})"
        )
    return arr


def check_same_length(**arrays: NDArray[np.generic]) -> int:
    """Raise unless every array has the same length; return that length.

    Parameters
    ----------
    **arrays : ndarray
        Named 1-D arrays.

    Returns
    -------
    int
        The common length.
    """
    sizes = {name: int(a.shape[0]) for name, a in arrays.items()}
    if len(set(sizes.values())) > 1:
        desc = ", ".join(f"{name} has {size}" for name, size in sizes.items())
        raise InputError(f"shape mismatch: {desc} elements")
    return next(iter(sizes.values()))


def check_both_classes(
    is_ood: NDArray[np.bool_], what: str = "this metric", pos: str = "ID", neg: str = "OOD"
) -> tuple[int, int]:
    """Raise unless ``is_ood`` has both classes; return ``(n_id, n_ood)``.

    Parameters
    ----------
    is_ood : ndarray of bool, shape (n,)
        True = OOD / negative.
    what : str
        Name of the metric, for the message.
    pos, neg : str
        Names of the False and True classes, for the message.

    Returns
    -------
    n_id, n_ood : int
    """
    n_ood = int(np.count_nonzero(is_ood))
    n_id = is_ood.size - n_ood
    if n_id == 0 or n_ood == 0:
        raise InputError(
            f"{what} needs both {pos} and {neg} samples, got {n_id} {pos} and {n_ood} {neg} "
            f"(a single class)"
        )
    return n_id, n_ood
