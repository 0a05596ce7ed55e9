"""Training images decoded once: the cached epochs give the tensors a fresh decode gives, bit for
bit; the budget bounds what is kept; one loader feeds every epoch by ``(epoch, index)`` keys."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from semshift.errors import InputError
from semshift.features.data import open_source
from semshift.training.images import EpochBatches, TrainImages
from semshift.training.loop import train
from semshift.training.recipe import Recipe, TrainConfig

from .images import write_class_images


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_class_images(tmp_path_factory.mktemp("cache") / "imgs", {"a": 5, "b": 5})


def _ds(data: Path, **kw) -> TrainImages:
    return TrainImages(open_source(data), "resize40-crop32", (0.5,) * 3, (0.25,) * 3, seed=3, **kw)


def test_cached_images_give_the_uncached_tensors_and_survive_the_files(data, tmp_path):
    fresh, cached = _ds(data, cache_bytes=0), _ds(data)
    keys = [(e, i) for e in (0, 1, 2) for i in range(10)]
    ref = [fresh[k] for k in keys]
    got = [cached[k] for k in keys]
    assert all(torch.equal(a[0], b[0]) and a[1] == b[1] for a, b in zip(ref, got, strict=True))
    assert not torch.equal(ref[0][0], ref[10][0])  # another epoch, another augmentation
    assert fresh.cached_bytes == 0 and cached.cached_bytes == 10 * 4 * 40 * 40
    # the kept images are what the next epochs start from: the files are no longer read
    moved = tmp_path / "gone"
    data.rename(moved)
    try:
        assert torch.equal(cached[(1, 4)][0], ref[14][0])
        with pytest.raises(Exception, match=r"a/004\.png"):
            fresh[(1, 4)]
    finally:
        moved.rename(data)
    # set_epoch and an int key draw what the (epoch, index) key draws
    cached.set_epoch(2)
    assert torch.equal(cached[7][0], ref[27][0])


def test_budget_bounds_the_cache(data):
    ds = _ds(data, cache_bytes=3 * 4 * 40 * 40 + 5)
    for i in range(10):
        ds[(0, i)]
    assert ds.cached_bytes == 3 * 4 * 40 * 40 and ds.cached == [0, 1, 2]
    ds.set_cache_bytes(100)  # below what is kept: dropped
    assert ds.cached_bytes == 0 and ds.cached == []


def test_epoch_batches_key_every_index_by_its_epoch():
    eb = EpochBatches(lambda e: [[2 * e, 1], [0]], 1, 3, per_epoch=2)
    assert len(eb) == 4
    assert list(eb) == [[(1, 2), (1, 1)], [(1, 0)], [(2, 4), (2, 1)], [(2, 0)]]
    assert list(EpochBatches(lambda e: [[0]], 3, 3, per_epoch=1)) == [] and len(eb) == 4


def test_weights_do_not_depend_on_the_cache(data, tmp_path):
    recipe = Recipe(epochs=2, batch_size=4, lr=0.05, randaugment_n=1, randaugment_m=9)
    cfg = TrainConfig(model="demo-glyphnet", data=str(data), recipe=recipe, seed=1)
    a = train(cfg, tmp_path / "a", threads=1)
    b = train(cfg, tmp_path / "b", threads=1, cache_bytes=0)
    wa, wb = load_file(str(a.model_file)), load_file(str(b.model_file))
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert [h["loss"] for h in a.history] == [h["loss"] for h in b.history]
    with pytest.raises(InputError, match=r"cache_bytes \(--cache-mb\) must be >= 0, got -1"):
        train(cfg, tmp_path / "c", cache_bytes=-1)


def test_busy_threads_note_names_the_idle_cpus():
    from semshift.training.loop import busy_threads_note

    note = busy_threads_note(4, load=6.2, cpus=8)
    assert note.startswith("4 torch threads, 2 of 8 CPUs idle (load 6.2)")
    assert "--threads 2 is faster here" in note
    assert busy_threads_note(2, load=7.0, cpus=2).count("--threads 1 ") == 1
    assert busy_threads_note(2, load=0.4, cpus=4) == "" and busy_threads_note(1, 9.0, 2) == ""


@pytest.mark.parametrize("module", ["loop", "recipe", "superclass_list", "images"])
def test_docstring_examples(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(f"semshift.training.{module}"))
    assert result.attempted > 0 and result.failed == 0
