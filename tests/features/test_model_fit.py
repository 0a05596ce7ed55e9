"""Model-level detectors that read several layers and learn from ID training images.

The machinery (block names and layer outputs of the adapters, ``fit_model``, the fitted
state's save and load, :func:`fit_model_detectors` over an image source) is checked with a
small detector defined here: the negative distance of an image's pooled block outputs to the
nearest class mean of the training images.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from semshift.detectors.model_level import ModelLevelDetector, pool_layer  # noqa: E402
from semshift.errors import InputError, NotFittedError, UnknownNameError  # noqa: E402
from semshift.features.models import HookAdapter, TorchvisionAdapter  # noqa: E402


class NearestMean(ModelLevelDetector):
    """``-min_c ||g(x) - mu_c||`` with g the pooled outputs of every block, concatenated."""

    name = "test_nearest_mean"
    model_requires = frozenset({"layers"})
    fits = True
    state_names: ClassVar[tuple[str, ...]] = ("means_",)

    def __init__(self, *, scale: float = 1.0) -> None:
        self.scale = scale

    @staticmethod
    def _g(model: Any, x: Any) -> Any:
        _, _, outs = model.layer_outputs(x)
        return torch.cat([pool_layer(o) for o in outs], dim=1)

    def _fit_model(self, model: Any, batches: Any) -> None:
        sums: Any = None
        counts: Any = None
        with torch.no_grad():
            for x, y in batches():
                g = self._g(model, x).double()
                if sums is None:
                    sums = torch.zeros(model.num_classes, g.shape[1], dtype=torch.float64)
                    counts = torch.zeros(model.num_classes, dtype=torch.float64)
                sums.index_add_(0, y.cpu(), g.cpu())
                counts += torch.bincount(y.cpu(), minlength=model.num_classes)
        self.means_ = (sums / counts.clamp(min=1)[:, None]).numpy()

    def _score_batch(self, model: Any, x: Any) -> Any:
        with torch.no_grad():
            g = self._g(model, x)
            mu = self.fitted_tensor("means_", g)
            return -self.scale * torch.cdist(g.to(mu.dtype), mu).min(dim=1).values


def _glyph(num_classes: int = 3) -> Any:
    from semshift.demo.model import GlyphNet, GlyphNetAdapter

    torch.manual_seed(0)
    return GlyphNetAdapter(GlyphNet(num_classes, widths=(4, 4, 8, 8)))


def _write(root: Any, classes: dict[str, int], seed: int = 0, shift: int = 0) -> None:
    from PIL import Image

    rng = np.random.default_rng(seed)
    for k, (c, n) in enumerate(classes.items()):
        (root / c).mkdir(parents=True)
        for i in range(n):
            base = rng.integers(0, 60, (32, 32, 3)) + 60 * k + shift
            Image.fromarray(np.clip(base, 0, 255).astype(np.uint8)).save(root / c / f"{i}.png")


def test_block_names_and_layer_outputs_of_the_adapters() -> None:
    glyph = _glyph()
    assert glyph.block_names() == ("trunk.2", "trunk.6", "trunk.10", "trunk.14")
    x = torch.randn(2, 3, 32, 32)
    logits, h, outs = glyph.layer_outputs(x)
    assert [tuple(o.shape) for o in outs] == [(2, 4, 32, 32), (2, 4, 16, 16), (2, 8, 8, 8),
                                              (2, 8, 4, 4)]  # fmt: skip
    want_logits, want_h = glyph(x)
    torch.testing.assert_close(logits, want_logits)
    torch.testing.assert_close(h, want_h)
    torch.testing.assert_close(pool_layer(outs[-1]), h)  # the last block pooled is h
    # the hooks are removed: a later forward leaves no trace
    assert not any(m._forward_hooks for m in glyph.module.modules())

    from torchvision.models import resnet18

    rn = TorchvisionAdapter("resnet18", resnet18(num_classes=5))
    assert rn.block_names() == ("layer1", "layer2", "layer3", "layer4")
    _, h, outs = rn.layer_outputs(torch.randn(1, 3, 64, 64))
    assert [o.shape[1] for o in outs] == [64, 128, 256, 512]
    torch.testing.assert_close(pool_layer(outs[-1]), h)


def test_layer_outputs_are_copies_in_the_autograd_graph() -> None:
    """A later in-place ReLU cannot change a grabbed output, and gradients flow through it."""
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(inplace=True), nn.Flatten(), nn.LazyLinear(2))
    net(torch.randn(1, 3, 6, 6))
    model = HookAdapter("seq", net, blocks=("0", "1"))
    x = torch.randn(2, 3, 6, 6, requires_grad=True)
    _, _, (conv, relu) = model.layer_outputs(x)
    assert (conv < 0).any() and (relu >= 0).all()  # the conv output kept its negative values
    conv.sum().backward()
    assert x.grad is not None and float(x.grad.abs().sum()) > 0
    with pytest.raises(UnknownNameError, match="no module named 'nope' for `blocks`"):
        HookAdapter("seq", net, blocks=("nope",))
    with pytest.raises(InputError, match="names no blocks"):
        HookAdapter("seq", net).layer_outputs(x)
    reason = NearestMean().unavailable(HookAdapter("seq", net))
    assert reason is not None and "names no blocks" in reason


def test_fit_save_load_and_refusals(tmp_path) -> None:
    model = _glyph()
    x = torch.randn(12, 3, 32, 32)
    y = torch.arange(12) % 3

    def batches() -> Any:
        for lo in (0, 5):
            yield x[lo : lo + 7 if lo else 5], y[lo : lo + 7 if lo else 5]

    det = NearestMean()
    assert not det.is_fitted
    with pytest.raises(NotFittedError, match=r"^test_nearest_mean\.score_batch: fit it"):
        det.score_batch(model, x)
    det.fit_model(model, batches, source="abc")
    with torch.no_grad():
        g = NearestMean._g(model, x).double()
    want = np.stack([g[y == c].mean(0).numpy() for c in range(3)])
    np.testing.assert_allclose(det.means_, want, rtol=1e-12)
    scores = det.score_batch(model, x)
    assert scores.shape == (12,)
    desc = det.describe()
    assert desc["fit"]["source"] == "abc" and len(desc["fit"]["state"]) == 16

    path = det.save_state(tmp_path / "state.npz")
    loaded = NearestMean().load_state_file(path)
    torch.testing.assert_close(loaded.score_batch(model, x), scores, rtol=0, atol=0)
    assert loaded.describe() == desc
    with pytest.raises(InputError, match=r"fitted with \{'scale': 1.0\}, asked for"):
        NearestMean(scale=2.0).load_state_file(path)
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(InputError, match="not a fitted detector state"):
        NearestMean().load_state_file(tmp_path / "junk.npz")
    with pytest.raises(InputError, match="holds NaN"):
        NearestMean().load_state({"means_": np.full((3, 24), np.nan)})
    with pytest.raises(InputError, match="has no array 'means_'"):
        NearestMean().load_state({"other": np.zeros(2)})


def test_fit_model_detectors_reads_the_labelled_images(tmp_path) -> None:
    from semshift.features.data import ImageDataset, image_folder
    from semshift.features.extract import extract
    from semshift.features.model_detectors import fit_model_detectors, fit_subset
    from semshift.features.store import open_store

    _write(tmp_path / "train", {"a": 4, "b": 4, "c": 4})
    _write(tmp_path / "ood", {"a": 3}, seed=1, shift=90)
    model = _glyph()
    src = image_folder(tmp_path / "train")
    det = NearestMean()
    fit_model_detectors([det], model, src, preset="resize32-crop32", batch_size=5, device="cpu")
    ds = ImageDataset(src, "resize32-crop32", model.mean, model.std)
    x = torch.stack([ds[i][0] for i in range(len(ds))])
    y = torch.as_tensor(src.labels)
    with torch.no_grad():
        g = NearestMean._g(model, x).double()
    want = np.stack([g[y == c].mean(0).numpy() for c in range(3)])
    np.testing.assert_allclose(det.means_, want, rtol=1e-6)
    assert det.describe()["fit"]["source"] == src.fingerprint()

    # evenly spaced subset
    sub = fit_subset(src, 4)
    assert [src.names.index(n) for n in sub.names] == [0, 3, 7, 11]
    with pytest.raises(InputError, match="max_images must be >= 1"):
        fit_subset(src, 0)
    # a label the head cannot hold
    with pytest.raises(InputError, match=r"label 2 outside the head of 'demo-glyphnet' \(2 "):
        fit_model_detectors([NearestMean()], _glyph(2), src, preset="resize32-crop32")

    # the fitted detector scores in extraction; the OOD images lie further from the means
    for name in ("train", "ood"):
        extract(model, image_folder(tmp_path / name), tmp_path / f"s_{name}",
                preset="resize32-crop32", device="cpu", scores=(det,), progress=False,
                fsync=False)  # fmt: skip
    id_s = open_store(tmp_path / "s_train").arrays("test_nearest_mean")[0]
    ood_s = open_store(tmp_path / "s_ood").arrays("test_nearest_mean")[0]
    assert id_s.min() > ood_s.max()
    assert open_store(tmp_path / "s_ood").meta["scores"]["test_nearest_mean"] == det.describe()
