"""adascale_a and adascale_l (AdaSCALE): known answers, agreement with a port of OpenOOD v1.5's
code, the fixed-percentile identity with SCALE, direction, fitted state, bad inputs."""

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
from semshift.detectors.adascale import (  # noqa: E402
    adaptive_scale,
    perturbation_shift,
    top_fraction,
)
from semshift.errors import InputError, NotFittedError  # noqa: E402

from .glyph_shift import batches_of, id_images, shifted_images, trained_glyph  # noqa: E402

NAMES = ("adascale_a", "adascale_l")


def _glyph(seed: int = 0, width: int = 128) -> GlyphNetAdapter:
    """A random GlyphNet (widths 4, 4, 8, width) in float64 with random BatchNorm statistics;
    128 features give OpenOOD's k1 = int(128 * 5 / 100) = 6 and k2 = 1."""
    torch.manual_seed(seed)
    net = GlyphNet(5, widths=(4, 4, 8, width)).double()
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    return GlyphNetAdapter(net.eval())


def _images(n: int, seed: int, scale: float = 1.0) -> Any:
    return torch.from_numpy(scale * np.random.default_rng(seed).normal(size=(n, 3, 32, 32)))


# -- a literal port of OpenOOD v1.5 -----------------------------------------------------------
# openood/networks/adascale_net.py and openood/postprocessors/adascale_postprocessor.py, with
# `.cuda()` removed (and `.float()` as `.double()`), tqdm dropped, super() without arguments,
# and statsmodels' ECDF written out (ECDF(x)(t) = the fraction
# of x <= t: StepFunction with side="right").


class _ECDF:
    def __init__(self, x: Any) -> None:
        self.x = np.sort(np.asarray(x))

    def __call__(self, t: Any) -> Any:
        return np.searchsorted(self.x, np.asarray(t), side="right") / len(self.x)


class _Backbone(nn.Module):
    """GlyphNet with OpenOOD's backbone interface."""

    def __init__(self, net: GlyphNet) -> None:
        super().__init__()
        self.net = net
        self.feature_size = net.fc.in_features

    def forward(self, x: Any, return_feature: bool = False) -> Any:
        feature = torch.flatten(self.net.pool(self.net.trunk(x)), 1)
        logits = self.net.fc(feature)
        return (logits, feature) if return_feature else logits

    def get_fc_layer(self) -> nn.Linear:
        return self.net.fc


def ada_scale(x, percentiles):
    assert x.dim() == 2
    b, _c = x.shape
    assert percentiles.shape == (b,)
    assert torch.all(0 < percentiles) and torch.all(percentiles < 100)
    n = x.shape[1:].numel()
    ks = n - torch.round(n * percentiles / 100.0).to(torch.int)
    max_k = ks.max()
    values, _ = torch.topk(x, max_k, dim=1)
    mask = torch.arange(max_k, device=x.device)[None, :] < ks[:, None]
    batch_sums = x.sum(dim=1, keepdim=True)
    masked_values = values * mask
    topk_sums = masked_values.sum(dim=1, keepdim=True)
    scales = batch_sums / topk_sums
    return scales


class AdaScaleANet(nn.Module):
    def __init__(self, backbone):
        super().__init__()
        self.backbone = backbone
        self.logit_scaling = False

    def forward(self, x, return_feature=False, return_feature_list=False):
        try:
            return self.backbone(x, return_feature, return_feature_list)
        except TypeError:
            return self.backbone(x, return_feature)

    def forward_threshold(self, feature, percentiles):
        scale = ada_scale(torch.relu(feature), percentiles)
        if self.logit_scaling:
            logits_cls = self.backbone.get_fc_layer()(feature)
            logits_cls *= scale**2.0
        else:
            feature *= torch.exp(scale)
            logits_cls = self.backbone.get_fc_layer()(feature)
        return logits_cls


class AdaScaleLNet(AdaScaleANet):
    def __init__(self, backbone):
        super().__init__(backbone)
        self.logit_scaling = True


