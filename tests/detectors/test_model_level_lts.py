"""lts (logit scaling): known answers, pytorch-ood agreement, direction, bad inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from scipy.stats import spearmanr  # noqa: E402
from sklearn.metrics import roc_auc_score  # noqa: E402
from torch import nn  # noqa: E402

from semshift import detectors  # noqa: E402
from semshift.detectors.lts import lts_scaling  # noqa: E402
from semshift.errors import InputError  # noqa: E402
from semshift.features.models import HookAdapter, load_model  # noqa: E402

from .conftest import make_problem  # noqa: E402


def _linear(w: object, b: object) -> HookAdapter:
    """Images (n, D, 1, 1) -> h = the D values (the head's input) -> logits h W^T + b."""
    w, b = np.asarray(w, np.float64), np.asarray(b, np.float64)
    lin = nn.Linear(w.shape[1], w.shape[0]).double()
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(w))
        lin.bias.copy_(torch.from_numpy(b))
    return HookAdapter("linear", nn.Sequential(nn.Flatten(), lin))


def _images(h: np.ndarray):
    return torch.from_numpy(np.asarray(h, np.float64)).reshape(len(h), -1, 1, 1)


def test_known_answer_by_hand() -> None:
    """h = (3, 1, 0, -2): relu sum 4; z = (3, 1.5)."""
    model = _linear([[1, 0, 0, 0], [0, 1, 0, 0]], [0.0, 0.5])
    x = _images([[3.0, 1.0, 0.0, -2.0], [-1.0, -2.0, -3.0, -4.0]])
    # percentile 75: k = 4 - round(3) = 1, top-1 sum 3, S = (4 / 3)^2
    got = detectors.get("lts", percentile=75).score_batch(model, x).numpy()
    s = (4 / 3) ** 2
    assert got[0] == pytest.approx(math.log(math.exp(3 * s) + math.exp(1.5 * s)), rel=1e-12)
    # no positive activation: S = 1, plain Energy of z = (-1, -1.5)
    assert got[1] == pytest.approx(math.log(math.exp(-1) + math.exp(-1.5)), rel=1e-12)
    # percentile 50: k = 2, the top two hold the whole mass: S = 1; percentile 0: k = D, S = 1
    energy = math.log(math.exp(3) + math.exp(1.5))
    for p in (50, 0):
        assert detectors.get("lts", percentile=p).score_batch(model, x)[0].item() == (
            pytest.approx(energy, rel=1e-12)
        )
    # percentile 100 keeps k = max(1, 0) = 1, as 75 does here
    np.testing.assert_allclose(
        detectors.get("lts", percentile=100).score_batch(model, x).numpy(), got, rtol=1e-12
    )


def test_scaling_factor_rounds_half_to_even() -> None:
    h = torch.tensor([[4.0, 3.0, 2.0, 1.0, 0.0, 0.0]])  # D = 6, sum 10
    # 6 * 62.5 / 100 = 3.75 -> 4: k = 2; 6 * 75 / 100 = 4.5 -> 4 (half to even): k = 2
    for p in (62.5, 75.0):
        assert lts_scaling(h, p).item() == pytest.approx((10 / 7) ** 2)
    assert lts_scaling(h, 95.0).item() == pytest.approx((10 / 4) ** 2)  # 5.7 -> 6: k = max(1, 0)


@pytest.mark.parametrize("percentile", [95.0, 80.0])
def test_agrees_with_pytorch_ood(percentile: float) -> None:
    """pytorch-ood 0.4.0's LTS (p = 1 - percentile / 100) gives minus these scores."""
    pood = pytest.importorskip("pytorch_ood.detector")
    model = load_model("resnet18", random_init=True, seed=0, num_classes=10)
    x = torch.from_numpy(np.random.default_rng(0).normal(size=(24, 3, 48, 48))).float()
    ours = detectors.get("lts", percentile=percentile).score_batch(model, x)
    ref = pood.LTS(encoder=model.features, head=model.module.fc, p=1 - percentile / 100)
    theirs = -ref.predict(x)
    assert spearmanr(ours.numpy(), theirs.numpy())[0] >= 0.999
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-6)
    # and on features with negative values (their ReLU applies to the factor only)
    rng = np.random.default_rng(1)
    w, b, h = rng.normal(size=(5, 16)), rng.normal(size=5), rng.normal(size=(40, 16))
    lin = _linear(w, b)
    ours = detectors.get("lts", percentile=percentile).score_batch(lin, _images(h))
    ref = pood.LTS(encoder=None, head=lin.module[1], p=1 - percentile / 100)
    theirs = -ref.predict_features(torch.from_numpy(h))
    assert spearmanr(ours.numpy(), theirs.numpy())[0] >= 0.999
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)


def test_id_scores_higher_than_new_classes() -> None:
    """On the Gaussian class mixture of test_direction.py, with its LDA head as the model."""
    p = make_problem(seed=0, dim=128, n_classes=10, n_per_class=100, n_test_id=200,
                     n_test_ood=200)  # fmt: skip
    scores = detectors.get("lts").score_batch(_linear(p.w, p.b), _images(p.h_test)).numpy()
    assert roc_auc_score(~p.is_ood, scores) > 0.8


def test_deterministic_and_per_sample() -> None:
    model = load_model("resnet18", random_init=True, seed=0, num_classes=10)
    x = torch.from_numpy(np.random.default_rng(2).normal(size=(6, 3, 32, 32))).float()
    det = detectors.get("lts")
    full = det.score_batch(model, x)
    torch.testing.assert_close(det.score_batch(model, x), full, rtol=0, atol=0)
    # a sample's score does not depend on the rest of its batch
    torch.testing.assert_close(det.score_batch(model, x[2:4]), full[2:4], rtol=1e-5, atol=1e-5)


def test_bad_inputs() -> None:
    model = _linear([[1.0, 0.0]], [0.0])
    for bad, message in [
        ({"percentile": 101}, r"^lts: percentile must be a number in \[0, 100\], got 101$"),
        ({"percentile": -1}, r"^lts: percentile must be"),
        ({"percentile": "95"}, r"^lts: percentile must be"),
        ({"p": 0.05}, r"^lts has no hyperparameter p; accepted: percentile$"),
    ]:
        with pytest.raises(InputError, match=message):
            detectors.get("lts", **bad)
    with pytest.raises(InputError, match=r"^lts\.score_batch: x must be a floating-point"):
        detectors.get("lts").score_batch(model, torch.ones(2, 2))
    with pytest.raises(InputError, match=r"^lts\.score: lts is a model-level detector"):
        detectors.get("lts").score(logits=np.zeros((2, 2)), features=np.zeros((2, 2)))
