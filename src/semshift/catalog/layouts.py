"""Readers for the folder layouts of the public dataset releases and their class-index conventions.

Each reader takes the folder a release unpacks to (or its parent) and returns an
:class:`~semshift.features.data.ImageSource` whose labels follow the published convention:

==========================  ===========================================  ==========================
reader                      layout                                       label
==========================  ===========================================  ==========================
:func:`imagenet1k`          ``{train,val}/<wnid>/*.JPEG`` or flat        index in the shipped
                            ``val/ILSVRC2012_val_*.JPEG`` + Kaggle        ``imagenet1k`` list
                            ``LOC_val_solution.csv`` or the devkit        (sorted wnids)
:func:`imagenet21k`         ``imagenet21k_{train,val}/<wnid>/`` (21K-P)   -1, or index in
                            or ``<wnid>/<wnid>_N.JPEG`` (fall11 whole)    ``classes`` when given
:func:`cub200`              ``CUB_200_2011/images.txt`` ...               target - 1
:func:`fgvc_aircraft`       ``fgvc-aircraft-2013b/data/...``              sorted variant position
:func:`stanford_cars`       ``car_data/car_data/{train,test}/<name>/``    sorted folder position
:func:`imagenet_r`,         ``<wnid>/*``                                  index in ``imagenet1k``
:func:`imagenet_sketch`
:func:`imagenet_o`          ``<wnid>/*``                                  -1 (OOD)
:func:`imagenet_c`          ``<corruption>/<severity>/<wnid>/*``          index in ``imagenet1k``
:func:`openood_list`        ``path [label]`` relative to a data root      as listed
==========================  ===========================================  ==========================

``names`` are relative to ``source.root``, the release's own top folder, so the same images get
the same names (and fingerprint) whichever of the accepted roots was given. The wnid or class
folder of every image is kept as the group column ``class_id`` (a store index column).

Every folder is listed with one :func:`os.scandir` pass and no ``stat`` per file; a file named by
a release's list is checked against the scan of its folder, so a missing image is reported before
any extraction starts.
"""

from __future__ import annotations

import csv
import itertools
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from semshift.errors import InputError, UnknownNameError
from semshift.features.data import IMAGE_EXTENSIONS, ImageSource
from semshift.registry import Registry
from semshift.taxonomy.classlists import ClassList, load_classlist
from semshift.textio import read_text

__all__ = [
    "LAYOUTS",
    "MissingImagesError",
    "check_sample",
    "cub200",
    "fgvc_aircraft",
    "imagenet1k",
    "imagenet21k",
    "imagenet_c",
    "imagenet_o",
    "imagenet_r",
    "imagenet_sketch",
    "is_image_name",
    "layout_parameters",
    "list_layouts",
    "open_layout",
    "openood_list",
    "register_layout",
    "sample_positions",
    "stanford_cars",
]

_VAL_IMAGE = re.compile(r"^ILSVRC2012_val_(\d{8})$")
_DEVKIT = "ILSVRC2012_devkit_t12"
_21K_RELEASES = {"winter21": "imagenet21k-p-winter21", "fall11": "imagenet21k-p"}


# ---------------------------------------------------------------------------------------------
# listing helpers
# ---------------------------------------------------------------------------------------------


_EXT_CASES = tuple({e for x in IMAGE_EXTENSIONS for e in (x, x.upper())})


def is_image_name(name: str) -> bool:
    """Whether a file name has an image extension (any case): one C-level ``endswith`` for the
    usual spellings, the lower-cased suffix otherwise."""
    if name.endswith(_EXT_CASES):
        return True
    dot = name.rfind(".")
    return dot > 0 and name[dot:].lower() in IMAGE_EXTENSIONS


def _scan(folder: Path) -> tuple[list[str], list[str]]:
    """(sorted sub-folder names, sorted image file names) of ``folder``: one ``os.scandir``.

    ``DirEntry.is_dir`` reads the entry type the scan already returned, so no file is stat-ed.
    Hidden entries are ignored.
    """
    dirs: list[str] = []
    images: list[str] = []
    try:
        with os.scandir(folder) as entries:
            for e in entries:
                if e.name.startswith("."):
                    continue
                if e.is_dir():
                    dirs.append(e.name)
                elif is_image_name(e.name):
                    images.append(e.name)
    except OSError as err:
        raise InputError(f"cannot list folder {folder}: {err.strerror or err}") from None
    return sorted(dirs), sorted(images)


def _root(root: str | Path, layout: str) -> Path:
    base = Path(root)
    if not base.is_dir():
        raise InputError(f"{layout} root {base} does not exist or is not a folder")
    return base


