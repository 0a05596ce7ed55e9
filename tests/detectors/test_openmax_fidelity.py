"""OpenMax reproduces the reference code's Weibull tail fit (docs/methods.md#openmax).

``weibull="libmr"`` (the default) is libMR's ``FitHigh`` as OpenOOD runs it: known answers from
libmr 0.1.9 (the PyPI release OpenOOD installs, built from its sdist), agreement with scipy's
MLE on the translated tail, and agreement with pytorch-ood's OpenMax, whose ``LibNotMR`` is the
same fit with a translation of 10000. ``weibull="mle"`` keeps the untranslated MLE.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest
import scipy.stats
from pytorch_ood.detector.openmax import numpy as pood_openmax
from pytorch_ood.detector.openmax.libnotmr import LibNotMR

from semshift import detectors
from semshift.detectors.openmax import weibull_fit_libmr, weibull_fit_loc0
from semshift.errors import InputError

from .conftest import Problem, make_problem

TAIL = np.array([3.1, 3.4, 3.45, 3.8, 3.95, 4.2, 4.25, 4.6, 4.9, 5.3, 5.35, 5.9, 6.4, 6.8, 7.7,
                 8.1, 8.9, 9.6, 10.8, 12.5])  # fmt: skip
PROBE = np.array([2.0, 3.1, 4.0, 6.0, 9.0, 12.5, 15.0])

#: libmr 0.1.9: ``m = libmr.MR(translate_amount=T); m.fit_high(TAIL, 20)``;
#: ``m.get_params()`` gives (scale, shape, sign=1, T, small_score=3.1); then
#: ``[m.w_score(x) for x in PROBE]``. ``libmr.MR()`` is T = 1.
LIBMR = {
    1: (
        4.561573529947638,
        1.6590552350510102,
        [0.0, 0.07746429387199982, 0.20852909709479928, 0.537488137968029,
         0.8628885080082356, 0.980252003912687, 0.9963417271508632],
    ),
    10000: (
        10004.44948803934,
        3430.223756744028,
        [0.13849882346236986, 0.19540624783020066, 0.256249466459583, 0.4444697152797613,
         0.8068478212741431, 0.9957351104145346, 0.9999973826697208],
    ),
}  # fmt: skip


def _w_score(x: np.ndarray, shape: float, scale: float, shift: float) -> np.ndarray:
    """libMR's ``W_score``: the Weibull CDF of the translated value, 0 below 0."""
    t = x + shift
    return np.where(t < 0, 0.0, 1.0 - np.exp(-((np.maximum(t, 0.0) / scale) ** shape)))


@pytest.mark.parametrize("translate", [1, 10000])
def test_libmr_fit_known_answer(translate: int) -> None:
    shape, scale, small = weibull_fit_libmr(TAIL[None], np.ones((1, 20), bool), translate)
    ref_scale, ref_shape, ref_w = LIBMR[translate]
    assert small[0] == 3.1  # libMR's small_score: the smallest tail value
    # libMR stops its root search at a tolerance of 1e-6 (in units of the log-data range);
    # here the likelihood equation is solved exactly
    np.testing.assert_allclose([shape[0], scale[0]], [ref_shape, ref_scale], rtol=1e-5)
    w = _w_score(PROBE, shape[0], scale[0], translate - small[0])
    np.testing.assert_allclose(w, ref_w, rtol=0, atol=1e-6)
    if translate == 1:
        assert w[0] == 0.0  # 2.0 + 1 - 3.1 < 0: below the translated origin
    # the same maximum scipy finds on the translated tail (location 0), at least as likely
    shifted = TAIL + translate - 3.1
    ks, loc, ls = scipy.stats.weibull_min.fit(shifted, floc=0.0)
    assert loc == 0.0
    np.testing.assert_allclose([shape[0], scale[0]], [ks, ls], rtol=2e-4)
    ll = scipy.stats.weibull_min.logpdf(shifted, shape[0], scale=scale[0]).sum()
    assert ll >= scipy.stats.weibull_min.logpdf(shifted, ks, scale=ls).sum() - 1e-9


