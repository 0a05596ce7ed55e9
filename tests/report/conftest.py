"""A synthetic run output directory (docs/design/run.md) for the report tests.

``make_run`` writes results.parquet / results.csv / results.json, scores/<set>.parquet and
sanity/seed<k>/<set>.parquet for every protocol of the contract. Scores are generated; every
result value is computed from them with semshift.metrics, so tables, figures and results agree.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from semshift.metrics import (
    accuracy,
    auroc,
    auroc_decomposition,
    bootstrap_ci,
    fpr_at_tpr,
    gzsl,
    level_trend,
    macro_f1,
    oscr,
)
from semshift.report._load import RESULT_COLUMNS

N_CLASSES = 5
SEM_LEVELS = ("1", "2", "3", "4")
COV_LEVELS = ("1", "2", "3", "4")
PROTOCOLS = (
    "osr",
    "newclass",
    "failure",
    "decomposition",
    "graded",
    "sanity",
    "generalisation",
    "gzsl",
)
#: OOD sets: name -> (split, semantic level, separation)
OOD_SETS = {"easy": ("easy", "1", 2.0), "medium": ("medium", "2", 1.3), "hard": ("hard", "3", 0.6)}
#: covariate sets: name -> (covariate level, shift of the ID scores)
COV_SETS = {"serif": ("1", 0.3), "noise3": ("3", 0.9)}


def _rows_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame([{c: r.get(c) for c in RESULT_COLUMNS} for r in rows])
    for c in ("value", "ci_low", "ci_high"):
        frame[c] = pd.to_numeric(frame[c]).astype(np.float64)
    for c in ("n_id", "n_ood"):
        frame[c] = pd.array(frame[c], dtype="Int64")
    return frame


def _score_frame(
    name: str,
    role: str,
    labels: np.ndarray,
    pred: np.ndarray,
    scores: dict[str, np.ndarray],
    sem: Sequence[str | None] | None = None,
    cov: Sequence[str | None] | None = None,
) -> pd.DataFrame:
    n = labels.size
    frame = pd.DataFrame(
        {
            "label": labels.astype(np.int64),
            "pred": pred.astype(np.int64),
            "role": [role] * n,
            "set": [name] * n,
            "semantic_level": list(sem) if sem is not None else [None] * n,
            "covariate_level": list(cov) if cov is not None else [None] * n,
        }
    )
    for det, s in scores.items():
        frame[f"score:{det}"] = s.astype(np.float64)
    return frame


def make_run(
    root: Path,
    *,
    detectors: Sequence[str] = ("msp", "energy", "knn", "broken"),
    protocols: Sequence[str] = PROTOCOLS,
    n_id: int = 240,
    n_ood: int = 90,
    seed: int = 0,
    fpr_convention: str = "id_recall",
    bootstrap: int = 50,
) -> Path:
    """Write a synthetic output directory under ``root`` and return it.

    ``broken`` (when listed) fails on the ``hard`` set, in the grid and in the sanity check:
    its rows there carry an error and NaN values, like the runner's error rows.
    """
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    dets = list(detectors)
    strength = {d: 1.0 + 0.4 * k for k, d in enumerate(dets)}

    def id_like(n: int, shift: float) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        labels = rng.integers(0, N_CLASSES, n)
        wrong = rng.random(n) < 0.15 + 0.1 * shift
        pred = np.where(wrong, (labels + rng.integers(1, N_CLASSES, n)) % N_CLASSES, labels)
        base = rng.normal(0.0, 1.0, n)
        scores = {
            d: strength[d] * (2.0 - shift) + base + 0.5 * rng.normal(0.0, 1.0, n) - 1.0 * wrong
            for d in dets
        }
        return labels, pred, scores

    def ood_like(n: int, sep: float) -> dict[str, np.ndarray]:
        return {d: strength[d] * (2.0 - sep) + rng.normal(0.0, 1.3, n) for d in dets}

    id_labels, id_pred, id_scores = id_like(n_id, 0.0)
    id_correct = id_labels == id_pred
    frames: dict[str, pd.DataFrame] = {
        "id_test": _score_frame("id_test", "id", id_labels, id_pred, id_scores)
    }
    ood_scores: dict[str, dict[str, np.ndarray]] = {}
    for name, (_split, level, sep) in OOD_SETS.items():
        s = ood_like(n_ood, sep)
        if name == "hard" and "broken" in s:
            s["broken"] = np.full(n_ood, np.nan)
        ood_scores[name] = s
        minus = -np.ones(n_ood, dtype=np.int64)
        frames[name] = _score_frame(
            name, "ood", minus, rng.integers(0, N_CLASSES, n_ood), s, sem=[level] * n_ood
        )
    cov_data: dict[str, tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]] = {}
    for name, (level, shift) in COV_SETS.items():
        labels, pred, s = id_like(n_ood, shift)
        cov_data[name] = (labels, pred, s)
        frames[name] = _score_frame(name, "covariate", labels, pred, s, cov=[level] * n_ood)
    # graded grid: semantic x covariate cells; cell (4, 4) has 3 samples -> N/A (min_count 10)
    sem_col: list[str] = []
    cov_col: list[str] = []
    grid_scores: dict[str, list[np.ndarray]] = {d: [] for d in dets}
    for i, sl in enumerate(SEM_LEVELS):
        for j, cl in enumerate(COV_LEVELS):
            n = 3 if (sl, cl) == ("4", "4") else 20
            sem_col += [sl] * n
            cov_col += [cl] * n
            for d in dets:
                grid_scores[d].append(strength[d] * (0.3 * i - 0.1 * j) + rng.normal(0.0, 1.0, n))
    grid = {d: np.concatenate(v) for d, v in grid_scores.items()}
    n_grid = len(sem_col)
    frames["grid"] = _score_frame(
        "grid",
        "ood",
        -np.ones(n_grid, dtype=np.int64),
        rng.integers(0, N_CLASSES, n_grid),
        grid,
        sem=sem_col,
        cov=cov_col,
    )

    rows: list[dict[str, Any]] = []

    def add(**kw: Any) -> None:
        rows.append(kw)

    def err(protocol: str, det: str, **kw: Any) -> None:
        add(
            protocol=protocol,
            detector=det,
            value=np.nan,
            ci_low=np.nan,
            ci_high=np.nan,
            error="RuntimeError: singular covariance in broken.fit",
            **kw,
        )

    def ci(fn: Any, s: np.ndarray, m: np.ndarray, *extra: np.ndarray) -> tuple[float, float]:
        if not bootstrap:
            return np.nan, np.nan
        r = bootstrap_ci(fn, s, m, *extra, n_resamples=bootstrap, seed=seed)
        return float(r.low), float(r.high)

    if "osr" in protocols:
        add(
            protocol="osr",
            set="id_test",
            metric="accuracy",
            value=accuracy(id_pred, id_labels),
            n_id=n_id,
        )
        for name, (split, _level, _sep) in OOD_SETS.items():
            for d in dets:
                s_ood = ood_scores[name][d]
                if not np.isfinite(s_ood).all():
                    err("osr", d, set=name, split=split)  # metric left null (tidy.error_row)
                    continue
                s = np.r_[id_scores[d], s_ood]
                m = np.r_[np.zeros(n_id, bool), np.ones(n_ood, bool)]
                c = np.r_[id_correct, np.zeros(n_ood, bool)]
                lo, hi = ci(auroc, s, m)
                common = dict(
                    protocol="osr", set=name, split=split, detector=d, n_id=n_id, n_ood=n_ood
                )
                add(**common, metric="auroc", value=auroc(s, m), ci_low=lo, ci_high=hi)
                add(**common, metric="oscr", value=oscr(s, m, c))
                add(**common, metric="fpr95", value=fpr_at_tpr(s, m, convention=fpr_convention))

    pooled = {d: np.concatenate([ood_scores[n][d] for n in OOD_SETS]) for d in dets}
    n_pool = 3 * n_ood
    for protocol in ("newclass", "failure"):
        if protocol not in protocols:
            continue
        for d in dets:
            if not np.isfinite(pooled[d]).all():
                err(protocol, d, metric="auroc", set="id_test")
                for name in COV_SETS:
                    err(protocol, d, metric="auroc", set=name)
                continue
            every = [*cov_data.items(), ("id_test", (id_labels, id_pred, id_scores))]
            for name, (labels, pred, s_set) in every:
                pos = s_set[d]
                if protocol == "newclass":
                    s = np.r_[pos, pooled[d]]
                    m = np.r_[np.zeros(pos.size, bool), np.ones(n_pool, bool)]
                else:
                    corr = labels == pred
                    s = np.r_[pos, pooled[d]]
                    m = np.r_[~corr, np.ones(n_pool, bool)]
                add(
                    protocol=protocol,
                    set=name,
                    detector=d,
                    metric="auroc",
                    value=auroc(s, m),
                    n_id=int((~m).sum()),
                    n_ood=int(m.sum()),
                )

    if "decomposition" in protocols:
        for d in dets:
            if not np.isfinite(pooled[d]).all():
                err("decomposition", d, set="id_test")
                continue
            s = np.r_[id_scores[d], pooled[d]]
            m = np.r_[np.zeros(n_id, bool), np.ones(n_pool, bool)]
            c = np.r_[id_correct, np.zeros(n_pool, bool)]
            dec = auroc_decomposition(s, m, c)
            for metric, value in (
                ("acc", dec.acc),
                ("auroc", dec.auroc),
                ("auroc_correct", dec.auroc_correct),
                ("auroc_incorrect", dec.auroc_incorrect),
                ("auroc_correct_vs_incorrect", dec.auroc_correct_vs_incorrect),
            ):
                add(
                    protocol="decomposition",
                    set="id_test",
                    detector=d,
                    metric=metric,
                    value=float(value),
                    n_id=n_id,
                    n_ood=n_pool,
                )

    if "graded" in protocols:
        sem_arr, cov_arr = np.array(sem_col), np.array(cov_col)
        for d in dets:
            if d == "broken":
                err("graded", d, set="grid")
                continue
            for metric in ("auroc", "fpr95"):
                cells = np.full((len(SEM_LEVELS), len(COV_LEVELS)), np.nan)
                for i, sl in enumerate(SEM_LEVELS):
                    for j, cl in enumerate(COV_LEVELS):
                        sel = (sem_arr == sl) & (cov_arr == cl)
                        if sel.sum() < 10:  # N/A cell: a NaN row with an "n/a: ..." note
                            add(
                                protocol="graded",
                                set="grid",
                                semantic_level=sl,
                                covariate_level=cl,
                                detector=d,
                                metric=metric,
                                value=np.nan,
                                error="n/a: fewer than 10 samples",
                                n_id=n_id,
                                n_ood=int(sel.sum()),
                            )
                            continue
                        s = np.r_[id_scores[d], grid[d][sel]]
                        m = np.r_[np.zeros(n_id, bool), np.ones(int(sel.sum()), bool)]
                        v = auroc(s, m) if metric == "auroc" else fpr_at_tpr(s, m)
                        cells[i, j] = v
                        add(
                            protocol="graded",
                            set="grid",
                            semantic_level=sl,
                            covariate_level=cl,
                            detector=d,
                            metric=metric,
                            value=v,
                            n_id=n_id,
                            n_ood=int(sel.sum()),
                        )
                for i, sl in enumerate(SEM_LEVELS):
                    add(
                        protocol="graded",
                        set="grid",
                        semantic_level=sl,
                        detector=d,
                        metric=f"{metric}.level_mean",
                        value=float(np.nanmean(cells[i, :])),
                    )
                for j, cl in enumerate(COV_LEVELS):
                    add(
                        protocol="graded",
                        set="grid",
                        covariate_level=cl,
                        detector=d,
                        metric=f"{metric}.level_mean",
                        value=float(np.nanmean(cells[:, j])),
                    )
                trend = level_trend(cells)
                for t in trend.itertuples(index=False):
                    add(
                        protocol="graded",
                        set="grid",
                        split=t.axis,
                        detector=d,
                        metric=f"{metric}.correlation",
                        value=float(t.correlation),
                    )
                    add(
                        protocol="graded",
                        set="grid",
                        split=t.axis,
                        detector=d,
                        metric=f"{metric}.sensitivity",
                        value=float(t.sensitivity),
                    )

    if "sanity" in protocols:
        delta = 0.05
        for k in (0, 1):
            seed_dir = root / "sanity" / f"seed{k}"
            seed_dir.mkdir(parents=True, exist_ok=True)
            r_id = {d: rng.normal(0.0, 1.0, n_id) for d in dets}
            id_frame = _score_frame("id_test", "id", id_labels, id_pred, r_id)
            id_frame.to_parquet(seed_dir / "id_test.parquet", index=False)
            for name in ("easy", "hard"):
                # energy is made to separate even on a random model: it must be flagged
                r_ood = {d: rng.normal(0.8 if d == "energy" else 0.0, 1.0, n_ood) for d in dets}
                minus = -np.ones(n_ood, dtype=np.int64)
                _score_frame(name, "ood", minus, minus, r_ood).to_parquet(
                    seed_dir / f"{name}.parquet", index=False
                )
                for d in dets:
                    if d == "broken" and name == "hard":
                        err("sanity", d, set=name, split=f"seed{k}", metric="auroc")
                        continue
                    s = np.r_[r_id[d], r_ood[d]]
                    m = np.r_[np.zeros(n_id, bool), np.ones(n_ood, bool)]
                    lo, hi = ci(auroc, s, m)
                    add(
                        protocol="sanity",
                        set=name,
                        split=f"seed{k}",
                        detector=d,
                        metric="auroc",
                        value=auroc(s, m),
                        ci_low=lo,
                        ci_high=hi,
                        n_id=n_id,
                        n_ood=n_ood,
                    )
        for d in dets:
            vals = [
                r
                for r in rows
                if r["protocol"] == "sanity"
                and r.get("detector") == d
                and r.get("metric") == "auroc"
                and r.get("error") is None
            ]
            flagged = any(r["ci_high"] < 0.5 - delta or r["ci_low"] > 0.5 + delta for r in vals)
            add(
                protocol="sanity",
                split="all",
                detector=d,
                metric="flagged",
                value=1.0 if flagged else 0.0,
            )

    if "generalisation" in protocols:
        acc_id = accuracy(id_pred, id_labels)
        f1_id = macro_f1(id_pred, id_labels)
        add(protocol="generalisation", set="id_test", metric="accuracy", value=acc_id, n_id=n_id)
        add(protocol="generalisation", set="id_test", metric="macro_f1", value=f1_id, n_id=n_id)
        for name, (labels, pred, _s) in cov_data.items():
            a, f = accuracy(pred, labels), macro_f1(pred, labels)
            add(protocol="generalisation", set=name, metric="accuracy", value=a, n_id=n_ood)
            add(protocol="generalisation", set=name, metric="macro_f1", value=f, n_id=n_ood)
            add(
                protocol="generalisation",
                set=name,
                metric="accuracy.relative_drop",
                value=(acc_id - a) / acc_id,
            )
            add(
                protocol="generalisation",
                set=name,
                metric="macro_f1.relative_drop",
                value=(f1_id - f) / f1_id,
            )

    if "gzsl" in protocols:
        labels = rng.integers(0, 8, 200)
        pred = np.where(rng.random(200) < 0.6, labels, rng.integers(0, 8, 200))
        zsl_pred = np.where(rng.random(200) < 0.7, labels, rng.integers(5, 8, 200))
        res = gzsl(pred, labels, np.arange(5), np.arange(5, 8), zsl_pred=zsl_pred)
        for metric in ("ts", "tr", "h", "zsl_top1"):
            add(protocol="gzsl", metric=metric, value=float(getattr(res, metric)))

    frame = _rows_frame(rows)
    frame.to_parquet(root / "results.parquet", index=False)
    frame.to_csv(root / "results.csv", index=False)
    (root / "scores").mkdir(exist_ok=True)
    for name, f in frames.items():
        f.to_parquet(root / "scores" / f"{name}.parquet", index=False)
    provenance = {
        "name": "synthetic study",
        "config": {
            "name": "synthetic study",
            "seed": seed,
            "detectors": dets,
            "protocols": {p: {} for p in protocols},
            "metrics": ["auroc", "fpr95"],
            "bootstrap": {"n_resamples": bootstrap, "level": 0.95, "seed": seed},
        },
        "fpr_convention": fpr_convention,
        "versions": {"semshift": "0.1.0", "numpy": np.__version__, "python": "3.11"},
        "seeds": {"run": seed, "sanity": [0, 1]},
        "timings": {"score": 1.25, "evaluate": 0.5},
    }
    (root / "results.json").write_text(json.dumps(provenance, indent=2))
    return root


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A complete synthetic run (every protocol, four detectors, one failing)."""
    return make_run(tmp_path_factory.mktemp("run") / "out")


@pytest.fixture(scope="module")
def chromium() -> str:
    """Debian's headless chromium; without it the browser tests are skipped with the install
    command, unless SEMSHIFT_REQUIRE_BROWSER=1 (CI), which makes them fail instead."""
    import os

    from tests.report._cdp import find_chromium

    path = find_chromium()
    if path is None:
        msg = "chromium not installed: apt-get install chromium"
        if os.environ.get("SEMSHIFT_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{msg} (SEMSHIFT_REQUIRE_BROWSER=1: the browser test must run)")
        pytest.skip(msg)
    return path
