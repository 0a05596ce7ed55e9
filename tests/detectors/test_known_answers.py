"""Per-detector known answers, each computed independently from the formula in docs/methods.md.

The references below are deliberately plain: Python loops over samples and classes, scipy and
scikit-learn building blocks, float64 throughout; no code shared with the package.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import scipy.linalg
import scipy.optimize
import scipy.special
import scipy.stats
from sklearn.covariance import EmpiricalCovariance

from semshift import detectors

RTOL = 1e-5


def close(actual: np.ndarray, expected: Any, rtol: float = RTOL) -> None:
    expected = np.asarray(expected, dtype=np.float64)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * np.abs(expected).max())


def energy_of(z: np.ndarray) -> float:
    m = max(z)
    return m + math.log(sum(math.exp(v - m) for v in z))


def softmax_of(z: np.ndarray) -> np.ndarray:
    e = np.array([math.exp(v - max(z)) for v in z])
    return e / e.sum()


# -- hand-computed cases --------------------------------------------------------------------------
def test_hand_computed_logit_scores() -> None:
    z = np.array([[0.0, 0.0], [math.log(3.0), 0.0]])
    fit = {name: detectors.get(name).fit() for name in ("msp", "mls", "energy", "entropy", "gen")}
    close(fit["msp"].score(logits=z), [0.5, 0.75])
    close(fit["mls"].score(logits=z), [0.0, math.log(3.0)])
    close(fit["energy"].score(logits=z), [math.log(2.0), math.log(4.0)])
    close(
        fit["entropy"].score(logits=z),
        [math.log(0.5), 0.75 * math.log(0.75) + 0.25 * math.log(0.25)],
    )
    g = 0.1
    close(fit["gen"].score(logits=z), [-2 * 0.25**g, -2 * (0.75 * 0.25) ** g])


def test_hand_computed_fdbd() -> None:
    # Two classes in 2-D: W rows (1, 0) and (-1, 0), b = 0; boundary x = 0, ||W0 - W1|| = 2.
    w, b = np.array([[1.0, 0.0], [-1.0, 0.0]]), np.zeros(2)
    h_train = np.array([[1.0, 1.0], [-1.0, -1.0]])  # mean (0, 0)
    det = detectors.get("fdbd").fit(features=h_train, head=(w, b))
    h = np.array([[3.0, 4.0], [-0.5, 0.0]])
    # distance to boundary |x|, divided by ||h - 0||; mean over the C - 1 = 1 other class.
    close(det.score(features=h, logits=h @ w.T + b), [3.0 / 5.0, 0.5 / 0.5])


def test_hand_computed_mahalanobis_identity_covariance() -> None:
    # Two classes at (+-1, 0) with within-class deviations (0, +-1) and (+-1, 0):
    # the tied covariance is 0.5 * I, so MD = 2 ||h - mu||^2.
    h = np.array([[1, 1], [1, -1], [2, 0], [0, 0], [-1, 1], [-1, -1], [0, 0], [-2, 0]], float)
    y = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    det = detectors.get("mahalanobis").fit(features=h, labels=y)
    close(det.score(features=np.array([[1.0, 0.0], [0.0, 3.0]])), [0.0, -2 * (1 + 9)])


# -- logit detectors on the tiny problem ---------------------------------------------------------
def test_logit_detectors_match_loops(problem: Any) -> None:
    z = problem.z_test
    expected: dict[str, list[float]] = {"msp": [], "mls": [], "energy": [], "entropy": []}
    for row in z:
        p = softmax_of(row)
        expected["msp"].append(float(p.max()))
        expected["mls"].append(float(row.max()))
        expected["energy"].append(energy_of(row))
        expected["entropy"].append(float(sum(v * math.log(v) for v in p if v > 0)))
    for name, values in expected.items():
        close(detectors.get(name).fit().score(logits=z), values)


@pytest.mark.parametrize(("gamma", "m"), [(0.1, 100), (0.5, 3)])
def test_gen(problem: Any, gamma: float, m: int) -> None:
    z = problem.z_test
    expected = []
    for row in z:
        p = sorted(softmax_of(row), reverse=True)[: min(m, len(row))]
        expected.append(-sum(v**gamma * (1 - v) ** gamma for v in p))
    close(detectors.get("gen", gamma=gamma, M=m).fit().score(logits=z), expected)


def test_temp_scaling(problem: Any) -> None:
    zv, yv = problem.z_val * 0.3, problem.y_val  # scaled so the optimum is interior

    def nll(t: float) -> float:
        return float(-np.mean(scipy.special.log_softmax(zv / t, axis=1)[np.arange(len(yv)), yv]))

    t_ref = scipy.optimize.minimize_scalar(nll, bounds=(0.05, 20), method="bounded",
                                           options={"xatol": 1e-10}).x  # fmt: skip
    det = detectors.get("temp_scaling").fit(val_logits=zv, val_labels=yv)
    assert det.temperature_ == pytest.approx(t_ref, rel=1e-6)
    assert nll(det.temperature_) <= nll(t_ref) + 1e-12
    close(det.score(logits=problem.z_test), [softmax_of(r / t_ref).max() for r in problem.z_test])


def test_temp_scaling_at_the_bounds(problem: Any) -> None:
    zv, yv = problem.z_val, problem.y_val
    wrong = (yv + 1) % zv.shape[1]  # labels always contradict the logits: T -> infinity
    assert detectors.get("temp_scaling").fit(val_logits=zv, val_labels=wrong).temperature_ == 100
    sharp = np.eye(zv.shape[1])[yv] * 1e3  # perfectly separated: T -> 0
    det = detectors.get("temp_scaling").fit(val_logits=sharp, val_labels=yv)
    assert det.temperature_ == pytest.approx(0.01)


def test_klm(problem: Any) -> None:
    zv = problem.z_val
    pv = np.array([softmax_of(r) for r in zv])
    pred = zv.argmax(1)
    templates = [pv[pred == c].mean(0) for c in range(zv.shape[1]) if (pred == c).any()]
    expected = [
        -min(scipy.stats.entropy(softmax_of(r), d) for d in templates) for r in problem.z_test
    ]
    close(detectors.get("klm").fit(val_logits=zv).score(logits=problem.z_test), expected)


def test_klm_skips_classes_never_predicted(problem: Any) -> None:
    zv = problem.z_val.copy()
    zv[:, 2] -= 1e3  # class 2 is never predicted on the validation set
    det = detectors.get("klm").fit(val_logits=zv)
    assert 2 not in det.template_classes_
    assert det.templates_.shape == (zv.shape[1] - 1, zv.shape[1])
    scores = det.score(logits=problem.z_test)
    assert np.isfinite(scores).all()


def _weibull_mle(x: np.ndarray) -> tuple[float, float]:
    """The exact MLE scipy.stats.weibull_min.fit(x, floc=0) approximates (its optimiser stops
    at about 1e-4 relative): the root of the shape's likelihood equation, by brentq."""
    y = x / x.max()
    ln = np.log(y)

    def f(k: float) -> float:
        return float((y**k * ln).sum() / (y**k).sum() - 1 / k - ln.mean())

    k = scipy.optimize.brentq(f, 1e-3, 1e3, xtol=1e-14, rtol=1e-14)
    shape_ref, _, _ = scipy.stats.weibull_min.fit(x, floc=0)
    assert abs(k / shape_ref - 1) < 1e-3  # the same maximum as scipy's fit
    return k, float(x.max() * np.mean(y**k) ** (1 / k))


