"""GMM: hand-computed and scipy cases, agreement with pytorch-ood's GMM, and a bad input."""

from __future__ import annotations

import importlib
import math
from typing import Any

import numpy as np
import pytest
import scipy.special
import scipy.stats

from semshift import detectors
from semshift.errors import InputError

from .conftest import make_problem


def test_hand_computed() -> None:
    # class 0 at (0, 0) with covariance diag(1, 0), class 1 at (10, 10) likewise; reg = 1 gives
    # Sigma_c + I = diag(2, 1), pi_c = 1/2. At (0, 0) class 1 is 14 standard units away, so
    # log p = log(1/2) - (log 2 + 2 log(2 pi)) / 2 up to e^-100.
    h = np.array([[-1.0, 0.0], [1.0, 0.0], [9.0, 10.0], [11.0, 10.0]])
    det = detectors.get("gmm", reg=1.0).fit(features=h, labels=np.array([0, 0, 1, 1]))
    expected = math.log(0.5) - 0.5 * (math.log(2.0) + 2 * math.log(2 * math.pi))
    # at (2, 1): MD_0 = 4 / 2 + 1 = 3 more than at the centre
    np.testing.assert_allclose(
        det.score(features=np.array([[0.0, 0.0], [2.0, 1.0]])), [expected, expected - 1.5]
    )
    np.testing.assert_array_equal(det.ranks_, [1, 1])


@pytest.mark.parametrize(("dim", "per_class", "reg"), [(6, 40, 1e-6), (24, 8, 1e-6), (24, 8, 0.1)])
def test_matches_scipy_mixture(dim: int, per_class: int, reg: float) -> None:
    # full-rank classes (40 samples in 6-D) and rank-deficient ones (8 samples in 24-D)
    p = make_problem(seed=1, dim=dim, n_classes=3, n_per_class=per_class)
    det = detectors.get("gmm", reg=reg).fit(features=p.h_train, labels=p.y_train)
    parts = []
    for c in range(3):
        x = p.h_train[p.y_train == c]
        cov = np.cov(x, rowvar=False, bias=True) + reg * np.eye(dim)
        log_pdf = scipy.stats.multivariate_normal(x.mean(axis=0), cov).logpdf(p.h_test)
        parts.append(np.log(len(x) / len(p.h_train)) + log_pdf)
    expected = scipy.special.logsumexp(np.stack(parts, axis=1), axis=1)
    np.testing.assert_allclose(det.score(features=p.h_test), expected, rtol=1e-7)


@pytest.mark.parametrize(("dim", "per_class"), [(64, 120), (128, 40)])
def test_agrees_with_pytorch_ood(dim: int, per_class: int) -> None:
    torch = pytest.importorskip("torch")
    pood = pytest.importorskip("pytorch_ood.detector")
    p = make_problem(seed=3, dim=dim, n_classes=8, n_per_class=per_class)
    ref = pood.GMM(None).fit_features(torch.tensor(p.h_train), torch.tensor(p.y_train))
    theirs = ref.predict_features(torch.tensor(p.h_test)).numpy()
    ours = detectors.get("gmm").fit(**p.fit_inputs()).score(**p.score_inputs())
    # measured: Spearman 1.000000 in both regimes; relative difference 5e-10 (full-rank
    # classes) and 1e-10 (39-rank classes, where reg = 1e-6 scales distances by 1e6)
    assert scipy.stats.spearmanr(ours, -theirs).statistic >= 0.999
    np.testing.assert_allclose(ours, -theirs, rtol=1e-8)


def test_class_without_samples_is_refused(problem: Any) -> None:
    keep = problem.y_train != 4
    with pytest.raises(InputError, match=r"^gmm.fit: 1 class\(es\) have fewer than 1 training "
                       r"samples: class id\(s\) 4; every class in \[0, 6\)"):  # fmt: skip
        detectors.get("gmm").fit(features=problem.h_train[keep], labels=problem.y_train[keep])


def _plain_log_density(p: Any, reg: float, h: np.ndarray) -> np.ndarray:
    parts = []
    for c in np.unique(p.y_train):
        x = p.h_train[p.y_train == c]
        cov = np.cov(x, rowvar=False, bias=True) + reg * np.eye(x.shape[1])
        d = h - x.mean(axis=0)
        md = np.einsum("ij,jk,ik->i", d, np.linalg.inv(cov), d)
        logdet = np.linalg.slogdet(cov)[1]
        log_pdf = -0.5 * (md + logdet + x.shape[1] * math.log(2 * math.pi))
        parts.append(np.log(len(x) / len(p.h_train)) + log_pdf)
    return scipy.special.logsumexp(np.stack(parts, axis=1), axis=1)


@pytest.mark.parametrize("dense_share", [0.0, 1.0])
@pytest.mark.parametrize(("reg", "offset"), [(1e-6, 0.0), (1e-6, 1e3), (10.0, 0.0)])
def test_float32_first_pass_then_float64_agrees_with_float64(
    monkeypatch: pytest.MonkeyPatch, dense_share: float, reg: float, offset: float
) -> None:
    # Scoring screens the classes with float32 products and recomputes in float64 every class
    # that may come within 50 nats of a row's best: the result is the float64 one, whether the
    # recomputation goes class by class (dense_share 1) or a whole group at once (0), also
    # when a large common offset makes float32 products lose digits.
    gmm_module = importlib.import_module("semshift.detectors.gmm")
    monkeypatch.setattr(gmm_module, "_DENSE_SHARE", dense_share)
    p = make_problem(seed=7, dim=48, n_classes=30, n_per_class=12, sep=4.0)
    p.h_train = p.h_train + offset
    h = p.h_test + offset
    det = detectors.get("gmm", reg=reg).fit(features=p.h_train, labels=p.y_train)
    np.testing.assert_allclose(det.score(features=h), _plain_log_density(p, reg, h), rtol=1e-9)
