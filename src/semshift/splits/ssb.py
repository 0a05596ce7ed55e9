"""Semantic Shift Benchmark open-set splits: candidates ranked by semantic distance to the known.

Presets (docs/methods.md#ssb-splits):

``ssb``
    What the published ImageNet lists did: a breadth-first spanning tree of WordNet from the root,
    restricted to the pool list's classes ("chains"); ``dist(k, u)`` = steps from ``k`` up to the
    lowest common chain node + steps from ``u`` up to it, ``len(chain_k) + len(chain_u) + 1`` when
    the chains share no node; ``total(u)`` = sum over known classes; Easy = the smallest totals,
    Hard = the largest, Medium = the middle; 1000 classes per bin. The known side is the known
    classes present in the pool list (991 of ImageNet-1K in ImageNet-21K-P).
    A sum of path lengths is dominated by the candidate's own depth, so Easy collects shallow
    generic nodes and Hard deep fine-grained siblings of known classes (see the audit's ``depth``).
``nearest``
    Path distance (full WordNet DAG) to the nearest known class; Easy = farthest, Hard = nearest.
``lch-mean``
    Mean Leacock-Chodorow similarity to the known classes; Easy = least similar.
``hierarchy``
    Rules of the SSB's FGVC splits over any taxonomy: ``gap`` = levels from the candidate up to the
    deepest node it shares with a known class; Hard = gap 1 (e.g. Aircraft: an unknown variant of a
    family with known variants), Medium = gap 2 (same manufacturer, other family), Easy = the rest.

Every preset is a set of parameters (``graph``, ``measure``, ``aggregation``, ``easy_first``) that
can be overridden.

References
----------
Vaze, S. et al. (2022). Open-set recognition: a good closed-set classifier is all you need?
(The Semantic Shift Benchmark.)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from pydantic import BeforeValidator, field_validator, model_validator

from semshift.errors import InputError, UnknownNameError
from semshift.splits.levels import BIN_NAMES, ssb_bin_level
from semshift.splits.manifest import SplitManifest
from semshift.splits.registry import (
    BuildContext,
    BuilderParams,
    ClassSpec,
    ParamError,
    register_builder,
)
from semshift.taxonomy import graph as g
from semshift.taxonomy.classlists import ClassList, load_classlist
from semshift.taxonomy.core import Taxonomy
from semshift.taxonomy.custom import load_taxonomy

__all__ = [
    "PRESETS",
    "SSBParams",
    "SSBResult",
    "build_ssb_split",
    "resolve_classes",
    "ssb_bin_level",
]

Graph = Literal["induced-tree", "dag"]
MeasureName = Literal["path", "lch", "wup", "gap"]
Aggregation = Literal["sum", "mean", "median", "nearest"]

PRESETS: dict[str, dict[str, Any]] = {
    "ssb": {"graph": "induced-tree", "measure": "path", "aggregation": "sum", "easy_first": "low"},
    "nearest": {"graph": "dag", "measure": "path", "aggregation": "nearest", "easy_first": "high"},
    "lch-mean": {"graph": "dag", "measure": "lch", "aggregation": "mean", "easy_first": "low"},
    "hierarchy": {"graph": "dag", "measure": "gap", "aggregation": "nearest", "easy_first": "high"},
}
SIMILARITIES = ("lch", "wup")


@dataclass
class SSBResult:
    """A built split: the manifest, a per-candidate audit table and a per-bin summary."""

    manifest: SplitManifest
    audit: pd.DataFrame
    summary: pd.DataFrame

    def write(self, out_dir: str | Path) -> Path:
        """Write ``split.json``, ``audit.csv`` and ``summary.csv`` into ``out_dir``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        self.manifest.write(out / "split.json")
        for name, frame in (("audit.csv", self.audit), ("summary.csv", self.summary)):
            tmp = out / f".{name}.tmp"
            frame.to_csv(tmp, index=False)
            tmp.replace(out / name)
        return out


