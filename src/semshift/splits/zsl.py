"""Zero-shot splits: seen/unseen classes and the image sets of "proposed split v2".

Method reference: docs/methods.md#zero-shot-splits.

Class level: ``seen`` (the manifest's ``known``) and ``unseen`` are disjoint; the seen classes are
split again into disjoint ``train`` and ``val`` classes for cross-validation.
Image level (``images.csv``: path, class, set):

* ``test_seen``: a held-out fraction of every seen class's images;
* ``trainval``: the other seen-class images, and ``train`` / ``val``: those of the train / val
  classes (subsets of ``trainval``; never containing ``test_seen`` images, the v1 bug);
* ``test_unseen``: every image of an unseen class.

Unseen classes can be kept away from a fixed set (``not_unseen``, e.g. the ImageNet-1K classes a
feature extractor was pre-trained on) and restricted to classes within ``max_hops`` taxonomy edges
of that set (the "2-hops" / "3-hops" ImageNet splits).

References
----------
Xian, Y., Lampert, C. H., Schiele, B. and Akata, Z. (2018). Zero-shot learning - a comprehensive
evaluation of the good, the bad and the ugly. TPAMI. (Proposed Split Version 2.0.)
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import Field, ValidationInfo, field_validator, model_validator

from semshift.errors import InputError
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
from semshift.taxonomy.core import Taxonomy
from semshift.taxonomy.custom import load_taxonomy
from semshift.textio import read_csv, read_text

__all__ = ["ZSLParams", "ZSLResult", "build_zsl_split", "read_image_list"]

DISJOINT = [["known", "unseen"], ["train", "val"], ["train", "unseen"], ["val", "unseen"]]
IMAGE_CLASSES = {
    "trainval": "known",
    "train": "train",
    "val": "val",
    "test_seen": "known",
    "test_unseen": "unseen",
}
IMAGE_SUBSETS = [["train", "trainval"], ["val", "trainval"]]


@dataclass
class ZSLResult:
    """A zero-shot split: the manifest and the image table (path, class, set)."""

    manifest: SplitManifest
    images: pd.DataFrame

    def write(self, out_dir: str | Path) -> Path:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        tmp = out / ".images.csv.tmp"
        self.images.to_csv(tmp, index=False)
        tmp.replace(out / "images.csv")
        self.manifest.write(out / "split.json")
        return out

    def manifest_with_images(self) -> SplitManifest:
        """The manifest with the image table inline, for a split written as ``split.json`` alone.

        ``extra["images"]`` holds the table's columns (``{"path": [...], "class": [...],
        "set": [...]}``, paths relative to ``extra["image_root"]``) instead of the name of
        ``images.csv``; the rest is :attr:`manifest` unchanged.
        """
        table = {col: self.images[col].astype(str).tolist() for col in ("path", "class", "set")}
        extra = {**self.manifest.extra, "images": table}
        return dataclasses.replace(self.manifest, extra=extra)


def read_image_list(path: str | Path) -> pd.DataFrame:
    """Read images as a CSV with ``path`` and ``class`` (and optional ``set``) columns, or a
    whitespace-separated file list ``path label`` (one image per line, ``#`` comments)."""
    path = Path(path)
    text = read_text(path, "image list")
    if not text.strip():
        raise InputError(f"image list {path} is empty")
    first = text.split("\n", 1)[0]
    if path.suffix.lower() == ".csv" or first.startswith("path,"):
        frame = read_csv(path, "image list", text=text, dtype=str, keep_default_na=False)
        missing = {"path"} - set(frame.columns)
        if missing:
            raise InputError(f"{path}, line 1: the header must name a 'path' column")
        frame["line"] = np.arange(2, len(frame) + 2)
        return frame
    rows, lines = [], []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.rsplit(None, 1)
        if len(parts) != 2:
            raise InputError(f"{path}, line {lineno}: expected 'path label', got {line!r}")
        rows.append(parts)
        lines.append(lineno)
    frame = pd.DataFrame(rows, columns=["path", "class"])
    frame["line"] = lines
    return frame


def build_zsl_split(
    classes: str | Path | Sequence[str],
    images: str | Path | pd.DataFrame,
    *,
    taxonomy: str | Path | Taxonomy = "wordnet",
    unseen: str | Path | Sequence[str] | None = None,
    unseen_fraction: float = 0.2,
    val_fraction: float = 0.2,
    test_seen_fraction: float = 0.2,
    not_unseen: str | Path | Sequence[str] | None = None,
    max_hops: int | None = None,
    seed: int = 0,
) -> ZSLResult:
    """Build a zero-shot split with the image sets of proposed split v2.

    Parameters
    ----------
    classes : the classes of the dataset (list name, file or ids)
    images : image list (see :func:`read_image_list`) or a DataFrame with path and class
    taxonomy : validates class ids and measures hops
    unseen : explicit unseen classes; otherwise ``unseen_fraction`` of the eligible classes,
        drawn with ``seed``
    val_fraction : fraction of seen classes used as validation classes
    test_seen_fraction : fraction of each seen class's images held out as ``test_seen``
    not_unseen : classes that must stay seen (e.g. a backbone's pre-training classes)
    max_hops : unseen classes must lie within this path distance of a ``not_unseen`` class
    seed : random seed (same inputs and seed give the same split)
    """
    for name, frac in (
        ("unseen_fraction", unseen_fraction),
        ("val_fraction", val_fraction),
        ("test_seen_fraction", test_seen_fraction),
    ):
        if not 0.0 < frac < 1.0:
            raise InputError(f"{name} must be in (0, 1), got {frac}")
    tax = taxonomy if isinstance(taxonomy, Taxonomy) else load_taxonomy(taxonomy)
    class_ids, class_src = resolve_classes(tax, classes, "classes")
    frame = images.copy() if isinstance(images, pd.DataFrame) else read_image_list(images)
    where = "images" if isinstance(images, pd.DataFrame) else str(images)
    if not {"path", "class"} <= set(frame.columns):
        raise InputError(f"{where}: needs 'path' and 'class' columns")
    frame["class"] = frame["class"].astype(str)
    known_class = frame["class"].isin(class_ids)
    if not known_class.all():
        k = int(np.flatnonzero(~known_class.to_numpy())[0])
        line = frame["line"].iloc[k] if "line" in frame else k + 1
        raise InputError(
            f"{where}, line {line}: class {frame['class'].iloc[k]!r} is not one of the "
            f"{len(class_ids)} classes ({(~known_class).sum()} such images)"
        )
    rng = np.random.default_rng(seed)
    if unseen is not None:
        unseen_ids, _ = resolve_classes(tax, unseen, "unseen")
        stray = sorted(set(unseen_ids) - set(class_ids))
        if stray:
            raise InputError(f"unseen class {stray[0]!r} is not one of the dataset's classes")
    else:
        eligible = list(class_ids)
        if not_unseen is not None:
            fixed, _ = resolve_classes(tax, not_unseen, "not_unseen")
            fixed_set = set(fixed)
            eligible = [c for c in eligible if c not in fixed_set]
            if max_hops is not None:
                d = tax.distance_matrix(fixed, eligible).min(axis=0)
                eligible = [c for c, h in zip(eligible, d.tolist(), strict=True) if h <= max_hops]
        elif max_hops is not None:
            raise InputError("max_hops needs not_unseen (the classes hops are counted from)")
        n_unseen = round(unseen_fraction * len(class_ids))
        if n_unseen < 1 or n_unseen > len(eligible):
            raise InputError(
                f"cannot draw {n_unseen} unseen classes from {len(eligible)} eligible classes"
            )
        unseen_ids = sorted(rng.choice(np.asarray(eligible, dtype=object), n_unseen, replace=False))
    unseen_set = set(unseen_ids)
    seen = [c for c in class_ids if c not in unseen_set]
    n_val = max(1, round(val_fraction * len(seen)))
    if n_val >= len(seen):
        raise InputError(f"val_fraction {val_fraction} leaves no train classes of {len(seen)}")
    val = sorted(rng.choice(np.asarray(seen, dtype=object), n_val, replace=False))
    val_set = set(val)
    train = [c for c in seen if c not in val_set]

    # hold out test_seen_fraction of each seen class's images: rank within class by a random key
    is_unseen = frame["class"].isin(unseen_set).to_numpy()
    key = rng.random(len(frame))
    codes = pd.factorize(frame["class"])[0]
    order = np.lexsort((key, codes))
    rank = np.empty(len(frame), dtype=np.int64)
    sizes = np.bincount(codes)
    starts = np.cumsum(sizes) - sizes
    rank[order] = np.arange(len(frame)) - np.repeat(starts, sizes)
    n_test = np.round(test_seen_fraction * sizes).astype(np.int64)
    held = rank < n_test[codes]
    sets = np.where(is_unseen, "test_unseen", np.where(held, "test_seen", "trainval"))
    out = frame[["path", "class"]].copy()
    out["set"] = sets
    trainval = out[out["set"] == "trainval"]
    sub = trainval.copy()
    sub["set"] = np.where(sub["class"].isin(val_set), "val", "train")
    images_out = pd.concat([out, sub], ignore_index=True)
    roles = {"known": seen, "train": train, "val": list(val), "unseen": list(unseen_ids)}
    _refuse_lost_classes(images_out, roles, where, test_seen_fraction)

    params: dict[str, Any] = {
        "classes": class_src,
        "unseen_fraction": unseen_fraction,
        "val_fraction": val_fraction,
        "test_seen_fraction": test_seen_fraction,
        "not_unseen": None
        if not_unseen is None
        else str(not_unseen)
        if isinstance(not_unseen, (str, Path))
        else "list",
        "max_hops": max_hops,
        "seed": seed,
    }
    counts = images_out["set"].value_counts().reindex(list(IMAGE_CLASSES), fill_value=0)
    manifest = SplitManifest(
        method="zsl",
        params=json.loads(json.dumps(params)),
        taxonomy=tax.name,
        known=seen,
        bins={"unseen": list(unseen_ids), "train": train, "val": list(val)},
        extra={
            "disjoint": DISJOINT,
            "images": "images.csv",
            "image_classes": IMAGE_CLASSES,
            "image_subsets": IMAGE_SUBSETS,
            "counts": {"images_" + k: int(v) for k, v in counts.items()},
            "image_root": (
                None if isinstance(images, pd.DataFrame) else str(Path(images).resolve().parent)
            ),
        },
    )
    return ZSLResult(manifest=manifest, images=images_out)


def _refuse_lost_classes(
    images: pd.DataFrame, roles: dict[str, list[str]], where: str, test_seen_fraction: float
) -> None:
    """Every image set holds an image of each of its classes (:data:`IMAGE_CLASSES`).

    A class without images in a set is left out of what the set measures without a word: an
    unseen class without images leaves the others to share the unseen top-1 (one left scores
    a trivial 100 %), a seen class whose few images all went to ``test_seen`` is never trained.
    """
    for name, role in IMAGE_CLASSES.items():
        have = set(images.loc[images["set"] == name, "class"])
        lost = [c for c in roles[role] if c not in have]
        if not lost:
            continue
        shown = ", ".join(map(repr, lost[:5])) + (
            f" and {len(lost) - 5} more" if len(lost) > 5 else ""
        )
        counts = images.loc[images["set"] != "train", "class"].value_counts()
        none = sum(counts.get(c, 0) == 0 for c in lost)
        why = [f"{none} with no image in {where}"] if none else []
        if none < len(lost):
            why.append(
                f"{len(lost) - none} with too few images for test_seen_fraction "
                f"{test_seen_fraction} (a seen class needs an image in test_seen and in trainval)"
            )
        why_text = "; ".join(why)
        raise InputError(
            f"zero-shot split: the {name} set would have no image of {len(lost)} of its "
            f"{len(roles[role])} classes ({shown}: {why_text}); a class without images is dropped "
            "from the evaluation silently, so give it images or leave it out of the classes"
        )


class ZSLParams(BuilderParams):
    """Parameters of the ``zsl`` builder: those of :func:`build_zsl_split` (the options of
    ``semshift splits zsl``), same defaults; ``seed: null`` (the default) takes the run's seed.

    The manifest carries the image table inline (:meth:`ZSLResult.manifest_with_images`), since
    the split stage writes ``split.json`` alone. ``max_hops`` needs ``not_unseen``; ``unseen``
    (explicit unseen classes) excludes ``unseen_fraction``, ``not_unseen`` and ``max_hops``.
    """

    classes: ClassSpec
    images: PathSpec
    unseen: ClassSpec | None = None
    unseen_fraction: float = 0.2
    val_fraction: float = 0.2
    test_seen_fraction: float = 0.2
    not_unseen: ClassSpec | None = None
    max_hops: int | None = Field(default=None, ge=1)
    seed: int | None = None

    @field_validator("unseen_fraction", "val_fraction", "test_seen_fraction")
    @classmethod
    def _fraction(cls, value: float, info: ValidationInfo) -> float:
        """A fraction in (0, 1), said as :func:`build_zsl_split` says it."""
        if not 0.0 < value < 1.0:
            raise ValueError(f"{info.field_name} must be in (0, 1), got {value}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ZSLParams:
        if self.max_hops is not None and self.not_unseen is None:
            raise ParamError("max_hops", "needs not_unseen (the classes hops are counted from)")
        if self.unseen is not None:
            for key in ("unseen_fraction", "not_unseen", "max_hops"):
                if key in self.model_fields_set:
                    raise ParamError(key, "does not apply when 'unseen' lists the unseen classes")
        return self


@register_builder(
    "zsl",
    ZSLParams,
    "Zero-shot split (proposed split v2): disjoint seen / unseen and train / val classes, and "
    "the trainval / train / val / test_seen / test_unseen image sets.",
)
def _build_from_params(params: ZSLParams, ctx: BuildContext) -> SplitManifest:
    """:func:`build_zsl_split` on the context's taxonomy (files resolved against ``base_dir``,
    ``seed`` defaulting to the context's), with the image table inline."""
    classes = ctx.classes("classes", params.classes)
    images = ctx.path("images", params.images)
    unseen = ctx.classes("unseen", params.unseen)
    not_unseen = ctx.classes("not_unseen", params.not_unseen)
    return build_zsl_split(
        classes,
        images,
        taxonomy=ctx.load_taxonomy(),
        unseen=unseen,
        unseen_fraction=params.unseen_fraction,
        val_fraction=params.val_fraction,
        test_seen_fraction=params.test_seen_fraction,
        not_unseen=not_unseen,
        max_hops=params.max_hops,
        seed=ctx.seed if params.seed is None else params.seed,
    ).manifest_with_images()
