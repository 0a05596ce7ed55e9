"""The seed papers' published numbers, and a study's numbers beside them.

``study/data/published_numbers.csv`` holds every number the seed papers print in their result
tables (SSB Table 1; ImageNet-OOD Table 1 and its appendix B and D tables; SOOD-ImageNet Tables
1-2; the zero-shot Tables 1-2; IS-OOD Tables 1-7), one row per cell (821), with the table, row
and column it comes from, the cell as printed, and the value in semshift's units (percentages
as fractions). ``scripts/build_published_numbers.py`` parses them from the papers' text;
``tests/study/test_published_table.py`` checks sample rows against verbatim copies of the
papers' table lines.

A study dataset matches a published setting when it runs a catalog benchmark the paper
published (:data:`BENCHMARK_SETTINGS`), or when it says so (``published: ssb:cub`` in the
study file). :func:`compare_published` then puts published, ours (the mean over the study's
models), the difference and whether the published value lies inside our CI side by side.

Matching rules (a published row's ``method`` is a semshift detector name, compared with that
detector's mean over models):

- SSB Table 1: the ``osr`` rows of the split (``easy`` / ``hard``) and metric; the closed-set
  accuracy on the MLS row only (the cross-entropy baseline: an ARPL+ accuracy needs
  ARPL+-trained models and is not matched).
- ImageNet-OOD Table 1: the ``newclass`` / ``failure`` row of the pair ``"<reference> vs
  <ood>"`` (``newclass_failure`` with ``pairs``), the paper's datasets named as the
  ``imagenet-ood`` benchmark names its sets (ImageNet-1K is ``id_test``).
- IS-OOD Tables 1, 4 and 6 (ImageNet-21K): the ``graded`` protocol's ``<metric>.correlation``
  and ``<metric>.sensitivity`` along the axis.
- SOOD-ImageNet Table 1 (``published: sood:sood-imagenet-c``): per backbone, the study model
  labelled as the row's method (the ``sood-8`` zoo's labels), its macro-F1 on the
  ``generalisation`` protocol's sets with splits ``easy`` / ``hard`` and the relative drop
  Easy -> Hard; no CI (one model).
- Zero-shot (``published: zsl-v2:*``) Tables 1 and 2: the ``gzsl`` rows of the ``zsl``
  protocol, on the datasets whose names are the paper's (SUN, CUB, AWA1, AWA2, aPY; case and
  punctuation ignored): ZSL top-1 of V1 and V2 (Table 1) and ts / tr / H on V2 (Table 2), per
  method.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from importlib.resources import files
from typing import Any

import numpy as np
import pandas as pd

from semshift.errors import InputError

__all__ = [
    "BENCHMARK_SETTINGS",
    "PUBLISHED_COLUMNS",
    "compare_published",
    "published_numbers",
    "published_setting",
]

#: the columns of the shipped table
PUBLISHED_COLUMNS = (
    "paper", "table", "row", "column", "dataset", "method", "setting", "split", "metric",
    "printed", "value",
)  # fmt: skip
#: catalog benchmark -> (paper, dataset) of the published numbers it reproduces
BENCHMARK_SETTINGS: dict[str, tuple[str, str]] = {
    "ssb-cub": ("ssb", "cub"),
    "ssb-scars": ("ssb", "scars"),
    "ssb-aircraft": ("ssb", "aircraft"),
    "ssb-imagenet": ("ssb", "imagenet"),
    "imagenet-ood": ("imagenet-ood", "*"),
    "isood-imagenet": ("isood", "imagenet-21k"),
}
#: papers whose numbers :func:`compare_published` can match today
_PROTOCOL = {"ssb": "osr", "imagenet-ood": "newclass_failure", "isood": "graded",
             "sood": "generalisation", "zsl-v2": "zsl"}  # fmt: skip


@cache
def _read() -> pd.DataFrame:
    path = files("semshift.study") / "data" / "published_numbers.csv"
    frame = pd.read_csv(
        str(path), dtype={c: str for c in PUBLISHED_COLUMNS if c != "value"}, keep_default_na=False
    )
    frame["value"] = frame["value"].astype(np.float64)
    return frame


def published_numbers(paper: str | None = None, table: str | None = None) -> pd.DataFrame:
    """The shipped published numbers (a copy), of one paper and table when given.

    >>> ssb = published_numbers("ssb", "Table 1")
    >>> ssb[(ssb.method == "mls") & (ssb.dataset == "cub") & (ssb.metric == "auroc")][
    ...     ["split", "printed", "value"]].values.tolist()
    [['easy', '88.3', 0.883], ['hard', '79.3', 0.793]]
    """
    frame = _read()
    if paper is not None:
        if paper not in set(frame["paper"]):
            known = ", ".join(sorted(set(frame["paper"])))
            raise InputError(f"no published numbers of paper {paper!r}; papers: {known}")
        frame = frame[frame["paper"] == paper]
    if table is not None:
        frame = frame[frame["table"] == table]
    return frame.reset_index(drop=True).copy()


def published_setting(spec: str) -> tuple[str, str]:
    """``"ssb:cub"`` -> ``("ssb", "cub")``, checked against the shipped numbers; ``"paper:*"``
    (every dataset of the paper: ImageNet-OOD's pairs) too."""
    paper, sep, dataset = spec.partition(":")
    frame = _read()
    mine = (frame["paper"] == paper) & ((frame["dataset"] == dataset) | (dataset == "*"))
    if not sep or not mine.any():
        pairs = sorted({f"{p}:{d}" for p, d in zip(frame["paper"], frame["dataset"], strict=True)
                        if p in _PROTOCOL})  # fmt: skip
        raise InputError(f"no published setting {spec!r}; settings: {', '.join(pairs)}")
    if paper not in _PROTOCOL:
        raise InputError(
            f"published setting {spec!r}: comparing with {paper} numbers is not supported yet "
            f"(supported: {', '.join(_PROTOCOL)})"
        )
    return paper, dataset


def _match_ssb(mine: pd.DataFrame, p: Any) -> tuple[pd.DataFrame, str | None] | None:
    """SSB Table 1: osr rows of the detector, split and metric; accuracy on the MLS row."""
    mine = mine[mine["protocol"] == "osr"]
    if p.metric == "accuracy":
        if p.method != "mls":
            return None
        return mine[mine["detector"].isna() & (mine["metric"] == "accuracy")], None
    hit = mine[(mine["detector"] == p.method) & (mine["metric"] == p.metric)
               & (mine["split"] == p.split)]  # fmt: skip
    return hit, p.method


#: ImageNet-OOD's dataset names -> the imagenet-ood benchmark's set names
_INOOD_SETS = {"imagenet-1k": "id_test", "imagenet-c": "imagenet-c", "imagenet-r": "imagenet-r",
               "imagenet-sketch": "imagenet-sketch", "imagenet-ood": "imagenet-ood",
               "openimage-o": "openimage-o"}  # fmt: skip


def _match_imagenet_ood(mine: pd.DataFrame, p: Any) -> tuple[pd.DataFrame, str | None] | None:
    """ImageNet-OOD Table 1: the pair's newclass / failure row of the detector."""
    if p.table != "Table 1":
        return None
    ref, _, ood = p.dataset.partition(":")
    pair = f"{_INOOD_SETS[ref]} vs {_INOOD_SETS[ood]}"
    protocol = "newclass" if p.setting == "new-class" else "failure"
    here = mine[(mine["protocol"] == protocol) & (mine["set"] == pair)]
    if here.empty:
        return None  # the study has no such pair (no ImageNet-R root, say)
    hit = here[(here["detector"] == p.method) & (here["metric"] == "auroc")]
    return hit, p.method


def _match_isood(mine: pd.DataFrame, p: Any) -> tuple[pd.DataFrame, str | None] | None:
    """IS-OOD Tables 1, 4, 6: the graded protocol's correlation / sensitivity of the metric
    along the axis (ImageNet-21K; Syn-IS is generated images semshift does not make)."""
    if p.dataset != "imagenet-21k" or not p.setting:
        return None
    metric = f"{p.setting}.{p.metric}"
    hit = mine[(mine["protocol"] == "graded") & (mine["detector"] == p.method)
               & (mine["metric"] == metric) & (mine["split"] == p.split)]  # fmt: skip
    return hit, p.method


def _match_zsl(mine: pd.DataFrame, p: Any) -> tuple[pd.DataFrame, str | None] | None:
    """Zero-shot Tables 1 and 2: the ``gzsl`` row of the method on the dataset whose name is
    the paper's (``AWA2`` for ``awa2``, :func:`~semshift.report.study_tables.zsl_dataset_key`):
    ZSL top-1 of the setting's split version (Table 1), ts / tr / H on V2 (Table 2)."""
    from semshift.report.study_tables import zsl_dataset_key

    here = mine[mine["protocol"] == "gzsl"]
    here = here[here["set"].map(lambda s: zsl_dataset_key(str(s))) == p.dataset]
    if here.empty:
        return None  # the study has no such dataset
    if p.table == "Table 1":
        metric, version = "zsl_top1", str(p.setting).lower()
    else:
        metric, version = p.metric, "v2"
    hit = here[(here["detector"] == p.method) & (here["metric"] == metric)
               & (here["split"].astype(str) == version)]  # fmt: skip
    return hit, p.method


_MATCH = {"ssb": _match_ssb, "imagenet-ood": _match_imagenet_ood, "isood": _match_isood,
          "zsl-v2": _match_zsl}  # fmt: skip


def _sood_rows(name: str, pub: pd.DataFrame, values: pd.DataFrame) -> list[dict[str, Any]]:
    """SOOD Table 1 is per backbone: each published row against the study model whose label is
    the row's method (the ``sood-8`` zoo's labels), its macro-F1 on the ``generalisation``
    protocol's easy / hard sets (mean over seeds) and the relative drop Easy -> Hard."""
    mine = values[(values["dataset"] == name) & (values["protocol"] == "generalisation")
                  & (values["metric"] == "macro_f1")]  # fmt: skip
    f1 = {(r.model, r.split): float(r.value) for r in mine.itertuples(index=False)}
    out = []
    for p in pub[pub["table"] == "Table 1"].itertuples(index=False):
        if p.metric not in ("f1", "f1_drop") or not any(m == p.method for m, _ in f1):
            continue
        easy, hard = f1.get((p.method, "easy"), np.nan), f1.get((p.method, "hard"), np.nan)
        ours = (
            (hard - easy) / easy if p.metric == "f1_drop" else f1.get((p.method, p.split), np.nan)
        )
        out.append({"dataset": name, "paper": "sood", "table": p.table, "row": p.row,
                    "column": p.column, "detector": None, "split": p.split or None,
                    "metric": p.metric, "published": p.value, "ours": ours, "ci_low": np.nan,
                    "ci_high": np.nan, "difference": ours - p.value, "inside_ci": None,
                    "n_models": 1})  # fmt: skip
    return out


def compare_published(
    summary: pd.DataFrame,
    settings: Mapping[str, tuple[str, str]],
    values: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Published numbers beside a study's means over models.

    Parameters
    ----------
    summary : DataFrame
        :func:`semshift.study.aggregate_over_models` output.
    settings : mapping
        Study dataset -> (paper, published dataset; ``"*"``: every dataset of the paper).
    values : DataFrame, optional
        :func:`semshift.study.model_values`: SOOD's per-backbone table is matched against it.

    Returns
    -------
    DataFrame
        ``dataset``, ``paper``, ``table``, ``row``, ``column``, ``detector``, ``split``,
        ``metric``, ``published``, ``ours``, ``ci_low``, ``ci_high``, ``difference`` (ours -
        published), ``inside_ci`` (None without a CI), ``n_models``; one row per published cell
        the study could have (a pair the study lacks is left out; ``ours`` is NaN for a
        detector it did not run).
    """
    columns = [
        "dataset", "paper", "table", "row", "column", "detector", "split", "metric",
        "published", "ours", "ci_low", "ci_high", "difference", "inside_ci", "n_models",
    ]  # fmt: skip
    rows = []
    for name, (paper, dataset) in settings.items():
        pub = _read()
        pub = pub[(pub["paper"] == paper) & ((pub["dataset"] == dataset) | (dataset == "*"))]
        if paper == "sood":
            rows += _sood_rows(name, pub, values if values is not None else summary[:0])
            continue
        mine = summary[summary["dataset"] == name]
        for p in pub.itertuples(index=False):
            matched = _MATCH[paper](mine, p)
            if matched is None:
                continue
            hit, detector = matched
            got = hit.iloc[0] if len(hit) else None
            ours = float(got["mean"]) if got is not None else np.nan
            low = float(got["ci_low"]) if got is not None else np.nan
            high = float(got["ci_high"]) if got is not None else np.nan
            inside = (
                None
                if not (np.isfinite(low) and np.isfinite(high))
                else bool(low <= p.value <= high)
            )
            rows.append({
                "dataset": name, "paper": paper, "table": p.table, "row": p.row,
                "column": p.column, "detector": detector, "split": p.split or None,
                "metric": p.metric, "published": p.value, "ours": ours, "ci_low": low,
                "ci_high": high, "difference": ours - p.value, "inside_ci": inside,
                "n_models": int(got["n_models"]) if got is not None else 0,
            })  # fmt: skip
    return pd.DataFrame(rows, columns=columns)