def _locate(root: str | Path, layout: str, marker: str, candidates: Sequence[str]) -> Path:
    """The first ``root/<candidate>`` that holds ``marker`` (a file or folder).

    Raises an :class:`InputError` naming every place looked at and the expected layout.
    """
    base = _root(root, layout)
    for cand in candidates:
        top = base / cand if cand else base
        if (top / marker).exists():
            return top
    looked = ", ".join(str((base / c / marker) if c else base / marker) for c in candidates)
    raise InputError(f"{layout}: {marker} not found (looked for {looked})")


def _read_lines(path: Path, layout: str) -> list[tuple[int, str]]:
    """(line number, stripped line) of the non-empty lines of a release's text file."""
    if not path.is_file() and not path.exists():
        raise InputError(f"{layout}: {path} not found")
    text = read_text(path, f"{layout}:")
    return [(i, ln.strip()) for i, ln in enumerate(text.splitlines(), 1) if ln.strip()]


class _Rows:
    """Samples collected by a reader, in order."""

    def __init__(self, top: Path) -> None:
        self.top = str(top.resolve())  # resolved once; files are joined to it (no stat per file)
        self._prefix = os.path.join(self.top, "")
        self.paths: list[str] = []
        self.names: list[str] = []
        self.labels: list[int] = []
        self.groups: dict[str, list[Any]] = {}
        self.skipped: list[tuple[str, str]] = []

    def add(self, name: str, label: int, **groups: Any) -> None:
        self.paths.append(self._prefix + (name if os.sep == "/" else name.replace("/", os.sep)))
        self.names.append(name)
        self.labels.append(label)
        for key, value in groups.items():
            self.groups.setdefault(key, []).append(value)

    def source(self, root: Path, kind: str, classes: ClassList | None) -> ImageSource:
        if not self.paths:
            raise InputError(f"{kind}: no images found under {root}")
        return ImageSource(
            root,
            kind,
            self.paths,
            self.names,
            np.asarray(self.labels, np.int64),
            classes,
            groups=self.groups,
            skipped=self.skipped,
        )


class MissingImagesError(InputError):
    """Listed images are not on disk. ``str()`` adds what to do (complete the download, or
    leave them out with the layout parameter ``missing: skip``); :attr:`fact` is the finding
    alone, for callers whose users cannot skip (a benchmark check)."""

    def __init__(self, fact: str) -> None:
        super().__init__(
            f"{fact}; complete the download, or leave them out with the layout parameter "
            "missing: skip (in a run config, `layout: {params: {missing: skip}}`; in Python, "
            "missing='skip')"
        )
        self.fact = fact


def _check_files(
    top: Path, rels: Iterable[str], layout: str, missing: str
) -> tuple[list[str], list[tuple[str, str]]]:
    """Split ``rels`` (``/``-separated, relative to ``top``) into present and missing files.

    Each distinct folder is scanned once. ``missing="error"`` raises on the first missing file
    (with the count); ``"skip"`` returns them as ``(name, reason)``.
    """
    if missing not in ("error", "skip"):
        raise InputError(f"missing={missing!r}: use 'error' or 'skip'")
    rels = list(rels)
    listing: dict[str, set[str]] = {}
    present: list[str] = []
    absent: list[str] = []
    for rel in rels:
        folder, _, name = rel.rpartition("/")
        if folder not in listing:
            try:
                with os.scandir(top / folder if folder else top) as entries:
                    listing[folder] = {e.name for e in entries}
            except OSError:
                listing[folder] = set()
        (present if name in listing[folder] else absent).append(rel)
    if absent and missing == "error":
        raise MissingImagesError(
            f"{layout}: {len(absent)} of {len(rels)} listed images are missing under {top}, "
            f"first {absent[0]}"
        )
    return present, [(rel, "listed image not found") for rel in absent]


def _shipped(name: str) -> ClassList:
    return load_classlist(name)


def _as_classlist(classes: ClassList | str | Path | None) -> ClassList | None:
    if classes is None or isinstance(classes, ClassList):
        return classes
    return load_classlist(classes)


def _wnid_index(cl: ClassList) -> dict[str, int]:
    return {cid: k for k, cid in enumerate(cl.ids)}


