"""MCM: a hand-computed case, the open_clip head, agreement with pytorch-ood's MCM, bad input.

semshift's open_clip adapter stores L2-normalised image embeddings as features and the head
W = s T, b = 0 (T the normalised class text embeddings, s = exp(logit_scale)), so the stored
logits are s cos(h, T_c). The tests build exactly that from random embeddings.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special
import scipy.stats

from semshift import detectors
from semshift.errors import InputError

LOGIT_SCALE = 100.0  # exp(logit_scale) of trained CLIP models


def _clip_like(seed: int = 0, n: int = 40, n_classes: int = 5, dim: int = 16):
    rng = np.random.default_rng(seed)
    text = rng.standard_normal((n_classes, dim))
    text /= np.linalg.norm(text, axis=1, keepdims=True)
    image = text[rng.integers(0, n_classes, n)] + 0.8 * rng.standard_normal((n, dim))
    image /= np.linalg.norm(image, axis=1, keepdims=True)
    return image, text


def test_hand_computed() -> None:
    # text embeddings e_0 and e_1 scaled by s = 2; image (1, 0) has cosines (1, 0), image
    # (3, 4) has (0.6, 0.8): MCM = max softmax(cos / tau)
    head = (2.0 * np.eye(2), np.zeros(2))
    h = np.array([[1.0, 0.0], [3.0, 4.0]])
    for tau in (1.0, 0.1):
        det = detectors.get("mcm", temperature=tau).fit(head=head)
        expected = [
            math.exp(1 / tau) / (math.exp(1 / tau) + 1.0),
            math.exp(0.8 / tau) / (math.exp(0.6 / tau) + math.exp(0.8 / tau)),
        ]
        np.testing.assert_allclose(det.score(features=h), expected, rtol=1e-6)


@pytest.mark.parametrize("tau", [1.0, 0.01])
def test_equals_msp_of_the_stored_logits_divided_by_s_tau(tau: float) -> None:
    image, text = _clip_like()
    w = LOGIT_SCALE * text
    logits = image @ w.T  # what the adapter stores: s cos
    det = detectors.get("mcm", temperature=tau).fit(head=(w, np.zeros(len(w))))
    expected = scipy.special.softmax(logits / (LOGIT_SCALE * tau), axis=1).max(axis=1)
    np.testing.assert_allclose(det.score(features=image), expected, rtol=1e-5)


@pytest.mark.parametrize("tau", [1.0, 0.01])
def test_agrees_with_pytorch_ood(tau: float) -> None:
    torch = pytest.importorskip("torch")
    pood = pytest.importorskip("pytorch_ood.detector")
    image, text = _clip_like(seed=2, n=200, n_classes=10, dim=32)
    ref = pood.MCM(None, torch.tensor(text).float(), temperature=tau)
    theirs = ref.predict_features(torch.tensor(image).float()).numpy()
    det = detectors.get("mcm", temperature=tau).fit(head=(LOGIT_SCALE * text, np.zeros(10)))
    ours = det.score(features=image)
    np.testing.assert_allclose(ours, -theirs, rtol=1e-5)
    # measured: Spearman 1.000000 at tau = 1 (max |ours + theirs| 2e-8). At tau = 0.01 the
    # softmax saturates and their float32 rounds 37 of the 200 scores to exactly 1 (ties that
    # float64 orders): Spearman 0.9968 over all samples, 0.99997 over the other 163.
    open_ = -theirs < 1.0
    assert open_.sum() >= 150
    assert scipy.stats.spearmanr(ours[open_], -theirs[open_]).statistic >= 0.999


def test_embeddings_of_another_size_are_refused() -> None:
    image, text = _clip_like(dim=16)
    det = detectors.get("mcm").fit(head=(LOGIT_SCALE * text, np.zeros(len(text))))
    with pytest.raises(InputError, match=r"^mcm.score: feature dimension 12 does not match fit's "
                       r"16 \(features have shape \(40, 12\)\)$"):  # fmt: skip
        det.score(features=image[:, :12])
