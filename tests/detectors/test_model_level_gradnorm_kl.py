"""gradnorm_kl (GradNorm through the network): agreement with pytorch-ood's GradNorm, the
head-weight identity with the array-level gradnorm, a known answer, direction, bad inputs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("pytorch_ood")
from pytorch_ood.detector import GradNorm  # noqa: E402
from scipy.stats import spearmanr  # noqa: E402
from sklearn.metrics import roc_auc_score  # noqa: E402
from torch import nn  # noqa: E402

from semshift import detectors  # noqa: E402
from semshift.demo.model import GlyphNet, GlyphNetAdapter  # noqa: E402
from semshift.detectors.gradnorm_kl import selected_parameters  # noqa: E402
from semshift.errors import InputError  # noqa: E402

from .glyph_shift import id_images, shifted_images, trained_glyph  # noqa: E402


def _glyph(seed: int = 0, num_classes: int = 5) -> GlyphNetAdapter:
    """A random GlyphNet (widths 4, 4, 8, 8) in float64 with random BatchNorm statistics."""
    torch.manual_seed(seed)
    net = GlyphNet(num_classes, widths=(4, 4, 8, 8)).double()
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    return GlyphNetAdapter(net.eval())


def _images(n: int, seed: int, scale: float = 1.0) -> Any:
    return torch.from_numpy(scale * np.random.default_rng(seed).normal(size=(n, 3, 32, 32)))


@pytest.mark.parametrize(
    ("parameters", "param_filter"),
    [
        (None, None),
        (r"fc\.weight", lambda n: n == "fc.weight"),
        (r"trunk\.(0|4)\..*", lambda n: n.split(".")[1] in ("0", "4")),
    ],
)
@pytest.mark.parametrize("temperature", [1.0, 3.0])
def test_agrees_with_pytorch_ood(parameters: Any, param_filter: Any, temperature: float) -> None:
    model = _glyph()
    x = torch.cat([_images(20, seed=1), _images(20, seed=2, scale=3.0)])  # 40 > one chunk
    det = detectors.get("gradnorm_kl", temperature=temperature, parameters=parameters)
    ours = det.score_batch(model, x).numpy()
    ref = GradNorm(model.module, param_filter=param_filter, temperature=temperature)
    theirs = -ref.predict(x).numpy()  # pytorch-ood: higher = more OOD
    rho = spearmanr(ours, theirs).statistic
    assert rho >= 0.999, rho
    np.testing.assert_allclose(ours, theirs, rtol=1e-10)
    assert np.ptp(ours) > 0


def test_head_weight_is_the_array_level_gradnorm_over_c() -> None:
    """On the head's weight at T = 1: C gradnorm_kl = gradnorm (closed form, sum over classes)."""
    model = _glyph(seed=1, num_classes=6)
    x = _images(12, seed=3)
    with torch.no_grad():
        logits, h = model(x)
    closed = detectors.get("gradnorm").fit().score(features=h.numpy(), logits=logits.numpy())
    det = detectors.get("gradnorm_kl", parameters=r"fc\.weight")
    np.testing.assert_allclose(6 * det.score_batch(model, x).numpy(), closed, rtol=1e-10)
    # all parameters: more than the head's weight alone
    everything = detectors.get("gradnorm_kl").score_batch(model, x).numpy()
    assert np.all(everything > closed / 6)


def test_known_answer_on_a_linear_model() -> None:
    """f(x) = W vec(x) + b: the gradient with respect to (W, b) is ((p - u) / T) (vec(x), 1),
    so the score is sum_c |p_c - 1/C| / T * (||vec(x)||_1 + 1)."""

    class Linear(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(12, 3)

        def forward(self, x: Any) -> Any:
            return self.fc(x.flatten(1))

    class LinearAdapter(GlyphNetAdapter):
        def features(self, x: Any) -> Any:
            return x.flatten(1)

    torch.manual_seed(0)
    model = LinearAdapter(Linear().double().eval())
    x = _images(5, seed=4)[:, :, :2, :2]
    t = 2.0
    with torch.no_grad():
        p = torch.softmax(model.module(x) / t, dim=1)
    want = (p - 1 / 3).abs().sum(dim=1) / t * (x.flatten(1).abs().sum(dim=1) + 1)
    got = detectors.get("gradnorm_kl", temperature=t).score_batch(model, x)
    torch.testing.assert_close(got, want)


def test_shifted_images_score_lower() -> None:
    model = trained_glyph()
    det = detectors.get("gradnorm_kl")
    s_id = det.score_batch(model, id_images(20, seed=9)[0]).numpy()
    s_ood = det.score_batch(model, shifted_images(60, seed=3)).numpy()
    auroc = roc_auc_score(np.r_[np.ones(60), np.zeros(60)], np.r_[s_id, s_ood])
    assert auroc > 0.9, auroc


def test_selected_parameters() -> None:
    net = _glyph().module
    assert selected_parameters(net, r"fc\..*") == ["fc.weight", "fc.bias"]
    assert selected_parameters(net, "fc") == []  # matched in full
    assert selected_parameters(net, None) == [n for n, _ in net.named_parameters()]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"temperature": 0}, r"^gradnorm_kl: temperature must be a number > 0, got 0$"),
        (
            {"parameters": "fc.("},
            r"^gradnorm_kl: parameters must be a regular expression \(str\) "
            r"or None, got 'fc\.\('$",
        ),
        ({"parameters": 3}, r"^gradnorm_kl: parameters must be a regular expression"),
    ],
)
def test_bad_parameters(params: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        detectors.check_params("gradnorm_kl", params)
    det = detectors.get("gradnorm_kl")
    for key, value in params.items():
        setattr(det, key, value)
    with pytest.raises(InputError, match=message):
        det.score_batch(_glyph(), _images(2, 0))


def test_a_pattern_matching_no_parameter() -> None:
    det = detectors.get("gradnorm_kl", parameters=r"head\.weight")
    message = (
        r"^gradnorm_kl: parameters must be a regular expression matching some of the parameter "
        r"names of model 'demo-glyphnet' \('trunk\.0\.weight', .*\); 'head\\\\.weight' "
        r"matches none$"
    )
    with pytest.raises(InputError, match=message):
        det.score_batch(_glyph(), _images(2, 0))


def test_docstring_examples_run() -> None:
    import doctest

    import semshift.detectors.gradnorm_kl as module

    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
