"""SSB Fig. 1 in the report: each open-set class beside its nearest known class.

Method reference: docs/methods.md#open-set-class-pairs.

Reads only the output directory, like the operating-point gallery
(:mod:`semshift.report.gallery`): the per-sample tables ``scores/<set>.parquet`` with the
columns :data:`PAIR_COLUMNS` written by the run layer, and ``results.json``'s taxonomy for the
path distances. Runs without those columns get a sentence saying why.

Selection (:func:`select_pairs`, deterministic: no random draw, only sorting):

- **Open-set side**: rows with label -1, an image path and a ``nearest_known`` class (the run
  records one for every row whose class is in the taxonomy but not a known class). A class
  seen in several sets is shown once, in its first set ordered by covariate level (clean
  images first), semantic level, then set name; its images are its first :data:`PER_SIDE`
  distinct paths of that set in path order.
- **Known side**: rows of the ID sets (``id_test``, else ``id_val``) whose ``class_id`` equals
  the nearest known class: the first :data:`PER_SIDE` distinct paths in path order.
- **Order and cap**: the sets by semantic level (the smallest shift, e.g. SSB's Hard bin,
  first), then name; within a set the classes nearest their known class first (taxonomy path
  distance, where the taxonomy can be read), then by class id; at most :data:`MAX_PER_SET`
  classes per set, and the report says how many were left out.

References
----------
Vaze, S., Han, K., Vedaldi, A. and Zisserman, A. (2022). Open-set recognition: a good
closed-set classifier is all you need? ICLR (the Semantic Shift Benchmark, Fig. 1).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from semshift.report._load import RunData
from semshift.report.blocks import Block, Paragraph
from semshift.report.gallery import GALLERY_DIR, Gallery, Thumbnail, ThumbnailCache

if TYPE_CHECKING:
    from semshift.report.sections import SectionContext

__all__ = [
    "ID_SETS",
    "MAX_PER_SET",
    "PAIR_COLUMNS",
    "PER_SIDE",
    "ClassPair",
    "class_pairs_section",
    "pair_galleries",
    "select_pairs",
]

#: Per-sample columns read from ``scores/<set>.parquet``.
PAIR_COLUMNS = ("label", "path", "class_id", "class_name", "nearest_known", "nearest_known_name")
#: Images per side of a pair.
PER_SIDE = 2
#: Open-set classes shown per set.
MAX_PER_SET = 6
#: The ID sets the known side's images come from, in order of preference.
ID_SETS = ("id_test", "id_val")
#: ``distance(open_ids, known_ids) -> (n,) int``: taxonomy path lengths, -1 where none.
Distance = Callable[[Sequence[str], Sequence[str]], NDArray[np.int64]]


@dataclass(frozen=True)
class ClassPair:
    """An open-set class and its nearest known class, with the images shown for each.

    Attributes
    ----------
    set : str
        The set the open-set class's images come from.
    semantic_level : float or None
        That set's semantic level (None where the run recorded none).
    open_id, open_name : str, str or None
        The open-set class.
    known_id, known_name : str, str or None
        Its nearest known class in the taxonomy.
    distance : int or None
        Their taxonomy path distance (None when the taxonomy could not be read).
    open_paths, known_paths : tuple of str
        The images shown, at most :data:`PER_SIDE` each (``known_paths`` may be empty).
    """

    set: str
    semantic_level: float | None
    open_id: str
    open_name: str | None
    known_id: str
    known_name: str | None
    distance: int | None
    open_paths: tuple[str, ...]
    known_paths: tuple[str, ...]


def _levels(frame: pd.DataFrame, column: str) -> pd.Series:
    if column not in frame:
        return pd.Series(np.nan, index=frame.index)
    return pd.to_numeric(frame[column], errors="coerce")


def _first_paths(frame: pd.DataFrame, per_side: int) -> dict[str, tuple[str, ...]]:
    """Per ``class_id``: its first ``per_side`` distinct paths in path order."""
    rows = frame.assign(path=frame["path"].astype(str))
    rows = rows.drop_duplicates(["class_id", "path"]).sort_values(["class_id", "path"])
    rows = rows.groupby("class_id", sort=False).head(per_side)
    return {str(k): tuple(v) for k, v in rows.groupby("class_id", sort=False)["path"]}


def _name(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    return str(value) or None


def select_pairs(
    frames: Mapping[str, pd.DataFrame],
    *,
    per_side: int = PER_SIDE,
    max_per_set: int = MAX_PER_SET,
    distance: Distance | None = None,
) -> tuple[list[ClassPair], int]:
    """The open-set / nearest-known class pairs of a run's score tables.

    Parameters
    ----------
    frames : mapping of str to DataFrame
        Set name -> its ``scores/<set>.parquet`` rows, with the columns :data:`PAIR_COLUMNS`
        (``class_name`` may be missing) and optionally ``semantic_level``,
        ``covariate_level``.
    per_side : int
        Images per side.
    max_per_set : int
        Open-set classes shown per set.
    distance : callable, optional
        ``distance(open_ids, known_ids) -> (n,) int`` taxonomy path lengths, element-wise, -1
        where there is none; None: no distance, classes ordered by id.

    Returns
    -------
    pairs : list of ClassPair
        In report order (see the module docstring).
    left_out : int
        Open-set classes beyond ``max_per_set`` in their set.

    Examples
    --------
    >>> ood = pd.DataFrame({"label": [-1, -1], "path": ["b.png", "a.png"],
    ...                     "class_id": ["fox", "fox"], "nearest_known": ["dog", "dog"],
    ...                     "nearest_known_name": ["dog", "dog"]})
    >>> idt = pd.DataFrame({"label": [0], "path": ["d.png"], "class_id": ["dog"]})
    >>> pairs, left = select_pairs({"id_test": idt, "far": ood})
    >>> pairs[0].open_paths, pairs[0].known_paths, left
    (('a.png', 'b.png'), ('d.png',), 0)
    """
    parts = []
    for k, (name, frame) in enumerate(frames.items()):
        part = frame.assign(
            __set=name,
            __order=k,
            __sem=_levels(frame, "semantic_level"),
            __cov=_levels(frame, "covariate_level").fillna(0.0),
        )
        parts.append(part)
    if not parts:
        return [], 0
    both = pd.concat(parts, ignore_index=True)
    for col in ("path", "class_id", "nearest_known"):
        if col not in both:
            return [], 0
    label = pd.to_numeric(both["label"], errors="coerce") if "label" in both else None
    has = both["path"].notna() & both["class_id"].notna()
    is_open = has & both["nearest_known"].notna() & ((label == -1) if label is not None else True)
    opened = both[is_open].copy()
    opened[["path", "class_id", "nearest_known"]] = opened[
        ["path", "class_id", "nearest_known"]
    ].astype(str)
    # each class in its first set: clean images first, then the smallest shift, then by name
    opened = opened.sort_values(["__cov", "__sem", "__set", "class_id"], kind="stable")
    opened = opened[opened["__set"] == opened.groupby("class_id")["__set"].transform("first")]
    if opened.empty:
        return [], 0
    known_rows = both[has & both["__set"].isin(ID_SETS)].copy()
    if label is not None:
        known_rows = known_rows[label[known_rows.index] >= 0]
    known_rows["__pref"] = known_rows["__set"].map({s: i for i, s in enumerate(ID_SETS)})
    known_rows["class_id"] = known_rows["class_id"].astype(str)
    known_rows = known_rows[
        known_rows["__pref"] == known_rows.groupby("class_id")["__pref"].transform("min")
    ]
    classes = opened.drop_duplicates("class_id").reset_index(drop=True)
    if distance is not None:
        got = np.asarray(
            distance(classes["class_id"].tolist(), classes["nearest_known"].tolist()),
            dtype=np.int64,
        )
        classes["__dist"] = pd.Series(got, index=classes.index, dtype="Int64").where(got >= 0)
    else:
        classes["__dist"] = pd.array([None] * len(classes), dtype="Int64")
    set_sem = classes.groupby("__set")["__sem"].transform("min")
    classes = classes.assign(__set_sem=set_sem).sort_values(
        ["__set_sem", "__set", "__dist", "class_id"], kind="stable", na_position="last"
    )
    shown = classes.groupby("__set", sort=False).head(max(int(max_per_set), 0))
    # images of the shown classes only (a bounded number of groups)
    open_paths = _first_paths(opened[opened["class_id"].isin(shown["class_id"])], per_side)
    known_paths = _first_paths(
        known_rows[known_rows["class_id"].isin(shown["nearest_known"])], per_side
    )
    pairs = [
        ClassPair(
            set=str(r["__set"]),
            semantic_level=None if pd.isna(r["__sem"]) else float(r["__sem"]),
            open_id=str(r["class_id"]),
            open_name=_name(r.get("class_name")),
            known_id=str(r["nearest_known"]),
            known_name=_name(r.get("nearest_known_name")),
            distance=None if pd.isna(r["__dist"]) else int(r["__dist"]),
            open_paths=open_paths[str(r["class_id"])],
            known_paths=known_paths.get(str(r["nearest_known"]), ()),
        )
        for _, r in shown.iterrows()  # one row per shown class (at most max_per_set per set)
    ]
    return pairs, len(classes) - len(shown)


def _both(name: str | None, cid: str) -> str:
    return f"{name} ({cid})" if name and name != cid else cid


def pair_galleries(
    pairs: Sequence[ClassPair], cache: ThumbnailCache | None = None
) -> list[Gallery]:
    """One :class:`~semshift.report.gallery.Gallery` per pair: the open-set class's images,
    then its nearest known class's."""
    cache = cache or ThumbnailCache()
    out = []
    for p in pairs:
        open_text, known_text = _both(p.open_name, p.open_id), _both(p.known_name, p.known_id)
        thumbs: list[Thumbnail] = [cache.get(x, f"open-set: {open_text}") for x in p.open_paths]
        thumbs += [cache.get(x, f"known: {known_text}") for x in p.known_paths]
        level = "" if p.semantic_level is None else f", semantic level {p.semantic_level:g}"
        dist = "" if p.distance is None else f"; taxonomy path distance {p.distance}"
        missing = "" if p.known_paths else " (no ID test image of the known class was scored)"
        out.append(
            Gallery(
                key=f"pair-{p.set}-{p.open_id}",
                title=f"{open_text} vs nearest known {known_text}",
                caption=f"Set {p.set}{level}{dist}: the open-set class's images first, then "
                f"its nearest known class's{missing}.",
                thumbnails=thumbs,
                empty="no image of either class could be shown",
            )
        )
    return out


