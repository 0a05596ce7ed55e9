"""GMM's first pass from the shared scan: its error bound holds for every (row, class) pair,
and the scores are the float64 ones with unequal classes (one sample, duplicated rows)."""

from __future__ import annotations

import importlib
import math
from typing import Any

import numpy as np
import pytest
import scipy.special

from semshift import detectors

gmm_module = importlib.import_module("semshift.detectors.gmm")

COUNTS = (1, 2, 5, 9, 12, 12, 3, 7, 30, 6)  # all below D: gmm scans


def _problem(offset: float, dim: int = 40) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    mu = 3.0 * (rng.random((len(COUNTS), dim)) < 0.3) * rng.uniform(0.5, 1.5, (len(COUNTS), dim))
    y = np.repeat(np.arange(len(COUNTS)), COUNTS)
    x = np.maximum(mu[y] + rng.standard_normal((y.size, dim)), 0)
    x[y == 5] = x[y == 5][[0, 1, 2, 0, 1, 2, 3, 4, 0, 1, 2, 3]]  # duplicated rows: rank 4
    perm = rng.permutation(y.size)  # classes interleaved in the training rows
    # test rows: near each class, between two classes, and far from all
    near = mu[rng.integers(0, len(COUNTS), 40)] + 0.5 * rng.standard_normal((40, dim))
    pick = rng.integers(0, len(COUNTS), (30, 2))
    between = 0.5 * (mu[pick[:, 0]] + mu[pick[:, 1]]) + 0.3 * rng.standard_normal((30, dim))
    far = 4.0 * rng.standard_normal((20, dim))
    h = np.concatenate([near, between, far])
    return x[perm] + offset, y[perm], h + offset


def _plain(x: np.ndarray, y: np.ndarray, reg: float, h: np.ndarray) -> np.ndarray:
    parts = []
    for c in range(len(COUNTS)):
        xc = x[y == c]
        cov = np.cov(xc, rowvar=False, bias=True) if len(xc) > 1 else np.zeros((h.shape[1],) * 2)
        cov = cov + reg * np.eye(h.shape[1])
        d = h - xc.mean(axis=0)
        md = np.einsum("ij,jk,ik->i", d, np.linalg.inv(cov), d)
        log_det = np.linalg.slogdet(cov)[1]
        log_pdf = -0.5 * (md + log_det + h.shape[1] * math.log(2 * math.pi))
        parts.append(np.log(len(xc) / len(x)) + log_pdf)
    return scipy.special.logsumexp(np.stack(parts, axis=1), axis=1)


def _float64_log_density(det: Any, hb: np.ndarray) -> np.ndarray:
    """Every (row, class) log density from the float64 formulas the scores are recomputed with."""
    n_classes = det.means_.shape[0]
    out = np.zeros((hb.shape[0], n_classes))
    hb_sq = np.einsum("ij,ij->i", hb, hb)
    every = np.ones(out.shape, dtype=bool)
    det._recompute(hb, hb_sq, out, every, 0, n_classes)
    return out


@pytest.mark.parametrize(("reg", "offset"), [(1e-6, 0.0), (1e-6, 1e3), (1e-2, 0.0), (10.0, 0.0)])
def test_first_pass_error_is_within_its_bound(reg: float, offset: float) -> None:
    x, y, h = _problem(offset)
    det = detectors.get("gmm", reg=reg).fit(features=x, labels=y)
    assert det.requests() != ()  # the scan's first pass
    assert det.ranks_[0] == 0  # one sample
    assert det.ranks_[5] == 4 or offset != 0  # duplicated rows (the offset's rounding adds one)
    bank = det._rows
    hc = h - bank.center
    prod = hc.astype(np.float32) @ bank.rows32.T  # what the scan hands over
    first, dot, proj_sq, hb_sq, hb_norm = det._scan_first_pass(hc, prod)
    want = _float64_log_density(det, hc)
    classes, members = np.nonzero(np.ones(first.shape, dtype=bool))
    slack = det._scan_slack(
        hb_sq[members], hb_norm[members], proj_sq[classes, members], dot[classes, members],
        classes,
    )  # fmt: skip
    error = np.abs(first[classes, members] - want[members, classes])
    assert np.all(error <= slack)
    assert error.max() > 0  # float32 made a difference the bound covers
    # the bound of the first screening is above every class's
    widest = det._scan_slack(hb_sq, hb_norm, proj_sq.max(axis=0), None, None)
    assert np.all(slack <= widest[members])


@pytest.mark.parametrize("dense_share", [0.0, 1.0])
@pytest.mark.parametrize(("reg", "offset"), [(1e-6, 0.0), (1e-6, 1e3), (10.0, 0.0)])
def test_scan_scores_are_the_float64_ones(
    monkeypatch: pytest.MonkeyPatch, dense_share: float, reg: float, offset: float
) -> None:
    # recomputed pair by pair (dense_share 1) or in whole groups (0)
    monkeypatch.setattr(gmm_module, "_DENSE_SHARE", dense_share)
    x, y, h = _problem(offset)
    det = detectors.get("gmm", reg=reg).fit(features=x, labels=y)
    np.testing.assert_allclose(det.score(features=h), _plain(x, y, reg, h), rtol=1e-9)


def test_few_pairs_are_recomputed_and_sub_blocks_change_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    x, y, h = _problem(0.0)
    det = detectors.get("gmm").fit(features=x, labels=y)
    pairs = []
    original = det._recompute_pairs

    def counting(hb, hb_sq, classes, members):  # type: ignore[no-untyped-def]
        pairs.append(classes.size)
        return original(hb, hb_sq, classes, members)

    monkeypatch.setattr(det, "_recompute_pairs", counting)
    monkeypatch.setattr(gmm_module, "_DENSE_SHARE", 1.0)  # 10 classes: pair by pair all the same
    scores = det.score(features=h)
    # reg = 1e-6 separates the classes by many more nats than the bound: about one class a row
    assert h.shape[0] <= sum(pairs) <= 1.5 * h.shape[0]
    monkeypatch.setattr(gmm_module, "_SCAN_ROWS", 7)  # first pass in sub-blocks of 7 rows
    np.testing.assert_array_equal(det.score(features=h), scores)


def test_log_densities_beyond_float32_are_computed_in_float64() -> None:
    # reg = 1e-36 puts ||h - mu_c||^2 / reg beyond float32's range: no float32 first pass
    x, y, h = _problem(0.0)
    det = detectors.get("gmm", reg=1e-36).fit(features=x, labels=y)
    want = scipy.special.logsumexp(_float64_log_density(det, h - det._rows.center), axis=1)
    got = det.score(features=h)
    assert np.all(np.isfinite(got)) and np.all(got < -1e30)
    np.testing.assert_allclose(got, want, rtol=1e-12)
