"""Graded-shift protocol (IS-OOD): per-cell metrics on a semantic x covariate level grid, level
means, and the correlation / sensitivity of each metric to each shift axis."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from pydantic import Field

from semshift.errors import InputError
from semshift.metrics import level_means, level_trend
from semshift.protocols._bootstrap import (
    FloatArray,
    _point_values,
    check_id_test,
    check_metrics,
    check_sets,
    detector_names,
    percentile_ci,
    ranked_bootstrap,
)
from semshift.protocols.registry import (
    ProtocolConfig,
    ProtocolInputs,
    ReportSection,
    SetDescription,
    register_protocol,
)
from semshift.protocols.sets import DEFAULT_BOOTSTRAP, Bootstrap, ScoredSet
from semshift.protocols.tidy import error_row, results_frame

__all__ = ["graded", "level_order"]

_AXES = ("semantic", "covariate")
_GRID_CI = ("auroc", "fpr95")


def level_order(levels: Sequence[str]) -> list[str]:
    """The order of shift levels on an axis.

    Numeric when every level parses as a number (ascending by value), otherwise the order of
    first appearance.

    Parameters
    ----------
    levels : sequence of str
        Level of every sample (repeats allowed).

    Returns
    -------
    list of str
        The distinct levels in grid order; position i (1-based) is the level index used by the
        correlation and sensitivity (IS-OOD eq. 5-6).

    Examples
    --------
    >>> level_order(["10", "2", "2", "1.5"])
    ['1.5', '2', '10']
    >>> level_order(["low", "high", "mid", "low"])
    ['low', 'high', 'mid']
    """
    distinct = list(dict.fromkeys(levels))
    try:
        values = [float(x) for x in distinct]
    except ValueError:
        return distinct
    return [x for _, x in sorted(zip(values, distinct, strict=True), key=lambda t: t[0])]


def _trend_many(x: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Correlation and sensitivity of level means (B, L) vs level positions 1..L, per row.

    Levels that are NaN in the first row are left out (with their positions) in every row, as
    :func:`semshift.metrics.level_trend` does for the point estimate.
    """
    pos = np.arange(1.0, x.shape[1] + 1)
    keep = ~np.isnan(x[0])
    x, pos = x[:, keep], pos[keep]
    if x.shape[1] < 2:
        nan = np.full(x.shape[0], np.nan)
        return nan, nan
    dx = x - x.mean(axis=1, keepdims=True)
    dp = pos - pos.mean()
    sxp, spp, sxx = dx @ dp, float(dp @ dp), np.einsum("ij,ij->i", dx, dx)
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = np.where(sxx > 0, sxp / np.sqrt(sxx * spp), np.nan)
    return corr, np.abs(sxp) / spp


