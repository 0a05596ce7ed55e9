"""Model adapters with random weights on tiny inputs (no downloads anywhere)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from semshift.errors import InputError, UnknownNameError
from semshift.features.models import (
    MODELS,
    HookAdapter,
    OpenClipAdapter,
    TorchvisionAdapter,
    kaiming_init,
    list_models,
    load_model,
    register_open_clip_config,
)

from .conftest import TINY_CLIP

# one name per torchvision family (the registry holds every size); ViT at 32 px, 4 patches
TV = {
    "resnet18": {},
    "resnext50_32x4d": {},
    "wide_resnet50_2": {},
    "densenet121": {},
    "regnet_x_400mf": {},
    "vit_b_32": {"image_size": 32},
}


def _x(n=2, size=32, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).normal(size=(n, 3, size, size))).float()


def _check_adapter(adapter, x, *, reference=None):
    """Shapes, logits = h W^T + b, equality with the model's own output, the feature-map route."""
    with torch.no_grad():
        logits, h = adapter(x)
        w, b = adapter.head_weights()
        assert logits.shape == (x.shape[0], w.shape[0]) and h.shape == (x.shape[0], w.shape[1])
        assert w.dtype == np.float32 and b.shape == (w.shape[0],)
        np.testing.assert_allclose(
            logits.numpy(), h.numpy() @ w.T + b, rtol=1e-4, atol=1e-4 * float(logits.abs().max())
        )
        ref = reference(x) if reference is not None else adapter.module(x)
        np.testing.assert_allclose(logits.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)
        assert torch.isfinite(h).all()
        if adapter.has_feature_map:
            fmap = adapter.feature_map(x)
            assert fmap.ndim == 4 and fmap.shape[0] == x.shape[0]
            l2, h2 = adapter.from_feature_map(fmap)
            np.testing.assert_allclose(l2.numpy(), logits.numpy(), rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(h2.numpy(), h.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(TV))
def test_torchvision_families(name):
    adapter = load_model(name, random_init=True, seed=1, num_classes=7, **TV[name])
    assert isinstance(adapter, TorchvisionAdapter)
    assert adapter.num_classes == 7 and adapter.has_feature_map == (not name.startswith("vit"))
    _check_adapter(adapter, _x())


def test_registry_covers_families_and_names_unknowns():
    names = list_models()
    for fam in ("resnet50", "resnext101_32x8d", "wide_resnet101_2", "densenet201", "vit_l_16"):
        assert fam in names
    assert "timm/<name>" in names and "open_clip/<name>" in names
    assert all(MODELS[n].description for n in MODELS)
    with pytest.raises(UnknownNameError, match=r"unknown model 'resnet5'; did you mean resnet50"):
        load_model("resnet5", random_init=True)
    with pytest.raises(UnknownNameError, match="unknown timm model 'resnet_nope'"):
        load_model("timm/resnet_nope", random_init=True)
    with pytest.raises(InputError, match="exactly one of a local weights file or random_init"):
        load_model("resnet18")


def test_random_init_is_seeded_kaiming():
    a = load_model("resnet18", random_init=True, seed=3, num_classes=5)
    b = load_model("resnet18", random_init=True, seed=3, num_classes=5)
    c = load_model("resnet18", random_init=True, seed=4, num_classes=5)
    for (k, pa), pb in zip(
        a.module.state_dict().items(), b.module.state_dict().values(), strict=True
    ):
        assert torch.equal(pa, pb), k
    assert not torch.equal(a.module.conv1.weight, c.module.conv1.weight)
    # Kaiming normal, fan_in, ReLU gain: std = sqrt(2 / fan_in)
    w = a.module.layer4[0].conv2.weight  # 512 x 512 x 3 x 3
    fan_in = w.shape[1] * w.shape[2] * w.shape[3]
    assert abs(float(w.detach().std()) / np.sqrt(2 / fan_in) - 1) < 0.01
    assert float(w.detach().mean()) == pytest.approx(0, abs=1e-3)
    assert torch.equal(a.module.fc.bias, torch.zeros(5))
    assert torch.equal(a.module.bn1.weight, torch.ones(64))


def test_weights_round_trip_safetensors_and_torch(tmp_path):
    src = load_model("resnet18", random_init=True, seed=5, num_classes=4)
    state = {k: v.contiguous() for k, v in src.module.state_dict().items()}
    save_file(state, tmp_path / "w.safetensors")
    torch.save({"state_dict": {f"module.{k}": v for k, v in state.items()}}, tmp_path / "w.pt")
    x = _x()
    with torch.no_grad():
        want = src(x)[0]
        for f in ("w.safetensors", "w.pt"):
            got = load_model("resnet18", weights=tmp_path / f, num_classes=4)
            assert got.weights_desc.endswith(f)
            assert torch.equal(got(x)[0], want)


def test_weights_bad_keys_and_shapes(tmp_path):
    state = load_model("resnet18", random_init=True, num_classes=4).module.state_dict()
    partial = {k: v for k, v in state.items() if not k.startswith("fc.")}
    partial["extra.weight"] = torch.zeros(2)
    torch.save(partial, tmp_path / "bad.pt")
    with pytest.raises(
        InputError, match=r"missing keys: fc\.weight, fc\.bias; unexpected keys: extra\.weight"
    ):
        load_model("resnet18", weights=tmp_path / "bad.pt", num_classes=4)
    with pytest.raises(
        InputError, match=r"fc\.weight \(4, 512\) vs model \(10, 512\).*num_classes"
    ):
        torch.save(state, tmp_path / "w4.pt")
        load_model("resnet18", weights=tmp_path / "w4.pt", num_classes=10)
    with pytest.raises(InputError, match="does not exist"):
        load_model("resnet18", weights=tmp_path / "nope.pt")
    (tmp_path / "junk.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(InputError, match="not a readable safetensors file"):
        load_model("resnet18", weights=tmp_path / "junk.safetensors")


class _Evil:
    """Unpickling this would run code (writes a marker file)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_unsafe_pickle_checkpoint_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    with open(tmp_path / "evil.pt", "wb") as f:
        pickle.dump({"state_dict": {"w": torch.zeros(2)}, "x": _Evil(str(marker))}, f, protocol=2)
    with pytest.raises(InputError, match="refused, it needs unpickling arbitrary Python objects"):
        load_model("resnet18", weights=tmp_path / "evil.pt")
    assert not marker.exists()
    torch.save({"model": {"w": torch.zeros(1)}, "opt": nn.Linear(1, 1)}, tmp_path / "obj.pt")
    with pytest.raises(InputError, match="refused"):
        load_model("resnet18", weights=tmp_path / "obj.pt")


def test_tiny_vit_adapter():
    from torchvision.models import VisionTransformer

    vit = VisionTransformer(
        image_size=32, patch_size=16, num_layers=1, num_heads=2, hidden_dim=16, mlp_dim=32,
        num_classes=6, representation_size=8,
    )  # fmt: skip
    adapter = TorchvisionAdapter("vit-tiny", kaiming_init(vit, 0))
    assert adapter.feature_dim == 8 and adapter.input_size == 32
    _check_adapter(adapter, _x())
    with pytest.raises(InputError, match="no spatial feature map"):
        adapter.feature_map(_x())


@pytest.mark.parametrize("arch", ["test_resnet", "test_vit", "test_convnext"])
def test_timm_adapter(arch):
    adapter = load_model(f"timm/{arch}", random_init=True, seed=2, num_classes=5)
    assert adapter.has_feature_map == (arch != "test_vit")
    _check_adapter(adapter, _x(size=64))


def test_hook_adapter_default_head_and_named_layer():
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
        nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 3),
    )  # fmt: skip
    a = HookAdapter("seq", net)
    assert a.layer == "input of 6"
    _check_adapter(a, _x())
    with torch.no_grad():
        want_h = net[:6](_x())
        np.testing.assert_allclose(a.features(_x()).numpy(), want_h.numpy(), rtol=1e-6)
    b = HookAdapter("seq", net, head="6", layer="5")
    with torch.no_grad():
        np.testing.assert_allclose(b(_x())[1].numpy(), want_h.numpy(), rtol=1e-6)
    with pytest.raises(UnknownNameError, match="no module named '9' for `layer`"):
        HookAdapter("seq", net, layer="9")
    with pytest.raises(InputError, match="head '0' is Conv2d, not Linear"):
        HookAdapter("seq", net, head="0")


@pytest.fixture(scope="module")
def clip():
    register_open_clip_config("semshift-tiny-clip", TINY_CLIP)
    return load_model(
        "open_clip/semshift-tiny-clip", random_init=True, seed=0, classnames=["cat", "dog", "owl"]
    )


def test_open_clip_zero_shot_head(clip):
    assert isinstance(clip, OpenClipAdapter) and clip.input_size == 32
    x = _x()
    with torch.no_grad():
        logits, h = clip(x)
        img = clip.module.encode_image(x)
    np.testing.assert_allclose(torch.linalg.norm(h, dim=1).numpy(), 1.0, rtol=1e-5)
    text = clip.encode_text(["a photo of a cat.", "a photo of a dog.", "a photo of a owl."])
    np.testing.assert_allclose(np.linalg.norm(text, axis=1), 1.0, rtol=1e-5)
    cos = torch.nn.functional.normalize(img, dim=-1).numpy() @ text.T
    scale = 1 / 0.07  # exp(logit_scale) after random init, CLIP's initial temperature
    assert float(clip.module.logit_scale.detach().exp()) == pytest.approx(scale)
    np.testing.assert_allclose(logits.numpy(), scale * cos, rtol=1e-4, atol=1e-4)
    w, b = clip.head_weights()
    np.testing.assert_allclose(w, scale * text, rtol=1e-5)
    assert not b.any()
    _check_adapter(clip, x, reference=lambda t: clip(t)[0])


def test_open_clip_text_batches_give_the_one_batch_embeddings_without_autograd(clip):
    """encode_text runs in batches under inference mode (memory: one batch, no autograd
    graph): the same embeddings as one batch of every text."""
    texts = [f"a photo of a {w}." for w in ("cat", "dog", "owl", "bird", "fish", "ant", "bee")]
    whole = clip.encode_text(texts, batch_size=len(texts))
    np.testing.assert_allclose(clip.encode_text(texts, batch_size=2), whole, atol=1e-6)


def test_open_clip_text_encoder_and_scorer(clip, images):
    from semshift.splits.superclass import ImageTextScorer, TextEncoder

    enc: TextEncoder = clip
    scorer: ImageTextScorer = clip
    e1 = enc.encode(["bird", "cat"])
    assert e1.shape == (2, 32) and e1.dtype == np.float32
    np.testing.assert_array_equal(e1, clip.encode_text(["bird", "cat"]))
    paths = [str(p) for p in sorted(images.glob("*/*.png"))][:4]
    s = scorer.score(paths, "a cat")
    assert s.shape == (4,) and s.dtype == np.float64
    want = clip.encode_images(paths) @ clip.encode_text(["a cat"])[0]
    np.testing.assert_allclose(s, want, rtol=1e-6)
    assert np.all(np.abs(s) <= 1 + 1e-6)
