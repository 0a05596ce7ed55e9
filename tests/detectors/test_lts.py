"""lts (logit scaling): known answers, pytorch-ood agreement, direction, bad inputs.

lts is post-hoc (on stored logits and features); it was model-level: :func:`_model_level` is
that path (the network's own float32 outputs, scored in torch), kept as a reference.
"""

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


def _lts(model: HookAdapter, x, **params):
    """lts on the (logits, features) arrays a store would hold for images x."""
    with torch.no_grad():
        logits, h = model(x)
    arrays = {"logits": logits.numpy(), "features": h.numpy()}
    return torch.from_numpy(detectors.get("lts", **params).fit().score(**arrays))


def _model_level(model: HookAdapter, x, percentile: float = 95.0):
    """The former model-level lts: the network's outputs, scaled and summed in float32 torch."""
    with torch.no_grad():
        logits, h = model(x)
        logits, h = logits.float(), h.float()
        scale = lts_scaling(h, float(percentile)).to(logits.dtype)
        return torch.logsumexp(logits * scale[:, None], dim=1)


def test_known_answer_by_hand() -> None:
    """h = (3, 1, 0, -2): relu sum 4; z = (3, 1.5)."""
    model = _linear([[1, 0, 0, 0], [0, 1, 0, 0]], [0.0, 0.5])
    x = _images([[3.0, 1.0, 0.0, -2.0], [-1.0, -2.0, -3.0, -4.0]])
    # percentile 75: k = 4 - round(3) = 1, top-1 sum 3, S = (4 / 3)^2
    got = _lts(model, x, percentile=75).numpy()
    s = (4 / 3) ** 2
    assert got[0] == pytest.approx(math.log(math.exp(3 * s) + math.exp(1.5 * s)), rel=1e-12)
    # no positive activation: S = 1, plain Energy of z = (-1, -1.5)
    assert got[1] == pytest.approx(math.log(math.exp(-1) + math.exp(-1.5)), rel=1e-12)
    # percentile 50: k = 2, the top two hold the whole mass: S = 1; percentile 0: k = D, S = 1
    energy = math.log(math.exp(3) + math.exp(1.5))
    for p in (50, 0):
        assert _lts(model, x, percentile=p)[0].item() == (pytest.approx(energy, rel=1e-12))
    # percentile 100 keeps k = max(1, 0) = 1, as 75 does here
    np.testing.assert_allclose(_lts(model, x, percentile=100).numpy(), got, rtol=1e-12)


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
    ours = _lts(model, x, percentile=percentile)
    ref = pood.LTS(encoder=model.features, head=model.module.fc, p=1 - percentile / 100)
    theirs = -ref.predict(x).double()
    assert spearmanr(ours.numpy(), theirs.numpy())[0] >= 0.999
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-6)
    # and on features with negative values (their ReLU applies to the factor only)
    rng = np.random.default_rng(1)
    w, b, h = rng.normal(size=(5, 16)), rng.normal(size=5), rng.normal(size=(40, 16))
    lin = _linear(w, b)
    ours = _lts(lin, _images(h), percentile=percentile)
    ref = pood.LTS(encoder=None, head=lin.module[1], p=1 - percentile / 100)
    theirs = -ref.predict_features(torch.from_numpy(h))
    assert spearmanr(ours.numpy(), theirs.numpy())[0] >= 0.999
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)


def test_id_scores_higher_than_new_classes() -> None:
    """On the Gaussian class mixture of test_direction.py, with its LDA head as the model."""
    p = make_problem(seed=0, dim=128, n_classes=10, n_per_class=100, n_test_id=200,
                     n_test_ood=200)  # fmt: skip
    scores = _lts(_linear(p.w, p.b), _images(p.h_test)).numpy()
    assert roc_auc_score(~p.is_ood, scores) > 0.8


def test_deterministic_and_per_sample() -> None:
    model = load_model("resnet18", random_init=True, seed=0, num_classes=10)
    x = torch.from_numpy(np.random.default_rng(2).normal(size=(6, 3, 32, 32))).float()
    full = _lts(model, x)
    torch.testing.assert_close(_lts(model, x), full, rtol=0, atol=0)
    # a sample's score does not depend on the rest of its batch
    torch.testing.assert_close(_lts(model, x[2:4]), full[2:4], rtol=1e-5, atol=1e-5)


def test_bad_inputs() -> None:
    for bad, message in [
        ({"percentile": 101}, r"^lts: percentile must be a number in \[0, 100\], got 101$"),
        ({"percentile": -1}, r"^lts: percentile must be"),
        ({"percentile": "95"}, r"^lts: percentile must be"),
        ({"p": 0.05}, r"^lts has no hyperparameter p; accepted: percentile$"),
    ]:
        with pytest.raises(InputError, match=message):
            detectors.get("lts", **bad)
    with pytest.raises(InputError, match=r"^lts\.score\(\) needs `features`"):
        detectors.get("lts").fit().score(logits=np.zeros((2, 2)))
    with pytest.raises(InputError, match=r"^lts\.score: `features` contains 2 NaN"):
        detectors.get("lts").fit().score(logits=np.zeros((2, 2)), features=[[0.0, np.nan]] * 2)
    with pytest.raises(InputError, match=r"^lts\.score: inputs disagree on the number of samples"):
        det = detectors.get("lts").fit()
        det.score(logits=np.zeros((2, 2)), features=np.zeros((3, 2)))


@pytest.mark.parametrize("percentile", [95.0, 75.0, 50.0, 0.0, 100.0])
def test_array_scores_equal_the_model_level_scores(percentile: float) -> None:
    """lts on the (logits, features) a store would hold = the former model-level scores."""
    from semshift.detectors.lts import lts_scores

    model = load_model("resnet18", random_init=True, seed=0, num_classes=10)
    x = torch.from_numpy(np.random.default_rng(3).normal(size=(12, 3, 32, 32))).float()
    with torch.no_grad():
        logits, h = model(x)
    stored = {"logits": logits.numpy().astype(np.float32), "features": h.numpy()}
    ours = lts_scores(stored["logits"], stored["features"], percentile)
    assert ours.dtype == np.float64
    got = detectors.get("lts", percentile=percentile).fit().score(**stored)
    np.testing.assert_array_equal(got, ours)
    theirs = _lts(model, x, percentile=percentile).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
    # and the formula by hand, in float64, on features with negative values and a zero row
    rng = np.random.default_rng(4)
    z, f = rng.normal(size=(30, 7)), rng.normal(size=(30, 20))
    f[3] = -np.abs(f[3])
    r = np.maximum(f, 0.0)
    k = max(1, 20 - round(20 * percentile / 100))
    top = -np.sort(-r, axis=1)[:, :k].sum(axis=1)
    s = np.where(top > 0, r.sum(axis=1) / np.where(top > 0, top, 1.0), 1.0) ** 2
    by_hand = np.log(np.exp(z * s[:, None]).sum(axis=1))
    np.testing.assert_allclose(lts_scores(z, f, percentile), by_hand, rtol=1e-12)
    assert lts_scores(z[3:4], f[3:4], percentile)[0] == pytest.approx(by_hand[3], rel=1e-12)
    torch_ = lts_scaling(torch.from_numpy(f), percentile).numpy()
    np.testing.assert_allclose(torch_, s, rtol=1e-12)
