"""nac (neuron activation coverage, NAC-UE): known answers, agreement with pytorch-ood,
direction, fitted state, bad inputs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from scipy.stats import spearmanr  # noqa: E402
from sklearn.metrics import roc_auc_score  # noqa: E402
from torch import nn  # noqa: E402

from semshift import detectors  # noqa: E402
from semshift.demo.model import GlyphNet, GlyphNetAdapter  # noqa: E402
from semshift.detectors.nac import (  # noqa: E402
    geometric_bin_edges,
    layer_gradients,
    neuron_states,
)
from semshift.errors import InputError, NotFittedError  # noqa: E402
from semshift.features.models import HookAdapter  # noqa: E402

from .glyph_shift import batches_of, id_images, shifted_images, trained_glyph  # noqa: E402


def _glyph(num_classes: int = 4, seed: int = 0) -> GlyphNetAdapter:
    """A random GlyphNet (widths 4, 4, 8, 8) in float64."""
    torch.manual_seed(seed)
    return GlyphNetAdapter(GlyphNet(num_classes, widths=(4, 4, 8, 8)).double().eval())


def _images(n: int, seed: int) -> Any:
    return torch.from_numpy(np.random.default_rng(seed).normal(size=(n, 3, 32, 32)))


def _kl_loss(logits: Any) -> Any:
    p = torch.softmax(logits, dim=1)
    return -(torch.log(p + 1e-12)).mean(dim=1).sum()


def test_bin_edges_are_pytorch_oods() -> None:
    """Even counts: pytorch-ood's geometric edges, and every state in the same bin."""
    nac_mod = pytest.importorskip("pytorch_ood.detector.nac")
    for m in (2, 10, 50):
        edges = geometric_bin_edges(m)
        assert edges.shape == (m + 1,) and edges.dtype == torch.float64
        assert bool((edges.diff() > 0).all())
        assert edges[0] == pytest.approx(1e-6) and edges[m // 2] == pytest.approx(0.5)
        torch.testing.assert_close(edges, 1 - edges.flip(0), rtol=0, atol=1e-7)  # symmetric
        z = torch.rand(3000, generator=torch.Generator().manual_seed(m), dtype=torch.float64)
        z = torch.cat([z, z**8, 1 - z**8, 0.5 + (z - 0.5) * 1e-7, torch.tensor([0.0, 0.5, 1.0])])
        theirs = nac_mod._bin_indices_geometric(z, m)
        ours = (torch.bucketize(z.clamp(1e-6, 1 - 1e-6), edges) - 1).clamp(0, m - 1)
        assert torch.equal(ours, theirs)
        assert ours[-2] == m // 2  # a state of exactly 0.5 (no activation): the upper half
    # an odd count gets all its bins (pytorch-ood's mirror gives one fewer)
    assert geometric_bin_edges(5).shape == (6,)
    assert geometric_bin_edges(5)[2] == pytest.approx(0.5)


def test_layer_gradients_known_answer() -> None:
    """The gradient of the loss with respect to a block output, by splitting the network there."""
    model = _glyph()
    x = _images(5, 0)
    with torch.enable_grad():
        logits, outs, grads = layer_gradients(model, x)
    net = model.module
    for k, cut in enumerate((3, 7, 11, 15)):
        z = net.trunk[:cut](x).detach().requires_grad_(True)
        out = net.fc(torch.flatten(net.pool(net.trunk[cut:](z)), 1))
        (want,) = torch.autograd.grad(_kl_loss(out), z)
        torch.testing.assert_close(outs[k], z.detach(), rtol=0, atol=0)
        torch.testing.assert_close(grads[k], want, rtol=1e-10, atol=1e-14)
    torch.testing.assert_close(logits, model(x)[0])
    assert not any(m._forward_hooks for m in net.modules())  # the hooks are removed
    assert all(p.grad is None for p in net.parameters())  # nothing accumulated


def test_layer_gradients_before_an_inplace_activation() -> None:
    """A block followed by an in-place ReLU: its output and gradient are the pre-ReLU ones."""
    torch.manual_seed(1)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(inplace=True), nn.Flatten(),
                        nn.Linear(4 * 4 * 4, 3)).double()  # fmt: skip
    model = HookAdapter("seq", net, blocks=("0",))
    x = _images(6, 1)[:, :, :6, :6]
    with torch.enable_grad():
        _, (z,), (g,) = layer_gradients(model, x)
    conv = net[0](x).detach().requires_grad_(True)
    (want,) = torch.autograd.grad(_kl_loss(net[3](torch.relu(conv).flatten(1))), conv)
    assert (z < 0).any()
    torch.testing.assert_close(z, conv.detach(), rtol=0, atol=0)
    torch.testing.assert_close(g, want, rtol=1e-10, atol=1e-14)
    assert bool((g[conv.detach() < 0] == 0).all())


