"""Zero-shot data: image features, class embeddings and the proposed-split image sets.

Two sources give the same :class:`ZSLData`:

* the field's standard format (Xian et al.'s ``xlsa17`` release), read with SciPy
  (:func:`read_xlsa`): ``res101.mat`` holds ``features`` (d x n), ``labels`` (n x 1, 1-based)
  and ``image_files``; ``att_splits.mat`` holds ``att`` (a x C, the class embeddings),
  ``allclasses_names`` and the 1-based image index sets ``trainval_loc``, ``train_loc``,
  ``val_loc``, ``test_seen_loc``, ``test_unseen_loc``. :func:`write_xlsa` writes such a pair;
* semshift's own files (:func:`read_semshift_zsl`): a ``semshift splits zsl`` manifest
  (``split.json`` and its image table), a feature store holding those images' features, and a
  class-embedding table.

Version 1 and 2 of the proposed splits share ``trainval``, ``test_seen`` and ``test_unseen``; in
V1 the ``train`` and ``val`` sets (used only to choose hyperparameters) also held the
``test_seen`` images of their classes, which V2 removed. :meth:`ZSLData.split` gives either:
``"v2"`` refuses a file whose train / val sets hold test_seen images, ``"v1"`` adds the
test_seen images of the train / val classes back (the released V1 sets, for the V1 vs V2
comparison of the paper's Table 1).

References
----------
Xian, Y., Lampert, C. H., Schiele, B. and Akata, Z. (2018). Zero-shot learning - a comprehensive
evaluation of the good, the bad and the ugly. TPAMI. (Proposed Split Version 2.0.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from semshift.errors import InputError
from semshift.textio import read_csv, read_json

if TYPE_CHECKING:
    from semshift.splits.manifest import SplitManifest

__all__ = [
    "SETS",
    "SPLIT_VERSIONS",
    "ZSLData",
    "ZSLSplit",
    "read_semshift_zsl",
    "read_xlsa",
    "read_zsl_data",
    "write_xlsa",
]

#: The image sets of a proposed split (``<name>_loc`` in ``att_splits.mat``).
SETS: tuple[str, ...] = ("trainval", "train", "val", "test_seen", "test_unseen")
#: Proposed split versions :meth:`ZSLData.split` gives.
SPLIT_VERSIONS: tuple[str, ...] = ("v1", "v2")

I64 = NDArray[np.int64]
F64 = NDArray[np.float64]


@dataclass(frozen=True)
class ZSLSplit:
    """The image row indices of one split version (into :attr:`ZSLData.features`).

    ``train`` / ``val`` choose hyperparameters (fit on train, per-class top-1 on val over the
    val classes); the final model is fitted on ``trainval`` and tested on ``test_seen`` and
    ``test_unseen``.
    """

    version: str
    trainval: I64
    train: I64
    val: I64
    test_seen: I64
    test_unseen: I64


@dataclass(frozen=True)
class ZSLData:
    """Image features, class embeddings and the image sets of a zero-shot dataset.

    Attributes
    ----------
    name : str
        Dataset name (the report's column group).
    features : ndarray of float64, shape (n, d)
    labels : ndarray of int64, shape (n,)
        Class index of every image, in ``[0, C)``.
    embeddings : ndarray of float64, shape (C, a)
        Class embeddings (attributes or text), row c for class c.
    class_names : tuple of str, length C
    sets : mapping of str to ndarray of int64
        Row indices of each of :data:`SETS`.
    source : str
        Where the data came from (error messages name it).

    Raises
    ------
    InputError
        On construction: shapes or class counts that disagree, NaN or inf in the features or
        the embeddings, an index out of range, a missing set, test images in ``trainval``, a
        ``test_unseen`` class with images in ``trainval`` (class-level leak), train and val
        sharing a class, or train / val outside ``trainval``.
    """

    name: str
    features: F64
    labels: I64
    embeddings: F64
    class_names: tuple[str, ...]
    sets: Mapping[str, I64] = field(repr=False)
    source: str = ""

    def __post_init__(self) -> None:
        where = self.source or self.name
        X, y, S = self.features, self.labels, self.embeddings
        if X.ndim != 2 or y.ndim != 1 or S.ndim != 2:
            raise InputError(
                f"{where}: features must be (n, d), labels (n,), embeddings (C, a); got "
                f"{X.shape}, {y.shape}, {S.shape}"
            )
        if X.shape[0] != y.size:
            raise InputError(f"{where}: {X.shape[0]} feature rows but {y.size} labels")
        n_cls = S.shape[0]
        if len(self.class_names) != n_cls:
            raise InputError(
                f"{where}: {len(self.class_names)} class names but {n_cls} class embeddings"
            )
        if y.size and (y.min() < 0 or y.max() >= n_cls):
            raise InputError(
                f"{where}: mismatched class counts: labels reach class {int(y.max()) + 1} but "
                f"there are {n_cls} class embeddings"
            )
        bad = np.flatnonzero(~np.isfinite(S).all(axis=1))
        if bad.size:
            c = int(bad[0])
            raise InputError(
                f"{where}: class embeddings contain NaN or inf ({bad.size} class(es), first "
                f"class {c} {self.class_names[c]!r}); fill or drop them before training"
            )
        bad = np.flatnonzero(~np.isfinite(X).all(axis=1))
        if bad.size:
            raise InputError(
                f"{where}: features contain NaN or inf ({bad.size} image(s), first row {bad[0]})"
            )
        missing = [s for s in SETS if s not in self.sets]
        if missing:
            raise InputError(f"{where}: missing image set(s) {', '.join(missing)}")
        for name in SETS:
            idx = self.sets[name]
            if idx.size and (idx.min() < 0 or idx.max() >= y.size):
                raise InputError(f"{where}: {name} indexes images outside [0, {y.size})")
            if idx.size == 0:
                raise InputError(f"{where}: the {name} set is empty")
        trainval = self.sets["trainval"]
        for test in ("test_seen", "test_unseen"):
            both = np.intersect1d(trainval, self.sets[test])
            if both.size:
                raise InputError(
                    f"{where}: {both.size} {test} image(s) are also in trainval (first row "
                    f"{both[0]}); test images must stay out of training"
                )
        tv_classes = np.unique(y[trainval])
        leak = np.intersect1d(np.unique(y[self.sets["test_unseen"]]), tv_classes)
        if leak.size:
            c = int(leak[0])
            raise InputError(
                f"{where}: test classes appear in trainval: {leak.size} test_unseen class(es) "
                f"have training images (first class {c} {self.class_names[c]!r}); unseen "
                "classes must have no image in trainval"
            )
        for sub in ("train", "val"):
            outside = np.setdiff1d(
                self.sets[sub], np.union1d(trainval, self.sets["test_seen"]), assume_unique=False
            )
            if outside.size:
                raise InputError(
                    f"{where}: {outside.size} {sub} image(s) are in neither trainval nor "
                    f"test_seen (first row {outside[0]})"
                )
        used = np.unique(y[np.concatenate([np.asarray(self.sets[name]) for name in SETS])])
        imageless = np.setdiff1d(np.arange(n_cls), used)
        if imageless.size:  # left out of every top-1: one unseen class left scores 100 %
            names = ", ".join(repr(self.class_names[int(c)]) for c in imageless[:5])
            more = f" and {imageless.size - 5} more" if imageless.size > 5 else ""
            raise InputError(
                f"{where}: {imageless.size} of the {n_cls} classes have no image in any set "
                f"({names}{more}); a class without images would be left out of the top-1 "
                "silently: give it images or leave it out of the split and the embeddings"
            )
        shared = np.intersect1d(y[self.sets["train"]], y[self.sets["val"]])
        if shared.size:
            c = int(shared[0])
            raise InputError(
                f"{where}: train and val share {shared.size} class(es) (first {c} "
                f"{self.class_names[c]!r}); val classes must be unseen during training"
            )

    @property
    def n_classes(self) -> int:
        """Number of classes C."""
        return int(self.embeddings.shape[0])

    def classes_of(self, name: str) -> I64:
        """Sorted class indices with images in the set ``name``."""
        return np.unique(self.labels[self.sets[name]])

    @property
    def seen_classes(self) -> I64:
        """Classes of ``trainval`` (= those of ``test_seen``)."""
        return self.classes_of("trainval")

    @property
    def unseen_classes(self) -> I64:
        """Classes of ``test_unseen``."""
        return self.classes_of("test_unseen")

    def split(self, version: str = "v2") -> ZSLSplit:
        """The image sets of proposed split ``version`` (``"v1"`` or ``"v2"``).

        Raises
        ------
        InputError
            ``"v2"`` on data whose train or val set holds test_seen images (the V1 bug), or an
            unknown version.
        """
        if version not in SPLIT_VERSIONS:
            raise InputError(
                f"unknown split version {version!r}; known: {', '.join(SPLIT_VERSIONS)}"
            )
        s = {k: np.asarray(v, dtype=np.int64) for k, v in self.sets.items()}
        test_seen = s["test_seen"]
        if version == "v2":
            for sub in ("train", "val"):
                both = np.intersect1d(s[sub], test_seen)
                if both.size:
                    raise InputError(
                        f"{self.source or self.name}: the {sub} set holds {both.size} test_seen "
                        f"image(s) (first row {both[0]}), the V1 bug: split v2 needs train and "
                        "val inside trainval; use --split v1 to evaluate these sets as V1"
                    )
            return ZSLSplit("v2", s["trainval"], s["train"], s["val"], test_seen, s["test_unseen"])
        y = self.labels
        out = {}
        for sub in ("train", "val"):
            extra = test_seen[np.isin(y[test_seen], np.unique(y[s[sub]]))]
            out[sub] = np.union1d(s[sub], extra)
        return ZSLSplit("v1", s["trainval"], out["train"], out["val"], test_seen, s["test_unseen"])


# ---------------------------------------------------------------------- the .mat format
def _loadmat(path: Path) -> dict[str, Any]:
    from scipy.io import loadmat
    from scipy.io.matlab import MatReadError

    if not path.is_file():
        raise InputError(f"{path}: no such file")
    if path.stat().st_size == 0:  # SciPy: "Mat file appears to be truncated", no name
        raise InputError(f"{path} is empty (0 bytes); copy the .mat file again")
    try:
        return dict(loadmat(str(path)))
    except MemoryError:
        raise
    except (OSError, ValueError, TypeError, IndexError, KeyError, MatReadError) as err:
        # a truncated or damaged file fails deep in the parser (an IndexError on 40 bytes)
        raise InputError(
            f"{path}: not a readable .mat file ({type(err).__name__}: {err})"
        ) from None


def _mat_key(mat: Mapping[str, Any], key: str, path: Path) -> NDArray[Any]:
    if key not in mat:
        known = sorted(k for k in mat if not k.startswith("__"))
        raise InputError(f"{path}: no variable {key!r} (it has {', '.join(known)})")
    return np.asarray(mat[key])


def _strings(cell: NDArray[Any]) -> list[str]:
    """Strings of a MATLAB cell array as loadmat returns it (nested object arrays)."""
    out = []
    for item in np.asarray(cell, dtype=object).ravel():
        while isinstance(item, np.ndarray) and item.dtype == object and item.size == 1:
            item = item.ravel()[0]
        out.append(
            str(item.ravel()[0]) if isinstance(item, np.ndarray) and item.size else str(item)
        )
    return out


def _locs(mat: Mapping[str, Any], key: str, path: Path, n: int) -> I64:
    raw = _mat_key(mat, key, path).ravel()
    if not np.issubdtype(raw.dtype, np.number) or not np.all(raw == np.round(raw)):
        raise InputError(f"{path}: {key} must hold integer image numbers")
    loc = raw.astype(np.int64)
    if loc.size and (loc.min() < 1 or loc.max() > n):
        raise InputError(
            f"{path}: {key} holds image numbers outside 1..{n} (1-based, as in MATLAB)"
        )
    return loc - 1


def read_xlsa(
    directory: str | Path,
    *,
    features: str = "res101.mat",
    splits: str = "att_splits.mat",
    embedding: str = "att",
    name: str | None = None,
) -> ZSLData:
    """Read a dataset in the ``xlsa17`` format (``res101.mat`` and ``att_splits.mat``).

    Parameters
    ----------
    directory : folder holding both files
    features, splits : their file names
    embedding : the class-embedding variable of ``att_splits.mat`` (``att``, the l2-normalised
        attributes; ``original_att``; or any other a x C matrix)
    name : dataset name (default: the folder's name)

    Raises
    ------
    InputError
        A missing file or variable, class counts that disagree, NaN embeddings, or a leak
        (see :class:`ZSLData`); the message names the file.
    """
    root = Path(directory)
    fpath, spath = root / features, root / splits
    fmat, smat = _loadmat(fpath), _loadmat(spath)
    X = _mat_key(fmat, "features", fpath)
    raw_labels = _mat_key(fmat, "labels", fpath).ravel()
    if X.ndim != 2 or not np.issubdtype(X.dtype, np.number):
        raise InputError(f"{fpath}: features must be a numeric d x n matrix, got {X.shape}")
    if X.shape[1] != raw_labels.size:
        raise InputError(
            f"{fpath}: features has {X.shape[1]} columns (images) but labels has "
            f"{raw_labels.size} entries"
        )
    if raw_labels.size and raw_labels.min() < 1:
        raise InputError(f"{fpath}: labels must be 1-based class numbers")
    labels = raw_labels.astype(np.int64) - 1
    att = _mat_key(smat, embedding, spath)
    if att.ndim != 2 or not np.issubdtype(att.dtype, np.number):
        raise InputError(f"{spath}: {embedding} must be a numeric a x C matrix")
    n_cls = att.shape[1]
    n_label_cls = int(labels.max()) + 1 if labels.size else 0
    if n_label_cls != n_cls:
        raise InputError(
            f"mismatched class counts: {spath.name} '{embedding}' has {n_cls} classes (columns) "
            f"but {fpath.name} labels name {n_label_cls}"
        )
    if "allclasses_names" in smat:
        names = _strings(smat["allclasses_names"])
        if len(names) != n_cls:
            raise InputError(
                f"{spath}: allclasses_names has {len(names)} entries but {embedding} has "
                f"{n_cls} classes"
            )
    else:
        names = [f"class{c + 1}" for c in range(n_cls)]
    n = labels.size
    sets = {s: _locs(smat, f"{s}_loc", spath, n) for s in SETS}
    return ZSLData(
        name=name or root.resolve().name,
        features=np.ascontiguousarray(X.T, dtype=np.float64),
        labels=labels,
        embeddings=np.ascontiguousarray(att.T, dtype=np.float64),
        class_names=tuple(names),
        sets=sets,
        source=str(spath),
    )


def write_xlsa(
    data: ZSLData,
    directory: str | Path,
    *,
    features: str = "res101.mat",
    splits: str = "att_splits.mat",
    image_files: Sequence[str] | None = None,
) -> Path:
    """Write ``data`` as an ``xlsa17`` pair (features d x n, 1-based labels and locations).

    ``image_files`` (default ``image<k>``) fills ``res101.mat``'s ``image_files``. Returns the
    folder. :func:`read_xlsa` reads it back to the same arrays.
    """
    from scipy.io import savemat

    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    n = data.labels.size
    files = list(image_files) if image_files is not None else [f"image{k}" for k in range(n)]
    if len(files) != n:
        raise InputError(f"image_files has {len(files)} entries for {n} images")
    cell = np.empty((n, 1), dtype=object)
    cell[:, 0] = files
    names = np.empty((data.n_classes, 1), dtype=object)
    names[:, 0] = list(data.class_names)
    savemat(
        str(root / features),
        {
            "features": data.features.T,
            "labels": (data.labels + 1).reshape(-1, 1).astype(np.float64),
            "image_files": cell,
        },
    )
    out: dict[str, Any] = {
        "att": data.embeddings.T,
        "original_att": data.embeddings.T,
        "allclasses_names": names,
    }
    for s in SETS:
        out[f"{s}_loc"] = (np.asarray(data.sets[s]) + 1).reshape(-1, 1).astype(np.float64)
    savemat(str(root / splits), out)
    return root


# ---------------------------------------------------------------------- semshift's files
def _read_embeddings(path: Path) -> tuple[list[str], F64]:
    """Class ids and embeddings from a CSV (``class`` column, then numbers) or an ``.npz``
    (``classes``, ``embeddings``)."""
    if not path.is_file():
        raise InputError(f"{path}: no such class-embedding file")
    if path.suffix.lower() == ".npz":
        with np.load(path, allow_pickle=False) as z:
            if not {"classes", "embeddings"} <= set(z.files):
                raise InputError(f"{path}: needs arrays 'classes' and 'embeddings'")
            return [str(c) for c in z["classes"]], np.asarray(z["embeddings"], dtype=np.float64)
    try:
        frame = pd.read_csv(path, dtype={"class": str})
    except (OSError, ValueError) as err:
        raise InputError(f"{path}: unreadable CSV ({err})") from None
    if "class" not in frame.columns:
        raise InputError(f"{path}, line 1: the header must name a 'class' column")
    values = frame.drop(columns=["class"])
    try:
        arr = values.to_numpy(dtype=np.float64)
    except ValueError:
        raise InputError(f"{path}: every column but 'class' must be numeric") from None
    return frame["class"].astype(str).tolist(), arr


def read_semshift_zsl(
    split: str | Path,
    store: str | Path,
    embeddings: str | Path,
    *,
    array: str = "features",
    name: str | None = None,
) -> ZSLData:
    """Read a ``semshift splits zsl`` split with features from a store and class embeddings.

    Parameters
    ----------
    split : ``split.json`` (or its folder) of the ``zsl`` builder; its image table
        (``images.csv`` beside it, or inline) gives each image's path, class and set
    store : a feature store holding every image of the table (matched on ``path``, as written
        or relative to the manifest's ``image_root``); feature rows follow the sorted paths
    embeddings : class embeddings, a CSV (``class`` column, then one column per dimension) or
        an ``.npz`` (``classes``, ``embeddings``), covering every class of the split
    array : the store array to use as features
    name : dataset name (default: the split folder's name)
    """
    from semshift.features.store import open_verified
    from semshift.splits.manifest import SplitManifest

    spath = Path(split)
    manifest = SplitManifest.read(spath)
    mdir = spath if spath.is_dir() else spath.parent
    if manifest.method != "zsl":
        raise InputError(f"{spath}: a '{manifest.method}' split, not a zero-shot ('zsl') split")
    table = manifest.extra.get("images")
    if isinstance(table, str):
        images = read_csv(mdir / table, "zero-shot image table", dtype=str, keep_default_na=False)
    elif isinstance(table, dict):
        images = pd.DataFrame(table)
    else:
        raise InputError(f"{spath}: no image table ('images')")
    class_ids, emb = _read_embeddings(Path(embeddings))
    position = {c: k for k, c in enumerate(class_ids)}
    split_classes = list(manifest.known) + list(manifest.bins.get("unseen", []))
    missing = [c for c in split_classes if c not in position]
    if missing:
        raise InputError(
            f"mismatched class counts: {embeddings} has no embedding for {len(missing)} of the "
            f"split's {len(split_classes)} classes (first {missing[0]!r})"
        )
    order = sorted(split_classes)
    S = emb[[position[c] for c in order]]
    code = {c: k for k, c in enumerate(order)}
    _check_split_images(images, manifest, spath)
    paths = images["path"].astype(str)
    unique_paths = sorted(set(paths))  # one feature row per image, in path order
    st = open_verified({"zero-shot features": store}, same_model=False)["zero-shot features"]
    index = st.index
    stored = {p: k for k, p in enumerate(index["path"].astype(str))}
    root = manifest.extra.get("image_root")
    rows = []
    for p in unique_paths:
        k = stored.get(p)
        if k is None and root is not None:
            k = stored.get(str(Path(root) / p))
        if k is None:
            raise InputError(f"{store}: no features for image {p!r} of {spath}")
        rows.append(k)
    X = np.asarray(st.gather(np.asarray(rows, dtype=np.int64), array), dtype=np.float64)
    row_of = {p: r for r, p in enumerate(unique_paths)}
    first_class = images.drop_duplicates("path").set_index("path")["class"]
    labels = np.array([code[str(first_class[p])] for p in unique_paths], dtype=np.int64)
    sets = {
        s: np.array(sorted(row_of[p] for p in paths[images["set"] == s]), dtype=np.int64)
        for s in SETS
    }
    return ZSLData(
        name=name or mdir.resolve().name,
        features=X,
        labels=labels,
        embeddings=S,
        class_names=tuple(order),
        sets=sets,
        source=str(spath),
    )


#: The split's classes each image set must hold, as ``semshift splits zsl`` writes them
#: (``split.json``'s ``known`` and ``bins``).
_SET_CLASSES = {
    "trainval": "known",
    "train": "train",
    "val": "val",
    "test_seen": "known",
    "test_unseen": "unseen",
}


def _check_split_images(images: pd.DataFrame, manifest: SplitManifest, spath: Path) -> None:
    """Every image of the table names a class of the split, and every set has an image of
    each of its classes: a class without images would be dropped from the evaluation silently
    (one unseen class left scores a trivial 100 % top-1)."""
    for col in ("path", "class", "set"):
        if col not in images.columns:
            raise InputError(f"{spath}: the image table has no {col!r} column")
    roles = {"known": list(manifest.known), **{k: list(v) for k, v in manifest.bins.items()}}
    split_classes = set(roles["known"]) | set(roles.get("unseen", []))
    cls = images["class"].astype(str)
    stray = sorted(set(cls) - split_classes)
    if stray:
        raise InputError(
            f"{spath}: the image table names {len(stray)} class(es) that are not classes of "
            f"the split (first {stray[0]!r})"
        )
    for name, role in _SET_CLASSES.items():
        want = roles.get(role)
        if not want:
            continue  # a manifest without train / val class lists (older, or hand-written)
        have = set(cls[images["set"].astype(str) == name])
        lost = [c for c in want if c not in have]
        if lost:
            shown = ", ".join(map(repr, lost[:5])) + (
                f" and {len(lost) - 5} more" if len(lost) > 5 else ""
            )
            raise InputError(
                f"zero-shot split {spath}: the {name} set has no image of {len(lost)} of its "
                f"{len(want)} classes ({shown}); a class without images would be dropped from "
                "the evaluation silently: give it images or leave it out of the split "
                "(semshift splits zsl refuses such a split)"
            )


def read_zsl_data(directory: str | Path, *, name: str | None = None) -> ZSLData:
    """Read a folder of either format: ``res101.mat`` + ``att_splits.mat``, or ``zsl.json``
    naming semshift files (``{"split": ..., "store": ..., "embeddings": ...}``, paths relative
    to the folder)."""
    root = Path(directory)
    if (root / "res101.mat").is_file() or (root / "att_splits.mat").is_file():
        return read_xlsa(root, name=name)
    spec_file = root / "zsl.json"
    if spec_file.is_file():
        spec = read_json(spec_file, "zero-shot data file")
        if not isinstance(spec, dict):
            raise InputError(
                f"{spec_file}: expected a JSON object naming 'split', 'store' and 'embeddings'"
            )
        missing = [k for k in ("split", "store", "embeddings") if k not in spec]
        if missing:
            raise InputError(f"{spec_file}: missing key(s) {', '.join(missing)}")
        return read_semshift_zsl(
            root / spec["split"],
            root / spec["store"],
            root / spec["embeddings"],
            array=spec.get("array", "features"),
            name=name or spec.get("name"),
        )
    if not root.is_dir():
        raise InputError(f"{root}: no such folder")
    raise InputError(
        f"{root}: neither res101.mat + att_splits.mat nor a zsl.json naming a split, a store "
        "and class embeddings"
    )
