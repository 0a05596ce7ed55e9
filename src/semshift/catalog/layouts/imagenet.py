"""ImageNet-1K (train / val, flat or in class folders, with LOC_val_solution.csv or the devkit)
and ImageNet-21K (the whole release, or 21K-P's train / val folders)."""

from __future__ import annotations

import csv
import itertools
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from semshift.errors import InputError, UnknownNameError
from semshift.features.data import ImageSource
from semshift.taxonomy.classlists import ClassList

from ._common import (
    _21K_RELEASES,
    _DEVKIT,
    _as_classlist,
    _check_files,
    _in1k_label_of,
    _locate,
    _read_lines,
    _root,
    _Rows,
    _scan,
    _shipped,
    _wnid_index,
    _wnid_tree,
)


def imagenet1k(root: str | Path, split: str = "val", *, ground_truth: str = "auto") -> ImageSource:
    """ImageNet-1K (ILSVRC2012) train or val images, labelled by the shipped ``imagenet1k`` list.

    Parameters
    ----------
    root : str or Path
        The folder holding ``train/`` and ``val/``, or the Kaggle download (``ILSVRC/Data/CLS-LOC/
        {train,val}`` with ``LOC_val_solution.csv`` beside ``ILSVRC/``).
    split : {"val", "train"}
        ``train/<wnid>/*.JPEG``; ``val/`` either as class folders ``val/<wnid>/*.JPEG`` or flat
        ``val/ILSVRC2012_val_00000001.JPEG`` ... with the labels read from a ground-truth file.
    ground_truth : {"auto", "kaggle", "devkit"}
        For the flat val folder: Kaggle's ``LOC_val_solution.csv`` (``ImageId,PredictionString``,
        the first token of PredictionString is the wnid), or the devkit's
        ``ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt`` (line i = 1-based
        ILSVRC2012_ID of image i) mapped to wnids through ``ILSVRC2012_devkit_t12/data/meta.mat``.
        Both are looked for in ``root`` and in the folder holding ``val/``; ``"auto"`` takes the
        Kaggle file when present.

    Returns
    -------
    ImageSource
        Labels = index of the wnid in the shipped ``imagenet1k`` list (the sorted wnids, the
        torchvision / timm order). The devkit's ILSVRC2012_IDs are *not* in sorted order: they are
        translated through ``meta.mat`` (``synsets`` entries with ``num_children == 0``), never
        used as indices. Names: ``val/ILSVRC2012_val_00000001.JPEG``,
        ``train/n01440764/n01440764_10026.JPEG``; group ``class_id`` = wnid.

    Raises
    ------
    InputError
        Missing folder or ground-truth file, a flat val image without a label, a malformed line.
    UnknownNameError
        A class folder or ground-truth wnid that is not an ImageNet-1K wnid.
    """
    if split not in ("val", "train"):
        raise InputError(f"imagenet1k: split={split!r}: use 'val' or 'train'")
    if ground_truth not in ("auto", "kaggle", "devkit"):
        raise InputError(f"imagenet1k: ground_truth={ground_truth!r}: use auto, kaggle or devkit")
    base = _root(root, "imagenet1k")
    top = _locate(base, "imagenet1k", split, ("", os.path.join("ILSVRC", "Data", "CLS-LOC")))
    layout = f"imagenet1k {split}"
    cl = _shipped("imagenet1k")
    rows = _Rows(top)
    folder = top / split
    dirs, images = _scan(folder)
    if dirs and images:
        raise InputError(
            f"{layout}: {folder} holds both class folders ({dirs[0]}) and images "
            f"({images[0]}); expected one of {split}/<wnid>/*.JPEG or flat {split}/*.JPEG"
        )
    if dirs or split == "train":
        _wnid_tree(folder, f"{split}/", rows, _in1k_label_of(cl, layout, folder), layout)
        return rows.source(top, f"imagenet1k-{split}", cl)
    wnid_of = _val_ground_truth(base, top, ground_truth)
    index = _wnid_index(cl)
    for img in images:
        stem = os.path.splitext(img)[0]
        wnid = wnid_of.get(stem)
        if wnid is None:
            raise InputError(
                f"{layout}: {folder / img} has no label in the ground truth (expected names "
                "ILSVRC2012_val_<8 digits>.JPEG, as released)"
            )
        if wnid not in index:
            raise UnknownNameError(f"{layout}: ground truth of {img} is {wnid!r}, not in {cl.name}")
        rows.add(f"{split}/{img}", index[wnid], class_id=wnid)
    return rows.source(top, "imagenet1k-val-flat", cl)