class AdaScalePostprocessor:
    def __init__(self, percentile, k1, k2, lmbda, o, num_samples):
        self.percentile = percentile
        self.k1 = k1
        self.k2 = k2
        self.lmbda = lmbda
        self.o = o
        self.num_samples = num_samples
        self.setup_flag = False

    def setup(self, net, id_loader_dict, ood_loader_dict):
        self.net = net
        if not self.setup_flag:
            feature_log = []
            feature_perturbed_log = []
            feature_shift_log = []
            net.eval()
            self.feature_dim = net.backbone.feature_size
            with torch.no_grad():
                for batch in id_loader_dict["val"]:
                    data = batch["data"]
                    data = data.double()
                    with torch.enable_grad():
                        data.requires_grad = True
                        output, feature = net(data, return_feature=True)
                        labels = output.detach().argmax(dim=1)
                        net.zero_grad()
                        score = output[torch.arange(len(labels)), labels]
                        score.backward(torch.ones_like(labels))
                        grad = data.grad.data.detach()
                    feature_log.append(feature.data.cpu())
                    data_perturbed = self.perturb(data, grad)
                    _, feature_perturbed = net(data_perturbed, return_feature=True)
                    feature_shift = abs(feature - feature_perturbed)
                    feature_shift_log.append(feature_shift.data.cpu())
                    feature_perturbed_log.append(feature_perturbed.data.cpu())
            all_features = torch.cat(feature_log, axis=0)
            all_perturbed = torch.cat(feature_perturbed_log, axis=0)
            all_shifts = torch.cat(feature_shift_log, axis=0)
            total_samples = all_features.size(0)
            num_samples = self.num_samples
            indices = torch.randperm(total_samples)[:num_samples]
            self.feature_log = all_features[indices]
            self.feature_perturbed_log = all_perturbed[indices]
            self.feature_shift_log = all_shifts[indices]
            self.setup_flag = True

    @torch.no_grad()
    def get_percentile(self, feature, feature_perturbed, feature_shift):
        topk_indices = torch.topk(feature, dim=1, k=self.k1_)[1]
        topk_feature_perturbed = torch.gather(torch.relu(feature_perturbed), 1, topk_indices)
        topk_indices = torch.topk(feature, dim=1, k=self.k2_)[1]
        topk_feature_shift = torch.gather(feature_shift, 1, topk_indices)
        topk_norm = topk_feature_perturbed.sum(dim=1) + self.lmbda * topk_feature_shift.sum(dim=1)
        percent = 1 - self.ecdf(topk_norm.cpu())
        percentile = self.min_percentile + percent * (self.max_percentile - self.min_percentile)
        return torch.from_numpy(percentile)

    @torch.no_grad()
    def postprocess(self, net, data):
        with torch.enable_grad():
            data.requires_grad = True
            output, feature = net(data, return_feature=True)
            labels = output.detach().argmax(dim=1)
            net.zero_grad()
            score = output[torch.arange(len(labels)), labels]
            score.backward(torch.ones_like(labels))
            grad = data.grad.data.detach()
            data.requires_grad = False
        data_perturbed = self.perturb(data, grad)
        _, feature_perturbed = net(data_perturbed, return_feature=True)
        feature_shift = abs(feature - feature_perturbed)
        percentile = self.get_percentile(feature, feature_perturbed, feature_shift)
        output = net.forward_threshold(feature, percentile)
        _, pred = torch.max(output, dim=1)
        conf = torch.logsumexp(output, dim=1)
        return pred, conf

    @torch.no_grad()
    def perturb(self, data, grad):
        batch_size, channels, height, width = data.shape
        n_pixels = int(channels * height * width * self.o)
        abs_grad = abs(grad).view(batch_size, channels * height * width)
        _, topk_indices = torch.topk(abs_grad, n_pixels, dim=1, largest=False)
        mask = torch.zeros_like(abs_grad, dtype=torch.uint8)
        mask.scatter_(1, topk_indices, 1)
        mask = mask.view(batch_size, channels, height, width)
        data_ood = data + grad.sign() * mask * 0.5
        return data_ood

    def set_hyperparam(self, hyperparam):
        self.percentile = hyperparam[0]
        self.min_percentile, self.max_percentile = self.percentile[0], self.percentile[1]
        self.k1 = hyperparam[1]
        self.k2 = hyperparam[2]
        self.lmbda = hyperparam[3]
        self.o = hyperparam[4]
        self.k1_ = int(self.feature_dim * self.k1 / 100)
        self.k2_ = int(self.feature_dim * self.k2 / 100)
        topk_indices = torch.topk(self.feature_log, k=self.k1_, dim=1)[1]
        topk_feature_perturbed = torch.gather(
            torch.relu(self.feature_perturbed_log), 1, topk_indices
        )
        topk_indices = torch.topk(self.feature_log, k=self.k2_, dim=1)[1]
        topk_feature_shift_log = torch.gather(self.feature_shift_log, 1, topk_indices)
        sum_log = topk_feature_perturbed.sum(dim=1) + self.lmbda * topk_feature_shift_log.sum(dim=1)
        self.ecdf = _ECDF(sum_log)