def graded(
    id_test: ScoredSet,
    sets: Sequence[ScoredSet],
    *,
    metrics: Sequence[str] = ("auroc", "fpr95", "aupr_in"),
    min_count: int = 10,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> pd.DataFrame:
    """Evaluate every detector on each (semantic level, covariate level) cell of the OOD sets.

    Cells: every ``ood`` set contributes its rows with their levels, per row
    (``row_semantic_level`` / ``row_covariate_level``) or for the whole set
    (``semantic_level`` / ``covariate_level``), per-row levels first. Sets without any level are
    not on the grid. An axis no row has a level on is a single null level; rows without a level
    on an axis that other rows use are left out of the grid and reported in one error row per
    set (metric ``cells``). Level order per axis: :func:`level_order` (numeric when every level
    parses as a number, else first appearance); level positions 1..n enter the correlation and
    sensitivity.

    Rows (protocol ``graded``; ``set`` = names of the sets in the cell joined by ``+``):

    - per detector, cell and metric: the metric of ``id_test`` vs the cell's OOD samples,
      both levels set; cells with fewer than ``min_count`` samples (empty cells included) are
      N/A: value NaN, error ``"n/a: fewer than <min_count> samples"``;
    - per detector, metric and level of each used axis: ``<metric>.level_mean`` (mean over the
      other axis of the valid cells), the level on its axis set and ``split`` = the axis;
    - per detector, metric and used axis: ``<metric>.correlation`` (Pearson r of the level
      means vs positions) and ``<metric>.sensitivity`` (absolute least-squares slope),
      ``split`` = ``semantic`` or ``covariate`` (:func:`semshift.metrics.level_trend`).

    CIs: for ``auroc`` and ``fpr95`` the cells are bootstrapped together (ID resampled once
    per resample, each cell separately, paired across detectors) and the level means,
    correlation and sensitivity get CIs from the same resampled grids; other metrics have NaN
    bounds. ``n_ood`` of a cell = its sample count, of a level mean = the samples of its valid
    cells.

    Parameters
    ----------
    id_test : ScoredSet
        The ID test set.
    sets : sequence of ScoredSet
        Evaluation sets; the ``ood`` ones with levels are used.
    metrics : sequence of str, default ("auroc", "fpr95", "aupr_in")
        Registry names of ``(scores, is_ood)`` metrics.
    min_count : int, default 10
        Minimum OOD samples for a cell to be evaluated (IS-OOD uses 10).
    bootstrap : Bootstrap, default Bootstrap()
        CI settings.

    Returns
    -------
    pandas.DataFrame
        The tidy table (:data:`semshift.protocols.tidy.RESULT_COLUMNS`).

    Raises
    ------
    InputError
        No ``ood`` set with levels, a bad ``min_count`` or metric, duplicate set names.

    References
    ----------
    .. [1] Long et al., "Rethinking the Evaluation of Out-of-Distribution Detection: A Sorites
       Paradox" (IS-OOD), NeurIPS 2024 Datasets and Benchmarks, eq. 5-6.

    Examples
    --------
    >>> import numpy as np
    >>> from semshift.protocols import Bootstrap, ScoredSet, graded
    >>> idt = ScoredSet("id_test", "id_test", [0, 0, 0, 0], [0, 0, 0, 0],
    ...                 {"msp": np.array([4.0, 5.0, 6.0, 7.0])})
    >>> near = ScoredSet("near", "ood", [-1] * 2, [0] * 2, {"msp": np.array([4.5, 5.5])},
    ...                  semantic_level=1)
    >>> far = ScoredSet("far", "ood", [-1] * 2, [0] * 2, {"msp": np.array([0.0, 1.0])},
    ...                 semantic_level=2)
    >>> df = graded(idt, [near, far], metrics=["auroc"], min_count=1, bootstrap=Bootstrap(0))
    >>> df[["set", "semantic_level", "metric", "value"]].values.tolist()
    [['near', '1', 'auroc', 0.625], ['far', '2', 'auroc', 1.0],
     ['near+far', '1', 'auroc.level_mean', 0.625], ['near+far', '2', 'auroc.level_mean', 1.0],
     ['near+far', None, 'auroc.correlation', 1.0], ['near+far', None, 'auroc.sensitivity', 0.375]]
    """
    check_id_test(id_test, "graded")
    all_sets = check_sets(sets, "graded")
    names = check_metrics(metrics, "graded")
    if isinstance(min_count, bool) or not isinstance(min_count, int | np.integer) or min_count < 1:
        raise InputError(f"graded: min_count must be a positive integer, got {min_count!r}")
    rows: list[dict[str, Any]] = []
    grid = _Grid.build(_grid_members(all_sets), min_count, rows)
    detectors = detector_names([id_test], [m[0] for m in grid.members])
    cell_scores = {det: grid.cell_scores(det) for det in detectors}
    points: dict[str, dict[tuple[int, str], float | str]] = {}
    for det in detectors:
        ref = id_test.scores.get(det)
        if ref is None:
            continue
        subs = {j: v for j, v in enumerate(cell_scores[det]) if not isinstance(v, str)}
        points[det] = _point_values(ref, subs, names, None)
    resampled = _grid_bootstrap(id_test, detectors, names, cell_scores, points, grid, bootstrap)
    for d, det in enumerate(detectors):
        ref_err = None if det in id_test.scores else f"set {id_test.name!r}: {id_test.missing(det)}"
        for m in names:
            boot = resampled[m][d] if m in resampled else None  # (n_valid, B)
            rows += _cell_rows(
                grid, det, m, id_test.n, ref_err, cell_scores[det], points.get(det, {}), boot,
                bootstrap,
            )  # fmt: skip
    return results_frame(rows)


Member = tuple[ScoredSet, NDArray[np.object_], NDArray[np.object_]]


def _grid_members(all_sets: Sequence[ScoredSet]) -> list[Member]:
    """The ``ood`` sets with a level, with their per-row semantic and covariate levels."""
    members: list[Member] = []
    for s in all_sets:
        if s.role != "ood":
            continue
        sem = s.row_semantic_level
        cov = s.row_covariate_level
        sem = sem if sem is not None else np.full(s.n, s.semantic_level, dtype=object)
        cov = cov if cov is not None else np.full(s.n, s.covariate_level, dtype=object)
        if any(v is not None for v in sem) or any(v is not None for v in cov):
            members.append((s, sem, cov))
    if not members:
        raise InputError(
            "graded: no ood set has a semantic or covariate level; give sets semantic_level / "
            "covariate_level, or per-row levels (a graded split)"
        )
    return members


@dataclass
class _Grid:
    """The cells of the graded grid: which OOD rows fall in which (semantic, covariate) cell."""

    members: list[Member]
    levels: dict[str, list[Any]]
    used: dict[str, bool]
    keep: NDArray[np.bool_]  # rows with a level on every axis in use
    in_cell: NDArray[np.bool_]  # (n_cells, n_members): the member has rows in the cell
    counts: NDArray[np.int64]  # OOD samples per cell
    cell_names: list[str | None]
    all_names: str
    valid: NDArray[np.intp]  # evaluated cells, semantic-major
    order: NDArray[np.intp]  # kept rows sorted by cell
    bounds: NDArray[np.int64]  # cell c's rows: order[bounds[c]:bounds[c + 1]]
    min_count: int

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.levels["semantic"]), len(self.levels["covariate"])

    @classmethod
    def build(cls, members: list[Member], min_count: int, rows: list[dict[str, Any]]) -> _Grid:
        """The grid of ``members``; one error row per set with rows left out goes to ``rows``."""
        sem_all = np.concatenate([m[1] for m in members])
        cov_all = np.concatenate([m[2] for m in members])
        used = {"semantic": any(v is not None for v in sem_all)}
        used["covariate"] = any(v is not None for v in cov_all)
        keep = np.ones(sem_all.size, dtype=bool)
        for axis, arr in (("semantic", sem_all), ("covariate", cov_all)):
            if used[axis]:
                keep &= np.array([v is not None for v in arr], dtype=bool)
        set_of_row = np.repeat(np.arange(len(members)), [m[0].n for m in members])
        dropped = np.bincount(set_of_row[~keep], minlength=len(members))
        for k in np.flatnonzero(dropped):
            s = members[k][0]
            rows.append(
                error_row(
                    "graded",
                    set=s.name,
                    metric="cells",
                    n_ood=int(dropped[k]),
                    error=f"n/a: {dropped[k]} of {s.n} rows lack a level on an axis other rows "
                    f"use; left out of the grid",
                )
            )
        if not keep.any():
            raise InputError(
                "graded: no OOD row has a level on every axis in use (each set has only one of "
                "semantic / covariate level); give every graded set both levels, or only one axis"
            )
        levels = {
            "semantic": level_order([v for v in sem_all[keep]]) if used["semantic"] else [None],
            "covariate": level_order([v for v in cov_all[keep]]) if used["covariate"] else [None],
        }
        n_sem, n_cov = len(levels["semantic"]), len(levels["covariate"])
        sem_pos = pd.Index(levels["semantic"]).get_indexer(sem_all[keep]) if used["semantic"] else 0
        cov_pos = (
            pd.Index(levels["covariate"]).get_indexer(cov_all[keep]) if used["covariate"] else 0
        )
        cell = np.zeros(int(keep.sum()), dtype=np.int64) + sem_pos * n_cov + cov_pos
        n_cells = n_sem * n_cov
        counts = np.bincount(cell, minlength=n_cells)
        in_cell = np.zeros((n_cells, len(members)), dtype=bool)
        in_cell[cell, set_of_row[keep]] = True
        return cls(
            members,
            levels,
            used,
            keep,
            in_cell,
            counts,
            ["+".join(members[k][0].name for k in np.flatnonzero(r)) or None for r in in_cell],
            "+".join(m[0].name for m in members),
            np.flatnonzero(counts >= min_count),
            np.argsort(cell, kind="stable"),
            np.concatenate(([0], np.cumsum(counts))),
            int(min_count),
        )

    def cell_scores(self, det: str) -> list[FloatArray | str]:
        """The OOD scores of ``det`` in every valid cell (the error where a member lacks them)."""
        members = self.members
        miss = [k for k, m in enumerate(members) if det not in m[0].scores]
        full = np.concatenate([m[0].scores.get(det, np.zeros(m[0].n)) for m in members])
        full = full[self.keep][self.order]
        per: list[FloatArray | str] = []
        for vc in self.valid.tolist():
            bad = [k for k in miss if self.in_cell[vc, k]]
            if bad:
                s = members[bad[0]][0]
                per.append(f"set {s.name!r}: {s.missing(det)}")
            else:
                per.append(full[self.bounds[vc] : self.bounds[vc + 1]])
        return per


