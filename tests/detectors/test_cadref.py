"""CARef and CADRef: hand-computed cases, agreement with the authors' released code, bad inputs."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
import scipy.stats

import semshift.detectors.cadref
from semshift import detectors
from semshift.errors import InputError

# Training: predictions (argmax of the logits) 0, 1, 0, 1, 0; the last sample's label would be
# 1 but CARef/CADRef group by prediction, so the class means are (3, 0) and (0, 3).
H_TRAIN = np.array([[2.0, 0.0], [0.0, 2.0], [4.0, 0.0], [0.0, 4.0], [3.0, 0.0]])
Z_TRAIN = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
HEAD = (np.array([[1.0, -1.0], [-1.0, 1.0]]), np.zeros(2))  # sign(W) = W
H = np.array([[4.0, 1.0], [1.0, 2.0]])
Z = np.array([[2.0, 0.0], [0.0, 0.5]])  # predicted 0 and 1


def test_hand_computed_caref() -> None:
    det = detectors.get("caref").fit(features=H_TRAIN, logits=Z_TRAIN)
    np.testing.assert_allclose(det.means_, [[3.0, 0.0], [0.0, 3.0]])
    # |(4, 1) - (3, 0)|_1 / 5 = 2/5 and |(1, 2) - (0, 3)|_1 / 3 = 2/3
    np.testing.assert_allclose(det.score(features=H, logits=Z), [-2 / 5, -2 / 3])


def test_hand_computed_cadref() -> None:
    # Sample 1: d = ((4, 1) - (3, 0)) * (1, -1) = (1, -1): E_p = 1/5, E_n = 1/5.
    # Sample 2: d = ((1, 2) - (0, 3)) * (-1, 1) = (-1, -1): E_p = 0, E_n = 2/3.
    e_p, e_n = np.array([0.2, 0.0]), np.array([0.2, 2 / 3])
    fit = {"features": H_TRAIN, "logits": Z_TRAIN, "head": HEAD}
    # MaxLogit: S = 2 and 0.5 on the test logits, 1 on every training logit.
    det = detectors.get("cadref", logit_method="mls").fit(**fit)
    np.testing.assert_allclose(det.score(features=H, logits=Z), -(e_p / [2.0, 0.5] + e_n / 1.0))
    # Energy: S = log(1 + e^2), log(1 + e^0.5); log(1 + e) on every training logit.
    det = detectors.get("cadref").fit(**fit)
    s = np.array([math.log(1 + math.e**2), math.log(1 + math.e**0.5)])
    np.testing.assert_allclose(
        det.score(features=H, logits=Z), -(e_p / s + e_n / math.log(1 + math.e))
    )
    # MSP: S = e^2 / (1 + e^2), e^0.5 / (1 + e^0.5); e / (1 + e) on the training logits.
    det = detectors.get("cadref", logit_method="msp").fit(**fit)
    s = np.array([math.e**2 / (1 + math.e**2), math.e**0.5 / (1 + math.e**0.5)])
    np.testing.assert_allclose(
        det.score(features=H, logits=Z), -(e_p / s + e_n / (math.e / (1 + math.e)))
    )
    # GEN with C = 2 < 10: every probability; S = 1 / sum_c p_c^0.1 (1 - p_c)^0.1.
    det = detectors.get("cadref", logit_method="gen").fit(**fit)
    p = np.array([math.e**2 / (1 + math.e**2), math.e**0.5 / (1 + math.e**0.5)])
    s = 1 / (2 * (p * (1 - p)) ** 0.1)
    p0 = math.e / (1 + math.e)
    np.testing.assert_allclose(
        det.score(features=H, logits=Z), -(e_p / s + e_n * 2 * (p0 * (1 - p0)) ** 0.1)
    )


def reference_scores(
    h_train: np.ndarray,
    z_train: np.ndarray,
    w: np.ndarray,
    h: np.ndarray,
    z: np.ndarray,
    method: str,
    logit_method: str,
) -> np.ndarray:
    """The released CARef / CADRef scores in float64 torch on the CPU, ported from
    LingAndZero/CADRef@utils/get_stat.py (``get_features``: grouping by predicted class),
    @ood_methods/CARef.py and @ood_methods/CADRef.py (``get_state``, ``eval``, the logit
    scores); the model's forward pass is replaced by the given logits and features."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional

    def maxLogits(output):
        return output.max(dim=1).values

    def gen(output, gamma=0.1):
        M = output.shape[-1] // 10
        M = 10 if M < 10 else M
        smax = F.softmax(output, dim=1)
        probs_sorted = torch.sort(smax, dim=1).values[:, -M:]
        scores = torch.sum(probs_sorted**gamma * (1 - probs_sorted) ** gamma, axis=1)
        return 1 / scores

    def energy(output):
        return torch.logsumexp(output, dim=1)

    def msp(output):
        return torch.max(F.softmax(output, dim=1), dim=1).values

    scorers = {"MaxLogit": maxLogits, "GEN": gen, "Energy": energy, "MSP": msp}

    def get_logits_score(logits):
        return scorers[logit_method or "Energy"](logits)

    num_classes = z_train.shape[1]
    features: list[list] = [[] for _ in range(num_classes)]  # get_features
    logits: list[list] = [[] for _ in range(num_classes)]
    output, feature = torch.from_numpy(z_train), torch.from_numpy(h_train)
    p_labels = output.argmax(1)
    for i in range(output.size(0)):
        logits[p_labels[i]].append(output[i])
        features[p_labels[i]].append(feature[i])
    save_features = [torch.stack(f, dim=0) for f in features]
    save_logits = [torch.stack(g, dim=0) for g in logits]
    train_mean = torch.stack([f.mean(dim=0) for f in save_features])  # get_mean_feature
    global_mean_logit_score = torch.mean(
        torch.cat([get_logits_score(g) for g in save_logits]), dim=0
    )
    logit, feature = torch.from_numpy(z), torch.from_numpy(h)  # eval
    class_ids = torch.argmax(torch.softmax(logit, dim=1), dim=1).cpu().numpy()
    tm = train_mean[class_ids]
    if method == "caref":
        score = (tm - feature).norm(dim=1, p=1) / feature.norm(dim=1, p=1)
        return -score.numpy()
    dist = feature - tm
    sg = torch.from_numpy(w)[class_ids].sign()
    ep_dist = dist * sg
    ep_dist[ep_dist < 0] = 0
    ep_error = ep_dist.norm(dim=1, p=1) / feature.norm(dim=1, p=1)
    en_dist = dist * (-sg)
    en_dist[en_dist < 0] = 0
    en_error = en_dist.norm(dim=1, p=1) / feature.norm(dim=1, p=1)
    logit_score = get_logits_score(logit)
    score = ep_error / logit_score + en_error / global_mean_logit_score
    return -score.numpy()