def test_openmax(problem: Any) -> None:
    z, y = problem.z_train, problem.y_train
    n_classes, alpha, tail = z.shape[1], 3, 20
    mav, shape, scale = [], [], []
    for c in range(n_classes):
        rows = [i for i in range(len(y)) if y[i] == c and z[i].argmax() == c]
        mu = z[rows].mean(0)
        dist = sorted(float(np.linalg.norm(z[i] - mu)) for i in rows)
        k, s = _weibull_mle(np.array(dist[-tail:]))
        mav.append(mu)
        shape.append(k)
        scale.append(s)
    expected = []
    for row in problem.z_test:
        w = np.ones(n_classes)
        for r, c in enumerate(np.argsort(-row)[:alpha], start=1):
            d = np.linalg.norm(row - mav[c])
            cdf = 1 - math.exp(-((d / scale[c]) ** shape[c]))
            w[c] = 1 - (alpha - r + 1) / alpha * cdf
        full = np.r_[row * w, np.sum(row * (1 - w))]
        expected.append(-softmax_of(full)[-1])
    det = detectors.get("openmax", weibull="mle").fit(logits=z, labels=y)  # the plain MLE
    close(det.score(logits=problem.z_test), expected)


# -- feature detectors ---------------------------------------------------------------------------
def test_max_cosine(problem: Any) -> None:
    w = problem.w
    expected = [
        max(float(h @ wc) / (np.linalg.norm(h) * np.linalg.norm(wc)) for wc in w)
        for h in problem.h_test
    ]
    det = detectors.get("max_cosine").fit(head=(w, problem.b))
    close(det.score(features=problem.h_test), expected)


