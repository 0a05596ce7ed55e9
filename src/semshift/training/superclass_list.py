"""A SOOD-ImageNet super-class split as a labelled image list for ``semshift train``.

The split (``semshift splits superclass``; :mod:`semshift.splits.superclass`) names sub-classes
(ImageNet-21K-P wnids) and the super-class each belongs to; the images sit in a class-folder
tree of sub-classes (``ROOT/<wnid>/<image>``). The classifier of the paper learns the
super-classes: :func:`write_superclass_list` lists the images of one part of the split (``iid``,
the training part, by default) with their super-class as the label, and writes the class list
of super-classes beside it, so that ``semshift train --data LIST --classes CLASSES`` trains on
it (docs/methods.md#training-recipes).

- ``images.txt``: ``<absolute path>\\t<super-class index>`` per line, the sub-classes in the
  split's order and each folder's images sorted by name;
- ``classes.txt``: one super-class per line, ``<id> <name>``, the id the name with spaces made
  underscores; the kept super-classes in the split's order, whichever part is listed, so the
  IID, Easy and Hard lists share one label space.

A stage-1 split (no scores: method ``superclass``) has no IID / Easy / Hard parts: every
sub-class is listed (``part="all"``). The split's per-image outliers (``images.csv`` beside it)
are not read: every image in a listed sub-class folder is listed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from semshift.errors import InputError
from semshift.features.data import IMAGE_EXTENSIONS
from semshift.splits.manifest import SplitManifest

__all__ = ["PARTS", "SuperclassList", "superclass_labels", "write_superclass_list"]

#: The parts of a scored split (stage 2) and ``all`` (every binned sub-class).
PARTS = ("iid", "easy", "hard", "all")


@dataclass
class SuperclassList:
    """What :func:`write_superclass_list` wrote.

    Attributes
    ----------
    images, classes : Path
        ``images.txt`` and ``classes.txt``.
    superclasses : list of str
        The label space, in label order.
    counts : dict of str to int
        Images listed per super-class (label order; 0 for one without a listed image).
    subclasses : int
        Sub-class folders listed.
    missing : list of str
        Sub-classes of the part without a folder under the image root (``allow_missing``).
    """

    images: Path
    classes: Path
    superclasses: list[str]
    counts: dict[str, int]
    subclasses: int
    missing: list[str] = field(default_factory=list)

    @property
    def n_images(self) -> int:
        return sum(self.counts.values())


def superclass_labels(
    manifest: SplitManifest, part: str = "iid"
) -> tuple[list[str], dict[str, str]]:
    """The super-classes (label order) and ``sub-class -> super-class`` of one part of a split.

    >>> m = SplitManifest("superclass:scores", {}, "wordnet", [],
    ...     {"iid": ["n1", "n3"], "easy": ["n2"], "hard": []},
    ...     extra={"superclass_of": {"n1": "bird", "n2": "boat", "n3": "boat"},
    ...            "superclass_nodes": {"bird": 0, "boat": 1, "cake": 2}, "dropped": {"cake": 3}})
    >>> superclass_labels(m, "iid")
    (['bird', 'boat'], {'n1': 'bird', 'n3': 'boat'})

    Raises
    ------
    InputError
        Not a super-class split, or a part it does not have.
    """
    if part not in PARTS:
        raise InputError(f"part {part!r}: use one of {', '.join(PARTS)}")
    if manifest.method == "superclass":
        if part != "all":
            raise InputError(
                f"part {part!r}: this super-class split has no scores (method 'superclass'), so "
                "no IID / Easy / Hard parts; list part 'all' or build the scored split"
            )
        names = list(manifest.bins)
        return names, {sub: sc for sc, subs in manifest.bins.items() for sub in subs}
    if manifest.method != "superclass:scores" or "superclass_of" not in manifest.extra:
        raise InputError(
            f"split of method {manifest.method!r} is not a super-class split (semshift splits "
            "superclass)"
        )
    owner: dict[str, str] = dict(manifest.extra["superclass_of"])
    dropped = set(manifest.extra.get("dropped", {}))
    nodes = manifest.extra.get("superclass_nodes") or dict.fromkeys(owner.values())
    names = [s for s in nodes if s not in dropped]
    subs = [s for b in ("iid", "easy", "hard") for s in manifest.bins.get(b, [])]
    if part != "all":
        subs = list(manifest.bins.get(part, []))
    return names, {s: owner[s] for s in subs}


def _class_id(name: str) -> str:
    return "_".join(name.split())


def write_superclass_list(
    manifest: str | Path | SplitManifest,
    images: str | Path,
    out: str | Path,
    *,
    part: str = "iid",
    allow_missing: bool = False,
) -> SuperclassList:
    """Write ``out/images.txt`` and ``out/classes.txt`` for ``part`` of a super-class split.

    Parameters
    ----------
    manifest : path or SplitManifest
        ``split.json`` (or its folder) of ``semshift splits superclass``.
    images : path
        Class-folder tree of sub-classes: ``IMAGES/<wnid>/<image>``.
    out : path
        Folder of the two files (made when missing; files of those names are replaced).
    part : {"iid", "easy", "hard", "all"}
        The split's part to list (``iid``: the training part).
    allow_missing : bool
        List the sub-classes that have a folder and report the others, instead of refusing.

    Returns
    -------
    SuperclassList

    Raises
    ------
    InputError
        Not a super-class split, an unknown part, an image root that is not a folder, a
        sub-class without a folder (unless ``allow_missing``), or no image to list.
    """
    m = manifest if isinstance(manifest, SplitManifest) else SplitManifest.read(manifest)
    names, owner = superclass_labels(m, part)
    root = Path(images)
    if not root.is_dir():
        raise InputError(f"image root {root} is not a folder of sub-class folders")
    label = {name: k for k, name in enumerate(names)}
    unknown = [s for s, sc in owner.items() if sc not in label]
    if unknown:
        raise InputError(
            f"split: sub-class {unknown[0]} belongs to super-class {owner[unknown[0]]!r}, which "
            "is not among the kept super-classes"
        )
    top = root.resolve()
    lines: list[str] = []
    counts = dict.fromkeys(names, 0)
    missing: list[str] = []
    listed = 0
    for sub, sc in owner.items():
        folder = top / sub
        if not folder.is_dir():
            missing.append(sub)
            continue
        with os.scandir(folder) as entries:
            files = sorted(
                e.name
                for e in entries
                if not e.name.startswith(".")
                and os.path.splitext(e.name)[1].lower() in IMAGE_EXTENSIONS
                and e.is_file()
            )
        lines += [f"{folder / f}\t{label[sc]}" for f in files]
        counts[sc] += len(files)
        listed += 1
    if missing and not allow_missing:
        raise InputError(
            f"image root {root}: {len(missing)} sub-classes of part {part!r} have no folder "
            f"(e.g. {missing[0]}); add them or allow missing ones (--allow-missing)"
        )
    hashed = [ln for ln in lines if "#" in ln]
    if hashed:
        raise InputError(
            f"image {hashed[0].split(chr(9))[0]}: a '#' in the path would start a comment in "
            "the file list; rename it"
        )
    if not lines:
        raise InputError(f"image root {root}: no image in the {listed} sub-class folders of {part}")
    dest = Path(out)
    dest.mkdir(parents=True, exist_ok=True)
    classes_text = "".join(f"{_class_id(n)} {n}\n" for n in names)
    _write(dest / "classes.txt", classes_text)
    _write(dest / "images.txt", "\n".join(lines) + "\n")
    return SuperclassList(dest / "images.txt", dest / "classes.txt", names, counts, listed, missing)


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
