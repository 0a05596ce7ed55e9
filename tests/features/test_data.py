"""Image sources (folder tree, file list), presets and the dataset's handling of bad images."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch
from PIL import Image

from semshift.errors import InputError, UnknownNameError
from semshift.features.data import (
    ImageDataset,
    file_list,
    image_folder,
    load_image,
    make_transform,
    open_source,
    parse_preset,
)
from semshift.taxonomy.classlists import load_classlist

from .conftest import write_images


@pytest.fixture
def wnids(tmp_path):
    f = tmp_path / "classes.txt"
    f.write_text("n01\tgreat white shark\nn02\ttench\nn03\tbarn owl\n")
    return f


def test_folder_tree_by_id_and_name(tmp_path, wnids):
    root = tmp_path / "d"
    write_images(root, {"n03": 2, "Tench": 3, "great_white_shark": 1}, size=8)
    Image.new("RGB", (8, 8)).save(root / "loose.png")
    (root / "n03" / "notes.txt").write_text("not an image")
    src = image_folder(root, load_classlist(wnids))
    assert src.names == [
        "loose.png", "Tench/0000.png", "Tench/0001.png", "Tench/0002.png",
        "great_white_shark/0000.png", "n03/0000.png", "n03/0001.png",
    ]  # fmt: skip
    assert src.labels.tolist() == [-1, 1, 1, 1, 0, 2, 2]
    assert all(p.startswith(str(root.resolve())) for p in src.paths)
    # default class list: the sorted folder names
    src2 = image_folder(root)
    assert src2.classes.ids == ("Tench", "great_white_shark", "n03")
    assert src2.labels.tolist() == [-1, 0, 0, 0, 1, 2, 2]


def test_folder_unknown_and_empty_class(tmp_path, wnids):
    root = tmp_path / "d"
    write_images(root, {"n01": 2, "n0x": 2}, size=8)
    cl = load_classlist(wnids)
    with pytest.raises(UnknownNameError, match=r"class folder .*n0x is not in the class list"):
        image_folder(root, cl)
    skip = image_folder(root, cl, unknown="skip")
    assert skip.names == ["n01/0000.png", "n01/0001.png"]
    assert skip.skipped == [
        ("n0x/0000.png", "class folder 'n0x' not in the class list"),
        ("n0x/0001.png", "class folder 'n0x' not in the class list"),
    ]
    assert image_folder(root, cl, unknown="ood").labels.tolist() == [0, 0, -1, -1]
    (root / "n02").mkdir()
    with pytest.raises(InputError, match=r"class folder .*n02 has no images"):
        image_folder(root, cl, unknown="ood")
    with pytest.raises(InputError, match="does not exist"):
        image_folder(tmp_path / "nope")


def test_file_list(tmp_path, wnids):
    write_images(tmp_path / "im", {"a": 3}, size=8)
    lst = tmp_path / "list.txt"
    lst.write_text(
        "# path label\n"
        "im/a/0000.png 2\n"
        "im/a/0001.png n02   # by id\n"
        "im/a/0002.png\tbarn owl\n"
        f"{tmp_path / 'im/a/0000.png'}\n"
        "\n"
    )
    src = file_list(lst, load_classlist(wnids))
    assert src.labels.tolist() == [2, 1, 2, -1]
    assert src.names[:3] == ["im/a/0000.png", "im/a/0001.png", "im/a/0002.png"]
    assert src.paths[0] == src.paths[3] == str((tmp_path / "im/a/0000.png").resolve())
    assert open_source(lst, load_classlist(wnids)).labels.tolist() == [2, 1, 2, -1]
    bad = tmp_path / "bad.txt"
    bad.write_text("im/a/0000.png 0\nim/a/0001.png 3\n")
    with pytest.raises(InputError, match=r"bad\.txt, line 2: label 3 is not in \[-1, 3\)"):
        file_list(bad, load_classlist(wnids))
    bad.write_text("a b c\n")
    with pytest.raises(InputError, match=r"line 1: expected 'path \[label\]', got 3 fields"):
        file_list(bad)
    bad.write_text("x.png zebra\n")
    with pytest.raises(UnknownNameError, match=r"line 1: label 'zebra' is not in"):
        file_list(bad, load_classlist(wnids))
    with pytest.raises(InputError, match="neither an image folder nor a file list"):
        open_source(tmp_path / "missing")


def test_presets_and_transform():
    assert parse_preset("imagenet") == (256, 224)
    assert parse_preset("imagenet-224") == (224, 224)
    assert parse_preset("resize72-crop64") == (72, 64)
    for bad in ("imagenet-1k", "resize32-crop64", "resize-crop", "crop224"):
        with pytest.raises(InputError, match="unknown preprocessing preset"):
            parse_preset(bad)
    img = Image.fromarray(np.full((300, 400, 3), 255, np.uint8))
    t = make_transform("imagenet", (0.5, 0.5, 0.5), (0.25, 0.25, 0.25))(img)
    assert t.shape == (3, 224, 224)
    torch.testing.assert_close(t, torch.full((3, 224, 224), 2.0))  # (1 - 0.5) / 0.25


def test_dataset_skips_bad_images(tmp_path):
    write_images(tmp_path / "d", {"a": 2}, size=20)
    good = tmp_path / "d" / "a" / "0000.png"
    trunc = tmp_path / "d" / "a" / "trunc.jpg"
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), np.uint8)).save(trunc)
    trunc.write_bytes(trunc.read_bytes()[:300])
    (tmp_path / "d" / "a" / "garbage.jpg").write_bytes(b"\x00\x01 definitely not a jpeg")
    src = image_folder(tmp_path / "d")
    ds = ImageDataset(src, "resize20-crop16", (0, 0, 0), (1, 1, 1))
    by_name = {src.names[i]: ds[i] for i in range(len(ds))}
    x, i, err = by_name["a/0000.png"]
    assert err == "" and x.shape == (3, 16, 16) and src.names[i] == "a/0000.png"
    want = torch.from_numpy(np.asarray(load_image(good).crop((2, 2, 18, 18)), np.float32) / 255)
    torch.testing.assert_close(x, want.permute(2, 0, 1))
    assert "truncated" in by_name["a/trunc.jpg"][2].lower()
    assert by_name["a/garbage.jpg"][2] == "not a recognised image format"
    assert not by_name["a/garbage.jpg"][0].any()


def test_uint8_dataset_normalised_by_batch_is_identical(tmp_path):
    write_images(tmp_path / "d", {"a": 3, "b": 2}, size=40)
    (tmp_path / "d" / "b" / "garbage.jpg").write_bytes(b"not a jpeg")
    src = image_folder(tmp_path / "d")
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)

    def corrupt(img, i):  # deterministic per index, as the corruptions are
        return img.rotate(7 * i)

    for corruption in (None, corrupt):
        full = ImageDataset(src, "resize36-crop32", mean, std, corruption)
        raw = ImageDataset(src, "resize36-crop32", mean, std, corruption, normalize=False)
        items = [raw[i] for i in range(len(raw))]
        assert all(x.dtype == torch.uint8 and x.shape == (3, 32, 32) for x, _, _ in items)
        assert [e for _, _, e in items] == [full[i][2] for i in range(len(full))]
        batch = raw.normalize_batch(torch.stack([x for x, _, _ in items]))
        want = torch.stack([full[i][0] for i in range(len(full))])
        ok = [i for i, (_, _, e) in enumerate(items) if not e]
        assert batch.dtype == torch.float32 and len(ok) == 5
        assert torch.equal(batch[ok], want[ok])  # bit for bit, not merely close


def test_fingerprint_tracks_files_and_labels(tmp_path):
    write_images(tmp_path / "d", {"a": 2, "b": 1}, size=8)
    f1 = image_folder(tmp_path / "d").fingerprint()
    assert image_folder(tmp_path / "d").fingerprint() == f1
    # the documented recipe (cache keys depend on it): SHA-256 over (name, size, label) rows
    d = tmp_path / "d"
    rows = [(f"{c}/{f.name}", f.stat().st_size, k) for k, c in enumerate("ab")
            for f in sorted((d / c).iterdir())]  # fmt: skip
    text = "\n".join(("a", "b")) + "".join(f"{n}\t{z}\t{k}\n" for n, z, k in rows)
    assert f1 == hashlib.sha256(text.encode()).hexdigest()
    src = image_folder(tmp_path / "d")
    assert src.fingerprint() == f1
    Image.new("RGB", (9, 9)).save(tmp_path / "d" / "a" / "0000.png")
    # a source fingerprints its files once; a new listing sees the change
    assert src.fingerprint() == f1
    assert image_folder(tmp_path / "d").fingerprint() != f1