@pytest.mark.parametrize("translate", [1, 10000])
def test_libmr_fit_matches_pytorch_oods_libnotmr_per_class(translate: int) -> None:
    rng = np.random.default_rng(0)
    counts = [35] * 9 + [5, 3, 2]  # the last classes have fewer samples than the tail
    data = [rng.gamma(3.0, 1.5, n) for n in counts]
    sizes = np.minimum(counts, 20)
    valid = np.arange(20)[None, :] < sizes[:, None]
    tails = np.zeros((12, 20))
    for c, d in enumerate(data):
        tails[c, : sizes[c]] = np.sort(d)[-sizes[c] :]
    shape, scale, small = weibull_fit_libmr(tails, valid, translate)
    for c, d in enumerate(data):
        ref = LibNotMR(tailsize=20)
        ref.translation = translate  # 10000 is LibNotMR's own; 1 is libmr.MR()'s
        ref.fit_high(d)
        assert small[c] == ref.min_val
        # LibNotMR maximises the same likelihood with Nelder-Mead (scipy's exponweib.fit)
        np.testing.assert_allclose([shape[c], scale[c]], [ref.c, ref.scale], rtol=5e-5)
        # a class fitted alone gives the same numbers as in the padded batch
        alone = weibull_fit_libmr(tails[c : c + 1, : sizes[c]], valid[c : c + 1, : sizes[c]],
                                  translate)  # fmt: skip
        np.testing.assert_allclose([a[0] for a in alone], [shape[c], scale[c], small[c]],
                                   rtol=1e-12)  # fmt: skip


def test_default_is_libmr_of_openood_and_mle_is_the_untranslated_fit() -> None:
    params = detectors.get("openmax").get_params()
    assert params == {"alpha": 3, "tail_size": 20, "weibull": "libmr", "translate_amount": 1.0}
    # three classes; class 0's correct samples sit at the distances TAIL (twice, +-) from its
    # mean, so with tail_size=40 its tail is TAIL twice (the same MLE as TAIL once)
    rows = [[20.0, 0.0, s * d] for d in TAIL for s in (1, -1)]
    rows += [[0.0, 20.0, s * d] for d in (1.0, 2.0) for s in (1, -1)]
    rows += [[s * d, 0.0, 20.0] for d in (1.0, 2.0) for s in (1, -1)]
    z = np.array(rows)
    y = np.r_[np.zeros(40, int), np.ones(4, int), np.full(4, 2)]
    det = detectors.get("openmax", tail_size=40).fit(logits=z, labels=y)
    np.testing.assert_allclose(det.mav_, np.diag([20.0, 20.0, 20.0]), atol=1e-12)
    # libmr 0.1.9, libmr.MR().fit_high(data, len(data)): TAIL twice; [1, 1, 2, 2]
    np.testing.assert_allclose(det.weibull_shape_, [1.6590552643484744, 3.4615482912868254,
                                                    3.4615482912868254], rtol=1e-5)  # fmt: skip
    np.testing.assert_allclose(det.weibull_scale_, [4.561573552090823, 1.6786778376785134,
                                                    1.6786778376785134], rtol=1e-5)  # fmt: skip
    np.testing.assert_allclose(det.weibull_shift_, [1 - 3.1, 1 - 1.0, 1 - 1.0], rtol=1e-15)
    # the score by hand, OpenOOD's recalibration with libMR's w-scores, minus P(unknown)
    probe = np.array([[15.0, 3.0, 1.0], [5.0, 4.0, 3.0], [0.0, 0.0, 0.5], [20.0, 0.0, 14.0]])
    expected = []
    for row in probe:
        weights = np.ones(3)
        for rank, c in enumerate(np.argsort(-row)[:3], start=1):
            d = float(np.linalg.norm(row - det.mav_[c]))
            w = _w_score(np.array([d]), det.weibull_shape_[c], det.weibull_scale_[c],
                         det.weibull_shift_[c])[0]  # fmt: skip
            weights[c] = 1 - (3 - rank + 1) / 3 * w
        full = np.r_[row * weights, np.sum(row * (1 - weights))]
        expected.append(-math.exp(full[-1]) / np.exp(full).sum())
    np.testing.assert_allclose(det.score(logits=probe), expected, rtol=1e-12, atol=1e-15)
    # "mle": the plain maximum likelihood of the untranslated distances
    mle = detectors.get("openmax", tail_size=40, weibull="mle").fit(logits=z, labels=y)
    k, lam = weibull_fit_loc0(np.r_[TAIL, TAIL][None], np.ones((1, 40), bool))
    np.testing.assert_allclose([mle.weibull_shape_[0], mle.weibull_scale_[0]], [k[0], lam[0]],
                               rtol=1e-12)  # fmt: skip
    np.testing.assert_array_equal(mle.weibull_shift_, 0.0)
    ks, _, ls = scipy.stats.weibull_min.fit(TAIL, floc=0.0)  # shape 2.53 against libMR's 1.66
    np.testing.assert_allclose([mle.weibull_shape_[0], mle.weibull_scale_[0]], [ks, ls], rtol=2e-4)
    assert mle.weibull_shape_[0] - det.weibull_shape_[0] > 0.8
    # translate_amount only acts with "libmr"
    other = detectors.get("openmax", tail_size=40, weibull="mle", translate_amount=5.0)
    other.fit(logits=z, labels=y)
    np.testing.assert_array_equal(other.score(logits=probe), mle.score(logits=probe))


