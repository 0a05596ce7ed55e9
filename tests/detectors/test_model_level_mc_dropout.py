"""mc_dropout (Monte Carlo dropout): known answers, pytorch-ood agreement, direction,
determinism, bad inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from scipy.stats import spearmanr  # noqa: E402
from sklearn.metrics import roc_auc_score  # noqa: E402
from torch import nn  # noqa: E402

from semshift import detectors  # noqa: E402
from semshift.errors import InputError  # noqa: E402
from semshift.features.models import HookAdapter  # noqa: E402

from .conftest import make_problem  # noqa: E402


def _images(h: object):
    arr = np.asarray(h, np.float64)
    return torch.from_numpy(arr).reshape(len(arr), -1, 1, 1)


def _model(w: object, b: object, p: float, *, batch_norm: bool = False) -> HookAdapter:
    """Images (n, D, 1, 1) -> h (D values) -> [BatchNorm] -> Dropout(p) -> h W^T + b."""
    w, b = np.asarray(w, np.float64), np.asarray(b, np.float64)
    lin = nn.Linear(w.shape[1], w.shape[0])
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(w))
        lin.bias.copy_(torch.from_numpy(b))
    norm = [nn.BatchNorm1d(w.shape[1])] if batch_norm else []
    net = nn.Sequential(nn.Flatten(), *norm, nn.Dropout(p), lin).double().eval()
    return HookAdapter("dropout-net", net, head=str(len(norm) + 2))


def test_known_answer_everything_dropped() -> None:
    """Dropout(p = 1) zeroes h in every pass: logits = b, score = max softmax(b), variance 0.
    (Were dropout left in evaluation mode the logits would be W h + b.)"""
    model = _model([[1.0, 0.0], [0.0, 1.0], [2.0, -1.0]], [0.5, -1.0, 2.0], p=1.0)
    x = _images([[3.0, 1.0], [-2.0, 5.0]])
    got = detectors.get("mc_dropout", samples=4).score_batch(model, x).numpy()
    want = math.exp(2.0) / (math.exp(0.5) + math.exp(-1.0) + math.exp(2.0))
    np.testing.assert_allclose(got, [want, want], rtol=1e-12)
    var = detectors.get("mc_dropout", samples=4, mode="var").score_batch(model, x).numpy()
    np.testing.assert_array_equal(var, [0.0, 0.0])


def test_known_answer_one_unit_kept_or_dropped() -> None:
    """One feature h = 1 behind Dropout(0.5): each pass sees h' = 0 (softmax (1/2, 1/2)) or
    h' = 2 (logits (2, -2): softmax (s, 1 - s), s = sigmoid(4)). With m passes out of T keeping
    it, mean mode gives (m s + (T - m) / 2) / T and var mode -m (T - m) (s - 1/2)^2 / (T (T - 1))
    with the same m (the same seed draws the same masks)."""
    t, s = 20, 1 / (1 + math.exp(-4.0))
    model = _model([[1.0], [-1.0]], [0.0, 0.0], p=0.5)
    x = _images([[1.0]])
    for seed in range(5):
        mean = detectors.get("mc_dropout", samples=t, seed=seed).score_batch(model, x).item()
        m = (mean * t - t / 2) / (s - 0.5)
        assert abs(m - round(m)) < 1e-9 and 0 <= round(m) <= t
        m = round(m)
        var = detectors.get("mc_dropout", samples=t, seed=seed, mode="var")
        want = -m * (t - m) * (s - 0.5) ** 2 / (t * (t - 1))
        assert var.score_batch(model, x).item() == pytest.approx(want, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("mode", ["mean", "var"])
@pytest.mark.parametrize("batch_norm", [False, True])
def test_agrees_with_pytorch_ood(mode: str, batch_norm: bool) -> None:
    """pytorch-ood 0.4.0's MCD, seeded alike, gives minus these scores (to the last bit)."""
    pood = pytest.importorskip("pytorch_ood.detector")
    rng = np.random.default_rng(0)
    model = _model(rng.normal(size=(5, 16)), rng.normal(size=5), p=0.3, batch_norm=batch_norm)
    model.module.float()
    if batch_norm:  # running statistics other than the defaults
        bn = model.module[1]
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
    x = _images(rng.normal(size=(64, 16))).float()
    ours = detectors.get("mc_dropout", samples=30, mode=mode, seed=11).score_batch(model, x)
    torch.manual_seed(11)
    theirs = -pood.MCD(model.module, samples=30, mode=mode, batch_norm=True).predict(x)
    assert spearmanr(ours.numpy(), theirs.numpy())[0] >= 0.999
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
    assert not model.module.training  # pytorch-ood put it back too


