"""Backbone-only initialisation (:func:`load_backbone`) from self-supervised checkpoints built
here with a known answer: a torchvision ResNet-18 re-keyed as MoCo v2, v3, DINO and SimCLR save
them; every backbone tensor must arrive bit for bit, the head must be the seeded fresh init."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from torch import nn
from torchvision.models import resnet18

from semshift.errors import InputError
from semshift.features.models import BackboneLoad, load_backbone


def _source(seed: int = 1) -> dict[str, torch.Tensor]:
    """A ResNet-18 state dict of 10 classes with non-default values everywhere (the BatchNorm
    statistics and batch counters included), so a tensor left at its init is caught."""
    torch.manual_seed(seed)
    net = resnet18(num_classes=10)
    gen = torch.Generator().manual_seed(seed)
    state = {}
    for k, v in net.state_dict().items():
        if v.is_floating_point():
            state[k] = torch.randn(v.shape, generator=gen).abs() + 0.1
        else:
            state[k] = torch.full_like(v, 7)
    return state


def _moco_v2(backbone: dict[str, torch.Tensor]) -> dict[str, object]:
    """MoCo v2's checkpoint layout: ``state_dict`` of ``module.encoder_q.*`` with a 2-layer MLP
    projection head ``fc.0`` / ``fc.2``, the key encoder, the queue and its pointer."""
    sd: dict[str, torch.Tensor] = {}
    for prefix in ("module.encoder_q.", "module.encoder_k."):
        for k, v in backbone.items():
            if not k.startswith("fc."):
                sd[prefix + k] = v.clone()
        sd[prefix + "fc.0.weight"] = torch.randn(512, 512)
        sd[prefix + "fc.0.bias"] = torch.randn(512)
        sd[prefix + "fc.2.weight"] = torch.randn(128, 512)
        sd[prefix + "fc.2.bias"] = torch.randn(128)
    sd["module.queue"] = torch.randn(128, 64)
    sd["module.queue_ptr"] = torch.zeros(1, dtype=torch.long)
    return {"epoch": 200, "arch": "resnet18", "state_dict": sd}


MOCO_IGNORED = sorted(
    [f"module.encoder_q.fc.{i}.{p}" for i in (0, 2) for p in ("weight", "bias")]
    + [f"module.encoder_k.{k}" for k in _source() if not k.startswith("fc.")]
    + [f"module.encoder_k.fc.{i}.{p}" for i in (0, 2) for p in ("weight", "bias")]
    + ["module.queue", "module.queue_ptr"]
)


def _fresh_head(seed: int, classes: int = 5) -> nn.Linear:
    torch.manual_seed(seed)
    return nn.Linear(512, classes)


def _check(net: nn.Module, backbone: dict[str, torch.Tensor], seed: int) -> None:
    own = net.state_dict()
    for k, v in backbone.items():
        if not k.startswith("fc."):
            assert own[k].dtype == v.dtype and torch.equal(own[k], v), k
    ref = _fresh_head(seed)
    assert torch.equal(own["fc.weight"], ref.weight) and torch.equal(own["fc.bias"], ref.bias)


def test_moco_v2_checkpoint_loads_the_query_encoder_and_a_fresh_head(tmp_path):
    backbone = _source()
    path = tmp_path / "moco_v2_800ep.pth.tar"
    torch.save(_moco_v2(backbone), path)
    net = resnet18(num_classes=5)
    rng_before = torch.get_rng_state()
    report = load_backbone(net, path, head="fc", seed=3)
    assert torch.equal(torch.get_rng_state(), rng_before)  # the global RNG is left alone
    _check(net, backbone, seed=3)
    assert isinstance(report, BackboneLoad) and report.prefix == "encoder_q."
    assert sorted(report.loaded) == sorted(k for k in backbone if not k.startswith("fc."))
    assert report.head == ("fc.weight", "fc.bias")
    assert sorted(report.ignored) == MOCO_IGNORED
    line = report.summary()
    assert "\n" not in line and f"{len(backbone) - 2} tensors loaded (under 'encoder_q.')" in line
    assert f"head re-initialised (seed 3): fc.weight, fc.bias; {len(MOCO_IGNORED)} checkpoint" in (
        line
    )
    assert line.endswith(
        "ignored (module.encoder_q.fc.* (4), module.encoder_k.* (124), module.queue, "
        "module.queue_ptr)"
    )
    assert report.to_dict()["loaded"] == len(backbone) - 2
    # the head found by default (the last nn.Linear) and given as the module: the same
    for head in (None, "fc"):
        other = resnet18(num_classes=5)
        assert load_backbone(other, path, head=head if head else other.fc, seed=3) == report
        assert _same(other, net)


def _same(a: nn.Module, b: nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return list(sa) == list(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)


def _rekey(backbone: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {prefix + k: v for k, v in backbone.items() if not k.startswith("fc.")}


@pytest.mark.parametrize(
    ("layout", "prefix"),
    [
        (lambda b: {"state_dict": _rekey(b, "module.base_encoder.")}, "base_encoder."),  # v3
        (lambda b: _rekey(b, "base_encoder."), "base_encoder."),
        (lambda b: _rekey(b, "encoder_q."), "encoder_q."),  # MoCo v1/v2, one GPU
        (lambda b: {"teacher": 0, "model": _rekey(b, "teacher.backbone.")}, "teacher.backbone."),
        (lambda b: {"network": {"state_dict": _rekey(b, "student.")}}, "student."),
        (lambda b: {"model": _rekey(b, "module.backbone.")}, "backbone."),  # DINO student
        (lambda b: _rekey(b, "encoder."), "encoder."),  # SimCLR-style
        (lambda b: dict(b), ""),  # a supervised checkpoint of another head size
    ],
)
def test_self_supervised_key_layouts_are_mapped(tmp_path, layout, prefix):
    backbone = _source(seed=2)
    path = tmp_path / "ckpt.pth"
    torch.save(layout(backbone), path)
    net = resnet18(num_classes=5)
    report = load_backbone(net, path, seed=0)
    _check(net, backbone, seed=0)
    assert report.prefix == prefix
    assert report.ignored == (("fc.weight", "fc.bias") if prefix == "" else ())


def test_a_mapping_and_a_safetensors_file_are_taken_too(tmp_path):
    backbone = _source(seed=4)
    moco = _rekey(backbone, "module.encoder_q.")
    net = resnet18(num_classes=5)
    assert load_backbone(net, moco, seed=1).source == "<state dict>"
    _check(net, backbone, seed=1)
    path = tmp_path / "moco.safetensors"
    save_file(moco, str(path))
    net = resnet18(num_classes=5)
    assert load_backbone(net, path, seed=1).prefix == "encoder_q."
    _check(net, backbone, seed=1)


def _refused(module: nn.Module, path: Path) -> str:
    before = {k: v.clone() for k, v in module.state_dict().items()}
    with pytest.raises(InputError) as exc:
        load_backbone(module, path)
    after = module.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # nothing was changed
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_a_missing_backbone_tensor_is_refused_in_one_line_naming_it(tmp_path):
    ckpt = _moco_v2(_source())
    state = ckpt["state_dict"]
    assert isinstance(state, dict)
    del state["module.encoder_q.layer3.1.bn2.running_var"]
    path = tmp_path / "moco.pth"
    torch.save(ckpt, path)
    msg = _refused(resnet18(num_classes=5), path)
    assert "backbone under 'encoder_q.': of its 120 backbone tensors 1 missing " in msg
    assert "(layer3.1.bn2.running_var)" in msg and str(path) in msg


def test_a_backbone_tensor_of_another_shape_is_refused_in_one_line_naming_it(tmp_path):
    ckpt = _moco_v2(_source())
    state = ckpt["state_dict"]
    assert isinstance(state, dict)
    state["module.encoder_q.conv1.weight"] = torch.randn(64, 3, 3, 3)
    path = tmp_path / "moco.pth"
    torch.save(ckpt, path)
    msg = _refused(resnet18(num_classes=5), path)
    assert "1 of another shape (conv1.weight (64, 3, 3, 3) vs model (64, 3, 7, 7))" in msg


def test_a_checkpoint_of_another_model_is_refused(tmp_path):
    path = tmp_path / "other.pth"
    torch.save({"state_dict": {"module.encoder_q.stem.w": torch.ones(2)}}, path)
    msg = _refused(resnet18(num_classes=5), path)
    assert "holds none of ResNet's 120 backbone tensors under any known prefix" in msg
    assert "module.encoder_q.stem.w" in msg


class _Opaque:
    """An object a checkpoint may pickle (e.g. argparse's Namespace); never unpickled."""

    def __init__(self) -> None:
        self.lr = 0.03


def test_a_pickled_object_is_refused_never_unpickled(tmp_path):
    ckpt = _moco_v2(_source())
    ckpt["args"] = _Opaque()
    path = tmp_path / "moco_args.pth"
    torch.save(ckpt, path)
    msg = _refused(resnet18(num_classes=5), path)
    assert "refused, it needs unpickling arbitrary Python objects" in msg


def test_a_bad_head_name_is_refused(tmp_path):
    net = resnet18(num_classes=5)
    with pytest.raises(InputError, match="has no submodule 'head' to take as the head"):
        load_backbone(net, _rekey(_source(), ""), head="head")
    with pytest.raises(InputError, match="not a submodule"):
        load_backbone(net, _rekey(_source(), ""), head=nn.Linear(2, 2))


def test_a_sequential_head_is_reset_with_its_own_init():
    # a two-layer head (nn.Sequential "head"): both layers re-initialised, the rest loaded
    def build() -> nn.Module:
        return nn.Sequential(
            collections.OrderedDict(
                body=nn.Conv2d(3, 4, 3),
                pool=nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten()),
                head=nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2)),
            )
        )

    src = {"body.weight": torch.randn(4, 3, 3, 3), "body.bias": torch.randn(4)}
    net = build()
    report = load_backbone(net, {"model": {"backbone." + k: v for k, v in src.items()}},
                           head="head", seed=5)  # fmt: skip
    assert report.head == ("head.0.weight", "head.0.bias", "head.2.weight", "head.2.bias")
    torch.manual_seed(5)
    ref = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2))
    assert _same(net.head, ref)
    assert torch.equal(net.body.weight, src["body.weight"])
