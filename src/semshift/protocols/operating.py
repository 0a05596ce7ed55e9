"""Operating-point protocol: what a rejection threshold chosen on ID validation data catches.

Engineers ship a threshold, not an AUROC. Per detector, the threshold t keeping ``recall`` of
the ID validation scores (:func:`semshift.metrics.threshold_at_recall`, the ``id_recall``
convention of FPR@95) is applied to ID test, to every other set and to every semantic bin and
covariate level: which fraction is rejected, and which fraction is accepted although it is
wrong (OOD, or misclassified). Method and reading: ``docs/methods.md#operating-point``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from pydantic import Field

from semshift.errors import InputError
from semshift.metrics.operating import check_recall, operating_rates, threshold_at_recall
from semshift.metrics.ranking import n_required
from semshift.protocols._bootstrap import (
    check_id_test,
    check_sets,
    detector_names,
    percentile_ci,
)
from semshift.protocols.graded import level_order
from semshift.protocols.registry import (
    ProtocolConfig,
    ProtocolInputs,
    ReportSection,
    register_protocol,
)
from semshift.protocols.sets import DEFAULT_BOOTSTRAP, Bootstrap, ScoredSet
from semshift.protocols.tidy import error_row, results_frame

__all__ = ["PROTOCOL", "OperatingPointConfig", "calibration_split", "operating_point"]

#: The protocol name in the results table.
PROTOCOL = "operating_point"
#: ``split`` of the ``threshold`` row when the threshold comes from the ID validation set.
VAL_SPLIT = "id_val"
_RATES = ("rejection_rate", "accepted_wrong_rate")
#: the rejection rate among correctly classified rows (groups with known-class rows only)
_CORRECT = "correct_rejection_rate"


def _rates_of(g: _Group) -> tuple[str, ...]:
    """The rate metrics of a group: the correct-rows rejection rate where rows are known."""
    return (*_RATES, _CORRECT) if g.n_id > 0 else _RATES


_BLOCK_ELEMENTS = 1 << 22  # resampled indices held at once (all groups of one block)

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]


class OperatingPointConfig(ProtocolConfig):
    """``protocols.operating_point``: the recall of the threshold and the report's gallery.

    Attributes
    ----------
    recall : float, default 0.95
        Fraction of the ID validation scores the threshold keeps, in (0, 1].
    gallery : int, default 8
        Thumbnails per detector and gallery kind in the report (0 = no gallery), at most 64.
    max_report_bytes : int, default 10_000_000
        Size bound of ``report.html``: the gallery stops adding thumbnails when it is reached.

    Examples
    --------
    >>> OperatingPointConfig().recall, OperatingPointConfig(gallery=0).gallery
    (0.95, 0)
    """

    recall: float = Field(default=0.95, gt=0.0, le=1.0)
    gallery: int = Field(default=8, ge=0, le=64)
    max_report_bytes: int = Field(default=10_000_000, ge=0)


def calibration_split(n: int, seed: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Seeded halves of ``n`` ID test rows: (calibration rows, evaluation rows), each sorted.

    The calibration half has ``n // 2`` rows (a random permutation of
    ``numpy.random.default_rng(seed)``, first half), the evaluation half the rest.

    Examples
    --------
    >>> cal, ev = calibration_split(5, seed=0)
    >>> len(cal), len(ev), sorted([*cal, *ev]) == list(range(5))
    (2, 3, True)
    """
    if n < 2:
        raise InputError(
            f"operating_point: splitting id_test into calibration and evaluation halves needs "
            f"at least 2 samples, got {n}; pass calibration= (the ID validation set's scores)"
        )
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[: n // 2]), np.sort(perm[n // 2 :])


@dataclass
class _Group:
    """One evaluated set of rows: result-row keys, per-detector scores (or the error), truth."""

    keys: dict[str, Any]
    scores: dict[str, FloatArray | str]
    wrong: BoolArray
    n_id: int
    n_ood: int


def _set_group(
    s: ScoredSet, detectors: Sequence[str], rows: NDArray[np.intp] | None, keys: dict[str, Any]
) -> _Group:
    take = slice(None) if rows is None else rows
    scores: dict[str, FloatArray | str] = {}
    for det in detectors:
        if det in s.scores:
            scores[det] = s.scores[det][take]
        else:
            scores[det] = f"set {s.name!r}: {s.missing(det)}"
    known = s.labels[take] >= 0
    return _Group(keys, scores, ~s.correct[take], int(known.sum()), int((~known).sum()))


def _level_groups(sets: Sequence[ScoredSet], detectors: Sequence[str]) -> list[_Group]:
    """One group per level of each axis: the rows of every set at that level, pooled."""
    out: list[_Group] = []
    for axis in ("semantic", "covariate"):
        per_set: list[tuple[ScoredSet, NDArray[np.object_]]] = []
        for s in sets:
            lv = getattr(s, f"row_{axis}_level")
            if lv is None:
                lv = np.full(s.n, getattr(s, f"{axis}_level"), dtype=object)
            if any(v is not None for v in lv):
                per_set.append((s, lv))
        if not per_set:
            continue
        levels = level_order([v for _, lv in per_set for v in lv if v is not None])
        for level in levels:
            members = [(s, lv == level) for s, lv in per_set]
            members = [(s, m) for s, m in members if m.any()]
            scores: dict[str, FloatArray | str] = {}
            for det in detectors:
                bad = next((s for s, _ in members if det not in s.scores), None)
                if bad is not None:
                    scores[det] = f"set {bad.name!r}: {bad.missing(det)}"
                else:
                    scores[det] = np.concatenate([s.scores[det][m] for s, m in members])
            labels = np.concatenate([s.labels[m] for s, m in members])
            wrong = ~np.concatenate([s.correct[m] for s, m in members])
            keys = {
                "set": "+".join(s.name for s, _ in members),
                "split": axis,
                f"{axis}_level": level,
            }
            n_known = int((labels >= 0).sum())
            out.append(_Group(keys, scores, wrong, n_known, labels.size - n_known))
    return out


def _resample(
    cal: Sequence[FloatArray | None],
    groups: Sequence[_Group],
    detectors: Sequence[str],
    recall: float,
    bootstrap: Bootstrap,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Resampled thresholds (n_det, B) and rates (n_det, n_groups, B), NaN where unavailable:
    rejection, accepted-and-wrong and the rejection among correct rows (NaN in a resample with
    no correct row).

    Per resample: the calibration rows are drawn with replacement and the threshold re-chosen
    on them; every group is drawn with replacement (independently of the calibration) and
    both rates are read off the same drawn rows with that resample's threshold. The draws are
    shared by every detector (paired). Stream: ``numpy.random.default_rng(bootstrap.seed)``,
    per block of resamples the calibration indices ``(b, n_cal)``, then each group's
    ``(b, n_g)`` in group order.
    """
    n_det, n_grp, n_b = len(detectors), len(groups), bootstrap.n_resamples
    thr = np.full((n_det, n_b), np.nan)
    rej = np.full((n_det, n_grp, n_b), np.nan)
    aw = np.full((n_det, n_grp, n_b), np.nan)
    cr = np.full((n_det, n_grp, n_b), np.nan)
    n_cal = next((c.size for c in cal if c is not None), 0)
    if n_cal == 0:
        return thr, rej, aw, cr
    sizes = [g.wrong.size for g in groups]
    i_thr = n_cal - n_required(recall, n_cal)
    block = max(1, min(n_b, _BLOCK_ELEMENTS // (n_cal + sum(sizes))))
    rng = np.random.default_rng(bootstrap.seed)
    for start in range(0, n_b, block):
        b = min(block, n_b - start)
        sl = slice(start, start + b)
        cal_idx = rng.integers(0, n_cal, size=(b, n_cal))
        grp_idx = [rng.integers(0, n, size=(b, n)) for n in sizes]
        grp_wrong = [g.wrong[idx] for g, idx in zip(groups, grp_idx, strict=True)]
        for d, det in enumerate(detectors):
            c = cal[d]
            if c is None:
                continue
            t = np.partition(c[cal_idx], i_thr, axis=1)[:, i_thr]  # (b,)
            thr[d, sl] = t
            for g, group in enumerate(groups):
                x = group.scores[det]
                if isinstance(x, str):
                    continue
                accepted = x[grp_idx[g]] >= t[:, None]  # (b, n_g)
                n_acc = np.count_nonzero(accepted, axis=1)
                rej[d, g, sl] = (sizes[g] - n_acc) / sizes[g]
                aw[d, g, sl] = np.count_nonzero(accepted & grp_wrong[g], axis=1) / sizes[g]
                if group.n_id:
                    ok = ~grp_wrong[g]
                    n_ok = np.count_nonzero(ok, axis=1)
                    with np.errstate(invalid="ignore", divide="ignore"):
                        cr[d, g, sl] = np.count_nonzero(~accepted & ok, axis=1) / n_ok
    return thr, rej, aw, cr


def operating_point(
    id_test: ScoredSet,
    others: Sequence[ScoredSet],
    *,
    calibration: ScoredSet | None = None,
    recall: float = 0.95,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    seed: int = 0,
) -> pd.DataFrame:
    """Rejection rate and accepted-and-wrong rate of a threshold at ``recall`` ID recall.

    Per detector, the threshold t is the largest value keeping at least ``recall`` of the
    ``calibration`` scores (:func:`semshift.metrics.threshold_at_recall`). Without
    ``calibration``, ``id_test`` is split into two seeded halves (:func:`calibration_split`
    with ``seed``): t is chosen on one half and id_test's rates are measured on the other. The
    rule "accept when score >= t" is then measured (:func:`semshift.metrics.operating_rates`)
    on id_test, on each set of ``others`` and on each shift level.

    Rows (protocol ``operating_point``), per detector, in this order:

    - ``threshold``: value = t (in score units, not a fraction); ``set`` = the calibration
      set's name, ``split`` = ``"id_val"`` (given ``calibration``) or ``"<id_test> half (seed
      <seed>)"`` (the halves); ``n_id`` = calibration rows;
    - for id_test (``split`` null, or ``"<id_test> other half (seed <seed>)"`` when halved),
      for each set of ``others`` (``split`` = the set's split) and for each level of each shift
      axis: ``rejection_rate`` = fraction with score < t and ``accepted_wrong_rate`` =
      fraction of all rows with score >= t that are OOD or misclassified (correct =
      ``labels == preds`` on known-class rows). A level row pools the rows of ``others`` at
      that level (per-row levels first, else the set's level): ``set`` = the member sets'
      names joined by ``+``, the level in ``semantic_level`` or ``covariate_level``, ``split``
      = ``"semantic"`` or ``"covariate"``; levels in :func:`semshift.protocols.level_order`.
      ``n_id`` / ``n_ood`` = the known-class / unknown rows of the evaluated rows.
      Where a group has known-class rows (id_test, covariate sets, covariate levels):
      ``correct_rejection_rate`` = the fraction of its correctly classified rows with score < t
      (ImageNet-OOD appendix B, Table 2: how many good predictions under covariate shift the
      rule throws away; an error row when no row is correct).

    CIs (percentile, ``bootstrap``): the threshold is **re-chosen** on each resample of the
    calibration rows, and each evaluated set is resampled separately, so an interval covers
    both the finite calibration set and the finite evaluation set (the question is what the
    rule "t at ``recall`` of a validation set like this one" does, not what one fixed t does).
    Both rates of a row come from the same resamples; the draws are shared by every detector.
    ``Bootstrap(n_resamples=0)`` gives NaN bounds. A detector without scores on the
    calibration set gives error rows for everything; one without scores on a set gives error
    rows for that set and for the levels it is part of.

    Parameters
    ----------
    id_test : ScoredSet
        The ID test set (role ``id_test``).
    others : sequence of ScoredSet
        Every other evaluation set (``ood`` and ``covariate``).
    calibration : ScoredSet, optional
        The ID validation set's scores (not an ``ood`` set); only its scores are used.
    recall : float, default 0.95
        ID recall of the threshold, in (0, 1].
    bootstrap : Bootstrap, default Bootstrap()
        CI settings.
    seed : int, default 0
        Seed of the id_test halves (used only without ``calibration``).

    Returns
    -------
    pandas.DataFrame
        The tidy table (:data:`semshift.protocols.tidy.RESULT_COLUMNS`).

    Raises
    ------
    InputError
        ``recall`` outside (0, 1], an ``ood`` calibration set, duplicate set names, fewer than
        two id_test rows to split.

    References
    ----------
    .. [1] Yang et al., "ImageNet-OOD: Deciphering Modern Out-of-Distribution Detection
       Algorithms", ICLR 2024 (what detectors accept: new classes vs failures).

    Examples
    --------
    >>> import numpy as np
    >>> from semshift.protocols import Bootstrap, ScoredSet
    >>> val = ScoredSet("id_val", "id_test", [0, 0, 0, 0], [0, 0, 0, 0],
    ...                 {"msp": np.array([0.9, 0.8, 0.7, 0.6])})
    >>> idt = ScoredSet("id_test", "id_test", [0, 0, 1, 1], [0, 1, 1, 1],
    ...                 {"msp": np.array([0.95, 0.75, 0.65, 0.5])})
    >>> ood = ScoredSet("far", "ood", [-1, -1], [0, 1], {"msp": np.array([0.72, 0.1])})
    >>> df = operating_point(idt, [ood], calibration=val, recall=0.75, bootstrap=Bootstrap(0))
    >>> df[["set", "split", "metric", "value"]].values.tolist()
    [['id_val', 'id_val', 'threshold', 0.7], ['id_test', None, 'rejection_rate', 0.5],
     ['id_test', None, 'accepted_wrong_rate', 0.25],
     ['id_test', None, 'correct_rejection_rate', 0.6666666666666666],
     ['far', None, 'rejection_rate', 0.5], ['far', None, 'accepted_wrong_rate', 0.5]]
    """
    check_id_test(id_test, PROTOCOL)
    sets = check_sets(others, PROTOCOL)
    r = check_recall(recall)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise InputError(f"{PROTOCOL}: seed must be an integer, got {seed!r}")
    if any(s.name == id_test.name for s in sets):
        raise InputError(f"{PROTOCOL}: set name {id_test.name!r} is both id_test and in others")
    cal_set, cal_rows, eval_rows, cal_split, id_split = _calibration(id_test, calibration, seed)
    cal_name = cal_set.name
    detectors = detector_names([cal_set, id_test], sets)
    groups = [_set_group(id_test, detectors, eval_rows, {"set": id_test.name, "split": id_split})]
    groups += [_set_group(s, detectors, None, {"set": s.name, "split": s.split}) for s in sets]
    groups += _level_groups(sets, detectors)
    cal: list[FloatArray | None] = []
    for det in detectors:
        c = cal_set.scores.get(det)
        cal.append(None if c is None else (c if cal_rows is None else c[cal_rows]))
    if bootstrap.enabled:
        thr_b, rej_b, aw_b, cr_b = _resample(cal, groups, detectors, r, bootstrap)
        thr_lo, thr_hi = percentile_ci(thr_b, bootstrap.level)
        rej_lo, rej_hi = percentile_ci(rej_b, bootstrap.level)
        aw_lo, aw_hi = percentile_ci(aw_b, bootstrap.level)
        cr_lo, cr_hi = percentile_ci(cr_b, bootstrap.level)  # NaN resamples left out
    else:
        thr_lo = thr_hi = np.full(len(detectors), np.nan)
        rej_lo = rej_hi = aw_lo = aw_hi = np.full((len(detectors), len(groups)), np.nan)
        cr_lo = cr_hi = rej_lo
    n_cal = cal_set.n if cal_rows is None else cal_rows.size
    rows: list[dict[str, Any]] = []
    for d, det in enumerate(detectors):
        c = cal[d]
        thr_key: dict[str, Any] = {
            "protocol": PROTOCOL,
            "set": cal_name,
            "split": cal_split,
            "detector": det,
            "metric": "threshold",
            "n_id": n_cal,
        }
        if c is None:
            msg = f"set {cal_name!r}: {cal_set.missing(det)}"
            rows.append(error_row(error=msg, **thr_key))
            for g in groups:
                for m in _rates_of(g):
                    rows.append(error_row(error=msg, **_rate_key(g, det, m)))
            continue
        t = threshold_at_recall(c, r)
        rows.append({**thr_key, "value": t, "ci_low": thr_lo[d], "ci_high": thr_hi[d]})
        for k, g in enumerate(groups):
            cis = {"rejection_rate": (rej_lo[d, k], rej_hi[d, k]),
                   "accepted_wrong_rate": (aw_lo[d, k], aw_hi[d, k]),
                   _CORRECT: (cr_lo[d, k], cr_hi[d, k])}  # fmt: skip
            rows += _group_rows(g, det, t, cis)
    return results_frame(rows)


def _group_rows(
    g: _Group, det: str, t: float, cis: dict[str, tuple[float, float]]
) -> list[dict[str, Any]]:
    """The rate rows of one group and detector at threshold ``t`` (CIs given by metric)."""
    x = g.scores[det]
    if isinstance(x, str):
        return [error_row(error=x, **_rate_key(g, det, m)) for m in _rates_of(g)]
    rates = operating_rates(x, t, correct=~g.wrong)
    values = {"rejection_rate": rates.rejection_rate,
              "accepted_wrong_rate": rates.accepted_wrong_rate}  # fmt: skip
    rows = [
        {**_rate_key(g, det, m), "value": v, "ci_low": cis[m][0], "ci_high": cis[m][1]}
        for m, v in values.items()
    ]
    if g.n_id:
        ok = ~g.wrong
        key = _rate_key(g, det, _CORRECT)
        if not ok.any():
            rows.append(error_row(error="n/a: no correctly classified row", **key))
        else:
            value = float(np.count_nonzero(x[ok] < t) / np.count_nonzero(ok))
            lo, hi = cis[_CORRECT]
            rows.append({**key, "value": value, "ci_low": float(lo), "ci_high": float(hi)})
    return rows


def _calibration(
    id_test: ScoredSet, calibration: ScoredSet | None, seed: int
) -> tuple[ScoredSet, NDArray[np.intp] | None, NDArray[np.intp] | None, str | None, str | None]:
    """Where the threshold is chosen: ``(set, its rows or None, id_test rows evaluated or None,
    the threshold rows' split, id_test's split)`` (the id_test halves without calibration)."""
    if calibration is None:
        cal_rows, eval_rows = calibration_split(id_test.n, int(seed))
        return (
            id_test,
            cal_rows,
            eval_rows,
            f"{id_test.name} half (seed {int(seed)})",
            f"{id_test.name} other half (seed {int(seed)})",
        )
    if not isinstance(calibration, ScoredSet) or calibration.role == "ood":
        got = calibration.role if isinstance(calibration, ScoredSet) else type(calibration)
        raise InputError(
            f"{PROTOCOL}: calibration must be a ScoredSet of ID samples (the ID validation "
            f"set), got {got!r}"
        )
    return calibration, None, None, VAL_SPLIT, id_test.split


def _rate_key(g: _Group, det: str, metric: str) -> dict[str, Any]:
    return {
        "protocol": PROTOCOL,
        **g.keys,
        "detector": det,
        "metric": metric,
        "n_id": g.n_id,
        "n_ood": g.n_ood,
    }


@register_protocol(
    "operating_point", OperatingPointConfig,
    "the rejection rule at a target ID recall: rejection and accepted-and-wrong rates per set",
    needs_id_val=True, order=70, on_stores=True, report_order=35,
    sections=[
        ReportSection("operating_point", "Operating point",
                      builder="operating_point_section"),
        ReportSection("operating_point_gallery", "Operating point: image gallery",
                      builder="operating_point_gallery_section"),
    ],
)  # fmt: skip
def _run_operating_point(inputs: ProtocolInputs, config: OperatingPointConfig) -> pd.DataFrame:
    return operating_point(
        inputs.id_test, inputs.others, calibration=inputs.id_val, recall=config.recall,
        bootstrap=inputs.bootstrap, seed=inputs.seed,
    )  # fmt: skip
