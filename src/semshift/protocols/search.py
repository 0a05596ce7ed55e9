"""Hyperparameter search that cannot leak: a grid scored on ID validation vs validation OOD data.

OpenOOD's automatic search picks values on validation OOD sets that may share classes with the
test OOD sets, and on training rows the detector was fitted on. Here (see
docs/methods.md#hyperparameter-search):

- the candidates are those a detector declares beside its constraints (``search_space``, see
  :func:`semshift.detectors.get_search_space`) or a checked subset given by the user;
- each combination of the full grid (the product of the candidates, first hyperparameter
  varying slowest) is fitted on ID training data and scored on an ID validation set and a
  validation OOD set, neither of which is evaluated;
- the objective is a ranking metric of :mod:`semshift.metrics` (AUROC by default, ID
  validation as in-distribution, the validation OOD set as OOD); the best value wins, and a
  tie goes to the first combination in grid order, so the search is deterministic and, with
  the declared candidates, prefers the earlier (declared first) value;
- :func:`check_val_ood_not_id` refuses a validation OOD set holding ID classes (rows with a
  known label, or class ids of the model's classes), such as an ID store given as one;
- :func:`check_val_ood_disjoint` refuses a validation OOD set whose classes meet a test OOD
  class: the same id, or (with a taxonomy) the same node, an ancestor or a descendant.

:func:`search_detector` is the pure core (arrays in, :class:`SearchResult` out);
:func:`search_frame` and :func:`sensitivity_frame` are the tidy tables the run writes
(``search.csv``, ``search_sensitivity.csv``) and the report draws.

>>> import numpy as np
>>> from semshift.protocols.search import grid
>>> grid({"k": (1, 10), "alpha": (0.1, 1.0)})
[{'k': 1, 'alpha': 0.1}, {'k': 1, 'alpha': 1.0}, {'k': 10, 'alpha': 0.1}, {'k': 10, 'alpha': 1.0}]
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from semshift.errors import InputError

if TYPE_CHECKING:
    from semshift.splits.check import LeakReport
    from semshift.taxonomy import Taxonomy

__all__ = [
    "DEFAULT_MAX_COMBINATIONS",
    "DEFAULT_OBJECTIVE",
    "SEARCH_COLUMNS",
    "SENSITIVITY_COLUMNS",
    "SearchResult",
    "Trial",
    "best_index",
    "check_objective",
    "check_val_ood_disjoint",
    "check_val_ood_not_id",
    "format_value",
    "grid",
    "search_detector",
    "search_frame",
    "sensitivity_frame",
]

#: The objective when none is given.
DEFAULT_OBJECTIVE = "auroc"
#: Combinations one detector's grid may have before the search refuses it.
DEFAULT_MAX_COMBINATIONS = 256
#: Columns of :func:`search_frame`: one row per combination tried and hyperparameter.
SEARCH_COLUMNS = (
    "detector",
    "trial",
    "parameter",
    "candidate",
    "objective",
    "value",
    "n_id",
    "n_ood",
    "chosen",
    "error",
)
#: Columns of :func:`sensitivity_frame`: one row per detector, hyperparameter and candidate.
SENSITIVITY_COLUMNS = (
    "detector",
    "parameter",
    "candidate",
    "objective",
    "value",
    "chosen",
    "others",
    "error",
)


def format_value(value: Any) -> str:
    """A candidate as the tables show it: ``90``, ``0.01``, ``None``, ``energy``, ``true``.

    >>> [format_value(v) for v in (90.0, 0.01, None, "energy", True, 50)]
    ['90', '0.01', 'None', 'energy', 'true', '50']
    """
    if isinstance(value, np.generic):
        value = value.item()
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str):
        return value
    return json.dumps(value) if isinstance(value, list | dict) else str(value)


def grid(space: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of the candidates, in order (the first hyperparameter slowest)."""
    names = list(space)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*space.values())]


