"""The scored evaluation sets every protocol reads, and the bootstrap settings they share.

A :class:`ScoredSet` is one evaluation set after scoring: its labels (``-1`` = unknown), the
classifier's predictions and one normality score array per detector (higher = more
in-distribution). The runner builds them; the protocol functions only read them. Everything is
validated once, here, so that a protocol never meets a NaN score or a length mismatch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from semshift.errors import InputError

__all__ = ["DEFAULT_BOOTSTRAP", "ROLES", "Bootstrap", "ScoredSet", "level_str"]

Role = Literal["id_test", "ood", "covariate"]
ROLES: tuple[str, ...] = ("id_test", "ood", "covariate")


def _int_array(x: Any, what: str) -> NDArray[np.int64]:
    arr = np.asarray(x)
    if arr.size == 0 and arr.ndim == 1:
        return np.zeros(0, dtype=np.int64)  # an empty list is float by default
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise InputError(f"{what} must hold integer class ids, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise InputError(f"{what} must be 1-D (one value per sample), got shape {arr.shape}")
    return arr.astype(np.int64, copy=False)


def _is_missing(x: Any) -> bool:
    return x is None or (isinstance(x, float | np.floating) and math.isnan(x))


def level_str(x: Any) -> str | None:
    """A shift level as the string the results table stores; None for a missing level.

    Integral numbers lose their ``.0`` (``1.0`` -> ``"1"``), so levels read back from a Parquet
    column with nulls (float) print as the integers they were.

    Examples
    --------
    >>> level_str(3), level_str(2.0), level_str(0.5), level_str("high"), level_str(float("nan"))
    ('3', '2', '0.5', 'high', None)
    """
    if _is_missing(x):
        return None
    if isinstance(x, bool | np.bool_):
        return str(bool(x))
    if isinstance(x, int | np.integer):
        return str(int(x))
    if isinstance(x, float | np.floating):
        return str(int(x)) if float(x).is_integer() else repr(float(x))
    return str(x)


def _row_levels(x: Any, n: int, what: str) -> NDArray[np.object_] | None:
    if x is None:
        return None
    arr = np.asarray(x, dtype=object)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise InputError(f"{what} must have one level per sample ({n}), got shape {arr.shape}")
    out = np.empty(n, dtype=object)
    # a graded set repeats a few levels over many rows: each distinct (type, value) once
    # (the type keeps True apart from 1; a NaN is never equal to itself, so each is a miss)
    memo: dict[tuple[type, Any], str | None] = {}
    try:
        out[:] = [
            memo[k] if (k := (v.__class__, v)) in memo else memo.setdefault(k, level_str(v))
            for v in arr
        ]
    except TypeError:  # an unhashable level: one at a time
        out[:] = [level_str(v) for v in arr]
    return out


@dataclass
class ScoredSet:
    """One evaluation set with its labels, predictions and per-detector normality scores.

    Parameters
    ----------
    name : str
        Set name (``id_test`` for the ID test set by convention); used in the results table.
    role : {"id_test", "ood", "covariate"}
        ``id_test``: the ID test set; ``ood``: semantic shift (every label ``-1``);
        ``covariate``: ID classes under covariate shift (labels known).
    labels : array_like of int, shape (n,)
        Class ids; ``-1`` = unknown. All ``-1`` for an ``ood`` set, all ``>= 0`` otherwise.
    preds : array_like of int, shape (n,)
        The classifier's predicted class (argmax of the logits); ``-1`` = no prediction.
    scores : mapping of str -> array_like of float, each shape (n,)
        Detector name -> normality scores, higher = more in-distribution; finite values.
        Stored as float64.
    errors : mapping of str -> str, optional
        Detector name -> one-line error for detectors that produced no scores on this set.
        A detector is in ``scores`` or in ``errors``, never both.
    split : str, optional
        Split name of an ``ood`` set (``"easy"``, ``"hard"``): OSR pools OOD sets by it; for a
        ``covariate`` set, the label used by the generalisation protocol.
    semantic_level, covariate_level : str, optional
        The set's level on the graded grid. Numbers are stored as strings (``1`` -> ``"1"``).
    row_semantic_level, row_covariate_level : array_like, shape (n,), optional
        Per-row levels (a graded set built by :mod:`semshift.splits.graded`); ``None`` / NaN =
        the row has no level on that axis. Stored as object arrays of strings or None.

    Raises
    ------
    InputError
        An unknown role, length mismatches, labels that contradict the role, a score array
        that is not 1-D, not numeric or holds NaN/inf, a detector in both ``scores`` and
        ``errors``, or an empty set. The message names the set (and the detector).

    Examples
    --------
    >>> import numpy as np
    >>> s = ScoredSet("easy", "ood", labels=[-1, -1], preds=[3, 0],
    ...               scores={"msp": np.array([0.2, 0.4])}, split="easy")
    >>> s.n, s.detectors
    (2, ['msp'])
    """

    name: str
    role: Role
    labels: NDArray[np.int64]
    preds: NDArray[np.int64]
    scores: dict[str, NDArray[np.float64]]
    errors: dict[str, str] = field(default_factory=dict)
    split: str | None = None
    semantic_level: str | None = None
    covariate_level: str | None = None
    row_semantic_level: NDArray[np.object_] | None = None
    row_covariate_level: NDArray[np.object_] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InputError(f"a scored set needs a non-empty string name, got {self.name!r}")
        where = f"set {self.name!r}"
        if self.role not in ROLES:
            raise InputError(f"{where}: role must be one of {ROLES}, got {self.role!r}")
        self.labels = _int_array(self.labels, f"{where}: labels")
        self.preds = _int_array(self.preds, f"{where}: preds")
        n = self.labels.size
        if n == 0:
            raise InputError(f"{where} has zero samples: give at least one sample")
        if self.preds.size != n:
            raise InputError(
                f"{where}: preds has {self.preds.size} entries but labels has {n}; give one "
                f"prediction per sample"
            )
        if (self.preds < -1).any():
            raise InputError(f"{where}: preds has ids below -1 (-1 = no prediction)")
        if self.role == "ood":
            bad = np.flatnonzero(self.labels != -1)
            if bad.size:
                raise InputError(
                    f"{where} is an ood set but {bad.size} label(s) are not -1, first at index "
                    f"{bad[0]} (label {self.labels[bad[0]]}); semantic-shift samples are unknown"
                )
        else:
            bad = np.flatnonzero(self.labels < 0)
            if bad.size:
                raise InputError(
                    f"{where} is a {self.role} set but {bad.size} label(s) are negative, first at "
                    f"index {bad[0]}; known-class samples need their class id"
                )
        if not isinstance(self.scores, Mapping) or not isinstance(self.errors, Mapping):
            raise InputError(f"{where}: scores and errors must be dicts keyed by detector name")
        both = sorted(set(self.scores) & set(self.errors))
        if both:
            raise InputError(
                f"{where}: detector {both[0]!r} has both scores and an error; keep one of them"
            )
        self.scores = {str(k): self._check_scores(str(k), v, n) for k, v in self.scores.items()}
        self.errors = {str(k): str(v) for k, v in self.errors.items()}
        for attr in ("split", "semantic_level", "covariate_level"):
            setattr(self, attr, level_str(getattr(self, attr)))
        self.row_semantic_level = _row_levels(
            self.row_semantic_level, n, f"{where}: row_semantic_level"
        )
        self.row_covariate_level = _row_levels(
            self.row_covariate_level, n, f"{where}: row_covariate_level"
        )

    def _check_scores(self, det: str, v: Any, n: int) -> NDArray[np.float64]:
        where = f"set {self.name!r}, detector {det!r}"
        arr = np.asarray(v)
        if arr.dtype == np.bool_ or not (
            np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
        ):
            raise InputError(f"{where}: scores must be real numbers, got dtype {arr.dtype}")
        if arr.ndim != 1:
            raise InputError(f"{where}: scores must be 1-D, got shape {arr.shape}")
        if arr.size != n:
            raise InputError(f"{where}: {arr.size} scores for {n} samples; give one per sample")
        out = arr.astype(np.float64, copy=False)
        bad = np.flatnonzero(~np.isfinite(out))
        if bad.size:
            raise InputError(
                f"{where}: {bad.size} non-finite score(s) (NaN/inf), first at index {bad[0]}; "
                f"record the detector in errors instead, or fix the scores"
            )
        return out

    @property
    def n(self) -> int:
        """Number of samples."""
        return int(self.labels.size)

    @property
    def detectors(self) -> list[str]:
        """Detectors with scores on this set, in insertion order."""
        return list(self.scores)

    @property
    def correct(self) -> NDArray[np.bool_]:
        """True for known samples whose prediction is right, shape (n,)."""
        return (self.labels >= 0) & (self.preds == self.labels)

    def missing(self, detector: str) -> str:
        """Why ``detector`` has no scores here: its recorded error, or a generic message."""
        if detector in self.errors:
            return self.errors[detector]
        return f"detector {detector!r} has no scores on set {self.name!r}"


@dataclass(frozen=True)
class Bootstrap:
    """Bootstrap settings shared by the protocols.

    Parameters
    ----------
    n_resamples : int, default 1000
        Resamples per confidence interval; 0 turns CIs off (``ci_low``/``ci_high`` NaN).
    level : float, default 0.95
        Confidence level in (0, 1).
    seed : int, default 0
        Seed of the resample draws (``numpy.random.default_rng``).

    Examples
    --------
    >>> Bootstrap(n_resamples=0).enabled
    False
    """

    n_resamples: int = 1000
    level: float = 0.95
    seed: int = 0

    def __post_init__(self) -> None:
        n = self.n_resamples
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
            raise InputError(f"bootstrap.n_resamples must be an integer >= 0, got {n!r}")
        if not isinstance(self.level, int | float) or not 0.0 < float(self.level) < 1.0:
            raise InputError(f"bootstrap.level must be in (0, 1), got {self.level!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int | np.integer):
            raise InputError(f"bootstrap.seed must be an integer, got {self.seed!r}")

    @property
    def enabled(self) -> bool:
        """True when confidence intervals are computed."""
        return self.n_resamples > 0


#: the default settings (1000 resamples, 95%, seed 0), shared as the protocols' default argument
DEFAULT_BOOTSTRAP = Bootstrap()