def _wnid_tree(
    base: Path,
    prefix: str,
    rows: _Rows,
    label_of: Callable[[str], int],
    layout: str,
    folders: Sequence[str] | None = None,
    **groups: Any,
) -> None:
    """Add ``base/<class>/<image>`` (names ``prefix<class>/<image>``) to ``rows``.

    ``folders`` restricts the classes (default: every sub-folder). An empty class folder, a
    requested folder that does not exist, and images directly in ``base`` are errors.
    """
    dirs, loose = _scan(base)
    if loose:
        raise InputError(
            f"{layout}: {base} holds images directly ({loose[0]}, ...); expected only "
            "class folders <class>/<image>"
        )
    if folders is not None:
        have = set(dirs)
        lost = [f for f in folders if f not in have]
        if lost:
            raise InputError(
                f"{layout}: {len(lost)} class folders missing under {base}, first {lost[0]}"
            )
        dirs = sorted(set(folders))
    if not dirs:
        raise InputError(f"{layout}: {base} has no class folders <class>/<image>")
    for d in dirs:
        _, images = _scan(base / d)
        if not images:
            raise InputError(f"{layout}: class folder {base / d} has no images")
        label = label_of(d)
        for img in images:
            rows.add(f"{prefix}{d}/{img}", label, class_id=d, **groups)


def _in1k_label_of(cl: ClassList, layout: str, where: Path) -> Callable[[str], int]:
    index = _wnid_index(cl)

    def label_of(wnid: str) -> int:
        try:
            return index[wnid]
        except KeyError:
            raise UnknownNameError(
                f"{layout}: class folder {where / wnid} is not an ImageNet-1K wnid "
                f"(shipped list {cl.name!r}); is this the right root?"
            ) from None

    return label_of


# ---------------------------------------------------------------------------------------------
# ImageNet-1K
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# ImageNet-21K
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# fine-grained sets (the SSB conventions)
# ---------------------------------------------------------------------------------------------


