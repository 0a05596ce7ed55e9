"""NECO: a hand-computed case, agreement with the authors' released code, bad inputs."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
import scipy.stats
from numpy import linalg as LA
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler

import semshift.detectors.neco
from semshift import detectors
from semshift.errors import InputError


def test_hand_computed_scores() -> None:
    # Columns 0 and 1 have standard deviations sqrt(2.5) and 3 sqrt(2.5) and correlation 0.6,
    # so the top principal axis of the standardised features is (1, 1) / sqrt(2); column 2
    # is constant (scale 1, standardised value 0).
    h_train = np.array([[3, 9, 5], [-1, -3, 5], [2, 0, 5], [0, 6, 5]], float)  # mean (1, 3, 5)
    det = detectors.get("neco", dim=1).fit(features=h_train)
    h = np.array([[4.0, 12.0, 5.0], [2.0, 3.0, 5.0]])  # z = (3, 3, 0) / sqrt(2.5), (1, 0, 0) / ...
    z = np.array([[0.0, 2.0], [1.0, -1.0]])  # max logits 2 and 1
    np.testing.assert_allclose(det.score(features=h, logits=z), [2.0, 1 / math.sqrt(2)], rtol=1e-6)
    det = detectors.get("neco", dim=1, max_logit=False).fit(features=h_train)
    np.testing.assert_allclose(det.score(features=h, logits=z), [1.0, 1 / math.sqrt(2)], rtol=1e-6)
    np.testing.assert_allclose(det.mean_, [1.0, 3.0, 5.0])
    np.testing.assert_allclose(det.scale_, [math.sqrt(2.5), 3 * math.sqrt(2.5), 1.0])


def reference_neco(
    feature_id_train: np.ndarray,
    feature_id_val: np.ndarray,
    logit_id_val: np.ndarray,
    model_architecture_type: str,
    neco_dim: int,
) -> np.ndarray:
    """The NECO score of the authors' released code, for the ID evaluation set only.

    Ported from gitlab.com/drti/neco ``ood_methods.py::neco`` (as mirrored in
    YuhengZhangMelody/NECO@neco-mastery/ood_methods.py); the OOD half, identical, is dropped.
    """
    ss = StandardScaler()
    complete_vectors_train = ss.fit_transform(feature_id_train)
    complete_vectors_test = ss.transform(feature_id_val)
    pca_estimator = PCA(feature_id_train.shape[1])
    _ = pca_estimator.fit_transform(complete_vectors_train)
    cls_test_reduced_all = pca_estimator.transform(complete_vectors_test)
    score_id_maxlogit = logit_id_val.max(axis=-1)
    if model_architecture_type in ["deit", "swin"]:
        complete_vectors_test = feature_id_val
    cls_test_reduced = cls_test_reduced_all[:, :neco_dim]
    l_ID = []
    for i in range(cls_test_reduced.shape[0]):
        sc_complet = LA.norm(complete_vectors_test[i, :])
        sc = LA.norm(cls_test_reduced[i, :])
        sc_finale = sc / sc_complet
        l_ID.append(sc_finale)
    score_id = np.array(l_ID)
    if model_architecture_type != "resnet":
        score_id *= score_id_maxlogit
    return score_id


@pytest.mark.parametrize(("arch", "max_logit"), [("vit", True), ("resnet", False)])
def test_agrees_with_released_code(arch: str, max_logit: bool) -> None:
    rng = np.random.default_rng(3)
    d, c = 40, 7
    mix = rng.standard_normal((d, d)) * rng.uniform(0.2, 2.0, d)  # correlated, unequal scales
    h_train = np.maximum(rng.standard_normal((600, d)) @ mix + 1.0, 0)
    h_test = np.maximum(rng.standard_normal((300, d)) @ mix + 1.0, 0)
    w, b = rng.standard_normal((c, d)), rng.standard_normal(c)
    z_test = h_test @ w.T + b + 5.0  # positive max logits, as for trained networks
    ours = (
        detectors.get("neco", dim=12, max_logit=max_logit)
        .fit(features=h_train)
        .score(features=h_test, logits=z_test)
    )
    ref = reference_neco(h_train, h_test, z_test, arch, 12)
    np.testing.assert_allclose(ours, ref, rtol=1e-5)
    assert scipy.stats.spearmanr(ours, ref).statistic >= 0.999


def test_dim_must_be_below_the_feature_dimension() -> None:
    h = np.random.default_rng(0).random((50, 8))
    with pytest.raises(InputError, match=r"^neco.fit: dim = 8 principal axes must lie in \[1, D\) "
                       r"with feature dimension D = 8; lower dim$"):  # fmt: skip
        detectors.get("neco", dim=8).fit(features=h)


def test_doctests() -> None:
    result = doctest.testmod(semshift.detectors.neco, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
