"""The SSB fine-grained releases: CUB-200-2011, FGVC-Aircraft and Stanford Cars (the folder
release with names.csv, or the original devkit), labelled as SSB labels them."""

from __future__ import annotations

import csv
import os
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from semshift.errors import InputError
from semshift.features.data import ImageSource
from semshift.taxonomy.classlists import ClassList

from ._common import _check_files, _locate, _read_lines, _root, _Rows, _scan, _wnid_tree


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
    r"""Stanford Cars: label = the class's index in the devkit's ``cars_meta.mat`` order.

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
