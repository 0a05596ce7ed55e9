"""Image sources (a class-folder tree or a file list) and ImageNet preprocessing.

A source is an ordered list of image paths with labels mapped through a class list (label -1 =
unknown) and optional per-sample group values. Its order is deterministic (sorted), so a restarted
extraction sees the same samples in the same shards.

- **Folder tree**: ``ROOT/<class>/<image>``, class folders named by class id (wnid) or class name
  (case and ``_``/space insensitive). Images directly in ``ROOT`` get label -1 (an OOD set).
  An empty class folder is an error; a folder not in the class list is an error by default
  (``unknown="skip"`` records its images as skipped, ``unknown="ood"`` labels them -1).
- **File list**: one ``path [label]`` per line (tab-separated when paths contain spaces),
  ``#`` comments; relative paths are relative to the list's folder; the label is a class index,
  a class id or a class name, and -1 or absent means unknown.

Presets: ``imagenet`` = resize 256 + center crop 224, ``imagenet-224`` = resize 224 + crop 224,
and any ``resize<R>-crop<C>``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from semshift.errors import InputError, UnknownNameError, close_matches
from semshift.taxonomy.classlists import ClassList, load_classlist
from semshift.textio import read_text

__all__ = [
    "IMAGE_EXTENSIONS",
    "PRESETS",
    "ImageSource",
    "default_workers",
    "file_list",
    "image_folder",
    "load_image",
    "make_transform",
    "normalize_batch",
    "open_source",
    "parse_preset",
]

IMAGE_EXTENSIONS = frozenset(
    {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".ppm", ".pgm", ".tif", ".tiff", ".webp"}
)
#: Named presets -> ``resize<R>-crop<C>``.
PRESETS = {"imagenet": "resize256-crop224", "imagenet-224": "resize224-crop224"}


class ImageError(InputError):
    """An image file that cannot be decoded (the extraction records it and goes on)."""


def default_workers(most: int = 4) -> int:
    """DataLoader worker processes for this machine: the CPUs this process may use, at most
    ``most`` (torch warns when there are more workers than CPUs)."""
    import os

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(int(most), int(cpus or 1)))


def parse_preset(preset: str) -> tuple[int, int]:
    """``(resize, crop)`` of a preset name or ``resize<R>-crop<C>``.

    >>> parse_preset("imagenet"), parse_preset("resize40-crop32")
    ((256, 224), (40, 32))
    """
    spec = PRESETS.get(preset, preset)
    parts = spec.split("-")
    if (
        len(parts) == 2
        and parts[0].startswith("resize")
        and parts[1].startswith("crop")
        and parts[0][6:].isdigit()
        and parts[1][4:].isdigit()
    ):
        resize, crop = int(parts[0][6:]), int(parts[1][4:])
        if 0 < crop <= resize:
            return resize, crop
    raise InputError(
        f"unknown preprocessing preset {preset!r}: use {', '.join(PRESETS)} or "
        "'resize<R>-crop<C>' with 0 < C <= R"
    )


def load_image(path: str | Path) -> Any:
    """Decode an image fully into an RGB ``PIL.Image``.

    Raises
    ------
    ImageError
        The file is missing, truncated, or not an image (the message says which).
    """
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            im.load()
            return im.convert("RGB")
    except UnidentifiedImageError:
        raise ImageError(f"{path}: not a recognised image format") from None
    except (OSError, SyntaxError, ValueError) as err:
        raise ImageError(f"{path}: unreadable image ({err})") from None
    except Image.DecompressionBombError as err:  # pragma: no cover - needs a huge file
        raise ImageError(f"{path}: {err}") from None


def make_transform(
    preset: str,
    mean: Sequence[float],
    std: Sequence[float],
    corruption: Callable[[Any], Any] | None = None,
) -> Callable[[Any], Any]:
    """PIL image -> normalised float tensor (3, C, C): resize (bilinear), center crop, normalise.

    ``corruption`` (PIL -> PIL), when given, is applied to the cropped image (as ImageNet-C does).
    """
    from torchvision import transforms as T

    resize, crop = parse_preset(preset)
    steps: list[Any] = [
        T.Resize(resize, interpolation=T.InterpolationMode.BILINEAR, antialias=True),
        T.CenterCrop(crop),
    ]
    if corruption is not None:
        steps.append(corruption)
    steps += [T.ToTensor(), T.Normalize(list(mean), list(std))]
    return T.Compose(steps)


@dataclass
class ImageSource:
    """An ordered image set.

    Attributes
    ----------
    root : Path
        Folder (tree) or list file it came from.
    kind : str
        ``"folder"`` or ``"list"``, or the name of a release layout read by
        :mod:`semshift.catalog.layouts` (``"cub200"``, ``"imagenet1k-val-flat"``, ...); recorded
        in the store's ``meta.json``. Paths are relative to ``root``'s folder for ``"list"``.
    paths : list of str
        Absolute paths, in extraction order.
    names : list of str
        The path as written in the index (relative to the root / as in the list).
    labels : array (n,) int64
        Class index in ``classes``, -1 = unknown.
    classes : ClassList or None
    groups : dict of str to list
        Optional per-sample group values (e.g. corruption, severity), each of length n.
    skipped : list of (name, reason)
        Files excluded while listing (e.g. a class folder not in the class list with
        ``unknown="skip"``).
    """

    root: Path
    kind: str
    paths: list[str]
    names: list[str]
    labels: NDArray[np.int64]
    classes: ClassList | None
    groups: dict[str, list[Any]] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    _fingerprint: str | None = field(default=None, init=False, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.paths)

    def take(
        self, keep: Sequence[int] | NDArray[np.integer], kind: str | None = None
    ) -> ImageSource:
        """The samples at positions ``keep`` (in that order), with their labels and groups.

        ``kind`` renames the subset (default: this source's kind); classes and skipped files
        are kept.
        """
        idx = [int(i) for i in keep]
        return ImageSource(
            self.root,
            self.kind if kind is None else kind,
            [self.paths[i] for i in idx],
            [self.names[i] for i in idx],
            np.asarray(self.labels, np.int64)[np.asarray(idx, np.int64)],
            self.classes,
            groups={k: [v[i] for i in idx] for k, v in self.groups.items()},
            skipped=list(self.skipped),
        )

    def fingerprint(self) -> str:
        """SHA-256 over (name, file size, label) of every sample and the class ids.

        Computed once per source (one ``stat`` per file): the runner's cache key and the
        store's ``meta.json`` then record the same value. List the images again
        (:func:`image_folder`, :func:`file_list`) to see later changes to the files.
        """
        if self._fingerprint is None:
            self._fingerprint = self._compute_fingerprint()
        return self._fingerprint

    def _compute_fingerprint(self) -> str:
        sha = hashlib.sha256()
        if self.classes is not None:
            sha.update("\n".join(self.classes.ids).encode())
        sizes = [_file_size(p) for p in self.paths]
        rows = zip(self.names, sizes, np.asarray(self.labels).tolist(), strict=True)
        sha.update("".join(f"{name}\t{size}\t{label}\n" for name, size, label in rows).encode())
        for key in sorted(self.groups):
            sha.update(f"{key}={self.groups[key]!r}".encode())
        return sha.hexdigest()


def _file_size(path: str) -> int:
    """Size of a file in bytes, -1 when it cannot be read."""
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


def _norm(name: str) -> str:
    return " ".join(name.replace("_", " ").lower().split())


def _class_lookup(classes: ClassList) -> dict[str, int]:
    lookup: dict[str, int] = {}
    if classes.names is not None:
        for k, nm in enumerate(classes.names):
            if nm:
                lookup.setdefault(_norm(nm), k)
    for k, cid in enumerate(classes.ids):
        lookup[cid] = k
    return lookup


def _images_in(folder: Path) -> list[str]:
    """Sorted names of the image files in ``folder`` (one directory scan, no stat per file)."""
    with os.scandir(folder) as entries:
        return sorted(
            e.name
            for e in entries
            if not e.name.startswith(".")
            and os.path.splitext(e.name)[1].lower() in IMAGE_EXTENSIONS
            and e.is_file()
        )


def _as_classlist(classes: ClassList | str | Path | None) -> ClassList | None:
    if classes is None or isinstance(classes, ClassList):
        return classes
    return load_classlist(classes)


def image_folder(
    root: str | Path,
    classes: ClassList | str | Path | None = None,
    *,
    unknown: str = "error",
) -> ImageSource:
    """List a class-folder tree.

    Parameters
    ----------
    root : str or Path
        ``ROOT/<class>/<image>``; images directly in ROOT get label -1.
    classes : ClassList, name or file, optional
        The class list labels index into; default: the sorted class folder names.
    unknown : {"error", "skip", "ood"}
        What to do with a class folder that is not in the class list.

    Raises
    ------
    InputError
        ``root`` is not a folder, has no images, or has an empty class folder.
    UnknownNameError
        A class folder is not in the class list (``unknown="error"``).
    """
    if unknown not in ("error", "skip", "ood"):
        raise InputError(f"unknown={unknown!r}: use 'error', 'skip' or 'ood'")
    base = Path(root)
    if not base.is_dir():
        raise InputError(f"image folder {base} does not exist or is not a folder")
    folders = sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith("."))
    cl = _as_classlist(classes)
    if cl is None:
        ids = tuple(p.name for p in folders)
        cl = ClassList(
            base.name, ids, None, f"class folders of {base}", tuple(range(1, len(ids) + 1))
        )
    lookup = _class_lookup(cl)
    paths: list[str] = []
    names: list[str] = []
    labels: list[int] = []
    skipped: list[tuple[str, str]] = []
    # the root is resolved once; files are named through it (a stat per file would cost
    # minutes on ImageNet-21K)
    top = str(base.resolve())
    for img in _images_in(base):
        paths.append(os.path.join(top, img))
        names.append(img)
        labels.append(-1)
    for folder in folders:
        images = _images_in(folder)
        if not images:
            raise InputError(
                f"class folder {folder} has no images (extensions: "
                f"{', '.join(sorted(IMAGE_EXTENSIONS))}); remove it or add its images"
            )
        label = lookup.get(folder.name, lookup.get(_norm(folder.name)))
        if label is None:
            if unknown == "error":
                close = close_matches(folder.name, list(lookup), n=3)
                hint = f" (close: {', '.join(close)})" if close else ""
                raise UnknownNameError(
                    f"class folder {folder} is not in the class list {cl.source}{hint}; pass "
                    "the right class list, or unknown='skip' / 'ood'"
                )
            if unknown == "skip":
                reason = f"class folder {folder.name!r} not in the class list"
                skipped.extend((f"{folder.name}/{img}", reason) for img in images)
                continue
            label = -1
        where = os.path.join(top, folder.name)
        for img in images:
            paths.append(os.path.join(where, img))
            names.append(f"{folder.name}/{img}")
            labels.append(label)
    if not paths:
        raise InputError(f"image folder {base} has no images")
    return ImageSource(
        base, "folder", paths, names, np.asarray(labels, np.int64), cl, skipped=skipped
    )


def file_list(path: str | Path, classes: ClassList | str | Path | None = None) -> ImageSource:
    """Read a file list: ``path [label]`` per line.

    Raises
    ------
    InputError
        Unreadable list, a malformed line, an out-of-range label index (naming file and line).
    UnknownNameError
        A label that is neither an index, a class id nor a class name.
    """
    lst = Path(path)
    text = read_text(lst, "file list")
    cl = _as_classlist(classes)
    lookup = _class_lookup(cl) if cl is not None else {}
    parent = str(lst.parent.resolve())  # relative paths are relative to the list's folder
    paths: list[str] = []
    names: list[str] = []
    labels: list[int] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        fields = line.split("\t") if "\t" in line else line.split()
        fields = [f.strip() for f in fields if f.strip()]
        if len(fields) > 2:
            raise InputError(
                f"{lst}, line {lineno}: expected 'path [label]', got {len(fields)} fields "
                "(separate with a tab when the path has spaces)"
            )
        label = -1
        if len(fields) == 2:
            tok = fields[1]
            if tok.lstrip("-").isdigit():
                label = int(tok)
                n = len(cl) if cl is not None else None
                if label < -1 or (n is not None and label >= n):
                    rng = f"[-1, {n})" if n is not None else ">= -1"
                    raise InputError(f"{lst}, line {lineno}: label {label} is not in {rng}")
            else:
                found = lookup.get(tok, lookup.get(_norm(tok)))
                if found is None:
                    if cl is None:
                        raise InputError(
                            f"{lst}, line {lineno}: label {tok!r} is a name but no class list "
                            "was given (pass --classes)"
                        )
                    close = close_matches(tok, list(lookup), n=3)
                    hint = f" (close: {', '.join(close)})" if close else ""
                    raise UnknownNameError(
                        f"{lst}, line {lineno}: label {tok!r} is not in {cl.source}{hint}"
                    )
                label = found
        paths.append(os.path.normpath(os.path.join(parent, fields[0])))
        names.append(fields[0])
        labels.append(label)
    if not paths:
        raise InputError(f"file list {lst} lists no images")
    return ImageSource(lst, "list", paths, names, np.asarray(labels, np.int64), cl)


def open_source(
    spec: str | Path, classes: ClassList | str | Path | None = None, *, unknown: str = "error"
) -> ImageSource:
    """A folder tree (``spec`` is a folder) or a file list (``spec`` is a file)."""
    p = Path(spec)
    if p.is_dir():
        return image_folder(p, classes, unknown=unknown)
    if p.is_file():
        return file_list(p, classes)
    raise InputError(f"data {p} is neither an image folder nor a file list")


class ImageDataset:
    """A torch-style dataset over a source: ``ds[i] -> (image tensor (3, C, C), i, error)``.

    Each image is decoded, resized, center-cropped, optionally corrupted by
    ``corruption(pil_image, i)`` (deterministic per sample index), then normalised. An unreadable
    image gives a zero tensor and a non-empty error message instead of an exception, so one bad
    file never stops a DataLoader; the extraction records it as skipped.

    With ``normalize=False`` the images come as uint8 tensors (a quarter of the bytes through
    DataLoader workers and onto the device) and :meth:`normalize_batch` normalises a whole
    batch, with exactly the float32 operations of ``ToTensor`` + ``Normalize``, so the values
    are identical.
    """

    def __init__(
        self,
        source: ImageSource,
        preset: str,
        mean: Sequence[float],
        std: Sequence[float],
        corruption: Callable[[Any, int], Any] | None = None,
        *,
        normalize: bool = True,
    ) -> None:
        from torchvision import transforms as T

        resize, self.crop = parse_preset(preset)
        self.normalize = normalize
        self.mean, self.std = tuple(float(m) for m in mean), tuple(float(s) for s in std)
        self.source, self.corruption = source, corruption
        self.pre = T.Compose(
            [
                T.Resize(resize, interpolation=T.InterpolationMode.BILINEAR, antialias=True),
                T.CenterCrop(self.crop),
            ]
        )
        self.post = T.Compose([T.ToTensor(), T.Normalize(list(mean), list(std))])

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, i: int) -> tuple[Any, int, str]:
        import torch

        try:
            img = self.pre(load_image(self.source.paths[i]))
            if self.corruption is not None:
                img = self.corruption(img, i)
            if not self.normalize:
                return torch.from_numpy(np.array(img, np.uint8)).permute(2, 0, 1), i, ""
            return self.post(img), i, ""
        except ImageError as err:
            dtype = torch.float32 if self.normalize else torch.uint8
            blank = torch.zeros(3, self.crop, self.crop, dtype=dtype)
            return blank, i, str(err).split(": ", 1)[-1]

    def normalize_batch(self, x: Any) -> Any:
        """uint8 images (n, 3, C, C) -> normalised float32, on ``x``'s device."""
        return normalize_batch(x, self.mean, self.std)


def normalize_batch(x: Any, mean: Sequence[float], std: Sequence[float]) -> Any:
    """uint8 images (n, 3, C, C) -> ``(x / 255 - mean) / std`` in float32, on ``x``'s device.

    The same float32 operations as torchvision's ``ToTensor`` then ``Normalize``, so the values
    are identical to normalising each image alone.
    """
    import torch

    m = torch.as_tensor([float(v) for v in mean], dtype=torch.float32, device=x.device)
    s = torch.as_tensor([float(v) for v in std], dtype=torch.float32, device=x.device)
    return x.to(torch.float32).div(255).sub_(m.view(-1, 1, 1)).div_(s.view(-1, 1, 1))