def _openood_scores(
    model: GlyphNetAdapter, logit_scaling: bool, fit_x: Any, x: Any, **kw: Any
) -> np.ndarray:
    args = {"percentile": [75, 85], "k1": 5, "k2": 1, "lmbda": 10, "o": 0.05, **kw}
    wrap = (AdaScaleLNet if logit_scaling else AdaScaleANet)(_Backbone(model.module))
    post = AdaScalePostprocessor(num_samples=len(fit_x), **args)
    val = [{"data": fit_x[lo : lo + 16].clone()} for lo in range(0, len(fit_x), 16)]
    post.setup(wrap, {"val": val}, {})
    post.set_hyperparam([args["percentile"], args["k1"], args["k2"], args["lmbda"], args["o"]])
    return post.postprocess(wrap, x.clone())[1].detach().numpy()


# -- known answers -----------------------------------------------------------------------------


def test_adaptive_scale_known_answers() -> None:
    h = torch.tensor([[4.0, -3.0, 2.0, 1.0], [1.0, 1.0, 1.0, 1.0], [-1.0, -2.0, 0.0, 0.0]],
                     dtype=torch.float64)  # fmt: skip
    # relu(h) sums 7, 4, 0; p = 50 -> k = 2 (4 + 2); p = 75 -> k = 1; p = 99 -> k = 0 -> 1
    r = adaptive_scale(h, torch.tensor([50.0, 75.0, 99.0], dtype=torch.float64))
    torch.testing.assert_close(r, torch.tensor([7 / 6, 4.0, 1.0], dtype=torch.float64))
    r = adaptive_scale(h[:2], torch.tensor([99.0, 99.0], dtype=torch.float64))  # k >= 1
    torch.testing.assert_close(r, torch.tensor([7 / 4, 4.0], dtype=torch.float64))
    # equal to the port wherever the port is defined
    rng = np.random.default_rng(0)
    z = torch.relu(torch.from_numpy(rng.normal(size=(20, 30))))
    p = torch.from_numpy(rng.uniform(60, 90, 20))
    torch.testing.assert_close(adaptive_scale(z, p), ada_scale(z, p)[:, 0])


def test_perturbation_shift_known_answer() -> None:
    h = torch.tensor([[5.0, 1.0, 3.0, 0.0]])
    hp = torch.tensor([[4.0, -2.0, 6.0, 7.0]])
    # top-2 of h: indices 0, 2 -> C_o = relu(4) + relu(6) = 10; top-1: index 0 -> Q = |5 - 4|
    assert perturbation_shift(h, hp, 2, 1, 10.0).tolist() == [10.0 + 10.0 * 1.0]
    assert perturbation_shift(h, hp, 0, 0, 10.0).tolist() == [0.0]
    assert (top_fraction(128, 5), top_fraction(128, 1), top_fraction(16, 5)) == (6, 1, 0)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("kw", [{}, {"percentile": [60, 95], "k1": 20, "k2": 10, "lmbda": 2}])
