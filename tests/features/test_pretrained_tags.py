"""timm and open_clip pretrained weights by their libraries' own names, from their own caches.

The tests point the Hugging Face cache (``HF_HOME`` / ``HF_HUB_CACHE``) at a temporary folder and
write a file where ``huggingface_hub`` looks for it (``models--{org}--{name}/snapshots/<commit>/``
and ``refs/main`` holding the commit), then check that loading reads exactly that file; nothing
touches the network.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from semshift.errors import InputError, UnknownNameError
from semshift.features.models import (
    hf_cache_dir,
    is_weights_name,
    load_model,
    named_weights_library,
    resolve_pretrained,
    weights_preprocessing,
)

from .conftest import TINY_CLIP

torch.set_num_threads(1)

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    return tmp_path / "hf" / "hub"


def place(cache: Path, repo_id: str, filename: str, state: dict[str, torch.Tensor]) -> Path:
    """Write ``state`` where huggingface_hub's cache keeps ``filename`` of ``repo_id``."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    path = repo / "snapshots" / COMMIT / filename
    path.parent.mkdir(parents=True)
    save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    return path


def test_names_are_dispatched_per_namespace(tmp_path, monkeypatch):
    assert named_weights_library("timm/resnet18", "a1_in1k") == "timm"
    assert named_weights_library("timm/resnet18", "timm/resnet18.a1_in1k") == "timm"
    assert named_weights_library("timm/resnet18", "pretrained") == "timm"
    assert named_weights_library("open_clip/ViT-B-32", "laion2b_s34b_b79k") == "open_clip"
    assert named_weights_library("resnet18", "IMAGENET1K_V1") == "torchvision"
    assert named_weights_library("resnet18", "a1_in1k") is None  # not a torchvision name
    for spec in ("w.safetensors", "ckpt/r18.pth", "/abs/model.bin"):
        assert named_weights_library("timm/resnet18", spec) is None
        assert named_weights_library("open_clip/ViT-B-32", spec) is None
    assert is_weights_name("a1_in1k", "timm/resnet18") and not is_weights_name("a1_in1k")
    # a local file that exists always wins over a tag of the same spelling
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(3)
    net = load_model("timm/test_resnet", random_init=True, seed=3, num_classes=7).module
    torch.save(net.state_dict(), "r160_in1k")
    a = load_model("timm/test_resnet", weights="r160_in1k", num_classes=7)
    assert torch.equal(a.module.fc.weight, net.fc.weight) and a.weights_desc == "r160_in1k"


def test_timm_tag_loads_from_the_hf_cache_with_its_preprocessing(hf_cache):
    import timm

    assert "test_resnet.r160_in1k" in timm.list_pretrained("test_*")
    ref = resolve_pretrained("timm/test_resnet", "r160_in1k")
    assert ref.repo_id == "timm/test_resnet.r160_in1k"
    assert ref.filenames == ("model.safetensors", "pytorch_model.bin")
    assert hf_cache_dir() == hf_cache and ref.cached_file() is None
    with pytest.raises(InputError) as info:  # offline, nothing cached: one line, where and what
        load_model("timm/test_resnet", weights="r160_in1k")
    msg = str(info.value)
    repo = hf_cache / "models--timm--test_resnet.r160_in1k"
    assert f"{repo}/snapshots/<commit>/model.safetensors" in msg and "\n" not in msg
    assert f"{repo}/refs/main" in msg and "huggingface-cli download timm/test_resnet" in msg

    torch.manual_seed(1)
    net = timm.create_model("test_resnet", pretrained=False)
    path = place(hf_cache, "timm/test_resnet.r160_in1k", "model.safetensors", net.state_dict())
    assert ref.cached_file() == path
    for spec in ("r160_in1k", "test_resnet.r160_in1k", "timm/test_resnet.r160_in1k", "pretrained"):
        a = load_model("timm/test_resnet", weights=spec, num_classes=5)  # head: the tag's 1000
        assert torch.equal(a.module.fc.weight, net.fc.weight) and a.num_classes == 1000
        assert torch.equal(a.module.conv1[0].weight, net.conv1[0].weight)
        assert a.mean == (0.5, 0.5, 0.5) and a.std == (0.5, 0.5, 0.5) and a.input_size == 160
        assert "timm/test_resnet.r160_in1k" in a.weights_desc and str(path) in a.weights_desc
    # input_size 160, crop_pct 0.95: resize floor(160 / 0.95) = 168 (as timm's transforms)
    pre = weights_preprocessing("timm/test_resnet", "r160_in1k")
    assert pre == {"preset": "resize168-crop160", "mean": (0.5, 0.5, 0.5), "std": (0.5, 0.5, 0.5)}
    # resnet50.a1_in1k: 224 px at crop_pct 0.95, ImageNet statistics
    pre = weights_preprocessing("timm/resnet50", "a1_in1k")
    assert pre is not None and pre["preset"] == "resize235-crop224"
    assert pre["mean"] == (0.485, 0.456, 0.406)
    assert weights_preprocessing("timm/resnet50", "w.safetensors") is None


