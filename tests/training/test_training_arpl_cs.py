"""ARPL+CS: the confusion term, BatchNorm on generated images, a resumable run that exports
like ARPL."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from semshift import detectors
from semshift.features.data import open_source
from semshift.features.models import load_model
from semshift.training import loop
from semshift.training.checkpoint import read_checkpoint
from semshift.training.images import TrainImages
from semshift.training.methods import get_method
from semshift.training.recipe import Recipe, TrainConfig

from .images import write_class_images

SMALL = {"nz": 8, "ngf": 4, "ndf": 4, "beta": 0.5}
RECIPE = Recipe(epochs=2, batch_size=6, lr=0.05, randaugment_n=0)


def test_confusion_is_one_over_c_for_equidistant_features_and_matches_its_formula():
    m = get_method("arpl_cs")
    points = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    centre = torch.zeros(3, 2)  # every point at the same distance
    assert float(m.confusion(centre, points)) == pytest.approx(1 / 4, rel=1e-6)
    gen = torch.Generator().manual_seed(3)
    h = torch.randn(5, 2, generator=gen, dtype=torch.float64)
    p = points.double()
    d2 = torch.stack([((h - p[k]) ** 2).mean(1) for k in range(4)], 1)
    prob = torch.softmax(d2, 1)
    ref = math.exp(float((prob * prob.log()).sum(1).mean()))
    got = float(m.confusion(h, p))
    assert got == pytest.approx(ref, rel=1e-12) and 1 / 4 < got <= 1


def test_generated_images_use_batch_statistics_but_keep_the_running_ones():
    adapter = load_model("demo-glyphnet", random_init=True, num_classes=3)
    m = get_method("arpl_cs", **SMALL)
    m.setup(3, adapter.feature_dim)
    adapter.module.train()
    before = {k: v.clone() for k, v in adapter.module.state_dict().items()}
    x = torch.randn(6, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    h = m._fake_features(adapter, x, (32, 32))
    after = adapter.module.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    with torch.no_grad():
        train_mode = adapter.features(x)  # ordinary train-mode pass: batch statistics
    torch.testing.assert_close(h, train_mode)
    assert not torch.equal(adapter.module.state_dict()["trunk.1.running_mean"],
                           before["trunk.1.running_mean"])  # fmt: skip


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_class_images(tmp_path_factory.mktemp("cs") / "imgs", {"a": 6, "b": 6, "c": 6})


def _config(data) -> TrainConfig:
    return TrainConfig(model="demo-glyphnet", data=str(data), method="arpl_cs",
                       method_params=SMALL, recipe=RECIPE, seed=1)  # fmt: skip


def test_run_exports_like_arpl_and_resumes_to_the_same_weights(data, tmp_path, monkeypatch):
    res = loop.train(_config(data), tmp_path / "whole", threads=1)
    ckpt = read_checkpoint(tmp_path / "whole" / "checkpoint.safetensors")
    assert {"points", "radius"} <= set(ckpt.method)
    assert any(k.startswith("generator.") for k in ckpt.method)
    assert any(k.startswith("discriminator.") for k in ckpt.method)
    assert sorted(ckpt.extra_optimizers) == ["discriminator", "generator"]
    assert int(ckpt.extra_optimizers["generator"]["state"][0]["step"]) == 2 * 3  # 3 steps/epoch
    # the exported model scores like ARPL: max distance logit to the learnt points
    adapter = load_model("demo-glyphnet", weights=res.model_file, num_classes=3)
    assert not any("generator" in k for k in load_file(str(res.model_file)))
    ds = TrainImages(open_source(data), "resize32-crop32", adapter.mean, adapter.std, augment=False)
    x = torch.stack([ds[i][0] for i in range(len(ds))])
    with torch.no_grad():
        logits, h = adapter(x)
        want = get_method("arpl").distance_logits(h, ckpt.method["points"])
    score = detectors.get("arpl").fit().score(logits=logits.numpy(), features=h.numpy())
    np.testing.assert_allclose(score, want.max(1).values.numpy(), rtol=1e-4, atol=1e-4)

    # stop after the first epoch's checkpoint, then resume: the uninterrupted weights, bit for bit
    class Stop(Exception):
        pass

    real = loop.write_checkpoint

    def write_then_stop(*args, **kwargs):
        real(*args, **kwargs)
        raise Stop

    monkeypatch.setattr(loop, "write_checkpoint", write_then_stop)
    with pytest.raises(Stop):
        loop.train(_config(data), tmp_path / "cut", threads=1)
    monkeypatch.setattr(loop, "write_checkpoint", real)
    assert read_checkpoint(tmp_path / "cut" / "checkpoint.safetensors").meta["epoch"] == 1
    again = loop.train(_config(data), tmp_path / "cut", resume=True, threads=1)
    a, b = load_file(str(res.model_file)), load_file(str(again.model_file))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert [h["loss"] for h in again.history] == [h["loss"] for h in res.history]
    cut = read_checkpoint(tmp_path / "cut" / "checkpoint.safetensors")
    assert all(torch.equal(cut.method[k], ckpt.method[k]) for k in ckpt.method)
