"""SOOD stage 2's inputs: per-image image-text scores, read, computed from images, or computed
from stored embeddings.

Method reference: docs/methods.md#sood-superclasses.

A score is the cosine similarity of an image's embedding and the text embedding of the bare
name of its super-class (the paper: "the normalized cosine similarity of the corresponding CLIP
embeddings"; the normalisation, min-max within the super-class, is
:func:`semshift.splits.superclass.split_by_scores`'s). Three sources, one table (``superclass``,
``class``, ``path``, ``score``) for :func:`semshift.splits.superclass.build_score_split`:

- :func:`read_scores`: a CSV the user computed;
- :func:`score_images`: a folder of sub-class folders scored by an :class:`ImageTextScorer`
  (an open_clip model: both towers run here);
- :func:`score_embeddings` / :func:`score_store`: image embeddings already extracted (a feature
  store of the sub-class images, its ``features`` array), against text embeddings of the
  super-class names: from the text tower of the store's open_clip model
  (:func:`text_embeddings`) or given as an array. No scaling (CLIP's logit scale of 100) and
  no softmax over super-classes: the min-max normalisation would undo a scale, and the paper
  scores each image against its own super-class only.

References
----------
Bacchin, A., Allegro, D., Ghidoni, S. and Menegatti, E. (2024). SOOD-ImageNet: a large-scale
dataset for semantic out-of-distribution image classification and semantic segmentation.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from semshift.errors import InputError
from semshift.textio import read_csv

if TYPE_CHECKING:
    from semshift.features.store import FeatureStore
    from semshift.splits.superclass import SuperclassResult, TextEncoder

__all__ = [
    "ImageTextScorer",
    "read_scores",
    "score_embeddings",
    "score_images",
    "score_store",
    "text_embeddings",
]


class ImageTextScorer(Protocol):
    """Scores images against a text: ``score(images, text) -> (len(images),)`` similarities."""

    def score(self, images: Sequence[str], text: str) -> NDArray[np.float64]: ...


def read_scores(path: str | Path) -> pd.DataFrame:
    """Per-image scores: a CSV with ``class`` (the image's sub-class id) and ``score`` columns,
    optionally ``superclass`` (checked against stage 1) and ``path`` (kept in the output).

    Returns the table with a ``line`` column (file line of each row) for error messages.
    """
    path = Path(path)
    frame = read_csv(path, "scores", dtype=str, keep_default_na=False)
    missing = [c for c in ("class", "score") if c not in frame.columns]
    if missing:
        raise InputError(f"{path}, line 1: the header must name the column(s) {', '.join(missing)}")
    frame["line"] = np.arange(2, len(frame) + 2)
    return frame


def score_images(
    stage1: SuperclassResult,
    images: str | Path,
    scorer: ImageTextScorer,
    *,
    max_per_class: int | None = None,
) -> pd.DataFrame:
    """Per-image scores for stage 2, computed: each image of every sub-class of a kept
    super-class against the bare super-class name (the paper: CLIP similarity).

    Parameters
    ----------
    stage1 : SuperclassResult
        :func:`build_superclasses`'s result.
    images : path
        A folder of class folders named by sub-class id (``<images>/<wnid>/*.JPEG``, as
        ImageNet-21K is laid out); sub-classes without a folder are left unscored.
    scorer : ImageTextScorer
        ``score(paths, text)``, e.g. an open_clip model (:mod:`semshift.features.models`).
    max_per_class : int, optional
        At most this many images per sub-class (the first in name order).

    Returns
    -------
    DataFrame
        ``superclass``, ``class``, ``path``, ``score``: what :func:`build_score_split` takes,
        super-classes in stage 1's order and images in name order.

    Raises
    ------
    InputError
        ``images`` is not a folder, or no sub-class of a kept super-class has images there.
    """
    from semshift.features.data import IMAGE_EXTENSIONS

    root = Path(images)
    if not root.is_dir():
        raise InputError(f"images {root}: not a folder of sub-class folders")
    kept = stage1.superclasses.loc[stage1.superclasses["kept"], "superclass"].tolist()
    members = stage1.assignment[stage1.assignment["superclass"].isin(kept)]
    frames = []
    for name in kept:
        paths, classes = [], []
        for wnid in members.loc[members["superclass"] == name, "wnid"].astype(str):
            folder = root / wnid
            if not folder.is_dir():
                continue
            found = sorted(
                p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS
            )[:max_per_class]
            paths += [str(p) for p in found]
            classes += [wnid] * len(found)
        if paths:
            scores = np.asarray(scorer.score(paths, name), dtype=np.float64)
            frames.append(pd.DataFrame(
                {"superclass": name, "class": classes, "path": paths, "score": scores}
            ))  # fmt: skip
    if not frames:
        raise InputError(
            f"images {root}: no sub-class of a kept super-class has a folder of images there "
            "(expected <images>/<sub-class id>/*.jpg)"
        )
    return pd.concat(frames, ignore_index=True)


def text_embeddings(stage1: SuperclassResult, encoder: TextEncoder) -> NDArray[np.float32]:
    """The text embedding of every bare super-class name, (S, E) in the order of
    ``stage1.superclasses`` (the order of the names given), as :meth:`ImageTextScorer.score`
    of an open_clip model embeds them (no prompt template)."""
    names = stage1.superclasses["superclass"].astype(str).tolist()
    return np.asarray(encoder.encode(names), dtype=np.float32)


def _unit_rows(
    x: NDArray[np.float64], what: str, rows: NDArray[np.int64] | None = None
) -> NDArray[np.float64]:
    """Rows scaled to unit length; a zero or non-finite row is an error naming its row
    (``rows[k]`` when the rows are a selection)."""
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    bad = ~np.isfinite(x).all(axis=1) | (norm[:, 0] == 0)
    if bad.any():
        k = int(np.argmax(bad))
        row = k if rows is None else int(rows[k])
        raise InputError(
            f"{what}: row {row} is zero, NaN or infinite ({int(bad.sum())} such rows); "
            "a cosine similarity needs a finite non-zero vector"
        )
    return x / norm


def _plan(
    stage1: SuperclassResult,
    classes: ArrayLike,
    paths: ArrayLike | None,
    max_per_class: int | None,
) -> tuple[NDArray[np.int64], NDArray[np.int64], list[str]]:
    """The rows to score, in output order (super-classes in stage 1's order, sub-classes in
    the assignment's, then by path and row), each row's super-class (a row of
    ``stage1.superclasses``), and the kept super-class names."""
    table = stage1.superclasses
    kept = table.loc[table["kept"], "superclass"].astype(str).tolist()
    position = {name: k for k, name in enumerate(table["superclass"].astype(str))}
    members = stage1.assignment[stage1.assignment["superclass"].isin(kept)]
    wnids = members["wnid"].astype(str)
    sc_of = pd.Series(members["superclass"].astype(str).map(position).to_numpy(), index=wnids)
    order_of = pd.Series(np.arange(len(members)), index=wnids)
    raw = pd.Series(np.asarray(classes, dtype=object), dtype=object)
    cls = raw.astype(str).where(raw.notna(), None)
    sc = cls.map(sc_of)
    use = sc.notna().to_numpy()
    rows = np.flatnonzero(use)
    key_path = (
        np.asarray(paths, dtype=object)[rows].astype(str)
        if paths is not None
        else np.zeros(len(rows), dtype=str)
    )
    key_sub = cls.map(order_of).to_numpy()[rows].astype(np.int64)
    key_sc = sc.to_numpy()[rows].astype(np.int64)
    rows = rows[np.lexsort((rows, key_path, key_sub, key_sc))]
    if max_per_class is not None:
        if max_per_class < 1:
            raise InputError(f"max_per_class must be >= 1, got {max_per_class}")
        rank = pd.Series(cls.to_numpy()[rows]).groupby(cls.to_numpy()[rows]).cumcount()
        rows = rows[rank.to_numpy() < max_per_class]
    return rows, sc.to_numpy()[rows].astype(np.int64), kept


def _text_rows(stage1: SuperclassResult, text: ArrayLike, dim: int) -> NDArray[np.float64]:
    t = np.asarray(text, dtype=np.float64)
    n = len(stage1.superclasses)
    if t.ndim != 2 or t.shape[0] != n:
        raise InputError(
            f"text embeddings: expected one row per super-class name ({n}, in the order of the "
            f"names given), got shape {t.shape}"
        )
    if t.shape[1] != dim:
        raise InputError(
            f"text embeddings are {t.shape[1]}-d but the image embeddings {dim}-d: they must "
            "come from one image-text model"
        )
    return _unit_rows(t, "text embeddings")


def _frame(
    stage1: SuperclassResult,
    rows: NDArray[np.int64],
    sc_rows: NDArray[np.int64],
    classes: ArrayLike,
    paths: ArrayLike | None,
    scores: NDArray[np.float64],
) -> pd.DataFrame:
    names = stage1.superclasses["superclass"].astype(str).to_numpy()
    out = pd.DataFrame(
        {
            "superclass": names[sc_rows],
            "class": np.asarray(classes, dtype=object)[rows].astype(str),
            "path": np.asarray(paths, dtype=object)[rows] if paths is not None else None,
            "score": scores,
        }
    )
    return out if paths is not None else out.drop(columns="path")


def _no_rows(where: str) -> InputError:
    return InputError(
        f"{where}: no row belongs to a sub-class of a kept super-class (rows are matched by "
        "class id: the store's class_id column, its class list, or the image's folder name)"
    )


def score_embeddings(
    stage1: SuperclassResult,
    embeddings: ArrayLike,
    classes: ArrayLike,
    text: ArrayLike,
    *,
    paths: ArrayLike | None = None,
    max_per_class: int | None = None,
) -> pd.DataFrame:
    """Per-image scores for stage 2 from image embeddings already computed: the cosine
    similarity of each image's embedding with the text embedding of its super-class name.

    Parameters
    ----------
    stage1 : SuperclassResult
        :func:`~semshift.splits.superclass.build_superclasses`'s result.
    embeddings : array_like, shape (N, D)
        Image embeddings (e.g. CLIP's image tower); normalised here.
    classes : array_like, shape (N,)
        Each row's sub-class id; rows of no kept super-class's sub-class are left out.
    text : array_like, shape (S, D)
        One text embedding per super-class, in the order of ``stage1.superclasses`` (see
        :func:`text_embeddings`); normalised here.
    paths : array_like, shape (N,), optional
        Each row's image path (kept in the output, and the order within a sub-class).
    max_per_class : int, optional
        At most this many images per sub-class (the first by path).

    Returns
    -------
    DataFrame
        ``superclass``, ``class``, (``path``,) ``score`` in [-1, 1], as :func:`score_images`.

    Raises
    ------
    InputError
        Shapes disagree, a used embedding is zero or not finite, or no row is of a kept
        super-class's sub-class.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> stage1 = SimpleNamespace(
    ...     superclasses=pd.DataFrame({"superclass": ["dog", "cat"], "kept": [True, True]}),
    ...     assignment=pd.DataFrame({"superclass": ["dog", "cat"], "wnid": ["n1", "n2"]}))
    >>> emb = [[3.0, 4.0], [0.0, 2.0], [1.0, 0.0]]
    >>> score_embeddings(stage1, emb, ["n2", "n1", "x"], [[1.0, 0.0], [0.0, 1.0]])
      superclass class  score
    0        dog    n1    0.0
    1        cat    n2    0.8
    """
    emb = np.asarray(embeddings)
    cls = np.asarray(classes, dtype=object)
    if emb.ndim != 2 or len(emb) != len(cls):
        raise InputError(
            f"image embeddings: expected shape (N, D) with N = {len(cls)} class ids, got "
            f"{emb.shape}"
        )
    if paths is not None and len(np.asarray(paths, dtype=object)) != len(cls):
        raise InputError("paths: one per image embedding")
    rows, sc_rows, _ = _plan(stage1, cls, paths, max_per_class)
    if not len(rows):
        raise _no_rows("image embeddings")
    t = _text_rows(stage1, text, emb.shape[1])
    e = _unit_rows(emb[rows].astype(np.float64), "image embeddings", rows)
    scores = np.einsum("nd,nd->n", e, t[sc_rows])
    return _frame(stage1, rows, sc_rows, cls, paths, scores)


def score_store(
    stage1: SuperclassResult,
    store: FeatureStore,
    text: ArrayLike,
    *,
    array: str = "features",
    max_per_class: int | None = None,
    text_model: str | None = None,
    block_rows: int = 65536,
) -> pd.DataFrame:
    """:func:`score_embeddings` over a feature store of the sub-class images, block by block.

    Each row's sub-class is its class id (:func:`semshift.features.store.row_class_ids`: the
    store's ``class_id`` column, else its class list, else the image's folder name, so a store
    extracted from ``<root>/<wnid>/*.JPEG`` works as it is); only the rows of sub-classes of
    kept super-classes are read, ``block_rows`` at a time.

    Parameters
    ----------
    stage1, text, max_per_class : as :func:`score_embeddings`
    store : FeatureStore
        An opened store whose ``array`` holds image embeddings.
    array : str
        The array of image embeddings (an open_clip store's ``features``: the L2-normalised
        image embeddings).
    text_model : str, optional
        The model whose text tower embedded ``text``: it must be the store's model (its
        ``meta.json`` ``model``), or the two embeddings share no space.

    Raises
    ------
    InputError
        As :func:`score_embeddings`; the store lacks ``array``, or came from another model
        than ``text_model``.
    """
    from semshift.features.store import row_class_ids

    where = f"feature store {store.path}"
    model = store.meta.get("model")
    if text_model is not None and model is not None and str(model) != text_model:
        raise InputError(
            f"{where}: image embeddings of {model!r}, but the text embeddings come from "
            f"{text_model!r}; use the model the store was extracted with"
        )
    if array not in store.array_names:
        raise InputError(
            f"{where}: no array {array!r} of image embeddings (arrays: "
            f"{', '.join(store.array_names) or 'none'})"
        )
    index = store.index
    classes = np.asarray(row_class_ids(store.meta, store.labels, index), dtype=object)
    paths = index["path"].astype(str).to_numpy() if "path" in index else None
    rows, sc_rows, _ = _plan(stage1, classes, paths, max_per_class)
    if not len(rows):
        raise _no_rows(where)
    shape = tuple(store.array_specs[array]["shape"])
    if len(shape) != 1:
        raise InputError(f"{where}: {array!r} holds {shape} per row, not an embedding vector")
    dim = int(shape[0])
    t = _text_rows(stage1, text, dim)
    order = np.argsort(rows, kind="stable")  # the store reads rows in increasing order
    mask = np.zeros(len(store), dtype=bool)
    mask[rows] = True
    parts = []
    for block in store.select(mask).blocks(array, rows=block_rows):
        pos = block["positions"]
        at = np.searchsorted(rows[order], pos)
        e = _unit_rows(np.asarray(block[array], dtype=np.float64), f"{where}, {array}", pos)
        parts.append(np.einsum("nd,nd->n", e, t[sc_rows[order][at]]))
    scores = np.empty(len(rows), dtype=np.float64)
    scores[order] = np.concatenate(parts)
    return _frame(stage1, rows, sc_rows, classes, paths, scores)
