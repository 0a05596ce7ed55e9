"""The shipped published lists: counts from the releases, hashes, names, the tar reader."""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
from importlib.resources import files

import pytest

from semshift.catalog import (
    PUBLISHED,
    imagenet_ood_images,
    isood_cells,
    isood_imagenet1k,
    list_hash,
    list_published,
    published_info,
    published_split,
    read_tar_members,
    resolve_manifest,
    ssb_imagenet21k_val_files,
)
from semshift.errors import InputError, UnknownNameError
from semshift.splits.check import check_split
from semshift.splits.manifest import SplitManifest
from semshift.taxonomy import load_classlist


def test_the_eight_published_lists_are_named_and_their_files_ship():
    assert list_published() == [
        "imagenet-ood",
        "isood-imagenet",
        "openimage-o",
        "ssb-aircraft",
        "ssb-cub",
        "ssb-imagenet",
        "ssb-imagenet-fall11",
        "ssb-scars",
    ]
    data = files("semshift.catalog") / "data"
    shipped = {p.name for p in data.iterdir()}
    assert "README.md" in shipped
    # list_counts.json: the image counts of the lists (test_counts_are_the_lists_counted)
    assert {f for p in PUBLISHED.values() for f in p.files} == shipped - {
        "README.md",
        "list_counts.json",
    }


def test_ssb_imagenet_winter21_counts_and_known_is_imagenet1k():
    m = published_split("ssb-imagenet")
    assert m.method == "published:ssb-imagenet"
    assert (len(m.known), list(m.bins), len(m.bins["easy"]), len(m.bins["hard"])) == (
        1000,
        ["easy", "hard"],
        1000,
        980,
    )
    assert set(m.known) == set(load_classlist("imagenet1k").ids)
    assert m.params["commit"] == "615320b" and m.params["list_hash"] == list_hash("ssb-imagenet")
    assert m.taxonomy == "wordnet-3.0" and m.extra["class_ids"] == "wnid"
    assert check_split(m).ok  # known, easy and hard are disjoint


def test_ssb_val_files_cover_the_winter21_unknown_classes():
    m = published_split("ssb-imagenet")
    val = ssb_imagenet21k_val_files()
    assert set(val) == set(m.bins["easy"]) | set(m.bins["hard"])
    assert sum(map(len, val.values())) == 99_000
    assert all(
        f.startswith(f"{wnid}_") and f.endswith(".JPEG") for wnid, fs in val.items() for f in fs
    )


def test_ssb_imagenet_fall11_counts_and_pool():
    m = published_split("ssb-imagenet-fall11")
    pool = set(m.extra["candidate_pool"])
    assert (len(m.known), len(pool), len(m.bins["easy"]), len(m.bins["hard"])) == (
        991,
        10_230,
        1000,
        1000,
    )
    assert set(m.bins["easy"]) | set(m.bins["hard"]) <= pool
    assert set(m.known) <= set(published_split("ssb-imagenet").known)
    assert m.params["repository"] == "sgvaze/osr_closed_set_all_you_need"
    assert check_split(m).ok


@pytest.mark.parametrize(
    ("name", "n_classes", "sizes"),
    [
        ("ssb-cub", 200, {"known": 100, "easy": 32, "medium": 34, "hard": 34}),
        ("ssb-scars", 196, {"known": 98, "easy": 76, "medium": 15, "hard": 7}),
        ("ssb-aircraft", 100, {"known": 50, "easy": 20, "medium": 17, "hard": 13}),
    ],
)
def test_fine_grained_bins_are_disjoint_and_cover_every_class_index(name, n_classes, sizes):
    m = published_split(name)
    sets = {"known": m.known, **m.bins}
    assert {k: len(v) for k, v in sets.items()} == sizes
    assert list(m.bins) == ["easy", "medium", "hard"]
    every = [c for ids in sets.values() for c in ids]
    assert len(every) == len(set(every)) == n_classes  # disjoint
    assert set(every) == {str(i) for i in range(n_classes)}  # 0-based indices as strings
    assert m.extra["class_ids"] == "index" and m.taxonomy == "none"


def test_imagenet_ood_images():
    images = imagenet_ood_images()
    assert len(images) == len(set(images)) == 31_802
    assert len({p.split("/")[0] for p in images}) == 637
    assert all(re.fullmatch(r"(n\d{8})/\1_\d+\.JPEG", p) for p in images)
    assert images[0] == "n02925009/n02925009_2846.JPEG"


def test_isood_cells_and_imagenet1k_lists():
    cells = isood_cells()
    assert list(cells) == [f"cov_{i}_sem_{j}" for i in range(8) for j in range(8)]
    assert sum(map(len, cells.values())) == 522_500
    assert sorted(k for k, v in cells.items() if not v) == [
        "cov_6_sem_0",
        "cov_7_sem_0",
        "cov_7_sem_1",
    ]
    assert cells["cov_7_sem_2"] == ["./imagenet21k_val/n04257223/n04257223_1100.JPEG"]
    test, val = isood_imagenet1k("test"), isood_imagenet1k("val")
    assert (len(test), len(val), len(set(test) | set(val))) == (45_000, 5_000, 50_000)
    assert test[0] == "./val/ILSVRC2012_val_00024235.JPEG"
    with pytest.raises(InputError, match="'test' or 'val'"):
        isood_imagenet1k("train")  # type: ignore[arg-type]