def best_index(values: Sequence[float], *, higher_is_better: bool = True) -> int:
    """Position of the best finite value; a tie goes to the first.

    NaN (a combination that failed) is never chosen.

    >>> best_index([0.7, 0.9, 0.9, float("nan")])
    1
    >>> best_index([0.3, 0.1, 0.1], higher_is_better=False)
    1

    Raises
    ------
    InputError
        No value is finite.
    """
    arr = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(arr)
    if not ok.any():
        raise InputError("no combination has a finite objective value")
    signed = np.where(ok, arr if higher_is_better else -arr, -np.inf)
    return int(np.argmax(signed))  # argmax returns the first maximum


def check_objective(objective: str) -> bool:
    """Whether the ranking metric ``objective`` is better higher (True) or lower (False).

    Raises
    ------
    UnknownNameError
        No metric has this name.
    InputError
        The metric is not a ranking metric of ``(scores, is_ood)``.
    """
    from semshift.metrics.registry import get_metric

    spec = get_metric(objective)
    if tuple(spec.inputs) != ("scores", "is_ood"):
        raise InputError(
            f"objective {objective!r} is not a ranking metric of (scores, is_ood); use auroc, "
            "fpr95, aupr_in, ..."
        )
    return bool(spec.higher_is_better)


@dataclass(frozen=True)
class Trial:
    """One combination tried: its hyperparameters, the objective value (NaN when it failed)
    and the one-line error of a failed fit or score."""

    params: dict[str, Any]
    value: float
    error: str | None = None