def test_agrees_with_a_port_of_openood(name: str, kw: dict[str, Any]) -> None:
    model = _glyph()
    fit_x, x = _images(48, seed=1), torch.cat([_images(20, seed=2), _images(20, 3, 2.5)])
    ours_kw = {k: v for k, v in kw.items() if k != "percentile"}
    if "percentile" in kw:
        ours_kw.update(min_percentile=kw["percentile"][0], max_percentile=kw["percentile"][1])
    det = detectors.get(name, **ours_kw).fit_model(model, batches_of(fit_x, torch.zeros(48)))
    ours = det.score_batch(model, x).numpy()
    ref = _openood_scores(model, name == "adascale_l", fit_x, x, **kw)
    rho = spearmanr(ours, ref).statistic
    assert rho >= 0.999, rho
    np.testing.assert_allclose(ours, ref, rtol=1e-9)
    assert np.ptp(ours) > 0.01 and np.ptp(det.ecdf_) > 0  # the percentiles do vary


@pytest.mark.parametrize("p", [70.0, 85.0])
def test_a_fixed_percentile_is_scale(p: float) -> None:
    """min_percentile = max_percentile: adascale_a is SCALE at that percentile and adascale_l
    is Energy of the logits times SCALE's r squared, whatever the training images."""
    model = _glyph(seed=1)
    x = _images(12, seed=4)
    with torch.no_grad():
        logits, h = model(x)
    w, b = model.head_weights()
    scale = detectors.get("scale", percentile=p).fit(features=h.numpy(), head=(w, b))
    want = scale.score(features=h.numpy(), logits=logits.numpy())
    fit = batches_of(_images(8, seed=5), torch.zeros(8))
    det = detectors.get("adascale_a", min_percentile=p, max_percentile=p).fit_model(model, fit)
    np.testing.assert_allclose(det.score_batch(model, x).numpy(), want, rtol=1e-5)
    det_l = detectors.get("adascale_l", min_percentile=p, max_percentile=p).fit_model(model, fit)
    r = adaptive_scale(h, torch.full((12,), p, dtype=torch.float64))
    want_l = torch.logsumexp(logits * r[:, None] ** 2, dim=1)
    torch.testing.assert_close(det_l.score_batch(model, x), want_l)


def test_the_percentile_follows_the_empirical_cdf() -> None:
    """An image shifting more than every training image gets p_min, less than every one p_max:
    with p_min = p_max - 10 the scores move accordingly (A: r rises with p)."""
    model = _glyph(seed=2)
    x = _images(6, seed=6)
    fit = batches_of(_images(16, seed=7), torch.zeros(16))
    det = detectors.get("adascale_a", k1=20, k2=10).fit_model(model, fit)
    low = det.ecdf_.copy()
    det.ecdf_ = low + 1e6  # every image shifts less than the "training" ones: p = p_max
    at_max = det.score_batch(model, x)
    det.ecdf_ = low - 1e6  # every image shifts more: p = p_min
    det._device_cache = {}
    at_min = det.score_batch(model, x)
    with torch.no_grad():
        h = model(x)[1]
    for p, got in ((85.0, at_max), (75.0, at_min)):
        r = adaptive_scale(h, torch.full((6,), p, dtype=torch.float64))
        torch.testing.assert_close(got, torch.logsumexp(model.head(h * torch.exp(r)[:, None]), 1))