def _val_ground_truth(base: Path, top: Path, which: str) -> dict[str, str]:
    """ImageId (``ILSVRC2012_val_00000001``) -> wnid, from the Kaggle csv or the devkit."""
    places = [base] if base.resolve() == top.resolve() else [base, top]
    if which in ("auto", "kaggle"):
        for p in places:
            if (p / "LOC_val_solution.csv").is_file():
                return _read_loc_solution(p / "LOC_val_solution.csv")
    if which in ("auto", "devkit"):
        for p in places:
            data = p / _DEVKIT / "data"
            if (data / "ILSVRC2012_validation_ground_truth.txt").is_file():
                return _read_devkit(data)
    looked = " or ".join(str(p) for p in places)
    wanted = {
        "auto": f"LOC_val_solution.csv or {_DEVKIT}/data/ILSVRC2012_validation_ground_truth.txt",
        "kaggle": "LOC_val_solution.csv",
        "devkit": f"{_DEVKIT}/data/ILSVRC2012_validation_ground_truth.txt",
    }[which]
    raise InputError(
        f"imagenet1k val: the flat val folder needs its labels: {wanted} not found in {looked}"
    )


def _read_loc_solution(path: Path) -> dict[str, str]:
    """Kaggle ``LOC_val_solution.csv``: ``ImageId,PredictionString`` (``wnid x0 y0 x1 y1 ...``)."""
    out: dict[str, str] = {}
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None or [h.strip() for h in header[:2]] != ["ImageId", "PredictionString"]:
                raise InputError(f"{path}, line 1: expected the header 'ImageId,PredictionString'")
            for lineno, row in enumerate(reader, 2):
                if not row:
                    continue
                tokens = row[1].split() if len(row) > 1 else []
                if not tokens:
                    raise InputError(f"{path}, line {lineno}: no PredictionString")
                out[row[0].strip()] = tokens[0]
    except OSError as err:
        raise InputError(f"cannot read {path}: {err.strerror or err}") from None
    return out


def _devkit_wnids(meta: Path) -> dict[int, str]:
    """ILSVRC2012_ID -> wnid of the 1,000 leaf synsets in the devkit's ``meta.mat``.

    Fields are read by name (``ILSVRC2012_ID``, ``WNID``, ``num_children``), not by position.
    """
    from scipy.io import loadmat
    from scipy.io.matlab import MatReadError

    try:
        mat = loadmat(str(meta), squeeze_me=True)
    except (OSError, ValueError, MatReadError, NotImplementedError) as err:
        raise InputError(f"cannot read {meta}: {err}") from None
    if "synsets" not in mat:
        raise InputError(f"{meta}: no 'synsets' struct array (is this the ILSVRC2012 devkit?)")
    syn = np.atleast_1d(mat["synsets"])
    names = syn.dtype.names or ()
    need = ("ILSVRC2012_ID", "WNID", "num_children")
    lost = [n for n in need if n not in names]
    if lost:
        raise InputError(f"{meta}: 'synsets' lacks the fields {', '.join(lost)}")

    def scalar(x: Any) -> Any:
        return np.asarray(x).ravel()[0]

    out: dict[int, str] = {}
    for entry in syn.ravel():
        if int(scalar(entry["num_children"])) == 0:
            out[int(scalar(entry["ILSVRC2012_ID"]))] = str(scalar(entry["WNID"]))
    return out


def _read_devkit(data: Path) -> dict[str, str]:
    gt = data / "ILSVRC2012_validation_ground_truth.txt"
    meta = data / "meta.mat"
    if not meta.is_file():
        raise InputError(f"imagenet1k val: {meta} not found (needed to map the IDs of {gt.name})")
    wnid_of_id = _devkit_wnids(meta)
    out: dict[str, str] = {}
    for lineno, line in _read_lines(gt, "imagenet1k val"):
        if not line.isdigit() or int(line) not in wnid_of_id:
            raise InputError(
                f"{gt}, line {lineno}: {line!r} is not an ILSVRC2012_ID of a leaf synset in {meta}"
            )
        out[f"ILSVRC2012_val_{lineno:08d}"] = wnid_of_id[int(line)]
    return out


