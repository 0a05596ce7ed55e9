"""GlyphNet: registration, training, weights, and extraction into a feature store."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from semshift.demo import MODEL_NAME, GlyphNetAdapter
from semshift.demo.model import PRESET, predict, to_input, train
from semshift.errors import InputError
from semshift.features import open_store
from semshift.features.data import open_source
from semshift.features.extract import extract
from semshift.features.models import list_models, load_model


def _read(folder, index_csv):
    index = pd.read_csv(index_csv)
    imgs = np.stack([np.asarray(Image.open(folder / p)) for p in index["path"]])
    return imgs, index


def test_registered_on_import_and_loadable(tiny_demo):
    assert MODEL_NAME in list_models()
    m = load_model(MODEL_NAME, weights=tiny_demo.weights_path, num_classes=tiny_demo.num_classes)
    assert isinstance(m, GlyphNetAdapter)
    assert (m.num_classes, m.feature_dim) == (8, 128)
    assert m.weights_desc == str(tiny_demo.weights_path)
    with pytest.raises(InputError, match="num_classes"):
        load_model(MODEL_NAME, weights=tiny_demo.weights_path, num_classes=9)


def test_random_init_is_seeded():
    a = load_model(MODEL_NAME, random_init=True, seed=1, num_classes=5)
    b = load_model(MODEL_NAME, random_init=True, seed=1, num_classes=5)
    c = load_model(MODEL_NAME, random_init=True, seed=2, num_classes=5)
    wa, wb, wc = (m.module.state_dict()["trunk.0.weight"] for m in (a, b, c))
    assert torch.equal(wa, wb) and not torch.equal(wa, wc)
    assert a.weights_desc.startswith("random-init")


def test_trains_well_above_chance_on_the_tiny_set(tiny_demo):
    # 8 classes (chance 12.5 %), 16 training images each, 6 epochs
    assert tiny_demo.test_accuracy >= 0.6
    hist = tiny_demo.history
    assert len(hist) == tiny_demo.params.epochs
    assert hist[-1]["loss"] < hist[0]["loss"] / 2


def _weights(result):
    return {k: v.clone() for k, v in result.adapter.module.state_dict().items()}


def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_training_is_deterministic_for_a_thread_count_and_checks_its_input():
    """In-process training: the same seed and thread count give the same bits (the documented
    guarantee; other thread counts may sum in other orders, see train_pinned)."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (24, 32, 32), dtype=np.uint8)
    y = np.arange(24) % 3
    for threads in (1, 2):
        a = train(x, y, 3, epochs=1, batch_size=8, seed=5, threads=threads)
        b = train(x, y, 3, epochs=1, batch_size=8, seed=5, threads=threads)
        assert _same(_weights(a), _weights(b)), threads
        assert a.numerics["threads"] == threads
    c = train(x, y, 3, epochs=1, batch_size=8, seed=6, threads=1)
    assert not _same(_weights(a), _weights(c))
    with pytest.raises(InputError, match=r"labels must lie in \[0, 3\)"):
        train(x, y + 1, 3, epochs=1)
    with pytest.raises(InputError, match="24 images and 23 labels"):
        train(x, y[:-1], 3)


def test_extraction_sees_what_training_saw(tiny_demo, tmp_path):
    """The extractor's resize32-crop32 + normalisation equals to_input on the PNG pixels."""
    s = tiny_demo.sets["id_test"]
    model = tiny_demo.load_model()
    src = open_source(s.path, tiny_demo.classes_path)
    summary = extract(
        model, src, tmp_path / "store", preset=PRESET, batch_size=16, device="cpu",
        scores=["rankfeat", "odin"], progress=False, fsync=False,
    )  # fmt: skip
    assert summary.n_stored == s.n_images and summary.n_skipped == 0
    store = open_store(tmp_path / "store")
    logits, feats, rankfeat = store.select().arrays("logits", "features", "rankfeat")
    assert logits.shape == (s.n_images, 8) and feats.shape == (s.n_images, 128)
    assert np.isfinite(rankfeat).all()
    w, b = store.head
    np.testing.assert_allclose(feats @ w.T + b, logits, rtol=1e-4, atol=1e-4)
    assert (feats >= 0).all()  # after ReLU and average pooling
    # same pixels through to_input give the same logits
    imgs = np.stack([np.asarray(Image.open(p)) for p in src.paths])
    with torch.no_grad():
        direct = model(to_input(imgs))[0].numpy()
    np.testing.assert_allclose(logits, direct, rtol=1e-4, atol=1e-4)
    # labels follow classes.txt, the training order
    acc = float((logits.argmax(1) == store.index["label"].to_numpy()).mean())
    assert acc == pytest.approx(tiny_demo.test_accuracy)
    np.testing.assert_array_equal(predict(model, imgs), logits.argmax(1))


def test_feature_map_path_matches_the_forward_pass(tiny_demo):
    model = tiny_demo.load_model()
    imgs, _ = _read(tiny_demo.sets["font_stix"].path, tiny_demo.root / "images" / "font_stix.csv")
    x = to_input(imgs)
    with torch.no_grad():
        z, h = model(x)
        fmap = model.feature_map(x)
        z2, h2 = model.from_feature_map(fmap)
    assert tuple(fmap.shape) == (len(imgs), 128, 4, 4)
    torch.testing.assert_close(z, z2)
    torch.testing.assert_close(h, h2)


def test_demo_weights_carry_checksums_and_damage_is_refused(tiny_demo, tmp_path):
    """glyphnet.safetensors is written with per-tensor checksums: a flipped bit in a weight is
    an error when the model loads, not a silently different model."""
    import shutil

    damaged = tmp_path / "glyphnet.safetensors"
    shutil.copyfile(tiny_demo.weights_path, damaged)
    data = bytearray(damaged.read_bytes())
    data[-3] ^= 0x40  # inside the last tensor's bytes
    damaged.write_bytes(bytes(data))
    n = tiny_demo.num_classes
    load_model(MODEL_NAME, weights=tiny_demo.weights_path, num_classes=n)  # intact: loads
    with pytest.raises(InputError, match=r"glyphnet.safetensors is damaged \(tensor '.*' does not"):
        load_model(MODEL_NAME, weights=damaged, num_classes=n)