@pytest.fixture(scope="module")
def shared() -> Problem:
    p = make_problem(seed=0, n_classes=10, n_per_class=80, n_test_id=200, n_test_ood=200,
                     noise=1.5)  # fmt: skip
    # pytorch-ood's predict measures distances only to the classes some test row predicts (0
    # to the others): every class is predicted here, so that quirk plays no part
    assert np.unique(p.z_test.argmax(1)).size == 10
    return p


@pytest.fixture
def libnotmr_translation(monkeypatch: pytest.MonkeyPatch) -> Iterator[type]:
    """pytorch-ood's OpenMax with LibNotMR's translation settable (10000 is its own)."""

    class Translated(LibNotMR):
        translation_amount = 10000

        def __init__(self, tailsize: int = 20) -> None:
            super().__init__(tailsize)
            self.translation = type(self).translation_amount

    monkeypatch.setattr(pood_openmax, "LibNotMR", Translated)
    yield Translated


def _reference(p: Problem) -> pood_openmax.OpenMax:
    """pytorch-ood's OpenMax on the correctly classified training logits (what OpenMax fits)."""
    ok = p.z_train.argmax(1) == p.y_train
    ref = pood_openmax.OpenMax(tailsize=20, alpha=3, euclid_weight=1.0)
    return ref.fit(p.z_train[ok], p.y_train[ok])


@pytest.mark.parametrize("translate", [1.0, 10000.0])
def test_scores_agree_with_pytorch_ood(shared, libnotmr_translation, translate: float) -> None:
    libnotmr_translation.translation_amount = translate
    ref = _reference(shared)
    theirs = -ref.predict(shared.z_test)[:, 0]  # theirs: P(unknown), higher = more OOD
    det = detectors.get("openmax", translate_amount=translate)
    ours = det.fit(logits=shared.z_train, labels=shared.y_train).score(logits=shared.z_test)
    rho = scipy.stats.spearmanr(ours, theirs).statistic
    # measured: 0.99989 (translation 1) and 0.99992 (10000); what differs is only LibNotMR's
    # Nelder-Mead fit (about 1e-5 from the exact maximum), felt among near-tied tiny scores
    assert rho >= 0.9998
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-4 if translate == 1.0 else 1e-5)
    # with LibNotMR's curves replaced by ours, the two are equal up to float rounding
    for c, model in ref.distributions.items():
        model.c, model.scale = det.weibull_shape_[c], det.weibull_scale_[c]
    np.testing.assert_allclose(det.mav_, np.stack([ref.centers[c] for c in range(10)]), atol=0)
    np.testing.assert_allclose(ours, -ref.predict(shared.z_test)[:, 0], rtol=0, atol=1e-13)
    # the untranslated MLE ranks the samples visibly differently
    mle = detectors.get("openmax", weibull="mle").fit(logits=shared.z_train, labels=shared.y_train)
    rho_mle = scipy.stats.spearmanr(mle.score(logits=shared.z_test), theirs).statistic
    assert rho_mle < 0.998 < rho


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"weibull": "exact"}, "openmax: weibull must be one of 'libmr', 'mle', got 'exact'"),
        ({"translate_amount": 0}, "openmax: translate_amount must be a number > 0, got 0"),
    ],
)
def test_bad_weibull_options_are_refused_before_fitting(params, message) -> None:
    with pytest.raises(InputError) as info:
        detectors.get("openmax", **params).fit()
    assert str(info.value) == message