def _taxonomy_distance(run: RunData) -> Distance | None:
    """Path distances in the run's taxonomy (``results.json``'s config), or None."""
    from semshift.errors import SemshiftError
    from semshift.taxonomy.custom import load_taxonomy

    cfg = run.provenance.get("config") if isinstance(run.provenance, dict) else None
    spec = cfg.get("taxonomy") if isinstance(cfg, dict) else None
    if not isinstance(spec, str) or not spec:
        return None
    try:
        tax = load_taxonomy(spec)
    except (SemshiftError, OSError, ValueError):
        return None

    ids = tax.ids.astype(str)

    def distance(a: Sequence[str], b: Sequence[str]) -> NDArray[np.int64]:
        ia, ib = np.asarray(a, dtype=str), np.asarray(b, dtype=str)
        ok = np.isin(ia, ids) & np.isin(ib, ids)
        d = np.full(len(ia), -1, dtype=np.int64)
        if ok.any():
            d[ok] = np.asarray(tax.path_distance(list(ia[ok]), list(ib[ok])), dtype=np.int64)
        return d

    return distance


def _read(run: RunData) -> tuple[dict[str, pd.DataFrame], str | None]:
    """The score tables with the pair columns, or why there are none."""
    wanted = [*PAIR_COLUMNS, "semantic_level", "covariate_level"]
    frames = {name: run.read_scores(name, wanted) for name in run.score_files}
    if not any("nearest_known" in f.columns and "path" in f.columns for f in frames.values()):
        return {}, (
            "the per-sample tables in scores/ have no image paths or nearest known classes "
            "(columns 'path', 'nearest_known'; runs written before semshift recorded them)"
        )
    return frames, None