@dataclass
class SearchResult:
    """The search of one detector.

    Attributes
    ----------
    detector : str
    space : dict of str to tuple
        The candidates tried per hyperparameter, in order.
    fixed : dict
        Hyperparameters held fixed (not searched).
    objective : str
        The ranking metric maximised (or minimised when lower is better).
    trials : list of Trial
        Every combination of the grid, in grid order.
    best : int
        Position of the chosen trial.
    n_id, n_ood : int
        Rows of the ID validation and validation OOD sets.
    """

    detector: str
    space: dict[str, tuple[Any, ...]]
    fixed: dict[str, Any]
    objective: str
    trials: list[Trial]
    best: int
    n_id: int
    n_ood: int
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def chosen(self) -> dict[str, Any]:
        """The chosen value of each searched hyperparameter."""
        return dict(self.trials[self.best].params)

    @property
    def params(self) -> dict[str, Any]:
        """The hyperparameters to use: the fixed ones and the chosen ones."""
        return {**self.fixed, **self.chosen}

    @property
    def value(self) -> float:
        """The objective value of the chosen combination."""
        return self.trials[self.best].value

    def to_json(self) -> dict[str, Any]:
        """A JSON-able summary (for ``results.json`` and the cache)."""
        return {
            "detector": self.detector,
            "objective": self.objective,
            "value": self.value,
            "chosen": self.chosen,
            "fixed": self.fixed,
            "space": {k: list(v) for k, v in self.space.items()},
            "n_id": self.n_id,
            "n_ood": self.n_ood,
            "trials": [
                {
                    "params": t.params,
                    "value": None if math.isnan(t.value) else t.value,
                    "error": t.error,
                }
                for t in self.trials
            ],
            "best": self.best,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SearchResult:
        """The result :meth:`to_json` describes."""
        trials = [
            Trial(
                dict(t["params"]),
                math.nan if t["value"] is None else float(t["value"]),
                t.get("error"),
            )
            for t in data["trials"]
        ]
        return cls(
            detector=str(data["detector"]),
            space={k: tuple(v) for k, v in data["space"].items()},
            fixed=dict(data["fixed"]),
            objective=str(data["objective"]),
            trials=trials,
            best=int(data["best"]),
            n_id=int(data["n_id"]),
            n_ood=int(data["n_ood"]),
        )


def _one_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    msg = lines[0] if lines else type(err).__name__
    return msg if isinstance(err, InputError) else f"{type(err).__name__}: {msg}"


def search_detector(
    name: str,
    *,
    fit_inputs: Mapping[str, Any],
    id_val: Mapping[str, Any],
    val_ood: Mapping[str, Any],
    space: Mapping[str, Sequence[Any]] | None = None,
    fixed: Mapping[str, Any] | None = None,
    objective: str = DEFAULT_OBJECTIVE,
    max_combinations: int = DEFAULT_MAX_COMBINATIONS,
) -> SearchResult:
    """Choose the hyperparameters of detector ``name`` on ID validation vs validation OOD data.

    Every combination of the grid is fitted on ``fit_inputs`` (one fit per combination, one
    after the other, so memory holds one fitted detector at a time), scored on ``id_val`` and
    ``val_ood``, and rated by ``objective`` with the ID validation rows as in-distribution
    (``is_ood = 0``) and the validation OOD rows as OOD. The best value wins; a tie goes to
    the first combination in grid order (:func:`grid`). A combination whose fit or score
    fails on these data (a ``ValueError`` such as k above the number of training rows, or an
    ``ArithmeticError``) gets a NaN value and its error, and is never chosen.

    Parameters
    ----------
    name : str
        A post-hoc detector.
    fit_inputs : mapping
        Keyword arguments of :meth:`~semshift.detectors.Detector.fit` (``logits``,
        ``features``, ``head``, ``labels``, ``val_logits``, ``val_labels``,
        ``val_ood_features``); each combination receives those its detector needs or accepts.
    id_val, val_ood : mapping
        Score inputs (``logits`` and/or ``features``) of the ID validation set and of the
        validation OOD set.
    space : mapping of str to sequence, optional
        Candidates per hyperparameter; default the detector's declared ``search_space``
        (checked by :func:`semshift.detectors.check_search_space`).
    fixed : mapping, optional
        Hyperparameters held fixed.
    objective : str, default "auroc"
        A ranking metric of ``(scores, is_ood)`` from :mod:`semshift.metrics`.
    max_combinations : int, default 256
        The largest grid searched.

    Returns
    -------
    SearchResult

    Raises
    ------
    InputError
        A model-level detector, a bad space (see
        :func:`~semshift.detectors.check_search_space`), a grid larger than
        ``max_combinations``, empty validation sets, or every combination failed.

    Examples
    --------
    k = 5 and k = 20 tie, so the first wins; k = 500 is more than the 200 training rows:

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> mu = np.array([3.0, 0.0, 0.0, 0.0])
    >>> train = rng.normal(mu, 1, size=(200, 4))
    >>> val_id, val_ood = rng.normal(mu, 1, size=(50, 4)), rng.normal(mu[::-1], 1, size=(50, 4))
    >>> res = search_detector("knn", fit_inputs={"features": train},
    ...                       id_val={"features": val_id}, val_ood={"features": val_ood},
    ...                       space={"k": [1, 5, 20, 500]})
    >>> res.chosen, [round(t.value, 4) for t in res.trials]
    ({'k': 5}, [0.9624, 0.9912, 0.9912, nan])
    """
    from semshift import detectors as D

    higher = check_objective(objective)
    from semshift.metrics.registry import get_metric

    metric = get_metric(objective)
    fixed = dict(fixed or {})
    D.check_params(name, fixed)
    checked = D.check_search_space(name, space, fixed=fixed)
    combos = grid(checked)
    if len(combos) > max_combinations:
        sizes = " x ".join(f"{len(v)} {k}" for k, v in checked.items())
        raise InputError(
            f"search {name}: {len(combos)} combinations ({sizes}) exceed max_combinations = "
            f"{max_combinations}; give fewer candidates (e.g. {name}:PARAM=V1,V2) or raise "
            "the limit"
        )
    cls = D.get_class(name)
    need = cls.score_requires
    n_id = _rows(id_val, need, "the ID validation set")
    n_ood = _rows(val_ood, need, "the validation OOD set")
    is_ood = np.concatenate([np.zeros(n_id, bool), np.ones(n_ood, bool)])
    wanted = cls.fit_requires | cls.fit_accepts
    fit_kw = {k: v for k, v in fit_inputs.items() if k in wanted and v is not None}
    id_kw = {k: v for k, v in id_val.items() if k in need and v is not None}
    ood_kw = {k: v for k, v in val_ood.items() if k in need and v is not None}
    trials: list[Trial] = []
    for combo in combos:
        try:
            det = D.get(name, **fixed, **combo).fit(**fit_kw)
            scores = np.concatenate([det.score(**id_kw), det.score(**ood_kw)])
            bad = int(np.count_nonzero(~np.isfinite(scores)))
            if bad:
                raise FloatingPointError(f"{bad} non-finite score(s)")
            value = float(metric(scores, is_ood))
            trials.append(Trial(combo, value if math.isfinite(value) else math.nan))
        except (ValueError, ArithmeticError) as err:  # caused by these data: recorded
            trials.append(Trial(combo, math.nan, _one_line(err)))
    try:
        best = best_index([t.value for t in trials], higher_is_better=higher)
    except InputError:
        first = next(t.error for t in trials if t.error is not None)
        raise InputError(
            f"search {name}: every one of the {len(trials)} combination(s) failed; the first: "
            f"{first}"
        ) from None
    return SearchResult(name, checked, fixed, objective, trials, best, n_id, n_ood)


def _rows(inputs: Mapping[str, Any], need: Iterable[str], what: str) -> int:
    counts = {k: int(np.shape(inputs[k])[0]) for k in need if inputs.get(k) is not None}
    if not counts:
        raise InputError(f"search: {what} lacks {' and '.join(sorted(need))}")
    if len(set(counts.values())) > 1 or 0 in counts.values():
        raise InputError(f"search: {what} has {counts} rows; it must be non-empty and agree")
    return next(iter(counts.values()))


def search_frame(results: Iterable[SearchResult]) -> pd.DataFrame:
    """The tidy trial table (:data:`SEARCH_COLUMNS`): one row per combination tried and
    searched hyperparameter; ``chosen`` marks the rows of the chosen combination."""
    rows = []
    for res in results:
        for i, t in enumerate(res.trials):
            for param, value in t.params.items():
                rows.append(
                    (
                        res.detector,
                        i,
                        param,
                        format_value(value),
                        res.objective,
                        t.value,
                        res.n_id,
                        res.n_ood,
                        i == res.best,
                        t.error,
                    )
                )
    frame = pd.DataFrame(rows, columns=list(SEARCH_COLUMNS))
    return frame.astype({"trial": np.int64, "value": np.float64, "chosen": bool})


def sensitivity_frame(trials: pd.DataFrame) -> pd.DataFrame:
    """The sensitivity curves (:data:`SENSITIVITY_COLUMNS`) of a :func:`search_frame` table.

    For each detector and searched hyperparameter: the objective at each candidate with the
    other hyperparameters at their chosen values (``others`` says which), in grid order;
    ``chosen`` marks the chosen candidate.
    """
    out: list[tuple[Any, ...]] = []
    for det, part in trials.groupby("detector", sort=False):
        wide = part.pivot(index="trial", columns="parameter", values="candidate")
        params = list(dict.fromkeys(part["parameter"]))
        info = part.drop_duplicates("trial").set_index("trial")
        best = info.index[info["chosen"].to_numpy(bool)]
        if len(best) != 1:
            continue  # no chosen combination recorded: no curve
        at = wide.loc[best[0]]
        for p in params:
            others = [q for q in params if q != p]
            keep = np.ones(len(wide), bool)
            for q in others:
                keep &= (wide[q] == at[q]).to_numpy()
            text = ", ".join(f"{q}={at[q]}" for q in others)
            for trial in wide.index[keep]:
                r = info.loc[trial]
                cand = wide.loc[trial, p]
                err = r["error"] if isinstance(r["error"], str) else None
                out.append(
                    (det, p, cand, r["objective"], float(r["value"]), cand == at[p], text, err)
                )
    frame = pd.DataFrame(out, columns=list(SENSITIVITY_COLUMNS))
    return frame.astype({"value": np.float64, "chosen": bool})


def check_val_ood_not_id(
    name: str,
    labels: Sequence[int] | np.ndarray,
    class_ids: Sequence[str | None],
    id_classes: Iterable[str],
    *,
    where: str = "search",
) -> None:
    """Refuse a validation OOD set that holds ID classes (e.g. an ID store given as one).

    A row is of an ID class when its label is known (``label >= 0``: labels index the model's
    classes, OOD rows have -1) or its class id is one of ``id_classes``. Rated against ID
    validation rows of the same classes, such a set would choose hyperparameters on noise.

    Parameters
    ----------
    name : str
        The validation OOD set.
    labels : int array (n,)
        Its rows' labels (-1 = unknown).
    class_ids : sequence of str or None (n,)
        Its rows' class ids (None where unknown).
    id_classes : iterable of str
        The ID classes' ids (the model's class list, the training rows' classes).
    where : str
        Prefix of the error message (the config file and key).

    Raises
    ------
    InputError
        One line naming the set, how many rows are of ID classes and the first few classes.

    Examples
    --------
    >>> check_val_ood_not_id("v", [-1, -1], ["x", "y"], {"a", "b"})
    >>> check_val_ood_not_id("v", [-1, 0, 1], ["x", "a", None], {"a", "b"})
    Traceback (most recent call last):
    ...
    semshift.errors.InputError: search: validation OOD set 'v' holds ID classes: 2 of its 3 \
rows are of a class the model knows (a, label 1); the validation OOD set must hold classes \
outside the ID classes (an OOD store, not an ID one)
    """
    lab = np.asarray(labels, dtype=np.int64)
    has_id = np.asarray([c is not None for c in class_ids], dtype=bool)
    ids = np.asarray(["" if c is None else str(c) for c in class_ids], dtype=object)
    bad = (lab >= 0) | (has_id & np.isin(ids, list(set(map(str, id_classes)))))
    if not bad.any():
        return
    rows = np.flatnonzero(bad)
    named = np.where(has_id[rows], ids[rows], [f"label {v}" for v in lab[rows]])
    first = list(dict.fromkeys(named.tolist()))
    more = f" and {len(first) - 5} more" if len(first) > 5 else ""
    raise InputError(
        f"{where}: validation OOD set {name!r} holds ID classes: {rows.size} of its {lab.size} "
        f"rows are of a class the model knows ({', '.join(first[:5])}{more}); the validation "
        "OOD set must hold classes outside the ID classes (an OOD store, not an ID one)"
    )


def check_val_ood_disjoint(
    val: Mapping[str, Iterable[str]],
    test: Mapping[str, Iterable[str]],
    taxonomy: Taxonomy | None = None,
    *,
    where: str = "search",
) -> LeakReport:
    """Refuse validation OOD classes that meet a test OOD class.

    Uses :func:`semshift.splits.check.check_class_disjoint`: the same class id is a leak,
    and with a taxonomy so are the same node, a test class that is an ancestor of a
    validation class, and one that is a descendant.

    Parameters
    ----------
    val, test : mapping of str to iterable of str
        Set name -> class ids of its rows, for the validation OOD set(s) and every test OOD
        set.
    taxonomy : Taxonomy, optional
    where : str
        Prefix of the error message (the config file and key).

    Returns
    -------
    LeakReport
        Empty violations; ``checked`` counts the classes checked.

    Raises
    ------
    InputError
        One line naming the first violation and how many there are.

    Examples
    --------
    >>> check_val_ood_disjoint({"val": ["a", "b"]}, {"far": ["b"]})
    Traceback (most recent call last):
    ...
    semshift.errors.InputError: search: validation OOD set 'val' leaks into test OOD set 'far': \
class b is in both sets; the validation OOD classes must be unrelated to every test OOD class
    """
    from semshift.splits.check import check_class_disjoint

    report = check_class_disjoint(val, test, taxonomy)
    if not report.ok:
        first = report.violations.iloc[0]
        n = len(report.violations)
        more = f" ({n - 1} more leak(s) found)" if n > 1 else ""
        raise InputError(
            f"{where}: validation OOD set {first['set_a']!r} leaks into test OOD set "
            f"{first['set_b']!r}: {first['detail']}{more}; the validation OOD classes must be "
            "unrelated to every test OOD class"
        )
    return report
