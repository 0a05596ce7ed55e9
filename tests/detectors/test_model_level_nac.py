"""nac (neuron activation coverage, NAC-UE): known answers, agreement with pytorch-ood and
with a port of the authors' released code, direction, fitted state, bad inputs."""

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
    released_bin_edges,
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


# ------------------------------------------------------------------ variant="released"
def _sigmoid(v: Any) -> Any:
    return 1.0 / (1.0 + np.exp(-v))


def test_released_bin_edges_known_values() -> None:
    np.testing.assert_array_equal(released_bin_edges(4).numpy(), [0.0, 0.5, 1.01, 1.2])
    inner = np.log10(1 + (np.sqrt(1e3) - 1) / 2) / 3  # log_1000 of the middle of 1 .. sqrt(1000)
    np.testing.assert_allclose(
        released_bin_edges(6).numpy(), [0.0, inner, 0.5, 1 - inner, 1.01, 1.2], rtol=1e-15
    )
    e = released_bin_edges(50).numpy()
    assert e.shape == (50,) and (np.diff(e) > 0).all() and e[24] == 0.5
    np.testing.assert_allclose(e[24:49][:-1], 1 - e[:25][::-1][:-1], rtol=0, atol=1e-15)
    widths = np.diff(e[:25])
    assert widths[0] > 0.1 and widths[-1] < 0.01  # wide near 0, dense near 0.5


def test_released_states_sum_before_the_product() -> None:
    """Known answer: the output on one position, the gradient on another."""
    z = torch.zeros(1, 1, 2, 2, dtype=torch.float64)
    g = torch.zeros_like(z)
    z[0, 0, 1, 1], g[0, 0, 0, 0] = 1.0, 1.0
    assert float(neuron_states(z, g, 3.0)) == 0.5  # mean of the product: 0
    assert float(neuron_states(z, g, 3.0, variant="released")) == pytest.approx(_sigmoid(3.0))
    tokens = torch.arange(6.0, dtype=torch.float64).reshape(1, 3, 2)  # (n, L, D)
    want = _sigmoid(0.1 * tokens.sum(1).numpy() * tokens.sum(1).numpy())
    np.testing.assert_allclose(neuron_states(tokens, tokens, 0.1, variant="released"), want)
    vec = torch.tensor([[0.5, -2.0]], dtype=torch.float64)  # a vector: the two agree
    torch.testing.assert_close(neuron_states(vec, vec, 2.0, variant="released"),
                               neuron_states(vec, vec, 2.0))  # fmt: skip


def test_released_loss_is_log_softmax() -> None:
    """eps=0: the gradient at the logits is p - 1/C; pytorch-ood's 1e-12 inside the log takes
    the classes of probability far below 1e-12 out of it (a confident network)."""
    net = nn.Sequential(nn.Linear(2, 4)).double()
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor([[0.0, 0.0], [40.0, 0.0], [-40.0, 0.0], [0.0, 5.0]]))
        net[0].bias.zero_()
    model = HookAdapter("lin", net, blocks=("0",))
    x = torch.tensor([[1.0, 0.2], [0.0, 1.0]], dtype=torch.float64)
    with torch.enable_grad():
        logits, _, (g,) = layer_gradients(model, x, eps=0.0)
        _, _, (g_pood,) = layer_gradients(model, x)
    torch.testing.assert_close(g, torch.softmax(logits, 1) - 0.25, rtol=1e-12, atol=1e-15)
    assert torch.softmax(logits, 1)[0, 2] < 1e-30
    assert abs(float(g_pood[0, 2]) - float(g[0, 2])) > 0.2  # -1/4 against ~0