def test_fitted_counts_known_answer() -> None:
    model = _glyph()
    x = _images(40, 2)
    y = torch.arange(40) % 4
    det = detectors.get("nac", bins=10, alpha=30.0).fit_model(model, batches_of(x, y, 16))
    with torch.enable_grad():
        _, outs, grads = layer_gradients(model, x)
    edges = geometric_bin_edges(10)
    assert [c.shape for c in det.counts_] == [(4, 10), (4, 10), (8, 10), (8, 10)]
    for z, g, counts in zip(outs, grads, det.counts_, strict=True):
        s = neuron_states(z, g, 30.0)
        want = np.zeros_like(counts)
        for i in range(s.shape[0]):
            for j in range(s.shape[1]):
                v = float(s[i, j].clamp(1e-6, 1 - 1e-6))
                want[j, max(0, int(np.searchsorted(edges.numpy(), v, side="left")) - 1)] += 1
        np.testing.assert_array_equal(counts, want)
        assert counts.sum() == 40 * s.shape[1]
    # score by hand: sum over blocks of the mean over neurons of min(count / o_star, 1)
    xt = _images(3, 3)
    with torch.enable_grad():
        _, outs, grads = layer_gradients(model, xt)
    want_scores = np.zeros(3)
    for z, g, counts in zip(outs, grads, det.counts_, strict=True):
        s = neuron_states(z, g, 30.0).clamp(1e-6, 1 - 1e-6).numpy()
        b = np.maximum(np.searchsorted(edges.numpy(), s, side="left") - 1, 0)
        hits = np.take_along_axis(counts.T, b, axis=0)
        want_scores += np.minimum(hits / 50, 1).mean(axis=1)
    np.testing.assert_allclose(det.score_batch(model, xt).numpy(), want_scores, rtol=1e-12)


@pytest.mark.parametrize("params", [{}, {"bins": 20, "alpha": 20.0, "o_star": 5}])
def test_agrees_with_pytorch_ood(params: dict[str, Any]) -> None:
    """pytorch-ood 0.4.0's ``NACUE`` with the blocks as its ``layers`` gives minus the scores."""
    pood = pytest.importorskip("pytorch_ood.detector")
    model = _glyph()
    x = _images(96, 4)
    y = torch.arange(96) % 4
    xt = _images(40, 5)
    xt[20:] *= 2.0
    ours = detectors.get("nac", **params).fit_model(model, batches_of(x, y, 16))
    s = ours.score_batch(model, xt)
    net = model.module
    kwargs = {"m_bins": 50, "alpha": 100.0, "o_star": 50}
    kwargs.update({"m_bins": params["bins"], "alpha": params["alpha"],
                   "o_star": params["o_star"]} if params else {})  # fmt: skip
    ref = pood.NACUE(net, layers=[net.trunk[i] for i in (2, 6, 10, 14)], **kwargs)
    ref.fit([(x[lo : lo + 16], y[lo : lo + 16]) for lo in range(0, 96, 16)])
    for ours_counts, stats in zip(ours.counts_, ref._stats, strict=True):
        np.testing.assert_array_equal(ours_counts, stats.counts.numpy())
    theirs = -ref.predict(xt)
    rho = spearmanr(s.numpy(), theirs.numpy())[0]
    assert rho >= 0.999, rho
    torch.testing.assert_close(s, theirs.double(), rtol=1e-6, atol=1e-6)
    assert float(s.std()) > 0