def test_returned_lists_are_copies_of_the_cache():
    imagenet_ood_images().clear()
    isood_cells()["cov_0_sem_0"].clear()
    published_split("ssb-cub").known.clear()
    assert len(imagenet_ood_images()) == 31_802
    assert isood_cells()["cov_0_sem_0"]
    assert len(published_split("ssb-cub").known) == 100


def test_list_hash_is_the_sha256_of_the_shipped_files_and_stable():
    expected = {
        "imagenet-ood": "17328484cb864cac",
        "isood-imagenet": "56b14187508f6db6",
        "openimage-o": "22b31b335ecd23c0",
        "ssb-aircraft": "2e291cb1708f7adb",
        "ssb-cub": "9bc6fceed92275f6",
        "ssb-imagenet": "59aa5a7f0d817f1a",
        "ssb-imagenet-fall11": "7a64c39244228068",
        "ssb-scars": "dcb9c062b1510b08",
    }
    assert {n: list_hash(n) for n in list_published()} == expected
    data = files("semshift.catalog") / "data"
    raw = (data / "ssb_cub_splits.json").read_bytes()
    assert hashlib.sha256(raw).hexdigest()[:16] == expected["ssb-cub"]
    lines = "".join(
        f"{hashlib.sha256((data / f).read_bytes()).hexdigest()}  {f}\n"
        for f in published_info("ssb-imagenet").files
    )
    assert hashlib.sha256(lines.encode()).hexdigest()[:16] == expected["ssb-imagenet"]


def test_unknown_names_list_the_known_ones_on_one_line():
    with pytest.raises(UnknownNameError) as info:
        published_split("ssb-imagnet")
    msg = str(info.value)
    assert "\n" not in msg and "Did you mean 'ssb-imagenet'" in msg and "ssb-aircraft" in msg
    with pytest.raises(UnknownNameError):
        list_hash("nope")
    with pytest.raises(InputError, match="image list, not a class split"):
        published_split("imagenet-ood")


def test_resolve_manifest_reads_paths_and_published_names(tmp_path):
    m = SplitManifest("x", {}, "none", ["0"], {"easy": ["1"]})
    path = m.write(tmp_path / "s")
    assert resolve_manifest(path).to_dict() == m.to_dict()
    assert resolve_manifest(str(tmp_path / "s")).bins == {"easy": ["1"]}
    assert (
        resolve_manifest("published:ssb-scars").to_dict() == published_split("ssb-scars").to_dict()
    )
    with pytest.raises(InputError, match="write published:ssb-cub"):
        resolve_manifest("ssb-cub")
    with pytest.raises(InputError, match="cannot read split manifest"):
        resolve_manifest(tmp_path / "missing.json")


def _tar(members: dict[str, bytes], links: tuple[str, ...] = ()) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name in links:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(info)
    return buf.getvalue()


def test_tar_reader_reads_members_in_memory():
    assert read_tar_members(_tar({"a/x.txt": b"1\n2\n", "b.txt": b""})) == {
        "a/x.txt": b"1\n2\n",
        "b.txt": b"",
    }


@pytest.mark.parametrize(
    "name", ["../evil.txt", "a/../../evil.txt", "/etc/evil.txt", "C:\\evil.txt"]
)
def test_tar_reader_refuses_unsafe_member_paths(name):
    with pytest.raises(InputError, match="unsafe member path"):
        read_tar_members(_tar({"ok.txt": b"x", name: b"y"}))


def test_tar_reader_refuses_links_and_non_archives():
    with pytest.raises(InputError, match=r"link member 'l\.txt'"):
        read_tar_members(_tar({"ok.txt": b"x"}, links=("l.txt",)))
    with pytest.raises(InputError, match="cannot read"):
        read_tar_members(b"not a tar archive")


def test_counts_are_the_lists_counted():
    """The shipped image counts (what ``semshift benchmark list`` and the sets read, without
    decoding 600,000 paths) are the lists' own, of the very files shipped."""
    from semshift.catalog import get_benchmark
    from semshift.catalog.lists import (
        COUNTS,
        count_lists,
        imagenet_ood_images,
        isood_cells,
        isood_imagenet1k,
        list_counts,
        ssb_imagenet21k_val_files,
    )

    assert COUNTS == "list_counts.json"
    assert list_counts() == count_lists()
    ood = {s.name: s for s in get_benchmark("imagenet-ood").sets()}
    images = imagenet_ood_images()
    assert ood["imagenet-ood"].images == len(images) == 31_802
    assert ood["imagenet-ood"].classes == len({p.split("/")[0] for p in images}) == 637
    assert ood["openimage-o"].images == 15_869
    isood = get_benchmark("isood-imagenet").sets()
    cells = {c: len(v) for c, v in isood_cells().items() if v}
    assert {s.name: s.images for s in isood if s.role == "ood"} == cells
    assert [s.name for s in isood if s.role == "ood"] == list(cells)
    assert next(s for s in isood if s.role == "id_test").images == len(isood_imagenet1k("test"))
    files = ssb_imagenet21k_val_files()
    man = published_split("ssb-imagenet")
    ssb = {s.name: s.images for s in get_benchmark("ssb-imagenet").sets() if s.role == "ood"}
    assert ssb == {b: sum(len(files[w]) for w in man.bins[b]) for b in ("easy", "hard")}
    fall11 = get_benchmark("ssb-imagenet-fall11").sets()
    assert [s.images for s in fall11 if s.role == "ood"] == [None, None]