def test_timm_pytorch_model_bin_is_read_without_unpickling(hf_cache):
    import timm

    torch.manual_seed(2)
    net = timm.create_model("test_resnet", pretrained=False)
    repo = hf_cache / "models--timm--test_resnet.r160_in1k"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    path = repo / "snapshots" / COMMIT / "pytorch_model.bin"
    path.parent.mkdir(parents=True)
    torch.save(net.state_dict(), path)
    a = load_model("timm/test_resnet", weights="pretrained")
    assert torch.equal(a.module.fc.bias, net.fc.bias) and str(path) in a.weights_desc


def test_unknown_timm_tags_list_close_matches(hf_cache):
    with pytest.raises(
        UnknownNameError, match=r"no pretrained tag 'r161_in1k'.*close: test_resnet\.r160_in1k"
    ):
        load_model("timm/test_resnet", weights="r161_in1k")
    with pytest.raises(
        UnknownNameError, match=r"are for resnet18, not resnet50.*resnet50\.a1_in1k"
    ):
        resolve_pretrained("timm/resnet50", "resnet18.a1_in1k")
    with pytest.raises(UnknownNameError, match="unknown timm model 'resnet5000'"):
        resolve_pretrained("timm/resnet5000", "a1_in1k")


@pytest.fixture
def tiny_clip_tag(monkeypatch):
    """A tiny registered CLIP architecture with one pretrained tag (open_clip keeps tags only
    for its built-in architectures: its two public look-ups are extended here)."""
    import open_clip

    from semshift.features.models import register_open_clip_config

    arch = "semshift-tags-clip"
    register_open_clip_config(arch, TINY_CLIP)
    cfg = {"url": "", "hf_hub": "semshift/tiny-clip-test/", "mean": (0.5, 0.4, 0.3),
           "std": (0.2, 0.2, 0.2), "resize_mode": "shortest"}  # fmt: skip
    real_cfg, real_tags = open_clip.get_pretrained_cfg, open_clip.list_pretrained_tags_by_model
    monkeypatch.setattr(
        open_clip, "get_pretrained_cfg",
        lambda m, t: dict(cfg) if (m, t) == (arch, "tinytag") else real_cfg(m, t),
    )  # fmt: skip
    monkeypatch.setattr(
        open_clip, "list_pretrained_tags_by_model",
        lambda m: ["tinytag"] if m == arch else real_tags(m),
    )  # fmt: skip
    return arch


def test_open_clip_tag_loads_from_the_hf_cache_and_keeps_the_zero_shot_head(
    hf_cache, tiny_clip_tag
):
    import open_clip

    name = f"open_clip/{tiny_clip_tag}"
    ref = resolve_pretrained(name, "tinytag")
    assert ref.repo_id == "semshift/tiny-clip-test"
    assert ref.filenames == ("open_clip_model.safetensors", "open_clip_pytorch_model.bin")
    with pytest.raises(InputError, match="models--semshift--tiny-clip-test/snapshots/<commit>"):
        load_model(name, weights="tinytag", classnames=["cat", "dog"])
    torch.manual_seed(4)
    net = open_clip.create_model(tiny_clip_tag, pretrained=None)
    path = place(hf_cache, ref.repo_id, ref.filenames[0], net.state_dict())
    a = load_model(name, weights="tinytag", classnames=["cat", "dog", "owl"])
    for (k, v), (k2, v2) in zip(
        a.module.state_dict().items(), net.state_dict().items(), strict=True
    ):
        assert k == k2 and torch.equal(v, v2), k
    assert a.mean == (0.5, 0.4, 0.3) and a.std == (0.2, 0.2, 0.2) and a.input_size == 32
    assert a.num_classes == 3 and a.classnames == ["cat", "dog", "owl"]
    assert str(path) in a.weights_desc
    pre = weights_preprocessing(name, "tinytag")
    assert pre == {"preset": "resize32-crop32", "mean": (0.5, 0.4, 0.3), "std": (0.2, 0.2, 0.2)}
    with pytest.raises(UnknownNameError, match=r"no pretrained tag 'tinytags'.*close: tinytag"):
        load_model(name, weights="tinytags", classnames=["cat"])


