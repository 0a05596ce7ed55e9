"""Every torchvision classifier with a linear head, and torchvision weights by name.

Named weights are read from torch's own cache (``$TORCH_HOME/hub/checkpoints``): the tests put
a file there the way torch does and check that loading uses it; nothing touches the network.
"""

from __future__ import annotations

import pytest
import torch
import torchvision

from semshift.errors import InputError, UnknownNameError
from semshift.features.models import (
    MODELS,
    is_weights_name,
    list_models,
    load_model,
    torchvision_weights,
    weights_cache_file,
    weights_preprocessing,
)

torch.set_num_threads(1)

#: one small member of each family (the larger members share the code path)
FAMILIES = {
    "alexnet": 224, "convnext_tiny": 64, "efficientnet_b0": 64, "efficientnet_v2_s": 64,
    "googlenet": 64, "inception_v3": 299, "maxvit_t": 224, "mnasnet0_5": 64,
    "mobilenet_v2": 64, "mobilenet_v3_small": 64, "shufflenet_v2_x0_5": 64, "swin_t": 64,
    "swin_v2_t": 64, "vgg11": 64, "resnet18": 64, "densenet121": 64, "regnet_x_400mf": 64,
    "vit_b_32": 224,
}  # fmt: skip


def test_every_torchvision_classifier_with_a_linear_head_is_registered():
    tv = torchvision.models.list_models(module=torchvision.models)
    names = set(list_models())
    assert {n for n in tv if not n.startswith("squeezenet")} <= names
    assert not any(n.startswith("squeezenet") for n in names)
    for family in ("convnext", "efficientnet", "mobilenet", "swin", "vit", "maxvit", "vgg"):
        assert any(n.startswith(family) for n in FAMILIES), family


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_head_of_the_features_reproduces_the_models_logits(name):
    """h is the input of the final linear layer: W h + b equals the network's own output,
    and the feature-map path (RankFeat) gives the same logits."""
    a = load_model(name, random_init=True, seed=0, num_classes=5)
    size = FAMILIES[name]
    x = torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = a.module(x)
        logits, h = a(x)
        assert h.shape == (2, a.feature_dim) and logits.shape == (2, 5)
        torch.testing.assert_close(logits, ref, rtol=1e-5, atol=1e-5)
        if a.has_feature_map:
            via_map, h2 = a.from_feature_map(a.feature_map(x))
            torch.testing.assert_close(via_map, ref, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(h2, h)


def test_squeezenet_is_refused_with_a_reason():
    from semshift.features.models import TorchvisionAdapter

    with pytest.raises(InputError, match="no linear classification head"):
        TorchvisionAdapter("squeezenet1_0", torchvision.models.squeezenet1_0())


def test_weights_names_are_told_from_files():
    assert is_weights_name("DEFAULT") and is_weights_name("IMAGENET1K_V2")
    assert is_weights_name("ResNet50_Weights.IMAGENET1K_V2")
    assert not is_weights_name("weights/resnet50.safetensors") and not is_weights_name("w.pt")


@pytest.fixture
def torch_home(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    return tmp_path / "torch"


def test_named_weights_load_from_torchs_cache_with_their_preprocessing(torch_home):
    w = torchvision_weights("resnet18", "DEFAULT")
    assert w.name == "IMAGENET1K_V1"
    path = weights_cache_file(w)
    assert path == torch_home / "hub" / "checkpoints" / "resnet18-f37072fd.pth"
    with pytest.raises(InputError) as info:  # offline, nothing cached: one line, where and what
        load_model("resnet18", weights="IMAGENET1K_V1")
    msg = str(info.value)
    assert str(path) in msg and "resnet18-f37072fd.pth" in msg and "\n" not in msg
    torch.manual_seed(1)
    net = torchvision.models.resnet18()
    path.parent.mkdir(parents=True)
    torch.save(net.state_dict(), path)
    a = load_model("resnet18", weights="ResNet18_Weights.IMAGENET1K_V1")
    assert torch.equal(a.module.fc.weight, net.fc.weight) and a.num_classes == 1000
    assert a.mean == (0.485, 0.456, 0.406) and "IMAGENET1K_V1" in a.weights_desc
    assert weights_preprocessing("resnet18", "DEFAULT")["preset"] == "resize256-crop224"
    assert weights_preprocessing("resnet50", "IMAGENET1K_V2")["preset"] == "resize232-crop224"
    assert weights_preprocessing("resnet18", "w.safetensors") is None


def test_googlenet_weights_load_as_torchvision_builds_them(torch_home):
    w = torchvision_weights("googlenet", "IMAGENET1K_V1")
    path = weights_cache_file(w)
    path.parent.mkdir(parents=True)
    net = torchvision.models.googlenet(aux_logits=True, init_weights=False, transform_input=True)
    torch.save(net.state_dict(), path)
    a = load_model("googlenet", weights="DEFAULT")
    assert a.module.aux1 is None and a.module.transform_input
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        torch.testing.assert_close(a(x)[0], a.module(x))


def test_unknown_weight_names_list_close_matches(torch_home):
    with pytest.raises(UnknownNameError, match=r"did you mean IMAGENET1K_V2.*known: IMAGENET1K_V1"):
        load_model("resnet50", weights="IMAGENET1K_V3")
    with pytest.raises(UnknownNameError, match="not resnet50's"):
        torchvision_weights("resnet50", "ResNet18_Weights.DEFAULT")
    with pytest.raises(UnknownNameError, match="not a torchvision model"):
        torchvision_weights("timm/resnet50", "DEFAULT")
    assert "resnet50" in MODELS


def test_a_run_config_names_weights_and_takes_their_preprocessing(torch_home, tmp_path):
    from semshift.run.config import load_config

    base = {"output": "out", "model": {"name": "resnet18", "weights": "DEFAULT"},
            "data": {"id_train": {"images": "."}, "id_test": {"images": "."}}}  # fmt: skip
    cfg = load_config(base, base_dir=tmp_path)
    assert cfg.model is not None and cfg.model.weights == "DEFAULT" and cfg.model.preset is None
    bad = {**base, "model": {"name": "resnet18", "weights": "IMAGENET1K_V9"}}
    with pytest.raises(
        InputError, match=r"model\.weights: resnet18 has no weights 'IMAGENET1K_V9'"
    ):
        load_config(bad, base_dir=tmp_path)