def cub200(root: str | Path, split: str = "test", *, missing: str = "error") -> ImageSource:
    """CUB-200-2011: label = ``image_class_labels.txt`` target - 1 (SSB's convention).

    Parameters
    ----------
    root : str or Path
        ``CUB_200_2011/`` (holding ``images.txt``, ``image_class_labels.txt``,
        ``train_test_split.txt``, ``classes.txt`` and ``images/``) or its parent.
    split : {"train", "test", "all"}
        From ``train_test_split.txt`` (``<image id> <is_training_image>``).
    missing : {"error", "skip"}

    Returns
    -------
    ImageSource
        Samples in image-id order (as ``images.txt``); names ``images/<class folder>/<file>``;
        classes from ``classes.txt`` (ids = class folders ``001.Black_footed_Albatross``, in
        target order); group ``class_id`` = class folder.
    """
    if split not in ("train", "test", "all"):
        raise InputError(f"cub200: split={split!r}: use 'train', 'test' or 'all'")
    top = _locate(root, "cub200", "images.txt", ("", "CUB_200_2011"))
    layout = "cub200"

    def table(fname: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for lineno, line in _read_lines(top / fname, layout):
            parts = line.split(None, 1)
            if len(parts) != 2:
                raise InputError(f"{top / fname}, line {lineno}: expected '<id> <value>'")
            out[parts[0]] = parts[1]
        return out

    images = table("images.txt")
    targets = table("image_class_labels.txt")
    is_train = table("train_test_split.txt") if split != "all" else {}
    names_of = table("classes.txt") if (top / "classes.txt").is_file() else {}
    class_ids = [names_of.get(str(t), "") for t in range(1, len(names_of) + 1)]
    n_classes = len(names_of) or 200
    keep: list[tuple[str, int, str]] = []
    for img_id, rel in images.items():
        t = targets.get(img_id)
        if t is None or not t.isdigit() or not 1 <= int(t) <= n_classes:
            raise InputError(
                f"{top / 'image_class_labels.txt'}: image id {img_id} has target {t!r}, "
                f"expected 1..{n_classes}"
            )
        if split != "all":
            flag = is_train.get(img_id)
            if flag not in ("0", "1"):
                raise InputError(
                    f"{top / 'train_test_split.txt'}: image id {img_id} has {flag!r}, expected 0/1"
                )
            if (flag == "1") != (split == "train"):
                continue
        folder = rel.split("/", 1)[0]
        if class_ids and class_ids[int(t) - 1] and class_ids[int(t) - 1] != folder:
            raise InputError(
                f"cub200: image {img_id} ({rel}) has target {t} but classes.txt names class {t} "
                f"{class_ids[int(t) - 1]!r}; the files do not belong together"
            )
        keep.append((rel, int(t) - 1, folder))
    present, skipped = _check_files(top / "images", [k[0] for k in keep], layout, missing)
    ok = set(present)
    rows = _Rows(top)
    rows.skipped = [(f"images/{n}", why) for n, why in skipped]
    for rel, label, folder in keep:
        if rel in ok:
            rows.add(f"images/{rel}", label, class_id=folder)
    cl = None
    if class_ids and all(class_ids):
        pretty = tuple(c.split(".", 1)[-1].replace("_", " ") for c in class_ids)
        cl = ClassList(
            "cub200",
            tuple(class_ids),
            pretty,
            str(top / "classes.txt"),
            tuple(range(1, len(class_ids) + 1)),
        )
    return rows.source(top, "cub200", cl)


def fgvc_aircraft(root: str | Path, split: str = "test", *, missing: str = "error") -> ImageSource:
    """FGVC-Aircraft (fgvc-aircraft-2013b), variant level: label = sorted position of the variant.

    The sorted set is the sorted unique variant names of ``data/images_variant_<split>.txt`` --
    exactly SSB's loader (``np.unique`` over the split's file), so the indices of
    ``ssb_aircraft_splits.json`` apply. In the real release every split file holds all 100
    variants, so this equals the sorted ``data/variants.txt`` and the same variant has the same
    index in every split. A split file that lacks some variants would shift the indices (SSB's
    loader would do so silently); this reader refuses it, naming the missing variants, whenever
    ``data/variants.txt`` is present to compare with.

    Parameters
    ----------
    root : str or Path
        ``fgvc-aircraft-2013b/`` or its parent.
    split : {"train", "val", "trainval", "test"}
        ``data/images_variant_<split>.txt``: lines ``<image id> <variant name, may hold spaces>``.
    missing : {"error", "skip"}

    Returns
    -------
    ImageSource
        Samples in the split file's order; names ``data/images/<id>.jpg``; classes = the sorted
        variants; group ``class_id`` = the variant name.
    """
    if split not in ("train", "val", "trainval", "test"):
        raise InputError(f"fgvc_aircraft: split={split!r}: use train, val, trainval or test")
    top = _locate(root, "fgvc_aircraft", "data", ("", "fgvc-aircraft-2013b"))
    layout = "fgvc_aircraft"
    listing = top / "data" / f"images_variant_{split}.txt"
    pairs: list[tuple[str, str]] = []
    for lineno, line in _read_lines(listing, layout):
        img_id, _, variant = line.partition(" ")
        if not variant.strip():
            raise InputError(f"{listing}, line {lineno}: expected '<image id> <variant>'")
        pairs.append((img_id, variant.strip()))
    variants = sorted({v for _, v in pairs})
    vfile = top / "data" / "variants.txt"
    if vfile.is_file():
        every = {line for _, line in _read_lines(vfile, layout)}
        lost, extra = sorted(every - set(variants)), sorted(set(variants) - every)
        if extra:
            raise InputError(f"{listing}: variant {extra[0]!r} is not in {vfile}")
        if lost:
            raise InputError(
                f"{listing} lacks {len(lost)} of the {len(every)} variants ({lost[0]!r}, ...): "
                "the sorted-variant indices (SSB's convention) would shift; use the complete "
                "release"
            )
    index = {v: k for k, v in enumerate(variants)}
    present, skipped = _check_files(
        top / "data" / "images", [f"{i}.jpg" for i, _ in pairs], layout, missing
    )
    ok = set(present)
    rows = _Rows(top)
    rows.skipped = [(f"data/images/{n}", why) for n, why in skipped]
    for img_id, variant in pairs:
        if f"{img_id}.jpg" in ok:
            rows.add(f"data/images/{img_id}.jpg", index[variant], class_id=variant)
    cl = ClassList(
        f"fgvc_aircraft-{split}",
        tuple(variants),
        tuple(variants),
        str(listing),
        tuple(range(1, len(variants) + 1)),
    )
    return rows.source(top, "fgvc_aircraft", cl)


def _cars_names_csv(path: Path) -> list[str]:
    """The 196 class names of the Kaggle release's ``names.csv``, in the devkit's order."""
    names: list[str] = []
    for lineno, line in _read_lines(path, "stanford_cars"):
        row = next(csv.reader([line]))
        name = row[0].strip() if row else ""
        if not name:
            raise InputError(f"{path}, line {lineno}: empty class name")
        names.append(name)
    return names


def _mat(path: Path, key: str, layout: str) -> Any:
    """Array ``key`` of a MATLAB file (read with scipy; never executes anything)."""
    from scipy.io import loadmat
    from scipy.io.matlab import MatReadError

    try:
        mat = loadmat(str(path), squeeze_me=True)
    except FileNotFoundError:
        raise InputError(f"{layout}: {path} not found") from None
    except (OSError, ValueError, MatReadError, NotImplementedError) as err:
        raise InputError(f"{layout}: cannot read {path}: {err}") from None
    if key not in mat:
        raise InputError(f"{layout}: {path} has no {key!r} array")
    return mat[key]


def _cars_devkit(top: Path, split: str) -> ImageSource:
    """The original release: ``cars_<split>/`` images, labels and class names from the devkit."""
    layout = f"stanford_cars {split}"
    devkit = top / "devkit"
    names = [str(n) for n in np.atleast_1d(_mat(devkit / "cars_meta.mat", "class_names", layout))]
    if split == "train":
        annos = devkit / "cars_train_annos.mat"
    else:
        annos = next(
            (a for a in (top / "cars_test_annos_withlabels.mat",
                         devkit / "cars_test_annos_withlabels.mat") if a.is_file()),
            top / "cars_test_annos_withlabels.mat",
        )  # fmt: skip
    table = np.atleast_1d(_mat(annos, "annotations", layout))
    fields = table.dtype.names or ()
    if "class" not in fields or "fname" not in fields:
        raise InputError(
            f"{layout}: {annos} has no 'class' labels (the test labels are in "
            "cars_test_annos_withlabels.mat)"
        )
    folder = f"cars_{split}"
    rows = _Rows(top)
    entries = [(str(a["fname"]), int(np.asarray(a["class"]).ravel()[0])) for a in table.ravel()]
    _check_files(top, [f"{folder}/{f}" for f, _ in entries], layout, "error")
    for fname, cls in entries:
        if not 1 <= cls <= len(names):
            raise InputError(f"{layout}: {annos}: class {cls} of {fname} is not in 1..{len(names)}")
        rows.add(f"{folder}/{fname}", cls - 1, class_id=names[cls - 1])
    cl = ClassList(
        "stanford_cars", tuple(names), tuple(names), f"{devkit / 'cars_meta.mat'}",
        tuple(range(1, len(names) + 1)),
    )  # fmt: skip
    return rows.source(top, f"stanford_cars-{split}", cl)


def stanford_cars(root: str | Path, split: str = "test", *, order: str = "devkit") -> ImageSource:
    """Stanford Cars: label = the class's index in the devkit's ``cars_meta.mat`` order.

    That is the order SSB's ``scars_ssb_splits.json`` indices follow (SSB's loaders map class
    names through it, and its DATA.md warns that ImageFolder's sorted folder order differs).
    Two releases are read:

    - the folder release SSB uses (Kaggle ``stanford-car-dataset-by-classes-folder``):
      ``car_data/car_data/{train,test}/<class name>/`` with ``names.csv`` (the 196 names in
      devkit order) beside ``car_data/``; a ``/`` in a name is ``-`` in its folder
      (``Ram C/V Cargo Van Minivan 2012``);
    - the original release (as torchvision's ``StanfordCars`` reads it): ``cars_train/``,
      ``cars_test/``, ``devkit/cars_meta.mat``, ``devkit/cars_train_annos.mat`` and
      ``cars_test_annos_withlabels.mat``; label = the annotation's ``class`` - 1.

    Parameters
    ----------
    root : str or Path
        The folder holding ``car_data/`` and ``names.csv`` (or ``car_data/car_data/`` itself, its
        parent, ...), or the original release's folder (or its parent ``stanford_cars/``).
    split : {"train", "test"}
    order : {"devkit", "sorted"}
        ``"sorted"``: position in the sorted class-folder names (torchvision ``ImageFolder``),
        for a folder tree without ``names.csv``. It does NOT match SSB's class indices.

    Returns
    -------
    ImageSource
        Names ``<split>/<class folder>/<file>`` (folder release) or ``cars_<split>/<file>``;
        group ``class_id`` = class name (the folder name in the folder release).

    Examples
    --------
    >>> import tempfile
    >>> base = Path(tempfile.mkdtemp())
    >>> top = base / "car_data" / "car_data"
    >>> for name in ("smart fortwo Convertible 2012", "AM General Hummer SUV 2000"):
    ...     (top / "test" / name).mkdir(parents=True)
    ...     (top / "test" / name / "00001.jpg").touch()
    >>> _ = (base / "names.csv").write_text("AM General Hummer SUV 2000\nAcura RL Sedan 2012\n"
    ...                                     "smart fortwo Convertible 2012\n")
    >>> src = stanford_cars(base, "test")
    >>> src.groups["class_id"], src.labels.tolist()
    (['AM General Hummer SUV 2000', 'smart fortwo Convertible 2012'], [0, 2])
    >>> import shutil; shutil.rmtree(base)
    """
    if split not in ("train", "test"):
        raise InputError(f"stanford_cars: split={split!r}: use 'train' or 'test'")
    if order not in ("devkit", "sorted"):
        raise InputError(f"stanford_cars: order={order!r}: use 'devkit' or 'sorted'")
    layout = f"stanford_cars {split}"
    base = _root(root, "stanford_cars")
    for cand in ("", "stanford_cars"):
        top = base / cand if cand else base
        if (top / "devkit" / "cars_meta.mat").is_file():
            if order != "devkit":
                raise InputError(f"{layout}: order='sorted' applies to the folder release only")
            return _cars_devkit(top, split)
    top = _locate(
        root, "stanford_cars", split, ("", "car_data", os.path.join("car_data", "car_data"))
    )
    folders, loose = _scan(top / split)
    if loose or not folders:
        raise InputError(f"{layout}: expected only class folders in {top / split}")
    other = "train" if split == "test" else "test"
    if (top / other).is_dir():
        theirs, _ = _scan(top / other)
        if theirs != folders:
            diff = sorted(set(folders) ^ set(theirs))
            raise InputError(
                f"{layout}: {top / split} and {top / other} hold different class folders "
                f"({len(diff)} differ, first {diff[0]!r})"
            )
    if order == "sorted":
        names = list(folders)
        source = f"class folders of {top / split} (sorted; not SSB's devkit order)"
    else:
        csv_path = next(
            (d / "names.csv" for d in (top, top.parent, top.parent.parent)
             if (d / "names.csv").is_file()),
            None,
        )  # fmt: skip
        if csv_path is None:
            raise InputError(
                f"{layout}: names.csv (the devkit's class order, which SSB's indices follow) not "
                f"found beside {top.parent}; order='sorted' reads ImageFolder's order instead"
            )
        names = [n.replace("/", "-") for n in _cars_names_csv(csv_path)]
        source = str(csv_path)
        dup = sorted(n for n, c in Counter(names).items() if c > 1)
        if dup:
            raise InputError(f"{layout}: {csv_path} lists {dup[0]!r} twice")
        stray = sorted(set(folders) - set(names))
        if stray:
            raise InputError(
                f"{layout}: class folder {top / split / stray[0]} is not a class of {csv_path} "
                f"({len(stray)} such folders)"
            )
    index = {n: k for k, n in enumerate(names)}
    rows = _Rows(top)
    _wnid_tree(top / split, f"{split}/", rows, index.__getitem__, layout)
    cl = ClassList("stanford_cars", tuple(names), tuple(names), source,
                   tuple(range(1, len(names) + 1)))  # fmt: skip
    return rows.source(top, f"stanford_cars-{split}", cl)


# ---------------------------------------------------------------------------------------------
# ImageNet variants
# ---------------------------------------------------------------------------------------------


def _in1k_variant(root: str | Path, layout: str, candidates: Sequence[str]) -> ImageSource:
    base = _root(root, layout)
    top = base
    for cand in candidates:
        if (base / cand).is_dir():
            top = base / cand
            break
    cl = _shipped("imagenet1k")
    rows = _Rows(top)
    _wnid_tree(top, "", rows, _in1k_label_of(cl, layout, top), layout)
    return rows.source(top, layout, cl)


def imagenet_r(root: str | Path) -> ImageSource:
    """ImageNet-R (``imagenet-r/<wnid>/*.jpg``, 200 classes), labels = ImageNet-1K indices.

    The 200 wnids are mapped to their index in the shipped ``imagenet1k`` list (so a 1,000-way
    classifier's prediction is compared directly; restrict the logits to the 200 classes
    elsewhere if wanted). ``root`` is ``imagenet-r/`` or its parent. Group ``class_id`` = wnid.
    """
    return _in1k_variant(root, "imagenet_r", ("imagenet-r",))


def imagenet_sketch(root: str | Path) -> ImageSource:
    """ImageNet-Sketch (``sketch/<wnid>/*.JPEG``, 1,000 classes), labels = ImageNet-1K indices.

    ``root`` is ``sketch/`` (as ImageNet-Sketch.zip unpacks) or its parent.
    """
    return _in1k_variant(root, "imagenet_sketch", ("sketch", "imagenet-sketch"))


def imagenet_o(root: str | Path) -> ImageSource:
    """ImageNet-O (``imagenet-o/<wnid>/*.jpg``): every image is OOD (label -1).

    Labels index into the shipped ``imagenet1k`` list (all -1); the wnid of each image's folder
    is kept in the group column ``class_id``. ``root`` is ``imagenet-o/`` or its parent.
    """
    layout = "imagenet_o"
    base = _root(root, layout)
    top = base / "imagenet-o" if (base / "imagenet-o").is_dir() else base
    rows = _Rows(top)
    _wnid_tree(top, "", rows, lambda _: -1, layout)
    return rows.source(top, layout, _shipped("imagenet1k"))


def imagenet_c(
    root: str | Path,
    corruption: str | Sequence[str] | None = None,
    severity: int | Sequence[int] | None = None,
) -> ImageSource:
    """ImageNet-C (``<corruption>/<severity>/<wnid>/*.JPEG``), labels = ImageNet-1K indices.

    Parameters
    ----------
    root : str or Path
        The folder holding the corruption folders (``gaussian_noise/``, ``fog/``, ...) as the
        released tars unpack.
    corruption : str or sequence of str, optional
        Default: every corruption folder present.
    severity : int or sequence of int (1..5), optional
        Default: every severity folder present.

    Returns
    -------
    ImageSource
        Ordered by corruption, severity, wnid, file; names
        ``<corruption>/<severity>/<wnid>/<file>``; groups ``corruption`` (str), ``severity``
        (int) and ``class_id`` (wnid).
    """
    layout = "imagenet_c"
    top = _root(root, layout)
    have, _ = _scan(top)
    if corruption is None:
        chosen = have
    else:
        chosen = sorted({corruption} if isinstance(corruption, str) else set(corruption))
        lost = [c for c in chosen if c not in have]
        if lost:
            raise InputError(
                f"{layout}: corruption folder {top / lost[0]} not found "
                f"(present: {', '.join(have) or 'none'})"
            )
    if not chosen:
        raise InputError(f"{layout}: {top} has no corruption folders <corruption>/<severity>/")
    wanted = (
        None if severity is None else {severity} if isinstance(severity, int) else set(severity)
    )
    if wanted is not None and not wanted <= {1, 2, 3, 4, 5}:
        raise InputError(f"{layout}: severity {sorted(wanted)} must be in 1..5")
    cl = _shipped("imagenet1k")
    rows = _Rows(top)
    for corr in chosen:
        levels, _ = _scan(top / corr)
        bad = [lv for lv in levels if lv not in {"1", "2", "3", "4", "5"}]
        if bad or not levels:
            raise InputError(
                f"{layout}: {top / corr} should hold severity folders 1..5"
                + (f", not {bad[0]!r}" if bad else "")
            )
        use = [int(lv) for lv in levels] if wanted is None else sorted(wanted)
        lost_lv = [s for s in use if str(s) not in levels]
        if lost_lv:
            raise InputError(f"{layout}: severity folder {top / corr / str(lost_lv[0])} not found")
        for sev in sorted(use):
            where = top / corr / str(sev)
            _wnid_tree(
                where,
                f"{corr}/{sev}/",
                rows,
                _in1k_label_of(cl, layout, where),
                layout,
                corruption=corr,
                severity=sev,
            )
    return rows.source(top, layout, cl)


# ---------------------------------------------------------------------------------------------
# OpenOOD lists
# ---------------------------------------------------------------------------------------------


def openood_list(
    path: str | Path,
    root: str | Path,
    *,
    classes: ClassList | str | Path | None = None,
    ood: bool = False,
    missing: str = "error",
) -> ImageSource:
    """An OpenOOD-style image list: ``<path> [<label>]`` per line, paths relative to ``root``.

    As OpenOOD's ``ImglistDataset`` reads it: each line is split at its first space (so paths
    hold no spaces); the rest is an integer label (absent = -1). Unlike
    :func:`~semshift.features.data.file_list`, paths are relative to the data root (OpenOOD's
    ``data_dir``), not the list's folder. A leading ``./`` is dropped (the IS-OOD lists write
    ``./imagenet21k_val/<wnid>/<file>``).

    Parameters
    ----------
    path : str or Path
        The list file.
    root : str or Path
        The data root the paths are relative to.
    classes : ClassList, name or file, optional
        Labels index into it (checked to be in range).
    ood : bool
        Every image is OOD: labels -1 whatever the list says (OpenOOD's OOD lists carry
        placeholder labels).
    missing : {"error", "skip"}

    Returns
    -------
    ImageSource
        In list order; names as in the list (without ``./``).
    """
    layout = "openood_list"
    lst = Path(path)
    top = _root(root, f"{layout} data")
    cl = _as_classlist(classes)
    entries: list[tuple[str, int]] = []
    seen: dict[str, int] = {}
    for lineno, line in _read_lines(lst, layout):
        rel, _, extra = line.partition(" ")
        rel = rel.removeprefix("./")
        if rel.startswith("/") or not rel:
            raise InputError(f"{lst}, line {lineno}: path {rel!r} must be relative to {top}")
        extra = extra.strip()
        label = -1
        if extra and not ood:
            if not extra.lstrip("-").isdigit():
                raise InputError(f"{lst}, line {lineno}: label {extra!r} is not an integer")
            label = int(extra)
            n = len(cl) if cl is not None else None
            if label < -1 or (n is not None and label >= n):
                rng = f"[-1, {n})" if n is not None else ">= -1"
                raise InputError(f"{lst}, line {lineno}: label {label} is not in {rng}")
        if rel in seen:
            raise InputError(f"{lst}, line {lineno}: {rel} already listed on line {seen[rel]}")
        seen[rel] = lineno
        entries.append((rel, label))
    present, skipped = _check_files(top, [r for r, _ in entries], layout, missing)
    ok = set(present)
    rows = _Rows(top)
    rows.skipped = skipped
    for rel, label in entries:
        if rel in ok:
            rows.add(rel, label)
    return rows.source(lst, "openood-list", cl)


# ---------------------------------------------------------------------------------------------
# registry: layouts by name, for run configs (``data.<set>.layout``)
# ---------------------------------------------------------------------------------------------


def _adopt(name: str, reader: Any) -> None:
    """Register the reader a ``semshift.layouts`` entry point names, under that name."""
    if not callable(reader):
        raise TypeError(f"entry point {name!r} names {reader!r}, not a reader f(root, **params)")
    LAYOUTS.add(name, reader)


#: Layout name -> reader ``f(root, **params) -> ImageSource`` (a
#: :class:`semshift.registry.Registry`); other packages add readers through the
#: ``semshift.layouts`` entry-point group (a module applying :func:`register_layout`, or a reader).
LAYOUTS: Registry[Callable[..., ImageSource]] = Registry(
    "layout", entry_points="semshift.layouts", adopt=_adopt
)
for _name, _reader in (
    ("imagenet1k", imagenet1k),
    ("imagenet21k", imagenet21k),
    ("cub200", cub200),
    ("fgvc_aircraft", fgvc_aircraft),
    ("stanford_cars", stanford_cars),
    ("imagenet_r", imagenet_r),
    ("imagenet_sketch", imagenet_sketch),
    ("imagenet_o", imagenet_o),
    ("imagenet_c", imagenet_c),
):
    LAYOUTS.add(_name, _reader)


def register_layout(
    name: str,
) -> Callable[[Callable[..., ImageSource]], Callable[..., ImageSource]]:
    """Decorator adding a reader ``f(root, **params) -> ImageSource`` under ``name``.

    Raises
    ------
    DuplicateNameError
        ``name`` is registered already (an InputError, so also a ValueError).
    """
    LAYOUTS.check_new(name)

    def deco(fn: Callable[..., ImageSource]) -> Callable[..., ImageSource]:
        LAYOUTS.add(name, fn)
        return fn

    return deco


def list_layouts() -> list[str]:
    """Names of the registered dataset layouts."""
    return LAYOUTS.names()


def sample_positions(n: int, sample: int | None) -> NDArray[np.int64]:
    """Positions of ``sample`` items evenly spaced over ``n`` (every position when ``sample`` is
    None or at least ``n``): ``floor(linspace(0, n - 1, sample))``, distinct and increasing.

    >>> sample_positions(10, 4).tolist()
    [0, 3, 6, 9]
    """
    if sample is None or sample >= n:
        return np.arange(n, dtype=np.int64)
    return np.floor(np.linspace(0, n - 1, sample)).astype(np.int64)


def layout_parameters(name: str) -> list[str]:
    """The parameters layout ``name`` accepts besides ``root`` (``sample`` is accepted by all)."""
    import inspect

    fn = LAYOUTS[name]
    accepted = [p for p in inspect.signature(fn).parameters if p != "root"]
    return accepted if "sample" in accepted else [*accepted, "sample"]


def check_sample(sample: object, where: str = "sample") -> int | None:
    """``sample`` as a positive int (or None); anything else raises a one-line ``InputError``."""
    if sample is None:
        return None
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 1:
        raise InputError(f"{where}={sample!r}: use a positive number of images per set")
    return sample


def open_layout(
    name: str, root: str | Path, *, sample: int | None = None, **params: Any
) -> ImageSource:
    """The images of a release read by the layout ``name`` from ``root``.

    ``sample`` keeps that many images, evenly spaced over the set's order
    (:func:`sample_positions`): a quick look, not the published set. Readers of fixed lists
    (those taking a ``sample`` parameter) select before reading, so only the sampled files need
    be present; the others read the whole set first.

    Raises
    ------
    UnknownNameError
        No layout has this name (close matches and every name are listed).
    InputError
        A parameter the reader does not take, or the reader's own one-line errors.
    """
    accepted = layout_parameters(name)
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise InputError(
            f"layout {name!r} takes no parameter {', '.join(unknown)}; accepted: "
            f"{', '.join(accepted)}"
        )
    import inspect

    n = check_sample(sample, f"layout {name!r}: sample")
    fn = LAYOUTS[name]
    if n is not None and "sample" in inspect.signature(fn).parameters:
        return fn(root, sample=n, **params)
    src = fn(root, **params)
    if n is None or n >= len(src):
        return src
    return src.take(sample_positions(len(src), n), kind=f"{src.kind}-sample{n}")