def class_pairs_section(ctx: SectionContext) -> list[Block] | None:
    """The report section: a sentence, then one gallery per open-set class (its images beside
    its nearest known class's); None (no section) for a run without ``scores/``.

    ``ctx`` is the report's :class:`~semshift.report.sections.SectionContext`; the thumbnails
    are written under :data:`~semshift.report.gallery.GALLERY_DIR` for report.md."""
    run = ctx.run
    if not run.score_files:
        return None  # no per-sample table at all: no section (as the OSCR figure)
    frames, reason = _read(run)
    if reason is not None:
        return [Paragraph(f"No class pairs: {reason}.")]
    pairs, left_out = select_pairs(frames, distance=_taxonomy_distance(run))
    if not pairs:
        return [
            Paragraph(
                "No class pairs: no open-set image (label -1) with an image path has a nearest "
                "known class (the run records one where the run's taxonomy holds the image's "
                "class, e.g. class-folder images named by taxonomy id)."
            )
        ]
    more = f" {left_out} more open-set class(es) are not shown." if left_out else ""
    blocks: list[Block] = [
        Paragraph(
            "As the Semantic Shift Benchmark's Fig. 1: each open-set class beside its nearest "
            "known class in the taxonomy, at most "
            f"{MAX_PER_SET} classes per set, the set with the smallest semantic shift first "
            "and within a set the classes nearest a known class first. Images: the first "
            f"{PER_SIDE} by path of each class (the known class's from id_test).{more}"
        )
    ]
    galleries = pair_galleries(pairs)
    folder = Path(run.root) / GALLERY_DIR
    for g in galleries:
        for t in g.thumbnails:
            path = folder / t.filename
            if not path.exists():
                folder.mkdir(parents=True, exist_ok=True)
                path.write_bytes(t.data)
    blocks += galleries
    return blocks
