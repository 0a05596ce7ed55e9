"""ImageNet-OOD candidate cleaning: drop classes that are not clean semantic shift.

Method reference: docs/methods.md#imagenet-ood-cleaning.

Rules, applied in order (the first that matches gives the reason code):

1. ``id_related``: the candidate is an ID class, a hypernym (ancestor) of one or a hyponym
   (descendant) of one.
2. ``excluded_subtree``: the candidate lies under an excluded subtree (default ``organism.n.01``;
   WordNet's biological and everyday categories disagree there, e.g. herbivore vs cattle).
3. ``covariate_shift``: "semantically grounded covariate shift". For each ID class, its highest
   ancestor that is an ancestor of no other ID class marks where the classifier's decision region
   for that class may begin; a candidate under such a node is the same class at a coarser level.
   Equivalently: the candidate has an ancestor that is an ancestor of exactly one ID class.
4. ``not_sister``: only sister classes (sharing a direct parent with an ID class) are kept as the
   final list for manual review (the paper reduced 5,074 candidates to 2,874 this way).

Rule 5 (visual ambiguity) works on features: :func:`visual_ambiguity` drops candidate images whose
nearest ID-image feature is closer than a threshold, and classes with too many such images.

References
----------
Yang, W., Zhang, B. and Russakovsky, O. (2024). ImageNet-OOD: Deciphering Modern
Out-of-Distribution Detection Algorithms. ICLR.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from pydantic import BeforeValidator

from semshift.errors import InputError, UnknownNameError
from semshift.splits.manifest import SplitManifest
from semshift.splits.registry import BuildContext, BuilderParams, ClassSpec, register_builder
from semshift.splits.ssb import resolve_classes
from semshift.taxonomy import graph as g
from semshift.taxonomy.core import Taxonomy
from semshift.taxonomy.custom import load_taxonomy

__all__ = [
    "RULES",
    "CleaningParams",
    "CleaningResult",
    "build_cleaning_split",
    "visual_ambiguity",
]

RULES = {
    1: "id_related",
    2: "excluded_subtree",
    3: "covariate_shift",
    4: "not_sister",
}


@dataclass
class CleaningResult:
    """Kept and dropped candidates, with a reason per dropped class and counts per rule."""

    manifest: SplitManifest
    audit: pd.DataFrame
    counts: dict[str, int]

    def write(self, out_dir: str | Path) -> Path:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        self.manifest.write(out / "split.json")
        tmp = out / ".audit.csv.tmp"
        self.audit.to_csv(tmp, index=False)
        tmp.replace(out / "audit.csv")
        return out


def _first_hit(
    anc: g.AncestorTable, rows: NDArray[np.int64], flag: NDArray[np.bool_], prefer_far: bool
) -> NDArray[np.int64]:
    """Per row, an ancestor with ``flag`` set (the nearest, or the farthest), else -1."""
    owner, pos = g.gather(anc.ptr, rows)
    a = anc.anc[pos]
    hit = flag[a] & (anc.dist[pos] > 0)
    owner, a, d = owner[hit], a[hit], anc.dist[pos][hit]
    best = np.full(len(rows), -1, dtype=np.int64)
    if len(owner):
        order = np.lexsort((a, -d if prefer_far else d, owner))
        owner, a = owner[order], a[order]
        first = np.ones(len(owner), dtype=bool)
        first[1:] = owner[1:] != owner[:-1]
        best[owner[first]] = a[first]
    return best


def build_cleaning_split(
    id_classes: str | Path | Sequence[str] = "imagenet1k",
    pool: str | Path | Sequence[str] = "imagenet21k-p",
    *,
    taxonomy: str | Path | Taxonomy = "wordnet",
    exclude_subtrees: Sequence[str] = ("organism.n.01",),
    sisters_only: bool = True,
) -> CleaningResult:
    """Apply rules 1-4 of the ImageNet-OOD cleaning to a candidate pool.

    Parameters
    ----------
    id_classes, pool : shipped list name, file of ids or sequence of ids
    taxonomy : "wordnet", a custom hierarchy file or a Taxonomy
    exclude_subtrees : ids or aliases (``organism.n.01``); empty to skip rule 2
    sisters_only : apply rule 4 (keep only sisters of ID classes)

    Returns
    -------
    CleaningResult
        ``manifest.bins = {"kept": [...], "dropped": [...]}`` (pool order), ``audit`` with
        wnid, name, kept, rule, reason, and ``counts`` per rule.
    """
    tax = taxonomy if isinstance(taxonomy, Taxonomy) else load_taxonomy(taxonomy)
    id_ids, id_src = resolve_classes(tax, id_classes, "ID")
    pool_ids, pool_src = resolve_classes(tax, pool, "pool")
    excluded = list(exclude_subtrees)
    ex_rows = tax.indices(excluded, where="--exclude-subtree") if excluded else np.zeros(0, int)
    n = len(tax)
    anc = tax.ancestor_table
    idr = np.unique(tax.indices(id_ids))
    cand = tax.indices(pool_ids)

    is_id = np.zeros(n, dtype=bool)
    is_id[idr] = True
    # how many ID classes lie at or below each node
    _, ipos = g.gather(anc.ptr, idr)
    id_below = np.bincount(anc.anc[ipos], minlength=n)
    # rule 1: an ID class, a hypernym of one (ID classes below it) or a hyponym (ID ancestor)
    hypo_of = _first_hit(anc, cand, is_id, prefer_far=False)
    r1 = is_id[cand] | (id_below[cand] > 0) | (hypo_of >= 0)
    # rule 2: under an excluded subtree
    under_ex = tax.descendant_mask(tax.ids[ex_rows].tolist()) if len(ex_rows) else np.zeros(n, bool)
    r2 = under_ex[cand]
    # rule 3: an ancestor that is an ancestor of exactly one ID class
    private = id_below == 1
    private_anc = _first_hit(anc, cand, private, prefer_far=True)
    r3 = private_anc >= 0
    # rule 4: sisters share a direct parent with an ID class
    parent_ptr, parent_idx = tax.parent_csr
    _, ppos = g.gather(parent_ptr, idr)
    id_parent = np.zeros(n, dtype=bool)
    id_parent[parent_idx[ppos]] = True
    cowner, cpos = g.gather(parent_ptr, cand)
    sister = np.zeros(len(cand), dtype=bool)
    np.logical_or.at(sister, cowner, id_parent[parent_idx[cpos]])
    r4 = ~sister if sisters_only else np.zeros(len(cand), dtype=bool)

    rule = np.zeros(len(cand), dtype=np.int64)
    for number, mask in ((4, r4), (3, r3), (2, r2), (1, r1)):  # first matching rule wins
        rule[mask] = number

    # the ID class a dropped candidate relates to, for the reason text
    below_id = _first_hit_desc(tax, cand, is_id)
    private_id = _private_owner(tax, private_anc, is_id)
    ex_of = _first_hit(anc, cand, np.isin(np.arange(n), ex_rows), prefer_far=False)
    labels = tax.names
    ids = tax.ids
    reasons = []
    for i, r in enumerate(rule.tolist()):
        if r == 1:
            if is_id[cand[i]]:
                reasons.append("is an ID class")
            elif hypo_of[i] >= 0:
                k = hypo_of[i]
                reasons.append(f"hyponym of ID class {ids[k]} ({labels[k]})")
            else:
                k = below_id[i]
                reasons.append(f"hypernym of ID class {ids[k]} ({labels[k]})")
        elif r == 2:
            e = ex_of[i] if ex_of[i] >= 0 else cand[i]
            reasons.append(f"under excluded subtree {ids[e]} ({labels[e]})")
        elif r == 3:
            a, k = private_anc[i], private_id[i]
            reasons.append(
                f"under {ids[a]} ({labels[a]}), which holds only ID class {ids[k]} ({labels[k]})"
            )
        elif r == 4:
            reasons.append("shares no direct parent with an ID class")
        else:
            reasons.append("")
    audit = pd.DataFrame(
        {
            "wnid": pool_ids,
            "name": [labels[i] for i in cand],
            "kept": rule == 0,
            "rule": [RULES.get(r, "") for r in rule.tolist()],
            "reason": reasons,
        }
    )
    counts = {RULES[r]: int((rule == r).sum()) for r in RULES}
    counts["candidates"] = len(pool_ids)
    counts["kept"] = int((rule == 0).sum())
    # the paper's intermediate numbers: after rules 1-2, and sisters among those
    counts["after_rules_1_2"] = int((~r1 & ~r2).sum())
    counts["sisters_after_rules_1_2"] = int((~r1 & ~r2 & sister).sum())
    kept = audit.loc[audit["kept"], "wnid"].tolist()
    dropped = audit.loc[~audit["kept"], "wnid"].tolist()
    params: dict[str, Any] = {
        "id_classes": id_src,
        "pool": pool_src,
        "exclude_subtrees": [str(ids[e]) for e in ex_rows],
        "sisters_only": sisters_only,
    }
    manifest = SplitManifest(
        method="cleaning",
        params=json.loads(json.dumps(params)),
        taxonomy=tax.name,
        known=list(id_ids),
        bins={"kept": kept, "dropped": dropped},
        extra={"counts": counts},
    )
    return CleaningResult(manifest=manifest, audit=audit, counts=counts)


def _first_hit_desc(
    tax: Taxonomy, cand: NDArray[np.int64], is_id: NDArray[np.bool_]
) -> NDArray[np.int64]:
    """For candidates that are hypernyms of ID classes, one ID class below each (smallest id)."""
    anc = tax.ancestor_table
    idr = np.flatnonzero(is_id)
    owner, pos = g.gather(anc.ptr, idr)
    a = anc.anc[pos]
    pos_in_cand = np.full(len(tax), -1, dtype=np.int64)
    pos_in_cand[cand] = np.arange(len(cand))
    hit = (pos_in_cand[a] >= 0) & (anc.dist[pos] > 0)
    out = np.full(len(cand), -1, dtype=np.int64)
    np.maximum.at(out, pos_in_cand[a[hit]], idr[owner[hit]])
    return out


def _private_owner(
    tax: Taxonomy, nodes: NDArray[np.int64], is_id: NDArray[np.bool_]
) -> NDArray[np.int64]:
    """The single ID class under each node (-1 where ``nodes`` is -1)."""
    anc = tax.ancestor_table
    idr = np.flatnonzero(is_id)
    owner, pos = g.gather(anc.ptr, idr)
    holder = np.full(len(tax), -1, dtype=np.int64)
    holder[anc.anc[pos]] = idr[owner]
    out = np.where(nodes >= 0, holder[np.maximum(nodes, 0)], -1)
    return out


def visual_ambiguity(
    id_features: ArrayLike,
    candidate_features: ArrayLike,
    candidate_class: ArrayLike,
    *,
    threshold: float,
    max_fraction: float = 0.5,
    metric: str = "euclidean",
    block: int = 4096,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rule 5: nearest ID-image feature distance per candidate image.

    Parameters
    ----------
    id_features : (N_id, D) features of ID images (e.g. ImageNet-1K validation)
    candidate_features : (N, D) features of candidate images
    candidate_class : (N,) class id of each candidate image
    threshold : images whose nearest ID distance is below it are dropped
    max_fraction : classes with more than this fraction of dropped images are dropped
    metric : "euclidean" or "cosine" (1 - cosine similarity)

    Returns
    -------
    images : DataFrame, one row per candidate image: class, nearest_id (row in id_features),
        distance, dropped
    classes : DataFrame, one row per class: images, dropped_images, fraction, dropped
    """
    if not 0.0 <= float(max_fraction) <= 1.0:
        raise InputError(
            f"max_fraction: a fraction of a class's images in [0, 1], got {max_fraction}"
        )
    x = np.asarray(id_features, dtype=np.float32)
    y = np.asarray(candidate_features, dtype=np.float32)
    cls = np.asarray(candidate_class)
    if x.ndim != 2 or y.ndim != 2:
        raise InputError("id_features and candidate_features must be 2-D (samples, dimensions)")
    if x.shape[1] != y.shape[1]:
        raise InputError(f"feature dimensions differ: ID {x.shape[1]} vs candidates {y.shape[1]}")
    if len(cls) != len(y):
        raise InputError(f"candidate_class has {len(cls)} entries for {len(y)} images")
    for name, arr in (("id_features", x), ("candidate_features", y)):
        bad = ~np.isfinite(arr).all(axis=1)
        if bad.any():
            raise InputError(
                f"{name} has {int(bad.sum())} rows with NaN or inf (first: row {np.argmax(bad)})"
            )
    if metric == "cosine":
        x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        y = y / np.maximum(np.linalg.norm(y, axis=1, keepdims=True), 1e-12)
    elif metric != "euclidean":
        raise InputError(f"unknown metric {metric!r}; choose euclidean or cosine")
    xx = (x.astype(np.float64) ** 2).sum(axis=1)
    nearest = np.empty(len(y), dtype=np.int64)
    dist = np.empty(len(y), dtype=np.float64)
    for lo in range(0, len(y), block):
        yb = y[lo : lo + block]
        d2 = xx[None, :] - 2.0 * (yb @ x.T).astype(np.float64)  # + ||y||^2, constant per row
        j = np.argmin(d2, axis=1)
        nearest[lo : lo + block] = j
        yy = (yb.astype(np.float64) ** 2).sum(axis=1)
        best = np.maximum(d2[np.arange(len(yb)), j] + yy, 0.0)
        dist[lo : lo + block] = np.sqrt(best) if metric == "euclidean" else best / 2.0
    images = pd.DataFrame(
        {"class": cls, "nearest_id": nearest, "distance": dist, "dropped": dist < threshold}
    )
    grouped = images.groupby("class", sort=True)["dropped"]
    classes = pd.DataFrame({"images": grouped.size(), "dropped_images": grouped.sum()})
    classes["fraction"] = classes["dropped_images"] / classes["images"]
    classes["dropped"] = classes["fraction"] > max_fraction
    return images, classes.reset_index()