def imagenet21k(
    root: str | Path,
    release: str = "winter21",
    split: str = "val",
    *,
    wnids: Sequence[str] | None = None,
    files: Sequence[str] | None = None,
    classes: ClassList | str | Path | None = None,
    missing: str = "error",
) -> ImageSource:
    """ImageNet-21K images: the 21K-P split trees or the whole-release wnid folders.

    Parameters
    ----------
    root : str or Path
        ImageNet-21K-P (``root/imagenet21k_train/<wnid>/``, ``root/imagenet21k_val/<wnid>/``), or
        the whole release (``root/<wnid>/<wnid>_N.JPEG``, as fall11_whole / winter21_whole unpack;
        it has no split, so ``split`` is not used).
    release : {"winter21", "fall11"}
        For a 21K-P tree, every wnid folder read must be a class of that release's shipped list
        (``imagenet21k-p-winter21``, 10,450 classes; ``imagenet21k-p``, 11,221) -- a fall11 tree
        read as winter21 fails here instead of passing silently.
    split : {"val", "train"}
    wnids : sequence of str, optional
        Read only these class folders.
    files : sequence of str, optional
        Read only these images, as ``wnid/wnid_N.JPEG`` relative to the split folder (the
        ImageNet-OOD list and SSB's val-file lists; a leading ``./`` and ``imagenet21k_<split>/``
        are accepted). Kept in sorted order; a duplicate is an error.
    classes : ClassList, name or file, optional
        Labels index into it; a wnid not in it is -1. Without it every label is -1 (unknown).
    missing : {"error", "skip"}
        A listed file that does not exist: error, or record it in ``skipped``.

    Returns
    -------
    ImageSource
        Names ``imagenet21k_val/<wnid>/<file>`` (21K-P, as the IS-OOD lists write them) or
        ``<wnid>/<file>`` (whole release, as the ImageNet-OOD list writes them); group ``class_id``.
    """
    if release not in _21K_RELEASES:
        raise InputError(f"imagenet21k: release={release!r}: use {', '.join(_21K_RELEASES)}")
    if split not in ("val", "train"):
        raise InputError(f"imagenet21k: split={split!r}: use 'val' or 'train'")
    if wnids is not None and files is not None:
        raise InputError("imagenet21k: pass wnids= or files=, not both")
    layout = f"imagenet21k {release} {split}"
    base = _root(root, "imagenet21k")
    sub = f"imagenet21k_{split}"
    dirs, _ = _scan(base)
    if sub in dirs:
        tree, prefix = base / sub, f"{sub}/"
        known: set[str] | None = set(_shipped(_21K_RELEASES[release]).ids)
        kind = f"imagenet21k-p-{split}"
    elif any(d.startswith("imagenet21k_") for d in dirs):
        raise InputError(
            f"{layout}: {base / sub} not found (have {', '.join(d for d in dirs if '_' in d)})"
        )
    elif dirs and all(re.fullmatch(r"n\d{8}", d) for d in dirs):
        tree, prefix, known, kind = base, "", None, "imagenet21k-whole"
    else:
        raise InputError(
            f"{layout}: {base} has neither {sub}/<wnid>/ (ImageNet-21K-P) nor only wnid "
            "folders <wnid>/<wnid>_N.JPEG (the whole release)"
        )
    cl = _as_classlist(classes)
    index = _wnid_index(cl) if cl is not None else {}

    def label_of(wnid: str) -> int:
        if known is not None and wnid not in known:
            raise UnknownNameError(
                f"{layout}: {tree / wnid} is not a class of ImageNet-21K-P {release} (shipped "
                f"list {_21K_RELEASES[release]!r}); is this the other release?"
            )
        return index.get(wnid, -1)

    rows = _Rows(base)
    if files is None:
        _wnid_tree(tree, prefix, rows, label_of, layout, folders=wnids)
        return rows.source(base, kind, cl)
    rels = sorted(_strip_prefix(f, sub) for f in files)
    dup = next((a for a, b in itertools.pairwise(rels) if a == b), None)
    if dup is not None:
        raise InputError(f"{layout}: files lists {dup} twice")
    bad = next((r for r in rels if r.count("/") != 1), None)
    if bad is not None:
        raise InputError(f"{layout}: files entry {bad!r} is not 'wnid/file'")
    present, rows.skipped = _check_files(tree, rels, layout, missing)
    for rel in present:
        wnid = rel.split("/", 1)[0]
        rows.add(f"{prefix}{rel}", label_of(wnid), class_id=wnid)
    return rows.source(base, kind, cl)


def _strip_prefix(rel: str, sub: str) -> str:
    rel = rel.strip().replace("\\", "/")
    rel = rel.removeprefix("./")
    return rel.removeprefix(f"{sub}/")
