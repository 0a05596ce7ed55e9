"""The seed papers' published lists, shipped in ``semshift/catalog/data`` (see its README.md).

One registry, :data:`PUBLISHED`, names every list: its shipped files, source repository and
commit, and license. Parsed lists are cached (``functools.cache``); the functions return
fresh lists, so a caller may modify what it gets.

>>> from semshift.catalog import list_published, published_split
>>> list_published()[:3]
['imagenet-ood', 'isood-imagenet', 'openimage-o']
>>> m = published_split("ssb-imagenet")
>>> m.method, len(m.known), {k: len(v) for k, v in m.bins.items()}
('published:ssb-imagenet', 1000, {'easy': 1000, 'hard': 980})
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib.resources import files
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Literal

from semshift.errors import InputError, unknown_name
from semshift.splits.manifest import SplitManifest

__all__ = [
    "PREFIX",
    "PUBLISHED",
    "PublishedList",
    "imagenet_ood_images",
    "isood_cells",
    "isood_imagenet1k",
    "list_hash",
    "list_published",
    "openimage_o_images",
    "published_info",
    "published_split",
    "read_tar_members",
    "resolve_manifest",
    "ssb_imagenet21k_val_files",
]

#: the prefix that names a shipped list where a split.json path is expected
PREFIX = "published:"

_SSB = ("sgvaze/SSB", "615320b", "MIT")


@dataclass(frozen=True)
class PublishedList:
    """A published benchmark list as shipped: what it is and where it came from.

    ``files`` are the file names in ``semshift/catalog/data`` (``.gz``: compressed here) and
    ``paths`` the matching paths in the source repository at ``commit``. ``kind`` is ``"split"``
    for class splits (readable with :func:`published_split`) and ``"images"`` for image lists.
    ``class_ids`` says what the class ids of a split are: ``"wnid"`` or ``"index"`` (0-based class
    index, written as a string).
    """

    name: str
    description: str
    files: tuple[str, ...]
    repository: str
    commit: str
    paths: tuple[str, ...]
    license: str
    kind: Literal["split", "images"]
    class_ids: Literal["wnid", "index", "none"] = "none"


def _ssb_fine(name: str, dataset: str, fname: str) -> PublishedList:
    return PublishedList(
        name,
        f"SSB {dataset} open-set split: known classes, unknown Easy / Medium / Hard",
        (fname,),
        *_SSB[:2],
        ("SSB/splits/",),  # the folder: the release notes do not name each file
        _SSB[2],
        "split",
        "index",
    )


#: name -> the published list; the one place these names are declared
PUBLISHED: dict[str, PublishedList] = {
    p.name: p
    for p in (
        PublishedList(
            "ssb-imagenet",
            "SSB ImageNet open-set split (ImageNet-21K-P winter21): ImageNet-1K known classes, "
            "unknown Easy (1000) / Hard (980), and the validation images of each unknown class",
            ("ssb_imagenet_winter21_splits.json", "ssb_imagenet21k_val_files.json.gz"),
            *_SSB[:2],
            ("SSB/splits/imagenet_ssb_splits.json", "SSB/splits/imagenet_21k_val_files.json"),
            _SSB[2],
            "split",
            "wnid",
        ),
        PublishedList(
            "ssb-imagenet-fall11",
            "the earlier SSB ImageNet lists (ImageNet-21K-P fall11): 991 known classes as "
            "released, candidate pool (10,230), unknown Easy (1000) / Hard (1000)",
            ("ssb_imagenet_fall11_splits.json",),
            "sgvaze/osr_closed_set_all_you_need",
            "3258f05",
            ("data/open_set_splits/imagenet_osr_splits.pkl",),
            "MIT",
            "split",
            "wnid",
        ),
        _ssb_fine("ssb-cub", "CUB-200-2011", "ssb_cub_splits.json"),
        _ssb_fine("ssb-scars", "Stanford Cars", "ssb_scars_splits.json"),
        _ssb_fine("ssb-aircraft", "FGVC-Aircraft", "ssb_aircraft_splits.json"),
        PublishedList(
            "imagenet-ood",
            "ImageNet-OOD: 31,802 ImageNet-21K images (wnid/wnid_N.JPEG) of 637 classes",
            ("imagenet_ood_images.txt.gz",),
            "princetonvisualai/imagenetood",
            "a8ff817",
            ("imagenetood.txt",),
            "none stated",
            "images",
        ),
        PublishedList(
            "openimage-o",
            "OpenImage-O (Wang et al., ViM, CVPR 2022): 15,869 test and 1,763 val OpenImages "
            "file names (<id>.jpg, one folder), as OpenOOD v1.5 uses them",
            ("openimage_o_test.json", "openimage_o_val.json"),
            "kkirchheim/pytorch-ood",
            "d047673",
            (
                "src/pytorch_ood/dataset/img/resources/openimage_o_test.json",
                "src/pytorch_ood/dataset/img/resources/openimage_o_val.json",
            ),
            "Apache-2.0",
            "images",
        ),
        PublishedList(
            "isood-imagenet",
            "IS-OOD: 64 cells cov_i_sem_j of ImageNet-21K validation images (522,500) and the "
            "ImageNet-1K test (45,000) / val (5,000) lists",
            ("isood_imagenet_imglists.tar.gz",),
            "qqwsad5/IS-OOD",
            "e771abb",
            ("data/imglist/imagenet21k/val", "data/imglist/imagenet1k"),
            "none stated",
            "images",
        ),
    )
}


def list_published() -> list[str]:
    """Names of the shipped published lists, sorted."""
    return sorted(PUBLISHED)


def published_info(name: str) -> PublishedList:
    """The registry entry of a published list; unknown names raise ``UnknownNameError``."""
    try:
        return PUBLISHED[name]
    except KeyError:
        raise unknown_name("published list", name, PUBLISHED) from None


@cache
def _raw(fname: str) -> bytes:
    """The shipped bytes of ``fname`` (as stored: still compressed)."""
    return (files("semshift.catalog") / "data" / fname).read_bytes()


def _text(fname: str) -> str:
    data = _raw(fname)
    return (gzip.decompress(data) if fname.endswith(".gz") else data).decode("utf-8")


@cache
def _json(fname: str) -> Any:
    return json.loads(_text(fname))


@cache
def list_hash(name: str) -> str:
    """Content hash of the lists a published benchmark uses: 16 hex digits of SHA-256.

    One file: the SHA-256 of the shipped file (``sha256sum`` of it in ``semshift/catalog/data``).
    Several: the SHA-256 of the lines ``<sha256 of the file>  <file name>\\n`` in the order of
    ``published_info(name).files``. Reports name it so that a number says exactly which lists
    were measured.

    >>> list_hash("ssb-cub")
    '9bc6fceed92275f6'
    """
    info = published_info(name)
    digests = [hashlib.sha256(_raw(f)).hexdigest() for f in info.files]
    if len(digests) == 1:
        return digests[0][:16]
    lines = "".join(f"{d}  {f}\n" for d, f in zip(digests, info.files, strict=True))
    return hashlib.sha256(lines.encode()).hexdigest()[:16]


_BINS = ("easy", "medium", "hard")


def published_split(name: str) -> SplitManifest:
    """A published SSB class split as a :class:`~semshift.splits.manifest.SplitManifest`.

    ``known`` holds the known classes and ``bins`` the unknown classes by difficulty, in the
    order easy, medium, hard (the bins the file has). Class ids are wnids for the ImageNet splits
    and the 0-based class indices written as strings (``"0"``..) for ``ssb-cub``, ``ssb-scars``
    and ``ssb-aircraft`` (conventions: ``semshift/catalog/data/README.md``). The fine-grained
    files have a Medium bin; SSB merges it into Hard when benchmarking, this manifest does not.

    ``method`` is ``"published:<name>"``; ``params`` name the source repository, commit, paths
    and :func:`list_hash`. ``ssb-imagenet-fall11`` keeps its ``candidate_pool`` as an extra field.
    Each call returns a new manifest.

    >>> m = published_split("ssb-cub")
    >>> len(m.known), {k: len(v) for k, v in m.bins.items()}
    (100, {'easy': 32, 'medium': 34, 'hard': 34})
    """
    info = published_info(name)
    if info.kind != "split":
        reader = "imagenet_ood_images" if name == "imagenet-ood" else "isood_cells"
        raise InputError(
            f"published list {name!r} is an image list, not a class split; "
            f"read it with semshift.catalog.{reader}()"
        )
    data = _json(info.files[0])
    unknown = {str(k).lower(): v for k, v in data["unknown_classes"].items()}
    extra: dict[str, Any] = {"class_ids": info.class_ids}
    if "candidate_pool" in data:
        extra["candidate_pool"] = [str(c) for c in data["candidate_pool"]]
    return SplitManifest(
        method=f"{PREFIX}{name}",
        params={
            "repository": info.repository,
            "commit": info.commit,
            "paths": list(info.paths),
            "files": list(info.files),
            "list_hash": list_hash(name),
        },
        taxonomy="wordnet-3.0" if info.class_ids == "wnid" else "none",
        known=[str(c) for c in data["known_classes"]],
        bins={b: [str(c) for c in unknown[b]] for b in _BINS if b in unknown},
        extra=extra,
    )


def resolve_manifest(spec: str | Path) -> SplitManifest:
    """A split manifest from a ``split.json`` path (or its directory) or ``published:<name>``.

    >>> resolve_manifest("published:ssb-scars").method
    'published:ssb-scars'
    """
    text = str(spec)
    if text.startswith(PREFIX):
        return published_split(text.removeprefix(PREFIX))
    path = Path(spec)
    if not path.exists() and text in PUBLISHED:
        raise InputError(f"no file {text!r}; for the shipped list write {PREFIX}{text}")
    return SplitManifest.read(path)


def ssb_imagenet21k_val_files() -> dict[str, list[str]]:
    """SSB's ImageNet-21K-P (winter21) validation file names of each unknown class.

    ``{wnid: [file name, ...]}`` for the 1,980 classes of the ``ssb-imagenet`` Easy and Hard bins
    (99,000 images), as released; file names are ``wnid_N.JPEG`` without folders.
    """
    return {k: list(v) for k, v in _val_files().items()}


@lru_cache(maxsize=1)
def _val_files() -> dict[str, tuple[str, ...]]:
    return {str(k): tuple(v) for k, v in _json(PUBLISHED["ssb-imagenet"].files[1]).items()}


def imagenet_ood_images() -> list[str]:
    """The ImageNet-OOD images: 31,802 paths ``wnid/wnid_N.JPEG`` of 637 ImageNet-21K classes."""
    return list(_lines(PUBLISHED["imagenet-ood"].files[0]))


@cache
def openimage_o_images(split: Literal["test", "val"] = "test") -> list[str]:
    """OpenImage-O's file names (``<id>.jpg``): 15,869 ``test`` or 1,763 ``val``, as released.

    >>> len(openimage_o_images()), len(openimage_o_images("val")), openimage_o_images()[0]
    (15869, 1763, 'b85bd6c20e9c378a.jpg')
    """
    if split not in ("test", "val"):
        raise InputError(f"OpenImage-O split must be 'test' or 'val', got {split!r}")
    return list(_json(f"openimage_o_{split}.json"))


def _lines(fname: str) -> tuple[str, ...]:
    return tuple(line for line in _text(fname).splitlines() if line)


def read_tar_members(data: bytes) -> dict[str, bytes]:
    """The regular files of a (gzip-compressed) tar archive held in memory: ``{name: bytes}``.

    Nothing is written to disk. A member with an absolute path, a ``..`` component or a link is
    refused (``InputError``): the archive is not what it should be.
    """
    out: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            for member in tar:
                name = member.name
                parts = PurePosixPath(name).parts
                if (
                    name.startswith(("/", "\\"))
                    or PureWindowsPath(name).drive
                    or ".." in parts
                    or ".." in PureWindowsPath(name).parts
                ):
                    raise InputError(f"tar archive: unsafe member path {name!r}")
                if member.issym() or member.islnk():
                    raise InputError(f"tar archive: link member {name!r} refused")
                if not member.isfile():
                    continue
                fh = tar.extractfile(member)
                out[name] = fh.read() if fh is not None else b""
    except tarfile.TarError as err:
        raise InputError(f"tar archive: cannot read ({err})") from None
    return out


_ISOOD_CELLS = tuple(f"cov_{i}_sem_{j}" for i in range(8) for j in range(8))
_ISOOD_1K = {"test": "test_imagenet", "val": "val_imagenet"}


@lru_cache(maxsize=1)
def _isood() -> dict[str, tuple[str, ...]]:
    """Every list of the IS-OOD archive by file stem (``cov_0_sem_0``, ``test_imagenet``...)."""
    fname = PUBLISHED["isood-imagenet"].files[0]
    lists: dict[str, tuple[str, ...]] = {}
    for name, data in read_tar_members(_raw(fname)).items():
        if name.endswith(".txt"):
            text = data.decode("utf-8")
            lists[PurePosixPath(name).stem] = tuple(ln for ln in text.splitlines() if ln)
    missing = [s for s in (*_ISOOD_CELLS, *_ISOOD_1K.values()) if s not in lists]
    if missing:
        raise InputError(f"shipped {fname} lacks {', '.join(missing)}; reinstall semshift")
    return lists


def isood_cells() -> dict[str, list[str]]:
    """The 64 IS-OOD cells ``cov_i_sem_j`` (i: covariate level, j: semantic level, 0..7).

    Image paths as released, ``./imagenet21k_val/wnid/file`` (522,500 in all; some cells are
    empty). Keys in the order cov_0_sem_0, cov_0_sem_1, ..., cov_7_sem_7.
    """
    lists = _isood()
    return {c: list(lists[c]) for c in _ISOOD_CELLS}


#: the image counts of the shipped image lists (:func:`list_counts`), for ``semshift benchmark
#: list`` and the benchmarks' sets, which would otherwise decode 600,000 paths to count them
COUNTS = "list_counts.json"


def count_lists() -> dict[str, Any]:
    """The image counts of the shipped image lists, counted from the lists (what
    :data:`COUNTS` holds; a test keeps the two equal): ``files`` (the SHA-256 of each list
    counted), ``isood-imagenet`` (images per list of the archive, by stem),
    ``imagenet-ood`` (images, classes), ``openimage-o`` (images per split) and
    ``ssb-imagenet21k-val`` (images per wnid)."""
    names = sorted({*PUBLISHED["isood-imagenet"].files, *PUBLISHED["imagenet-ood"].files,
                    "openimage_o_test.json", "openimage_o_val.json",
                    PUBLISHED["ssb-imagenet"].files[1]})  # fmt: skip
    ood = imagenet_ood_images()
    return {
        "files": {f: hashlib.sha256(_raw(f)).hexdigest() for f in names},
        "isood-imagenet": {k: len(v) for k, v in sorted(_isood().items())},
        "imagenet-ood": {"images": len(ood), "classes": len({p.split("/", 1)[0] for p in ood})},
        "openimage-o": {s: len(openimage_o_images(s)) for s in ("test", "val")},
        "ssb-imagenet21k-val": {k: len(v) for k, v in _val_files().items()},
    }


def list_counts() -> dict[str, Any]:
    """The shipped :data:`COUNTS` (:func:`count_lists`, written once): read in a millisecond,
    where counting decodes the lists (0.3 to 0.5 s). Each call returns a new dict."""
    return json.loads(_text(COUNTS))


def isood_imagenet1k(kind: Literal["test", "val"] = "test") -> list[str]:
    """IS-OOD's ImageNet-1K image lists: ``"test"`` (45,000) or ``"val"`` (5,000).

    Paths as released, ``./val/ILSVRC2012_val_N.JPEG``, without labels.
    """
    if kind not in _ISOOD_1K:
        raise InputError(f"isood_imagenet1k: kind must be 'test' or 'val', got {kind!r}")
    return list(_isood()[_ISOOD_1K[kind]])