def resolve_classes(
    taxonomy: Taxonomy, spec: str | Path | Sequence[str], role: str
) -> tuple[list[str], str]:
    """Class ids from a shipped list name, a file of ids or a sequence, checked in the taxonomy.

    Unknown ids raise :class:`UnknownNameError` naming the file and line and close matches.
    """
    if isinstance(spec, (str, Path)):
        cl: ClassList = load_classlist(spec)
        ids, source = list(cl.ids), str(spec)
        where = cl.where
    else:
        ids, source = [str(s) for s in spec], f"{role} list"

        def where(k: int) -> str:
            return f"{role} list, item {k + 1}"

    if not ids:
        raise InputError(f"the {role} classes ({source}) are empty")
    pos = taxonomy.id_rows(ids)
    bad = np.flatnonzero(pos < 0)
    if len(bad):
        k = int(bad[0])
        raise UnknownNameError(
            taxonomy.unknown_message(ids[k], where=f" ({where(k)}; {len(bad)} unknown in all)")
        )
    return ids, source


def _rank(score: NDArray[np.float64], ids: Sequence[str], easy_first: str) -> NDArray[np.int64]:
    """Order of candidates, easiest first; ties broken by id for determinism."""
    key = score if easy_first == "low" else -score
    return np.lexsort((np.asarray(ids, dtype=str), key))


def _bin_positions(
    n: int, bin_size: int | Sequence[int] | None, quantiles: Sequence[float] | None
) -> list[tuple[int, int]]:
    """(start, stop) rank ranges of Easy, Medium, Hard."""
    if quantiles is not None:
        q = [float(x) for x in quantiles]
        if len(q) != 2 or not 0 < q[0] < q[1] < 1:
            raise InputError(f"quantiles must be two increasing values in (0, 1), got {q}")
        cuts = [0, round(q[0] * n), round(q[1] * n), n]
        return [(cuts[i], cuts[i + 1]) for i in range(3)]
    if bin_size is None:
        sizes = [1000] * 3
    elif isinstance(bin_size, (int, np.integer)):
        sizes = [int(bin_size)] * 3
    else:
        sizes = [int(s) for s in bin_size]
    if len(sizes) != 3 or min(sizes) <= 0:
        raise InputError(f"bin sizes must be three positive integers, got {sizes}")
    if sum(sizes) > n:
        raise InputError(
            f"bin sizes {sizes} (total {sum(sizes)}) exceed the {n} candidates in the pool; "
            "use smaller bins or --quantiles"
        )
    easy, medium, hard = sizes
    mid = (easy + (n - hard)) // 2 - medium // 2
    mid = min(max(mid, easy), n - hard - medium)
    return [(0, easy), (mid, mid + medium), (n - hard, n)]


def _aggregate(matrix: NDArray[Any], how: str, similarity: bool) -> NDArray[np.float64]:
    """Aggregate a (known, candidate) matrix over the known axis."""
    m = matrix.astype(np.float64, copy=False)
    if how == "sum":
        return m.sum(axis=0)
    if how == "mean":
        return m.mean(axis=0)
    if how == "median":
        return np.median(m, axis=0)
    if how == "nearest":
        return m.max(axis=0) if similarity else m.min(axis=0)
    raise InputError(f"unknown aggregation {how!r}; choose sum, mean, median or nearest")


