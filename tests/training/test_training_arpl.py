"""ARPL: distance logits, the margin term, the head it exports and its detector."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from semshift import detectors
from semshift.features.data import open_source
from semshift.features.models import load_model
from semshift.training.checkpoint import read_checkpoint
from semshift.training.images import TrainImages
from semshift.training.loop import train
from semshift.training.methods import get_method
from semshift.training.recipe import Recipe, TrainConfig

from .images import write_class_images

GEN = torch.Generator().manual_seed(1)
H = torch.rand(5, 6, generator=GEN, dtype=torch.float64)
P = torch.randn(3, 6, generator=GEN, dtype=torch.float64)
Y = torch.tensor([0, 1, 2, 0, 1])


def test_distance_logits_match_their_definition():
    got = get_method("arpl").distance_logits(H, P)
    ref = torch.stack([((H - P[k]) ** 2).mean(1) - (H * P[k]).sum(1) for k in range(3)], dim=1)
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12)


def test_loss_is_ce_plus_the_hinge_on_the_own_point_distance():
    m = get_method("arpl", weight_pl=0.5, temperature=2.0)
    m.setup(3, 6)
    with torch.no_grad():
        m.points.copy_(P.float())
        m.radius.fill_(0.25)
    h = H.float()
    z = m.distance_logits(h, m.points)
    own = ((h - m.points[Y]) ** 2).mean(1)
    ref = torch.nn.functional.cross_entropy(z / 2.0, Y) + 0.5 * torch.relu(own - 0.25 + 1).mean()
    assert float(m.loss(z, h, Y, None).detach()) == pytest.approx(float(ref.detach()), rel=1e-6)
    # the margin term's gradient reaches the radius (it is learnt)
    m.loss(z, h, Y, None).backward()
    assert float(m.radius.grad) == pytest.approx(-0.5 * float((own - 0.25 + 1 > 0).float().mean()))


def test_exported_head_gives_the_distance_logits_up_to_the_feature_term():
    adapter = load_model("demo-glyphnet", random_init=True, num_classes=3)
    m = get_method("arpl")
    m.setup(3, adapter.feature_dim)
    x = torch.randn(4, 3, 32, 32, generator=GEN)
    with torch.no_grad():
        h = adapter.features(x)
        want = m.distance_logits(h, m.points)
        m.export(adapter)
        logits, h2 = adapter(x)
    torch.testing.assert_close(logits + (h2 * h2).sum(1, keepdim=True) / h2.shape[1], want,
                               rtol=1e-5, atol=1e-5)  # fmt: skip
    det = detectors.get("arpl").fit()
    score = det.score(logits=logits.numpy(), features=h2.numpy())
    np.testing.assert_allclose(score, want.max(1).values.numpy(), rtol=1e-5, atol=1e-5)


def test_arpl_run_exports_a_model_whose_store_scores_are_the_arpl_score(tmp_path):
    data = write_class_images(tmp_path / "imgs", {"a": 6, "b": 6, "c": 6})
    recipe = Recipe(epochs=2, batch_size=6, lr=0.05, randaugment_n=0)
    cfg = TrainConfig(model="demo-glyphnet", data=str(data), method="arpl", recipe=recipe)
    res = train(cfg, tmp_path / "arpl", threads=1)
    ckpt = read_checkpoint(tmp_path / "arpl" / "checkpoint.safetensors")
    assert set(ckpt.method) == {"points", "radius"} and ckpt.method["points"].shape == (3, 128)
    assert res.history[-1]["epoch"] == 2
    adapter = load_model("demo-glyphnet", weights=res.model_file, num_classes=3)
    ds = TrainImages(open_source(data), "resize32-crop32", adapter.mean, adapter.std, augment=False)
    x = torch.stack([ds[i][0] for i in range(len(ds))])
    with torch.no_grad():
        logits, h = adapter(x)
        want = get_method("arpl").distance_logits(h, ckpt.method["points"])
    score = detectors.get("arpl").fit().score(logits=logits.numpy(), features=h.numpy())
    np.testing.assert_allclose(score, want.max(1).values.numpy(), rtol=1e-4, atol=1e-4)
    assert (logits.argmax(1) == want.argmax(1)).all()