def _grid_bootstrap(
    id_test: ScoredSet,
    detectors: list[str],
    names: list[str],
    cell_scores: dict[str, list[FloatArray | str]],
    points: dict[str, dict[tuple[int, str], float | str]],
    grid: _Grid,
    bootstrap: Bootstrap,
) -> dict[str, FloatArray]:
    """Resampled cell values per CI metric, ``(n_detectors, n_valid, B)`` (empty: no CIs)."""
    ci_stats = [m for m in names if m in _GRID_CI]
    if not (bootstrap.enabled and ci_stats and grid.valid.size):
        return {}
    st = ranked_bootstrap(
        [id_test.scores.get(det) for det in detectors],
        [
            [
                v
                if not isinstance(v, str)
                and all(isinstance(points.get(det, {}).get((j, m)), float) for m in ci_stats)
                else None
                for j, v in enumerate(cell_scores[det])
            ]
            for det in detectors
        ],
        n_resamples=bootstrap.n_resamples,
        seed=bootstrap.seed,
        stats=ci_stats,
    )
    return st.values


def _cell_rows(
    grid: _Grid,
    det: str,
    metric: str,
    n_id: int,
    ref_err: str | None,
    scores: list[FloatArray | str],
    points: dict[tuple[int, str], float | str],
    boot: FloatArray | None,
    bootstrap: Bootstrap,
) -> list[dict[str, Any]]:
    """The rows of one detector and metric: every cell, then the level means and trends."""
    n_sem, n_cov = grid.shape
    n_cells = n_sem * n_cov
    valid_pos = {int(c): j for j, c in enumerate(grid.valid)}
    na = f"n/a: fewer than {grid.min_count} samples"
    values = np.full(n_cells, np.nan)
    boot_grid = np.full((n_cells, bootstrap.n_resamples), np.nan) if boot is not None else None
    rows: list[dict[str, Any]] = []
    for c in range(n_cells):
        key: dict[str, Any] = {
            "protocol": "graded",
            "set": grid.cell_names[c],
            "semantic_level": grid.levels["semantic"][c // n_cov],
            "covariate_level": grid.levels["covariate"][c % n_cov],
            "detector": det,
            "metric": metric,
            "n_id": n_id,
            "n_ood": int(grid.counts[c]),
        }
        j = valid_pos.get(c)
        if j is None:
            rows.append(error_row(error=na, **key))
            continue
        v = scores[j]
        if ref_err is not None or isinstance(v, str):
            rows.append(error_row(error=ref_err or str(v), **key))
            continue
        value = points[(j, metric)]
        if isinstance(value, str):
            rows.append(error_row(error=value, **key))
            continue
        values[c] = value
        row = {**key, "value": value}
        if boot is not None and boot_grid is not None:
            boot_grid[c] = boot[j]
            low, high = percentile_ci(boot[j], bootstrap.level)
            row.update(ci_low=float(low), ci_high=float(high))
        rows.append(row)
    rows += _level_rows(
        values.reshape(n_sem, n_cov),
        None if boot_grid is None else boot_grid.reshape(n_sem, n_cov, -1),
        grid.counts.reshape(n_sem, n_cov),
        grid.levels,
        grid.used,
        {"protocol": "graded", "set": grid.all_names, "detector": det, "n_id": n_id},
        metric,
        bootstrap.level,
    )
    return rows


def _level_rows(
    grid: FloatArray,
    boot: FloatArray | None,
    counts: NDArray[np.int64],
    levels: dict[str, list[Any]],
    used: dict[str, bool],
    base: dict[str, Any],
    metric: str,
    level: float,
) -> list[dict[str, Any]]:
    """Level-mean, correlation and sensitivity rows of one detector and metric."""
    rows: list[dict[str, Any]] = []
    means = level_means(grid)
    trend = level_trend(grid).set_index("axis")
    ok = ~np.isnan(grid)
    boot_means: dict[str, FloatArray] = {}
    if boot is not None:
        b = np.moveaxis(boot, -1, 0)  # (B, n_sem, n_cov), NaN outside the valid cells
        with np.errstate(invalid="ignore", divide="ignore"):
            sums = np.where(ok, b, 0.0)
            boot_means["semantic"] = sums.sum(axis=2) / ok.sum(axis=1)
            boot_means["covariate"] = sums.sum(axis=1) / ok.sum(axis=0)
    for a, axis in enumerate(_AXES):
        if not used[axis]:
            continue
        n_valid = np.where(ok, counts, 0).sum(axis=1 - a)
        lo = hi = np.full(len(levels[axis]), np.nan)
        if axis in boot_means:
            lo, hi = percentile_ci(boot_means[axis].T, level)
        for i, lv in enumerate(levels[axis]):
            key = {**base, "split": axis, f"{axis}_level": lv, "metric": f"{metric}.level_mean"}
            key["n_ood"] = int(n_valid[i])
            x = float(means[axis][i])
            if np.isnan(x):
                rows.append(error_row(error="n/a: no valid cell at this level", **key))
            else:
                rows.append({**key, "value": x, "ci_low": lo[i], "ci_high": hi[i]})
        corr_b = sens_b = None
        if axis in boot_means:
            x_b = np.vstack((means[axis][None, :], boot_means[axis]))
            corr_b, sens_b = _trend_many(x_b)
        for name, col, samples in (
            ("correlation", "correlation", corr_b),
            ("sensitivity", "sensitivity", sens_b),
        ):
            key = {**base, "split": axis, "metric": f"{metric}.{name}"}
            x = float(trend.loc[axis, col])
            if np.isnan(x):
                rows.append(
                    error_row(
                        error="n/a: needs two or more levels with valid cells and level means "
                        "that are not all equal",
                        **key,
                    )
                )
                continue
            row = {**key, "value": x}
            if samples is not None:
                low, high = percentile_ci(samples[1:], level)
                row.update(ci_low=float(low), ci_high=float(high))
            rows.append(row)
    return rows


class GradedConfig(ProtocolConfig):
    """``protocols.graded``: cells with fewer than ``min_count`` OOD samples are N/A."""

    min_count: int = Field(default=10, ge=1)
    metrics: list[str] | None = None

    def check_sets(self, sets: Mapping[str, SetDescription]) -> str | None:
        if not any(s.has_levels for s in sets.values()):
            return "no set has shift levels (grid, semantic_level or covariate_level)"
        return None


@register_protocol(
    "graded", GradedConfig,
    "graded semantic x covariate grid: per-cell metrics, correlation, sensitivity (IS-OOD)",
    metric_keys=("metrics",), order=30,
    sections=[ReportSection("graded", "Graded semantic x covariate shift grid",
                            builder="graded_section")],
)  # fmt: skip
def _run_graded(inputs: ProtocolInputs, config: GradedConfig) -> pd.DataFrame:
    metrics = config.metrics or list(inputs.metrics)
    return graded(inputs.id_test, inputs.others, metrics=metrics, min_count=config.min_count,
                  bootstrap=inputs.bootstrap)  # fmt: skip