def build_ssb_split(
    known: str | Path | Sequence[str] = "imagenet1k",
    pool: str | Path | Sequence[str] | None = "imagenet21k-p",
    *,
    taxonomy: str | Path | Taxonomy = "wordnet",
    preset: str = "ssb",
    graph: Graph | None = None,
    measure: MeasureName | None = None,
    aggregation: Aggregation | None = None,
    easy_first: Literal["low", "high"] | None = None,
    bin_size: int | Sequence[int] | None = None,
    quantiles: Sequence[float] | None = None,
    restrict_to: str | Path | Sequence[str] | None = None,
    gap_bins: dict[str, int] | None = None,
) -> SSBResult:
    """Build Easy / Medium / Hard open-set splits by semantic distance to the known classes.

    Parameters
    ----------
    known, pool : str, path or sequence of ids
        Known (closed-set) classes and open-set candidates: a shipped list name
        (``imagenet1k``, ``imagenet21k-p``, ``imagenet21k-p-winter21``), a file of ids or ids.
        Candidates that are also known are removed (the count is reported). With a custom
        taxonomy, ``pool=None`` means every leaf that is not known.
    taxonomy : "wordnet", a .csv/.json path or a Taxonomy
    preset : "ssb", "nearest", "lch-mean" or "hierarchy"
        Default parameters (module docstring); the keyword arguments below override them.
    graph : "induced-tree" (the pool list's chains) or "dag" (the full taxonomy)
    measure : "path" (edges), "lch", "wup" (similarities) or "gap" (hierarchy levels)
    aggregation : "sum", "mean", "median" or "nearest" (over known classes)
    easy_first : "low" or "high"
        Which end of the aggregated score is Easy.
    bin_size : int or three ints, default 1000
        Classes per bin (Easy from the easy end, Hard from the other, Medium centred).
    quantiles : two floats, optional
        Split all candidates at these rank fractions instead of fixed sizes.
    restrict_to : list name, path or ids, optional
        Keep only these classes in the bins after binning (dropped, not refilled), e.g.
        ``imagenet21k-p-winter21``.
    gap_bins : dict, optional
        For ``measure="gap"``: the gap of each named bin, default ``{"hard": 1, "medium": 2}``;
        larger gaps are Easy.

    Returns
    -------
    SSBResult
        ``manifest`` (bins ordered Easy, Medium, Hard, classes in rank order), ``audit`` (one row
        per candidate: wnid, name, bin, rank, score, nearest known class and its distance, depth)
        and ``summary`` (one row per bin).
    """
    cfg = _ssb_config(preset, graph, measure, aggregation, easy_first)
    tax = taxonomy if isinstance(taxonomy, Taxonomy) else load_taxonomy(taxonomy)
    known_ids, known_src = resolve_classes(tax, known, "known")
    if pool is None:
        leaves = tax.leaf_rows
        pool_ids, pool_src = [str(i) for i in tax.ids[leaves]], "taxonomy leaves"
    else:
        pool_ids, pool_src = resolve_classes(tax, pool, "pool")
    known_set = set(known_ids)
    overlap = [c for c in pool_ids if c in known_set]
    cands = [c for c in pool_ids if c not in known_set]
    if not cands:
        raise InputError(f"the pool ({pool_src}) has no classes outside the known set")

    dist, known_used, dropped_known, space = _known_distances(tax, cfg["graph"], known_ids,
                                                              pool_ids, cands)  # fmt: skip
    score = _score(cfg, dist, space, known_used, cands)

    order = _rank(score, cands, cfg["easy_first"])
    n = len(cands)
    bin_of, ranges_used = _assign_bins(score, order, cfg["measure"], gap_bins, bin_size, quantiles)

    not_kept: dict[str, int] = {}
    restrict_src = None
    if restrict_to is not None:
        keep_ids, restrict_src = resolve_classes(tax, restrict_to, "restrict_to")
        keep = np.isin(np.asarray(cands, dtype=object), np.asarray(keep_ids, dtype=object))
        for name in BIN_NAMES:
            not_kept[name] = int(((bin_of == name) & ~keep).sum())
        bin_of[~keep] = ""

    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(1, n + 1)
    near = np.argmin(dist, axis=0)  # ties: first known class in list order
    audit = (
        pd.DataFrame(
            {
                "wnid": cands,
                "name": tax.labels(cands),
                "bin": bin_of,
                "rank": rank,
                "score": score,
                "nearest_known": [known_used[i] for i in near],
                "nearest_known_name": tax.labels([known_used[i] for i in near]),
                "nearest_distance": dist[near, np.arange(n)],
                "depth": tax.depth(cands),
            }
        )
        .sort_values("rank", kind="stable")
        .reset_index(drop=True)
    )

    bins = {name: audit.loc[audit["bin"] == name, "wnid"].tolist() for name in BIN_NAMES}
    params: dict[str, Any] = {
        "preset": preset,
        **cfg,
        "known": known_src,
        "pool": pool_src,
        "bin_size": (bin_size if bin_size is None or isinstance(bin_size, int) else list(bin_size)),
        "quantiles": None if quantiles is None else list(quantiles),
        "restrict_to": restrict_src,
        **ranges_used,
    }
    extra = {
        "counts": {
            "known_given": len(known_ids),
            "known_used": len(known_used),
            "pool_given": len(pool_ids),
            "overlap_removed": len(overlap),
            "candidates": n,
            **{f"bin_{k}": len(v) for k, v in bins.items()},
        },
        "dropped": {
            "known_not_in_pool_list": dropped_known,
            "not_in_restrict_to": not_kept,
        },
    }
    manifest = SplitManifest(
        method=f"ssb:{preset}",
        params=json.loads(json.dumps(params)),
        taxonomy=tax.name,
        known=list(known_used),
        bins=bins,
        extra=extra,
    )
    return SSBResult(manifest=manifest, audit=audit, summary=summarize(audit))


