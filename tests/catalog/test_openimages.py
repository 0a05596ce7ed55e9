"""OpenImage-O: the shipped lists (as released by pytorch-ood), the layout that reads them and
its place in the imagenet-ood benchmark."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from semshift.catalog import get_benchmark, openimage_o_images, published_info
from semshift.catalog.layouts import MissingImagesError, open_layout, openimage_o
from semshift.errors import InputError


def test_the_lists_are_the_released_ones():
    test, val = openimage_o_images("test"), openimage_o_images("val")
    assert (len(test), len(val)) == (15_869, 1_763)
    assert not set(test) & set(val) and len(set(test)) == len(test)
    assert all(n.endswith(".jpg") and len(n) == 20 for n in test + val)
    info = published_info("openimage-o")
    assert info.license == "Apache-2.0" and info.repository == "kkirchheim/pytorch-ood"
    with pytest.raises(InputError, match="'test' or 'val'"):
        openimage_o_images("train")  # type: ignore[arg-type]


def _tree(root: Path, names: list[str]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for k, name in enumerate(names):
        Image.new("RGB", (4, 4), (k, 0, 0)).save(root / name)


@pytest.mark.parametrize("folder", ["openimage_o", "images_largescale/openimage_o", ""])
def test_the_layout_reads_every_listed_file_in_list_order(tmp_path, folder):
    names = openimage_o_images("val")
    _tree(tmp_path / folder if folder else tmp_path, names)
    src = openimage_o(tmp_path, "val")
    assert len(src) == 1_763 and (src.labels == -1).all()
    assert list(src.names) == names
    assert len(open_layout("openimage_o", tmp_path, split="val", sample=10)) == 10


def test_missing_files_are_one_error_or_skipped(tmp_path):
    names = openimage_o_images("val")
    _tree(tmp_path / "openimage_o", names[:-2])
    with pytest.raises(MissingImagesError, match=r"2 of 1763 listed images are missing"):
        openimage_o(tmp_path, "val")
    src = openimage_o(tmp_path, "val", missing="skip")
    assert len(src) == 1_761 and [n for n, _ in src.skipped] == names[-2:]


def test_the_benchmark_reads_it_as_a_second_ood_set_with_pairs():
    bench = get_benchmark("imagenet-ood")
    sets = {s.name: s for s in bench.sets()}
    o = sets["openimage-o"]
    assert (o.role, o.root, o.layout, o.optional, o.images) == (
        "ood", "openimage_o", "openimage_o", True, 15_869
    )  # fmt: skip
    assert bench.protocols["newclass_failure"] == {"pairs": "all"}