def _class_means(h: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.stack([h[y == c].mean(0) for c in range(y.max() + 1)])


def test_mahalanobis_and_rmd(problem: Any) -> None:
    h, y = problem.h_train, problem.y_train
    mu = _class_means(h, y)
    prec = EmpiricalCovariance().fit(h - mu[y]).precision_
    prec0 = EmpiricalCovariance().fit(h).precision_
    mu0 = h.mean(0)
    md = np.array([[(x - m) @ prec @ (x - m) for m in mu] for x in problem.h_test])
    md0 = np.array([(x - mu0) @ prec0 @ (x - mu0) for x in problem.h_test])
    fit = {"features": h, "labels": y}
    maha = detectors.get("mahalanobis").fit(**fit).score(features=problem.h_test)
    close(maha, (-md).max(1))
    rmd = detectors.get("rmd").fit(**fit).score(features=problem.h_test)
    close(rmd, (-(md - md0[:, None])).max(1))


def test_rmd_both_routes_to_the_global_distance() -> None:
    """Full-rank within covariance: MD_0 by the Woodbury identity; rank-deficient: by the
    pseudo-inverse of the global covariance. Both against pinvh on the definitions."""
    rng = np.random.default_rng(7)
    for n_per, dim in ((40, 12), (3, 16)):  # 3 per class x 4 classes: rank 8 < 16
        y = np.repeat(np.arange(4), n_per)
        h = rng.normal(size=(y.size, dim)) + 3 * rng.normal(size=(4, dim))[y]
        test = rng.normal(size=(30, dim)) * 2
        mu = _class_means(h, y)
        within = (h - mu[y]).T @ (h - mu[y]) / y.size
        glob = (h - h.mean(0)).T @ (h - h.mean(0)) / y.size
        prec, prec0 = scipy.linalg.pinvh(within), scipy.linalg.pinvh(glob)
        md = np.einsum("ncd,de,nce->nc", test[:, None] - mu, prec, test[:, None] - mu)
        md0 = np.einsum("nd,de,ne->n", test - h.mean(0), prec0, test - h.mean(0))
        det = detectors.get("rmd").fit(features=h, labels=y)
        assert (det._woodbury is not None) == (dim == 12)
        close(det.score(features=test), (-(md - md0[:, None])).max(1), rtol=1e-4)


def test_knn(problem: Any) -> None:
    def norm(x: np.ndarray) -> np.ndarray:
        return x / (np.linalg.norm(x, axis=1, keepdims=True) + 1e-10)

    bank, k = norm(problem.h_train), 5
    expected = [-sorted(np.linalg.norm(bank - q, axis=1))[k - 1] for q in norm(problem.h_test)]
    det = detectors.get("knn", k=k, backend="numpy").fit(features=problem.h_train)
    close(det.score(features=problem.h_test), expected, rtol=1e-6)


def _null_space(h: np.ndarray, u: np.ndarray, dim: int) -> np.ndarray:
    cov = EmpiricalCovariance(assume_centered=True).fit(h - u).covariance_
    vals, vecs = np.linalg.eigh(cov)
    return vecs[:, np.argsort(-vals)[dim:]]


def test_vim_and_residual(problem: Any) -> None:
    h, w, b = problem.h_train, problem.w, problem.b
    dim = 12  # default for D = 24 is D // 2
    u = -np.linalg.pinv(w) @ b
    ns = _null_space(h, u, dim)
    alpha = np.mean((h @ w.T + b).max(1)) / np.mean(np.linalg.norm((h - u) @ ns, axis=1))
    resid = np.array([np.linalg.norm((x - u) @ ns) for x in problem.h_test])
    energy = np.array([energy_of(r) for r in problem.z_test])
    fit = {"features": h, "head": (w, b)}
    vim = detectors.get("vim").fit(**fit)
    assert vim.dim_ == dim
    assert vim.alpha_ == pytest.approx(alpha, rel=1e-5)
    close(vim.score(features=problem.h_test, logits=problem.z_test), energy - alpha * resid)
    close(detectors.get("residual").fit(**fit).score(features=problem.h_test), -resid)


def test_vim_default_dim_rule() -> None:
    from semshift.detectors.vim import default_vim_dim

    assert [default_vim_dim(d) for d in (2048, 4096, 768, 1024, 512, 24)] == [
        1000, 1000, 512, 512, 256, 12,
    ]  # fmt: skip


def test_react(problem: Any) -> None:
    h, w, b = problem.h_train, problem.w, problem.b
    c = np.percentile(h.ravel(), 90)
    expected = [energy_of(w @ np.minimum(x, c) + b) for x in problem.h_test]
    det = detectors.get("react").fit(features=h, head=(w, b))
    assert det.threshold_ == c
    close(det.score(features=problem.h_test), expected)


def _ash_reference(x: np.ndarray, p: float, kind: str) -> np.ndarray:
    d = len(x)
    k = d - int(np.round(d * p / 100.0))
    keep = np.argsort(-x, kind="stable")[:k]
    out = np.zeros(d)
    s = x.sum()
    if kind == "p":
        out[keep] = x[keep]
    elif kind == "b":
        out[keep] = s / k
    elif kind == "s":
        out[keep] = x[keep] * math.exp(s / x[keep].sum())
    else:  # scale: unpruned h times exp(s / s_kept)
        out = x * math.exp(s / x[keep].sum())
    return out


@pytest.mark.parametrize(("name", "kind", "p"), [
    ("ash_p", "p", 90.0), ("ash_b", "b", 90.0), ("ash_s", "s", 90.0), ("scale", "scale", 85.0),
    ("ash_p", "p", 65.0), ("ash_b", "b", 65.0), ("ash_s", "s", 65.0), ("scale", "scale", 65.0),
])  # fmt: skip
def test_ash_family(problem: Any, name: str, kind: str, p: float) -> None:
    w, b = problem.w, problem.b
    expected = [energy_of(w @ _ash_reference(x, p, kind) + b) for x in problem.h_test]
    det = detectors.get(name, percentile=p).fit(head=(w, b))
    close(det.score(features=problem.h_test), expected)


def test_ash_keeps_lowest_index_among_ties() -> None:
    # Four tied activations, k = 2 kept (p = 50): units 0 and 1 get s / k = 4 / 2 under ASH-B.
    w, b = np.eye(4), np.zeros(4)
    det = detectors.get("ash_b", percentile=50.0).fit(head=(w, b))
    expected = energy_of(np.array([2.0, 2.0, 0.0, 0.0]))
    close(det.score(features=np.ones((1, 4))), [expected])


def test_dice(problem: Any) -> None:
    h, w, b = problem.h_train, problem.w, problem.b
    contrib = w * h.mean(0)
    masked = np.where(contrib > np.percentile(contrib, 90), w, 0.0)
    expected = [energy_of(masked @ x + b) for x in problem.h_test]
    det = detectors.get("dice").fit(features=h, head=(w, b))
    assert det.mask_.sum() == np.sum(contrib > np.percentile(contrib, 90))
    close(det.score(features=problem.h_test), expected)


def test_she(problem: Any) -> None:
    h, z, y = problem.h_train, problem.z_train, problem.y_train
    patterns = [h[(y == c) & (z.argmax(1) == c)].mean(0) for c in range(z.shape[1])]
    expected = [float(x @ patterns[int(zz.argmax())]) for x, zz in zip(problem.h_test,
                problem.z_test, strict=True)]  # fmt: skip
    det = detectors.get("she").fit(features=h, logits=z, labels=y)
    close(det.score(features=problem.h_test, logits=problem.z_test), expected)


def test_nnguide(problem: Any) -> None:
    h, z, k, alpha = problem.h_train, problem.z_train, 5, 0.2
    m = math.ceil(alpha * len(h))
    bank = [x / (np.linalg.norm(x) + 1e-10) * energy_of(zz) for x, zz in zip(h[:m], z[:m],
            strict=True)]  # fmt: skip
    expected = []
    for x, zz in zip(problem.h_test, problem.z_test, strict=True):
        q = x / (np.linalg.norm(x) + 1e-10)
        sims = sorted((float(q @ g) for g in bank), reverse=True)[:k]
        expected.append(energy_of(zz) * sum(sims) / k)
    det = detectors.get("nnguide", k=k, alpha=alpha, backend="numpy").fit(features=h, logits=z)
    assert det.bank_size_ == m
    close(det.score(features=problem.h_test, logits=problem.z_test), expected)


def test_fdbd(problem: Any) -> None:
    h, w, b = problem.h_train, problem.w, problem.b
    mean = h.mean(0)
    expected = []
    for x in problem.h_test:
        yhat = int(np.argmax(w @ x + b))
        terms = [
            abs((w[yhat] - w[c]) @ x + b[yhat] - b[c]) / np.linalg.norm(w[yhat] - w[c])
            for c in range(len(w))
            if c != yhat
        ]
        expected.append(np.mean(terms) / np.linalg.norm(x - mean))
    det = detectors.get("fdbd").fit(features=h, head=(w, b))
    close(det.score(features=problem.h_test, logits=problem.z_test), expected)


def test_gradnorm_closed_form(problem: Any) -> None:
    expected = []
    for x, zz in zip(problem.h_test, problem.z_test, strict=True):
        p = softmax_of(zz)
        expected.append(np.abs(x).sum() * np.abs(len(p) * p - 1).sum())
    det = detectors.get("gradnorm").fit()
    close(det.score(features=problem.h_test, logits=problem.z_test), expected)


def test_openmax_weibull_fit_is_scipys_maximum_likelihood():
    import scipy.stats

    from semshift.detectors.openmax import weibull_fit_loc0

    rng = np.random.default_rng(0)
    shapes = rng.uniform(0.5, 8.0, 60)
    x = rng.weibull(shapes[:, None], (60, 20)) * rng.uniform(0.1, 50.0, 60)[:, None]
    valid = np.ones_like(x, dtype=bool)
    valid[:15, 12:] = False  # classes with fewer tail samples than tail_size
    k, lam = weibull_fit_loc0(x, valid)
    for i in range(60):
        xi = x[i][valid[i]]
        ks, _loc, ls = scipy.stats.weibull_min.fit(xi, floc=0.0)
        np.testing.assert_allclose([k[i], lam[i]], [ks, ls], rtol=2e-4)
        # the exact root is at least as likely as scipy's optimiser result
        ll = scipy.stats.weibull_min.logpdf(xi, k[i], scale=lam[i]).sum()
        assert ll >= scipy.stats.weibull_min.logpdf(xi, ks, scale=ls).sum() - 1e-9