def _ssb_config(
    preset: str,
    graph: Graph | None,
    measure: MeasureName | None,
    aggregation: Aggregation | None,
    easy_first: Literal["low", "high"] | None,
) -> dict[str, Any]:
    """The preset's settings with the given ones over them, checked."""
    if preset not in PRESETS:
        raise UnknownNameError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    cfg = dict(PRESETS[preset])
    for key, value in (
        ("graph", graph),
        ("measure", measure),
        ("aggregation", aggregation),
        ("easy_first", easy_first),
    ):
        if value is not None:
            cfg[key] = value
    if cfg["graph"] not in ("induced-tree", "dag"):
        raise InputError(f"unknown graph {cfg['graph']!r}; choose induced-tree or dag")
    if cfg["measure"] not in ("path", "lch", "wup", "gap"):
        raise InputError(f"unknown measure {cfg['measure']!r}; choose path, lch, wup or gap")
    if cfg["easy_first"] not in ("low", "high"):
        raise InputError(f"easy_first must be 'low' or 'high', got {cfg['easy_first']!r}")

    return cfg


def _known_distances(
    tax: Taxonomy, graph: str, known_ids: list[str], pool_ids: list[str], cands: list[str]
) -> tuple[NDArray[np.int64], list[str], list[str], Taxonomy]:
    """``(distances (known used, candidates), known classes used, known classes dropped, the
    taxonomy the distances live in)`` over the pool's induced tree or the full graph."""
    dropped_known: list[str] = []
    if graph == "induced-tree":
        tree = tax.induced_tree(list(dict.fromkeys([*pool_ids])), name=f"{tax.name}:chains")
        in_tree = set(pool_ids)
        dropped_known = [k for k in known_ids if k not in in_tree]
        known_used = [k for k in known_ids if k in in_tree]
        if not known_used:
            raise InputError(
                "no known class is in the pool list, so the induced tree has no known side; "
                "use graph='dag'"
            )
        rk, rc = tree.indices(known_used), tree.indices(cands)
        raw = g.pairwise_updist(tree._anc, rc, rk).T.astype(np.int64)
        chain = tree._max_depth_arr + 1  # chain length, the node itself included
        none = raw >= g.NO_PATH
        dist = np.where(none, chain[rk][:, None] + chain[rc][None, :] + 1, raw)
        space = tree
    else:
        known_used = known_ids
        dist = tax.distance_matrix(known_used, cands)
        space = tax

    return dist, known_used, dropped_known, space