def test_released_known_answer_by_hand() -> None:
    """A 1 x 1 convolution, average pool and linear head, the gradients written out: block
    states from the spatial sums, the released bins, the mean over the two blocks."""
    torch.manual_seed(3)
    net = nn.Sequential(nn.Conv2d(3, 2, 1, bias=False), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                        nn.Linear(2, 3)).double()  # fmt: skip
    model = HookAdapter("lin", net, blocks=("0", "3"))
    alpha, bins, o_star = 30.0, 6, 3
    x_fit, x_test = _images(30, 11)[:, :, :4, :4], _images(8, 12)[:, :, :4, :4]

    def states(x: Any) -> list[np.ndarray]:
        with torch.no_grad():
            z, logits = net[0](x).numpy(), net(x).numpy()
        p = np.exp(logits - logits.max(1, keepdims=True))
        dlogits = p / p.sum(1, keepdims=True) - 1 / 3  # d(-mean_c log_softmax_c) / d logits
        # the pool spreads dz = dlogits @ W / 16 over the 16 positions: it sums to dlogits @ W
        s_conv = _sigmoid(alpha * z.sum(axis=(2, 3)) * (dlogits @ net[3].weight.detach().numpy()))
        return [s_conv, _sigmoid(alpha * logits * dlogits)]

    edges = released_bin_edges(bins).numpy()
    counts = []
    for s in states(x_fit):
        b = np.searchsorted(edges, s, side="right") - 1
        c = np.zeros((s.shape[1], bins - 1), dtype=np.int64)
        np.add.at(c, (np.broadcast_to(np.arange(s.shape[1]), b.shape), b), 1)
        counts.append(c)
    det = detectors.get("nac", bins=bins, alpha=alpha, o_star=o_star, variant="released")
    det.fit_model(model, batches_of(x_fit, torch.zeros(30, dtype=torch.int64), 7))
    for ours, want in zip(det.counts_, counts, strict=True):
        np.testing.assert_array_equal(ours, want)
    assert sum(int((c.sum(0) > 0).sum()) for c in counts) >= 5  # the states spread over bins
    want_scores = np.zeros(len(x_test))
    for s, c in zip(states(x_test), counts, strict=True):
        b = np.searchsorted(edges, s, side="right") - 1
        hits = c[np.arange(s.shape[1]), b]
        want_scores += np.minimum(hits / o_star, 1).mean(axis=1) / 2  # mean over the 2 blocks
    got = det.score_batch(model, x_test).numpy()
    np.testing.assert_allclose(got, want_scores, rtol=1e-12)
    assert got.std() > 0


# A port of the released code's lines (github.com/BierOne/ood_coverage, openood/postprocessors/
# nac/): coverage.py ``logspace``, ``Estimator.update / get_score / ood_test`` and the layer
# mean of ``KMNC.single_ood_test``; utils.py ``avg_pooling`` and the ``sigmoid(o*g_kl)`` state;
# instr_state.py ``kl_grad``. Devices, caching and loaders left out.
def _port_logspace(base: float = 1e3, num: int = 100) -> Any:
    num = int(num / 2)
    x = np.linspace(1, np.sqrt(base), num=num)
    x_l = np.emath.logn(base, x)
    x_r = (1 - x_l)[::-1]
    x = np.concatenate([x_l[:-1], x_r])
    x[-1] += 1e-2
    return torch.from_numpy(np.append(x, 1.2))


class _PortEstimator:
    def __init__(self, neuron_num: int, M: int, O: int) -> None:  # noqa: E741
        self.M, self.O = M, O
        self.thresh = _port_logspace(1e3, M).view(M, -1).repeat(1, neuron_num)
        self.t_act = torch.zeros(M - 1, neuron_num)

    def _b_act(self, states: Any) -> Any:
        return (states.unsqueeze(1) >= self.thresh[: self.M - 1].unsqueeze(0)) & (
            states.unsqueeze(1) < self.thresh[1 : self.M].unsqueeze(0)
        )

    def update(self, states: Any) -> None:
        self.t_act += self._b_act(states).sum(dim=0)

    def get_score(self) -> None:
        self.n_coverage = torch.min(self.t_act / self.O, torch.ones_like(self.t_act))

    def ood_test(self, states: Any) -> Any:
        return (self._b_act(states) * self.n_coverage.unsqueeze(0)).sum(dim=1).mean(dim=1)


def _port_kl_grad(b_state: Any, outputs: Any, retain_graph: bool) -> Any:
    targets = torch.ones_like(outputs) / outputs.shape[-1]
    loss = torch.sum(-targets * torch.nn.LogSoftmax(dim=-1)(outputs), dim=-1)
    return torch.autograd.grad(loss.sum(), b_state, retain_graph=retain_graph)[0]