def _one_or_many(value: Any) -> Any:
    return (value,) if isinstance(value, str) else value


class CleaningParams(BuilderParams):
    """Parameters of the ``cleaning`` builder: those of :func:`build_cleaning_split`, same
    defaults (``exclude_subtrees: []`` skips rule 2, ``sisters_only: false`` skips rule 4)."""

    id_classes: ClassSpec = "imagenet1k"
    pool: ClassSpec = "imagenet21k-p"
    exclude_subtrees: Annotated[tuple[str, ...], BeforeValidator(_one_or_many)] = ("organism.n.01",)
    sisters_only: bool = True


@register_builder(
    "cleaning",
    CleaningParams,
    "ImageNet-OOD cleaning: candidates kept or dropped by rules 1-4 (ID-related, excluded "
    "subtree, covariate shift, not a sister of an ID class).",
)
def _build_from_params(params: CleaningParams, ctx: BuildContext) -> SplitManifest:
    """``build_cleaning_split`` on the context's taxonomy, with files resolved against
    ``base_dir``; the excluded subtrees are looked up before the rules run."""
    id_classes = ctx.classes("id_classes", params.id_classes)
    pool = ctx.classes("pool", params.pool)
    tax = ctx.load_taxonomy()
    for k, node in enumerate(params.exclude_subtrees):
        try:
            tax.index(node)
        except UnknownNameError as err:
            raise InputError(f"{ctx.where}.params.exclude_subtrees[{k}]: {err}") from None
    return build_cleaning_split(
        id_classes,
        pool,
        taxonomy=tax,
        exclude_subtrees=params.exclude_subtrees,
        sisters_only=params.sisters_only,
    ).manifest