@pytest.mark.parametrize(
    ("name", "logit_method", "ref_method"),
    [
        ("caref", None, None),
        ("cadref", "energy", "Energy"),
        ("cadref", "msp", "MSP"),
        ("cadref", "mls", "MaxLogit"),
        ("cadref", "gen", "GEN"),
    ],
)
def test_agrees_with_released_code(name: str, logit_method: str, ref_method: str) -> None:
    rng = np.random.default_rng(11)
    d, c = 48, 120  # C >= 100, so GEN keeps the top C // 10 = 12 probabilities
    means = 3.0 * (rng.random((c, d)) < 0.3)
    y = np.tile(np.arange(c), 5)
    h_train = np.maximum(means[y] + rng.standard_normal((y.size, d)), 0)
    h = np.maximum(means[rng.integers(0, c, 300)] + 1.5 * rng.standard_normal((300, d)), 0)
    # a head scaled so that the softmax does not saturate: for p within rounding of 1, the
    # factor (1 - p)^0.1 of GEN depends on the last bit of p, which differs between softmaxes
    w = 0.1 * (means - means.mean(0))
    b = 0.1 * rng.standard_normal(c)
    z_train, z = h_train @ w.T + b, h @ w.T + b
    params = {} if logit_method is None else {"logit_method": logit_method}
    fit = {"features": h_train, "logits": z_train, "head": (w, b)}
    ours = detectors.get(name, **params).fit(**fit).score(features=h, logits=z)
    ref = reference_scores(h_train, z_train, w, h, z, name, ref_method)
    np.testing.assert_allclose(ours, ref, rtol=1e-9)
    assert scipy.stats.spearmanr(ours, ref).statistic >= 0.999


@pytest.mark.parametrize("name", ["caref", "cadref"])
def test_class_never_predicted(name: str) -> None:
    z = Z_TRAIN.copy()
    z[[1, 3], 0] = 5.0  # nothing is predicted as class 1 any more
    with pytest.raises(InputError, match=rf"^{name}.fit: 1 class\(es\) have fewer than 1 "
                       r"training samples predicted as them: class id\(s\) 1; every class in "
                       r"\[0, 2\) needs 1 or more$"):  # fmt: skip
        detectors.get(name).fit(features=H_TRAIN, logits=z, head=HEAD)


def test_non_positive_mean_logit_score() -> None:
    with pytest.raises(InputError, match=r"^cadref.fit: the mean training mls score is -4, not "
                       r"positive, so the decoupled errors would change sign; use "
                       r"logit_method='msp' or 'gen' \(always positive\)$"):  # fmt: skip
        detectors.get("cadref", logit_method="mls").fit(
            features=H_TRAIN, logits=Z_TRAIN - 5.0, head=HEAD
        )


def test_doctests() -> None:
    result = doctest.testmod(semshift.detectors.cadref, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
