"""iodin (iODIN): agreement with a port of OpenOOD v1.5's code, known answers, direction, bad
inputs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
from scipy.stats import spearmanr  # noqa: E402
from sklearn.metrics import roc_auc_score  # noqa: E402

from semshift import detectors  # noqa: E402
from semshift.demo.model import GlyphNet, GlyphNetAdapter  # noqa: E402
from semshift.detectors.iodin import largest_gradient_mask  # noqa: E402
from semshift.errors import InputError  # noqa: E402

from .glyph_shift import id_images, shifted_images, trained_glyph  # noqa: E402


def _glyph(seed: int = 0) -> GlyphNetAdapter:
    """A random GlyphNet (widths 4, 4, 8, 8) in float64 with random BatchNorm statistics."""
    torch.manual_seed(seed)
    net = GlyphNet(5, widths=(4, 4, 8, 8)).double()
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    return GlyphNetAdapter(net.eval())


def _images(n: int, seed: int, scale: float = 1.0) -> Any:
    return torch.from_numpy(scale * np.random.default_rng(seed).normal(size=(n, 3, 32, 32)))


# -- a literal port of OpenOOD v1.5's IODINPostprocessor (openood/postprocessors/
# iodin_postprocessor.py; temperature, noise and input_std set as ODINPostprocessor does) -----


class IODINPostprocessor:
    def __init__(self, temperature, noise, input_std):
        self.temperature = temperature
        self.noise = noise
        self.input_std = input_std

    def get_mask(self, grad):
        batch_size, channels, height, width = grad.shape
        abs_grad = abs(grad).view(batch_size, -1)
        max_indices = torch.argmax(abs_grad, dim=1, keepdim=True)
        mask = torch.zeros_like(abs_grad, dtype=torch.uint8)
        mask.scatter_(1, max_indices, 1)
        mask = mask.view(batch_size, channels, height, width)
        return mask

    def postprocess(self, net: nn.Module, data: Any):
        data.requires_grad = True
        output = net(data)
        criterion = nn.CrossEntropyLoss()
        labels = output.detach().argmax(axis=1)
        output = output / self.temperature
        loss = criterion(output, labels)
        loss.backward()
        grad = data.grad.detach()

        mask = self.get_mask(grad)
        gradient = torch.ge(grad, 0)
        gradient = (gradient.float() - 0.5) * 2

        gradient[:, 0] = (gradient[:, 0]) / self.input_std[0]
        gradient[:, 1] = (gradient[:, 1]) / self.input_std[1]
        gradient[:, 2] = (gradient[:, 2]) / self.input_std[2]

        tempInputs = torch.add(data.detach(), gradient * mask, alpha=-self.noise)
        output = net(tempInputs)
        output = output / self.temperature

        nnOutput = output.detach()
        nnOutput = nnOutput - nnOutput.max(dim=1, keepdims=True).values
        nnOutput = nnOutput.exp() / nnOutput.exp().sum(dim=1, keepdims=True)

        conf, pred = nnOutput.max(dim=1)

        return pred, conf


@pytest.mark.parametrize(("temperature", "epsilon"), [(1000.0, 0.0014), (1.0, 0.05), (10.0, 0.3)])
def test_agrees_with_a_port_of_openood(temperature: float, epsilon: float) -> None:
    model = _glyph()
    x = torch.cat([_images(20, seed=1), _images(20, seed=2, scale=3.0)])
    det = detectors.get("iodin", temperature=temperature, epsilon=epsilon)
    ours = det.score_batch(model, x).numpy()
    post = IODINPostprocessor(temperature, epsilon, model.std)
    ref = post.postprocess(model.module, x.clone())[1].numpy()
    rho = spearmanr(ours, ref).statistic
    assert rho >= 0.999, rho
    np.testing.assert_allclose(ours, ref, rtol=1e-12)
    # the single-element step moves the scores (iODIN is not the plain tempered MSP)
    with torch.no_grad():
        msp = torch.softmax(model(x)[0] / temperature, dim=1).amax(dim=1).numpy()
    assert np.abs(ours - msp).max() > 0


def test_epsilon_zero_is_the_tempered_msp_and_one_element_moves() -> None:
    model = _glyph(seed=1)
    x = _images(8, seed=3)
    with torch.no_grad():
        logits = model(x)[0]
    got = detectors.get("iodin", temperature=10.0, epsilon=0.0).score_batch(model, x)
    torch.testing.assert_close(got, torch.softmax(logits / 10.0, dim=1).amax(dim=1))
    g = torch.from_numpy(np.random.default_rng(0).normal(size=(4, 3, 5, 5)))
    mask = largest_gradient_mask(g)
    assert mask.sum(dim=(1, 2, 3)).tolist() == [1.0] * 4
    flat = g.abs().reshape(4, -1)
    assert torch.equal(mask.reshape(4, -1).argmax(dim=1), flat.argmax(dim=1))


def test_shifted_images_score_lower() -> None:
    model = trained_glyph()
    det = detectors.get("iodin")
    s_id = det.score_batch(model, id_images(20, seed=9)[0]).numpy()
    s_ood = det.score_batch(model, shifted_images(60, seed=3)).numpy()
    auroc = roc_auc_score(np.r_[np.ones(60), np.zeros(60)], np.r_[s_id, s_ood])
    assert auroc > 0.9, auroc


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"temperature": 0}, r"^iodin: temperature must be a number > 0, got 0$"),
        ({"epsilon": -0.1}, r"^iodin: epsilon must be a number >= 0, got -0\.1$"),
    ],
)
def test_bad_parameters(params: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        detectors.check_params("iodin", params)
    det = detectors.get("iodin")
    for key, value in params.items():
        setattr(det, key, value)
    with pytest.raises(InputError, match=message):
        det.score_batch(_glyph(), _images(2, 0))


def test_docstring_examples_run() -> None:
    import doctest

    import semshift.detectors.iodin as module

    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