def test_open_clip_tag_of_a_real_architecture_resolves_to_its_hf_file(hf_cache):
    """ViT-B-32 is too large to build in a unit test: its resolution and cache look-up are
    checked with a tiny stand-in file, and the error paths with nothing cached."""
    ref = resolve_pretrained("open_clip/ViT-B-32", "laion2b_s34b_b79k")
    assert ref.repo_id == "laion/CLIP-ViT-B-32-laion2B-s34B-b79K"
    assert ref.preset == "resize224-crop224" and ref.mean == (0.48145466, 0.4578275, 0.40821073)
    with pytest.raises(InputError) as info:
        load_model("open_clip/ViT-B-32", weights="laion2b_s34b_b79k", classnames=["cat"])
    msg = str(info.value)
    repo = hf_cache / "models--laion--CLIP-ViT-B-32-laion2B-s34B-b79K"
    assert f"{repo}/snapshots/<commit>/open_clip_model.safetensors" in msg and "\n" not in msg
    path = place(hf_cache, ref.repo_id, "open_clip_model.safetensors", {"x": torch.zeros(1)})
    assert ref.cached_file() == path
    assert resolve_pretrained("open_clip/RN50", "openai").options == {"force_quick_gelu": True}
    with pytest.raises(UnknownNameError, match=r"close: laion2b_s34b_b79k.*known: openai"):
        resolve_pretrained("open_clip/ViT-B-32", "laion2b_s34b")


def test_a_run_config_validates_a_timm_tag_at_load_time(hf_cache, tmp_path):
    from semshift.run.config import load_config

    base = {"output": "out", "model": {"name": "timm/test_resnet", "weights": "r160_in1k"},
            "data": {"id_train": {"images": "."}, "id_test": {"images": "."}}}  # fmt: skip
    cfg = load_config(base, base_dir=tmp_path)  # nothing cached yet: resolving needs no file
    assert cfg.model is not None and cfg.model.weights == "r160_in1k"
    bad = {**base, "model": {"name": "timm/test_resnet", "weights": "r161_in1k"}}
    with pytest.raises(InputError, match=r"model\.weights: .*no pretrained tag 'r161_in1k'"):
        load_config(bad, base_dir=tmp_path)
    missing = {**base, "model": {"name": "timm/test_resnet", "weights": "w.safetensors"}}
    with pytest.raises(InputError, match=r"model\.weights: weights file .*w\.safetensors"):
        load_config(missing, base_dir=tmp_path)


def test_a_run_keys_timm_weights_by_the_cached_file_and_takes_their_preset(hf_cache, tmp_path):
    """The run's extraction stage: the weights checksum is the cached file's, once it is there,
    and the default preset is the tag's."""
    from types import SimpleNamespace

    import timm

    from semshift.run.config import load_config
    from semshift.run.extract import _Extractor

    base = {"output": "out", "model": {"name": "timm/test_resnet", "weights": "r160_in1k"},
            "data": {"id_train": {"images": "."}, "id_test": {"images": "."}}}  # fmt: skip
    cfg = load_config(base, base_dir=tmp_path)
    ctx = SimpleNamespace(cfg=cfg, cache=SimpleNamespace(file_checksum=lambda p: f"sum of {p}"))
    ex = _Extractor(ctx, None)  # type: ignore[arg-type]
    assert ex.preset() == "resize168-crop160"
    assert ex.weights_id() == "r160_in1k"  # nothing cached: the name (loading fails naming it)
    net = timm.create_model("test_resnet", pretrained=False)
    path = place(hf_cache, "timm/test_resnet.r160_in1k", "model.safetensors", net.state_dict())
    assert ex.weights_id() == f"sum of {path}"