def _score(
    cfg: dict[str, Any],
    dist: NDArray[np.int64],
    space: Taxonomy,
    known_used: list[str],
    cands: list[str],
) -> NDArray[np.float64]:
    """The candidates' aggregated distance or similarity to the known classes (or their gap)."""
    if cfg["measure"] == "path":
        return _aggregate(dist, cfg["aggregation"], similarity=False)
    elif cfg["measure"] == "lch":
        return _aggregate(space._lch_from_path(dist), cfg["aggregation"], similarity=True)
    elif cfg["measure"] == "wup":
        return _aggregate(
            space.similarity_matrix(known_used, cands, "wup"), cfg["aggregation"], True
        )
    return _gap(space, known_used, cands).astype(np.float64)


def _assign_bins(
    score: NDArray[np.float64],
    order: NDArray[np.int64],
    measure: str,
    gap_bins: dict[str, int] | None,
    bin_size: int | Sequence[int] | None,
    quantiles: Sequence[float] | None,
) -> tuple[NDArray[np.object_], dict[str, Any]]:
    """Each candidate's bin (by gap, or by rank ranges) and the ranges used, for the manifest."""
    n = len(score)
    bin_of = np.full(n, "", dtype=object)
    if measure == "gap":
        gaps = dict(gap_bins or {"hard": 1, "medium": 2})
        for name in ("easy", "medium", "hard"):
            gaps.setdefault(name, -1)
        bin_of[:] = "easy"
        for name, gap in gaps.items():
            if name != "easy":
                bin_of[score == gap] = name
        ranges_used: dict[str, Any] = {"gap_bins": gaps}
    else:
        positions = _bin_positions(n, bin_size, quantiles)
        for name, (lo, hi) in zip(BIN_NAMES, positions, strict=True):
            bin_of[order[lo:hi]] = name
        ranges_used = {
            "rank_ranges": {k: list(v) for k, v in zip(BIN_NAMES, positions, strict=True)}
        }
    return bin_of, ranges_used


def _gap(tax: Taxonomy, known: Sequence[str], cands: Sequence[str]) -> NDArray[np.int64]:
    """Levels from each candidate up to the deepest ancestor it shares with any known class.

    Candidates sharing nothing get their depth + 1 (they meet at a simulated root).
    """
    anc = tax.ancestor_table
    _, kpos = g.gather(anc.ptr, tax.indices(known))
    shared = np.zeros(len(tax), dtype=bool)
    shared[anc.anc[kpos]] = True
    rows = tax.indices(cands)
    owner, pos = g.gather(anc.ptr, rows)
    depth = tax.min_depths
    best = np.full(len(rows), -1, dtype=np.int64)
    hit = shared[anc.anc[pos]]
    np.maximum.at(best, owner[hit], depth[anc.anc[pos][hit]])
    return depth[rows] - best


def summarize(audit: pd.DataFrame) -> pd.DataFrame:
    """One row per bin: count, score range and mean, mean depth, mean nearest distance, examples."""
    rows = []
    for name in BIN_NAMES:
        part = audit[audit["bin"] == name]
        rows.append(
            {
                "bin": name,
                "classes": len(part),
                "score_min": float(part["score"].min()) if len(part) else float("nan"),
                "score_mean": float(part["score"].mean()) if len(part) else float("nan"),
                "score_max": float(part["score"].max()) if len(part) else float("nan"),
                "mean_depth": float(part["depth"].mean()) if len(part) else float("nan"),
                "mean_nearest_distance": (
                    float(part["nearest_distance"].mean()) if len(part) else float("nan")
                ),
                "examples": ", ".join(part["name"].head(3)),
            }
        )
    return pd.DataFrame(rows)