def test_id_scores_higher_than_shifted_images() -> None:
    model = trained_glyph()
    x, y = id_images(60, seed=2)
    det = detectors.get("nac").fit_model(model, batches_of(x, y))
    x_id, _ = id_images(20, seed=1)
    s_id = det.score_batch(model, x_id).numpy()
    s_ood = det.score_batch(model, shifted_images(60, seed=3)).numpy()
    auroc = roc_auc_score(np.r_[np.ones(len(s_id)), np.zeros(len(s_ood))], np.r_[s_id, s_ood])
    assert auroc > 0.95, auroc
    assert s_id.max() <= 4.0  # at most 1 per block


def test_batch_independence_dtypes_and_saved_state(tmp_path: Any) -> None:
    model = _glyph()
    x = _images(48, 6)
    det = detectors.get("nac").fit_model(model, batches_of(x, torch.zeros(48, dtype=torch.int64)))
    xt = _images(8, 7)
    full = det.score_batch(model, xt)
    assert full.dtype == torch.float64
    torch.testing.assert_close(det.score_batch(model, xt[3:6]), full[3:6], rtol=0, atol=0)
    loaded = detectors.get("nac").load_state_file(det.save_state(tmp_path / "nac.npz"))
    torch.testing.assert_close(loaded.score_batch(model, xt), full, rtol=0, atol=0)
    with torch.inference_mode():
        torch.testing.assert_close(det.score_batch(model, xt), full, rtol=0, atol=0)
    model.module.float()
    s32 = det.score_batch(model, xt.float())
    assert s32.dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):  # full precision under mixed precision
        torch.testing.assert_close(det.score_batch(model, xt.float()), s32, rtol=0, atol=0)
    # a float32 state may fall in a neighbouring bin now and then
    assert np.abs(s32.numpy() - full.numpy()).mean() < 0.02


def test_bad_inputs() -> None:
    for bad, message in [
        ({"bins": 1}, r"^nac: bins must be an integer >= 2, got 1$"),
        ({"alpha": 0}, r"^nac: alpha must be a number > 0, got 0$"),
        ({"o_star": 0.5}, r"^nac: o_star must be an integer >= 1, got 0.5$"),
        ({"m_bins": 50}, r"^nac has no hyperparameter m_bins; accepted: "),
    ]:
        with pytest.raises(InputError, match=message):
            detectors.get("nac", **bad)
    model = _glyph()
    x = _images(8, 8)
    with pytest.raises(NotFittedError, match=r"^nac\.score_batch: fit it"):
        detectors.get("nac").score_batch(model, x)
    with pytest.raises(InputError, match=r"^nac\.fit_model: no training image"):
        detectors.get("nac").fit_model(model, lambda: iter(()))
    det = detectors.get("nac").fit_model(model, batches_of(x, torch.zeros(8, dtype=torch.int64)))
    torch.manual_seed(0)
    wider = GlyphNetAdapter(GlyphNet(4, widths=(4, 4, 8, 16)).double().eval())
    with pytest.raises(InputError, match=r"^nac\.score_batch: the model's block outputs do not"):
        det.score_batch(wider, x)
    with pytest.raises(InputError, match=r"^nac\.score_batch: x must be a floating-point"):
        det.score_batch(model, x[0])


def test_doctests() -> None:
    import doctest

    import semshift.detectors.nac as module

    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