# -- direction ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(("kw", "least"), [({}, 0.9), ({"k1": 25.0, "k2": 12.5}, 0.7)])
def test_shifted_images_score_lower(name: str, kw: dict[str, Any], least: float) -> None:
    """16 features: with the defaults k1 = k2 = 0 (Q' = 0, p = p_min: SCALE at 75); with
    larger k the percentile adapts (weaker on this toy problem, still the right direction)."""
    model = trained_glyph()
    x, y = id_images(30, seed=1)
    det = detectors.get(name, **kw).fit_model(model, batches_of(x, y))
    s_id = det.score_batch(model, id_images(20, seed=9)[0]).numpy()
    s_ood = det.score_batch(model, shifted_images(60, seed=3)).numpy()
    auroc = roc_auc_score(np.r_[np.ones(60), np.zeros(60)], np.r_[s_id, s_ood])
    assert auroc > least, auroc


# -- fitted state and bad inputs ---------------------------------------------------------------


def test_fit_subsample_state_and_save_load(tmp_path) -> None:
    model = _glyph()
    fit_x = _images(40, seed=1)
    det = detectors.get("adascale_l", num_samples=25, seed=3)
    assert not det.is_fitted
    with pytest.raises(NotFittedError, match=r"^adascale_l\.score_batch: fit it"):
        det.score_batch(model, _images(2, 0))
    det.fit_model(model, batches_of(fit_x, torch.zeros(40)), source="train")
    full = detectors.get("adascale_l").fit_model(model, batches_of(fit_x, torch.zeros(40)))
    assert det.ecdf_.shape == (25,) and full.ecdf_.shape == (40,)
    assert np.all(np.diff(det.ecdf_) >= 0) and np.isin(det.ecdf_, full.ecdf_).all()
    assert int(det.feature_dim_) == 128
    again = detectors.get("adascale_l", num_samples=25, seed=3)
    again.fit_model(model, batches_of(fit_x, torch.zeros(40)))
    np.testing.assert_array_equal(again.ecdf_, det.ecdf_)
    path = det.save_state(tmp_path / "s.npz")
    loaded = detectors.get("adascale_l", num_samples=25, seed=3).load_state_file(path)
    x = _images(5, 2)
    torch.testing.assert_close(loaded.score_batch(model, x), det.score_batch(model, x))
    with pytest.raises(InputError, match="fitted with"):
        detectors.get("adascale_l", num_samples=26, seed=3).load_state_file(path)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"max_percentile": 100}, r"^adascale_a: max_percentile must be a number in \(0, 100\)"),
        ({"k1": 0}, r"^adascale_a: k1 must be a number in \(0, 100\]"),
        ({"o": 1.5}, r"^adascale_a: o must be a number in \(0, 1\]"),
        ({"lmbda": -1.0}, r"^adascale_a: lmbda must be a number >= 0"),
        ({"num_samples": 0}, r"^adascale_a: num_samples must be an integer >= 1"),
    ],
)
def test_bad_parameters(params: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        detectors.check_params("adascale_a", params)
    det = detectors.get("adascale_a")
    for key, value in params.items():
        setattr(det, key, value)
    with pytest.raises(InputError, match=message):
        det.fit_model(_glyph(), batches_of(_images(4, 0), torch.zeros(4)))


def test_percentiles_in_the_wrong_order() -> None:
    det = detectors.get("adascale_l", min_percentile=90.0)  # p_max stays 85
    message = r"^adascale_l: min_percentile \(90.0\) must not exceed max_percentile \(85.0\)$"
    with pytest.raises(InputError, match=message):
        det.fit_model(_glyph(), batches_of(_images(4, 0), torch.zeros(4)))


def test_bad_fits_and_models() -> None:
    with pytest.raises(InputError, match=r"^adascale_a\.fit_model: no training image"):
        detectors.get("adascale_a").fit_model(_glyph(), lambda: iter(()))
    det = detectors.get("adascale_a").fit_model(_glyph(), batches_of(_images(4, 0), torch.zeros(4)))
    with pytest.raises(InputError, match=r"^adascale_a\.score_batch: the model's features have 16"):
        det.score_batch(_glyph(width=16), _images(2, 0))


def test_docstring_examples_run() -> None:
    import doctest

    import semshift.detectors.adascale as module

    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