def _bin_size(value: Any) -> Any:
    def positive(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v > 0

    if value is None or positive(value):
        return value
    if isinstance(value, (list, tuple)) and len(value) == 3 and all(map(positive, value)):
        return tuple(value)
    raise ValueError(f"expected a positive integer or three (easy, medium, hard), got {value!r}")


class SSBParams(BuilderParams):
    """Parameters of the ``ssb`` builder: those of :func:`build_ssb_split`, same defaults.

    Departure: ``pool`` defaults to ``None``, which means ``imagenet21k-p`` under WordNet and
    every leaf outside the known set under a custom taxonomy (as ``semshift splits ssb``). The
    CLI's ``--winter21`` is ``restrict_to: imagenet21k-p-winter21``. Checked before any work:
    ``bin_size`` and ``quantiles`` are exclusive and do not apply to measure ``gap``, whose bins
    come from ``gap_bins`` (which applies to it alone).
    """

    known: ClassSpec = "imagenet1k"
    pool: ClassSpec | None = None
    preset: str = "ssb"
    graph: Graph | None = None
    measure: MeasureName | None = None
    aggregation: Aggregation | None = None
    easy_first: Literal["low", "high"] | None = None
    bin_size: Annotated[int | tuple[int, int, int] | None, BeforeValidator(_bin_size)] = None
    quantiles: tuple[float, float] | None = None
    restrict_to: ClassSpec | None = None
    gap_bins: dict[str, int] | None = None

    @field_validator("preset")
    @classmethod
    def _preset(cls, value: str) -> str:
        if value not in PRESETS:
            raise ValueError(f"unknown preset {value!r}; choose one of {', '.join(PRESETS)}")
        return value

    @field_validator("quantiles")
    @classmethod
    def _quantiles(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        if value is not None and not 0 < value[0] < value[1] < 1:
            raise ValueError(f"expected two increasing fractions in (0, 1), got {list(value)}")
        return value

    @field_validator("gap_bins")
    @classmethod
    def _gap_bins(cls, value: dict[str, int] | None) -> dict[str, int] | None:
        for name, gap in (value or {}).items():
            if name not in BIN_NAMES:
                raise ValueError(f"bin {name!r} is not one of {', '.join(BIN_NAMES)}")
            if gap < 1:
                raise ValueError(f"the gap of bin {name!r} must be >= 1, got {gap}")
        return value

    @model_validator(mode="after")
    def _exclusive(self) -> SSBParams:
        measure = self.measure or PRESETS[self.preset]["measure"]
        if self.bin_size is not None and self.quantiles is not None:
            raise ParamError("quantiles", "give bin_size or quantiles, not both")
        if measure == "gap":
            for key in ("bin_size", "quantiles"):
                if getattr(self, key) is not None:
                    raise ParamError(key, "does not apply to measure 'gap' (use gap_bins)")
        elif self.gap_bins is not None:
            raise ParamError("gap_bins", f"applies to measure 'gap' only, not {measure!r}")
        return self


@register_builder(
    "ssb",
    SSBParams,
    "Easy / Medium / Hard open-set bins of candidates ranked by semantic distance to the known "
    "classes (Semantic Shift Benchmark).",
)
def _build_from_params(params: SSBParams, ctx: BuildContext) -> SplitManifest:
    """``build_ssb_split`` on the context's taxonomy, with files resolved against ``base_dir``."""
    pool = params.pool
    if pool is None and ctx.is_wordnet():
        pool = "imagenet21k-p"
    known = ctx.classes("known", params.known)
    pool = ctx.classes("pool", pool)
    restrict_to = ctx.classes("restrict_to", params.restrict_to)
    return build_ssb_split(
        known,
        pool,
        taxonomy=ctx.load_taxonomy(),
        preset=params.preset,
        graph=params.graph,
        measure=params.measure,
        aggregation=params.aggregation,
        easy_first=params.easy_first,
        bin_size=params.bin_size,
        quantiles=params.quantiles,
        restrict_to=restrict_to,
        gap_bins=None if params.gap_bins is None else dict(params.gap_bins),
    ).manifest