def test_id_scores_higher_than_new_classes() -> None:
    """On the Gaussian class mixture of test_direction.py, its LDA head behind Dropout(0.2)."""
    p = make_problem(seed=0, dim=128, n_classes=10, n_per_class=100, n_test_id=200,
                     n_test_ood=200)  # fmt: skip
    model = _model(p.w, p.b, p=0.2)
    for mode in ("mean", "var"):
        det = detectors.get("mc_dropout", samples=10, mode=mode)
        scores = det.score_batch(model, _images(p.h_test)).numpy()
        assert roc_auc_score(~p.is_ood, scores) > 0.8, mode


def test_seeded_and_leaves_the_random_state_alone() -> None:
    rng = np.random.default_rng(1)
    model = _model(rng.normal(size=(4, 8)), rng.normal(size=4), p=0.5)
    x = _images(rng.normal(size=(10, 8)))
    det = detectors.get("mc_dropout", samples=5, seed=3)
    torch.manual_seed(123)
    first = det.score_batch(model, x)
    after = torch.rand(3)
    torch.manual_seed(999)  # another global state: the same scores
    torch.testing.assert_close(det.score_batch(model, x), first, rtol=0, atol=0)
    torch.manual_seed(123)
    torch.testing.assert_close(torch.rand(3), after, rtol=0, atol=0)  # state untouched
    other = detectors.get("mc_dropout", samples=5, seed=4).score_batch(model, x)
    assert not torch.equal(other, first)  # the seed draws the masks
    # dropout layers switched back to what they were, evaluation or training
    drop = model.module[1]
    drop.train()
    det.score_batch(model, x)
    assert drop.training and not model.module[2].training


def test_bad_inputs() -> None:
    plain = HookAdapter("no-dropout", nn.Sequential(nn.Flatten(), nn.Linear(4, 3)).double())
    zero = _model(np.ones((3, 4)), np.zeros(3), p=0.0)
    x = _images(np.ones((2, 4)))
    for model, name in ((plain, "no-dropout"), (zero, "dropout-net")):
        with pytest.raises(
            InputError,
            match=rf"^mc_dropout: model '{name}' has no dropout layer with p > 0 \(torch\.nn "
            r"Dropout modules\) to sample from$",
        ):
            detectors.get("mc_dropout").score_batch(model, x)
    for bad, message in [
        ({"samples": 1}, r"^mc_dropout: samples must be an integer >= 2, got 1$"),
        ({"samples": 2.5}, r"^mc_dropout: samples must be an integer >= 2"),
        ({"mode": "max"}, r"^mc_dropout: mode must be one of 'mean', 'var', got 'max'$"),
        ({"seed": -1}, r"^mc_dropout: seed must be an integer in \[0, 4294967295\], got -1$"),
        ({"T": 5}, r"^mc_dropout has no hyperparameter T; accepted: samples, mode, seed$"),
    ]:
        with pytest.raises(InputError, match=message):
            detectors.get("mc_dropout", **bad)
    model = _model(np.ones((3, 4)), np.zeros(3), p=0.5)
    with pytest.raises(InputError, match=r"^mc_dropout\.score_batch: x must be a floating"):
        detectors.get("mc_dropout").score_batch(model, x.long())
