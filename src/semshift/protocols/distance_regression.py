"""Distance-binned regression (ImageNet-OOD Fig. 3 left, Appendix C).

A covariate-shift side and a semantic-shift side are each cut into equal-count subsets by their
images' distance to the nearest ID image in a reference feature space; per detector, the AUROC
of the ID test set against each subset is regressed on the subset's mean distance (OLS), and the
two sides' intercepts (and slopes) are compared by their 95 % CIs. Method and reading:
``docs/methods.md#distance-regression``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from pydantic import BaseModel, ConfigDict, Field

from semshift.errors import InputError, SemshiftError
from semshift.metrics.distance import (
    distance_bins,
    intervals_overlap,
    kth_neighbour_distance,
    ols_fit,
)
from semshift.protocols._bootstrap import check_id_test, check_sets, detector_names
from semshift.protocols.registry import (
    ProtocolConfig,
    ProtocolInputs,
    ReportSection,
    SetDescription,
    register_protocol,
)
from semshift.protocols.sets import ScoredSet
from semshift.protocols.tidy import error_row, results_frame

__all__ = [
    "PROTOCOL",
    "SIDES",
    "DistanceRegressionConfig",
    "distance_regression",
    "set_distances",
]

#: The protocol name in the results table.
PROTOCOL = "distance_regression"
#: The two sides, in the order of their rows; ``split`` holds the side.
SIDES = ("covariate", "semantic")
#: The verdict rows' ``split``.
VERDICT = "verdict"
_FIT_METRICS = ("slope", "intercept", "slope_se", "intercept_se", "r2")


def _side_sets(
    sets: Sequence[ScoredSet], names: Sequence[str] | None, role: str, side: str
) -> list[ScoredSet]:
    by_name = {s.name: s for s in sets}
    if names is None:
        out = [s for s in sets if s.role == role]
        if not out:
            raise InputError(f"{PROTOCOL}: no {role} set for the {side} side; configure one")
        return out
    out = []
    for name in names:
        if name not in by_name:
            raise InputError(f"{PROTOCOL}: {side} set {name!r} is not an evaluated set")
        if by_name[name].role != role:
            raise InputError(
                f"{PROTOCOL}: {side} set {name!r} has role {by_name[name].role!r}, not {role!r}"
            )
        out.append(by_name[name])
    if not out:
        raise InputError(f"{PROTOCOL}: the {side} side names no set")
    return out


def distance_regression(
    id_test: ScoredSet,
    covariate: Sequence[ScoredSet],
    semantic: Sequence[ScoredSet],
    distances: Mapping[str, ArrayLike],
    *,
    n_bins: int = 100,
    level: float = 0.95,
) -> pd.DataFrame:
    """AUROC vs distance to the ID set, per equal-count subset, and an OLS line per side.

    Each side (the ``covariate`` sets pooled, the ``semantic`` sets pooled) is cut into
    ``n_bins`` equal-count subsets by ``distances`` (:func:`semshift.metrics.distance.
    equal_count_bins`). Per detector, rows (``protocol`` = ``distance_regression``, ``split`` =
    the side, ``set`` = its sets joined by ``+``):

    - per subset ``b`` (1 = nearest; in ``covariate_level`` for the covariate side and in
      ``semantic_level`` for the semantic side): ``auroc`` (id_test vs the subset, ``n_ood`` =
      its size) and ``mean_distance``;
    - the OLS fit of AUROC on mean distance: ``slope`` and ``intercept`` (with their ``level``
      t-distribution CI in ``ci_low`` / ``ci_high``), ``slope_se``, ``intercept_se``, ``r2``;
    - ``split`` = ``verdict`` (``set`` = ``<covariate> vs <semantic>``): ``intercept_difference``
      and ``slope_difference`` (covariate - semantic), ``intercepts_differ`` and
      ``slopes_differ`` (1.0 when the two CIs do not overlap, else 0.0).

    A detector without scores on a set is an error row per side.

    Parameters
    ----------
    id_test : ScoredSet
        The ID test set (the positives of every AUROC).
    covariate, semantic : sequence of ScoredSet
        The two sides' sets.
    distances : mapping of str to array_like
        Set name -> each image's distance to the nearest ID image (:func:`set_distances`).
    n_bins : int, default 100
        Subsets per side (the paper's 100); each side needs at least ``n_bins`` images and
        ``n_bins >= 3`` (an OLS fit with CIs).
    level : float, default 0.95
        Confidence level of the CIs.

    Returns
    -------
    pandas.DataFrame
        The tidy table (:data:`semshift.protocols.tidy.RESULT_COLUMNS`).

    Raises
    ------
    InputError
        A side without sets, a set without distances or with the wrong number of them, too few
        images for ``n_bins``.

    References
    ----------
    .. [1] Yang et al., "ImageNet-OOD: Deciphering Modern Out-of-Distribution Detection
       Algorithms", ICLR 2024: Fig. 3 left, Appendix C (Fig. 10).

    Examples
    --------
    >>> import numpy as np
    >>> idt = ScoredSet("id_test", "id_test", [0] * 4, [0] * 4, {"msp": np.full(4, 0.5)})
    >>> x = np.arange(1, 7) / 6
    >>> cov = ScoredSet("r", "covariate", [0] * 6, [0] * 6, {"msp": 1.0 - x})
    >>> sem = ScoredSet("ood", "ood", [-1] * 6, [-1] * 6, {"msp": 1.0 - x})
    >>> df = distance_regression(idt, [cov], [sem], {"r": x, "ood": x}, n_bins=3)
    >>> df[df["metric"] == "intercepts_differ"]["value"].tolist()
    [0.0]
    """
    check_id_test(id_test, PROTOCOL)
    if isinstance(n_bins, bool) or not isinstance(n_bins, int | np.integer) or n_bins < 3:
        raise InputError(f"{PROTOCOL}: n_bins must be an integer >= 3, got {n_bins!r}")
    sides = {
        "covariate": check_sets(covariate, PROTOCOL),
        "semantic": check_sets(semantic, PROTOCOL),
    }
    pooled: dict[str, tuple[str, NDArray[np.float64]]] = {}
    for side, sets in sides.items():
        if not sets:
            raise InputError(f"{PROTOCOL}: the {side} side has no set")
        parts = []
        for s in sets:
            if s.name not in distances:
                raise InputError(f"{PROTOCOL}: no distances for set {s.name!r}")
            d = np.asarray(distances[s.name], dtype=np.float64)
            if d.shape != (s.n,):
                raise InputError(
                    f"{PROTOCOL}: set {s.name!r} has {s.n} images but {d.size} distances "
                    f"(shape {d.shape}); give one per image"
                )
            parts.append(d)
        d_all = np.concatenate(parts)
        if d_all.size < n_bins:
            raise InputError(
                f"{PROTOCOL}: the {side} side has {d_all.size} images, fewer than n_bins = "
                f"{n_bins}; lower n_bins"
            )
        pooled[side] = ("+".join(s.name for s in sets), d_all)
    detectors = detector_names([id_test], sides["covariate"], sides["semantic"])
    rows: list[dict[str, Any]] = []
    for det in detectors:
        fits: dict[str, Any] = {}
        for side, sets in sides.items():
            name, d_all = pooled[side]
            base = {"protocol": PROTOCOL, "set": name, "split": side, "detector": det}
            missing = [s for s in [id_test, *sets] if det not in s.scores]
            if missing:
                rows.append(error_row(error=missing[0].missing(det), **base))
                continue
            scores = np.concatenate([s.scores[det] for s in sets])
            bins = distance_bins(id_test.scores[det], scores, d_all, int(n_bins))
            fit = ols_fit(bins["mean_distance"], bins["auroc"], level=level)
            fits[side] = fit
            rows += _bin_rows(base, side, bins, id_test.n)
            rows += _fit_rows(base, fit, id_test.n, d_all.size)
        rows += _verdict_rows(det, pooled, fits)
    return results_frame(rows)


def _bin_rows(
    base: dict[str, Any], side: str, bins: pd.DataFrame, n_id: int
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    col = f"{side}_level"
    for b, dist, auc, n in bins[["bin", "mean_distance", "auroc", "n"]].itertuples(index=False):
        key = {**base, col: str(int(b) + 1), "n_id": n_id, "n_ood": int(n)}
        out.append({**key, "metric": "auroc", "value": float(auc)})
        out.append({**key, "metric": "mean_distance", "value": float(dist)})
    return out


def _fit_rows(base: dict[str, Any], fit: Any, n_id: int, n_ood: int) -> list[dict[str, Any]]:
    key = {**base, "n_id": n_id, "n_ood": n_ood}
    return [
        {**key, "metric": "slope", "value": fit.slope, "ci_low": fit.slope_ci[0],
         "ci_high": fit.slope_ci[1]},
        {**key, "metric": "intercept", "value": fit.intercept, "ci_low": fit.intercept_ci[0],
         "ci_high": fit.intercept_ci[1]},
        {**key, "metric": "slope_se", "value": fit.slope_se},
        {**key, "metric": "intercept_se", "value": fit.intercept_se},
        {**key, "metric": "r2", "value": fit.r2},
    ]  # fmt: skip


def _verdict_rows(
    det: str, pooled: Mapping[str, tuple[str, NDArray[np.float64]]], fits: Mapping[str, Any]
) -> list[dict[str, Any]]:
    base = {
        "protocol": PROTOCOL,
        "set": f"{pooled['covariate'][0]} vs {pooled['semantic'][0]}",
        "split": VERDICT,
        "detector": det,
    }
    metrics = ("intercept_difference", "slope_difference", "intercepts_differ", "slopes_differ")
    if set(fits) != set(SIDES):
        return [error_row(error="n/a: no fit on one of the sides", metric=m, **base)
                for m in metrics]  # fmt: skip
    c, s = fits["covariate"], fits["semantic"]
    return [
        {**base, "metric": "intercept_difference", "value": c.intercept - s.intercept},
        {**base, "metric": "slope_difference", "value": c.slope - s.slope},
        {**base, "metric": "intercepts_differ",
         "value": float(not intervals_overlap(c.intercept_ci, s.intercept_ci))},
        {**base, "metric": "slopes_differ",
         "value": float(not intervals_overlap(c.slope_ci, s.slope_ci))},
    ]  # fmt: skip


def set_distances(
    sets: Sequence[ScoredSet],
    reference: ArrayLike,
    features: Mapping[str, Callable[[], ArrayLike]],
    *,
    k: int = 1,
    normalize: bool = True,
) -> dict[str, NDArray[np.float64]]:
    """Each set's distance to its ``k``-th nearest ID reference row, by set name.

    ``features[name]()`` loads a set's rows in the reference space, one per image of the set
    (same order); a count that differs from the set's is an error naming the set.
    """
    ref = np.asarray(reference)
    out: dict[str, NDArray[np.float64]] = {}
    for s in sets:
        if s.name not in features:
            raise InputError(f"{PROTOCOL}: no reference features for set {s.name!r}")
        f = np.asarray(features[s.name]())
        if f.ndim != 2 or f.shape[0] != s.n:
            raise InputError(
                f"{PROTOCOL}: set {s.name!r} has {s.n} images but its reference features have "
                f"shape {f.shape}; give one row per image, in the set's order"
            )
        out[s.name] = kth_neighbour_distance(f, ref, k, normalize=normalize)
    return out


class ReferenceStore(BaseModel):
    """One set's rows in the reference space: a feature store and an optional row filter
    (``select``, as a set's ``select:``), one row per image of the set, in its order."""

    model_config = ConfigDict(extra="forbid")

    name: str
    store: Path
    select: dict[str, Any] = Field(default_factory=dict)


class DistanceRegressionConfig(ProtocolConfig):
    """``protocols.distance_regression``.

    Attributes
    ----------
    covariate, semantic : list of str, optional
        The sets of each side (pooled); default: every ``covariate`` / every ``ood`` set.
    n_bins : int, default 100
        Equal-count subsets per side (the paper's 100).
    k : int, default 1
        Distance to the k-th nearest ID image (1 = nearest, the paper's).
    normalize : bool, default True
        L2-normalise features before the Euclidean distance.
    level : float, default 0.95
        Confidence level of the OLS CIs.
    reference : list of ReferenceStore, optional
        The reference feature space as stores of another model over the same images: one entry
        named ``id_train`` (the ID images distances are measured to) and one per set of the two
        sides. Default: the run's own model features (id_train and each set's store).
    """

    covariate: list[str] | None = None
    semantic: list[str] | None = None
    n_bins: int = Field(default=100, ge=3)
    k: int = Field(default=1, ge=1)
    normalize: bool = True
    level: float = Field(default=0.95, gt=0.0, lt=1.0)
    reference: list[ReferenceStore] | None = None

    def check_sets(self, sets: Mapping[str, SetDescription]) -> str | None:
        for side, names, role in (
            ("covariate", self.covariate, "covariate"),
            ("semantic", self.semantic, "ood"),
        ):
            if names is None:
                if not any(s.role == role for s in sets.values()):
                    return f"no {role} set for the {side} side"
                continue
            for name in names:
                if name not in sets:
                    return f"{side}: {name!r} is not a set of data.sets"
                if sets[name].role != role:
                    return f"{side}: set {name!r} has role {sets[name].role!r}, not {role!r}"
        return None


def _store_loader(entry: ReferenceStore) -> Callable[[], NDArray[Any]]:
    def load() -> NDArray[Any]:
        from semshift.features.store import open_store

        store = open_store(entry.store)
        sel = store.select(**entry.select) if entry.select else store.all()
        return np.asarray(sel.arrays("features")[0])

    return load


@register_protocol(
    PROTOCOL, DistanceRegressionConfig,
    "AUROC vs distance to the ID set per equal-count subset, OLS per side (ImageNet-OOD)",
    order=75, report_order=25,
    sections=[ReportSection("distance_regression", "AUROC vs distance to the ID set",
                            builder="semshift.report.sections_shift:distance_regression_section")],
)  # fmt: skip
def _run_distance_regression(
    inputs: ProtocolInputs, config: DistanceRegressionConfig
) -> pd.DataFrame:
    cov = _side_sets(inputs.others, config.covariate, "covariate", "covariate")
    sem = _side_sets(inputs.others, config.semantic, "ood", "semantic")
    loaders: Mapping[str, Callable[[], Any]] = inputs.features
    if config.reference is not None:
        loaders = {e.name: _store_loader(e) for e in config.reference}
    if "id_train" not in loaders:
        raise InputError(
            f"{PROTOCOL}: no id_train features to measure distances to; give data.id_train or "
            "a reference entry named id_train"
        )
    try:
        reference = loaders["id_train"]()
        distances = set_distances(
            [*cov, *sem], reference, loaders, k=config.k, normalize=config.normalize
        )
    except SemshiftError as err:
        raise InputError(f"{PROTOCOL}: {err}") from None
    return distance_regression(
        inputs.id_test, cov, sem, distances, n_bins=config.n_bins, level=config.level
    )