def _port_states(net: Any, layers: list[str], x: Any, alpha: float) -> dict[str, Any]:
    retained: dict[str, Any] = {}
    hooks = [net.get_submodule(ln).register_forward_hook(
        lambda _m, _i, out, ln=ln: retained.__setitem__(ln, out)) for ln in layers]  # fmt: skip
    transform = lambda s: s.sum(dim=[2, 3]).detach() if len(s.shape) > 2 else s.detach()  # noqa: E731
    try:
        with torch.enable_grad():
            p = net(x)
            out = {}
            for j, ln in enumerate(layers):
                b_kl_grad = _port_kl_grad(retained[ln], p, retain_graph=j < len(layers) - 1)
                o, g_kl = transform(retained[ln]), transform(b_kl_grad)
                out[ln] = 1 / (1 + torch.exp(-alpha * (o * g_kl)))
    finally:
        for h in hooks:
            h.remove()
    return out


@pytest.mark.parametrize("params", [{}, {"bins": 10, "alpha": 2.0, "o_star": 3}])
def test_released_agrees_with_a_port_of_the_released_code(params: dict[str, Any]) -> None:
    """Same counts and, to float32 rounding (its estimator's), the same scores."""
    torch.manual_seed(0)
    net = GlyphNet(4, widths=(4, 4, 8, 8)).double().eval()
    layers = ["trunk.2", "trunk.10", "pool", "fc"]  # maps, a 1 x 1 map, a vector
    model = HookAdapter("glyph", net, blocks=tuple(layers))
    x, xt = _images(64, 4), _images(24, 5)
    xt[12:] *= 3.0
    m, alpha, o = params.get("bins", 50), params.get("alpha", 100.0), params.get("o_star", 50)
    assert torch.equal(released_bin_edges(m), _port_logspace(1e3, m))  # bit for bit
    det = detectors.get("nac", variant="released", **params)
    det.fit_model(model, batches_of(x, torch.zeros(64, dtype=torch.int64), 16))
    estimators = {}
    for ln, s in _port_states(net, layers, x, alpha).items():
        estimators[ln] = _PortEstimator(s.shape[1], m, o)
        estimators[ln].update(s)
        estimators[ln].get_score()
    for ours, ln in zip(det.counts_, layers, strict=True):
        np.testing.assert_array_equal(ours, estimators[ln].t_act.T.numpy().astype(np.int64))
    theirs = sum(estimators[ln].ood_test(s) / len(layers)
                 for ln, s in _port_states(net, layers, xt, alpha).items())  # fmt: skip
    ours = det.score_batch(model, xt)
    torch.testing.assert_close(ours, theirs.double(), rtol=1e-6, atol=1e-7)
    assert float(ours.std()) > 0


def test_the_variants_rank_images_differently() -> None:
    model = _glyph()
    x = _images(96, 4)
    xt = _images(40, 5)
    xt[20:] *= 2.0
    y = torch.zeros(96, dtype=torch.int64)
    scores = {}
    for variant in ("pytorch-ood", "released"):
        det = detectors.get("nac", bins=10, alpha=5.0, o_star=5, variant=variant)
        scores[variant] = det.fit_model(model, batches_of(x, y, 16)).score_batch(model, xt)
    rho = spearmanr(scores["pytorch-ood"].numpy(), scores["released"].numpy())[0]
    assert rho < 0.95, rho


def test_released_bad_bins_and_saved_state(tmp_path: Any) -> None:
    model = _glyph()
    x = _images(16, 8)
    y = torch.zeros(16, dtype=torch.int64)
    for bins in (2, 5):
        with pytest.raises(
            InputError,
            match=r"^nac: variant='released' needs an even number of "
            rf"bins >= 4 \(its edges come in mirrored pairs\), got bins={bins}$",
        ):
            detectors.get("nac", bins=bins, variant="released").fit_model(model, batches_of(x, y))
    with pytest.raises(InputError, match=r"^nac: variant must be one of 'pytorch-ood', 'released'"):
        detectors.get("nac", variant="paper")
    det = detectors.get("nac", bins=8, variant="released").fit_model(model, batches_of(x, y))
    assert [c.shape[1] for c in det.counts_] == [7, 7, 7, 7]
    loaded = detectors.get("nac", bins=8, variant="released")
    loaded.load_state_file(det.save_state(tmp_path / "nac.npz"))
    torch.testing.assert_close(loaded.score_batch(model, x), det.score_batch(model, x))
    with pytest.raises(InputError, match=r"nac fitted with .*'variant': 'released'"):
        detectors.get("nac", bins=8).load_state_file(tmp_path / "nac.npz")


def test_doctests() -> None:
    import doctest

    import semshift.detectors.nac as module

    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
