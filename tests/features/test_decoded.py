"""Decoded images shared between extractions of one image set (a study's models)."""

from __future__ import annotations

import pytest
import torch
from PIL import Image

from semshift.features import open_store
from semshift.features.data import image_folder
from semshift.features.decoded import DecodedMemo, active_memo, shared_decoding
from semshift.features.extract import extract
from semshift.features.models import load_model

from .conftest import count_decodes, write_images

KW = {"preset": "resize36-crop32", "batch_size": 3, "shard_size": 5, "progress": False}
KW |= {"fsync": False, "workers": 0}


def _batch(n: int) -> tuple[torch.Tensor, torch.Tensor, tuple[str, ...]]:
    return torch.zeros(n, 3, 2, 2, dtype=torch.uint8), torch.arange(n), ("",) * n


def test_memo_keeps_whole_sets_within_budget_least_recently_used_first() -> None:
    memo = DecodedMemo(max_bytes=100)  # a batch of n images is 12 n bytes
    for key, n in (("a", 3), ("b", 3)):
        rec = memo.recorder(key)
        rec.add(_batch(n))
        rec.commit()
    assert memo.nbytes == 72 and memo.get("a") is not None  # "a" is now the most recent
    rec = memo.recorder("c")
    rec.add(_batch(3))
    rec.commit()  # 108 bytes do not fit: "b", the least recently used, goes
    assert memo.get("b") is None and memo.get("a") is not None and memo.get("c") is not None
    big = memo.recorder("d")
    big.add(_batch(5))
    big.add(_batch(5))  # 120 bytes: over the budget, the set is not kept at all
    big.commit()
    assert memo.get("d") is None and memo.nbytes == 72
    unfinished = memo.recorder("e")
    unfinished.add(_batch(1))  # never committed (the extraction failed): nothing kept
    assert memo.get("e") is None


def test_context_is_scoped_and_nests() -> None:
    assert active_memo() is None
    with shared_decoding(10) as outer:
        assert active_memo() is outer
        with shared_decoding(0) as inner:
            assert active_memo() is inner
        assert active_memo() is outer
    assert active_memo() is None


@pytest.fixture
def counted(monkeypatch):
    return count_decodes(monkeypatch)


def test_second_model_reads_the_kept_batches_and_stores_are_identical(tmp_path, counted):
    root = tmp_path / "imgs"
    write_images(root, {"cat": 5, "dog": 4, "owl": 3})
    Image.new("RGB", (1, 1)).save(root / "owl" / "tiny.png")  # decodes fine
    (root / "dog" / "bad.png").write_bytes(b"not an image")  # a skipped image, kept as such
    src = image_folder(root)
    models = [
        load_model("timm/test_resnet", random_init=True, seed=s, num_classes=3) for s in (0, 1)
    ]
    for i, m in enumerate(models):  # references: no sharing
        extract(m, src, tmp_path / f"ref{i}", **KW)
    assert counted["n"] == 2 * 14
    counted["n"] = 0
    with shared_decoding() as memo:
        for i, m in enumerate(models):
            extract(m, image_folder(root), tmp_path / f"got{i}", **KW)
        assert counted["n"] == 14 and memo.hits == 1  # decoded once, read back once
        # another preprocessing is other images: decoded again
        extract(models[0], src, tmp_path / "other", **{**KW, "preset": "resize40-crop36"})
        assert counted["n"] == 28
    for i in range(2):
        ref, got = open_store(tmp_path / f"ref{i}"), open_store(tmp_path / f"got{i}")
        assert ref.checksums() == got.checksums()
        assert (tmp_path / f"ref{i}" / "skipped.csv").read_bytes() == (
            tmp_path / f"got{i}" / "skipped.csv"
        ).read_bytes()
