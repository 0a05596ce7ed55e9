"""GFZSL: the closed form against explicit formulas and a port of the authors' MATLAB, planted
recovery, the seen-class (GZSL) rule, bad input and determinism."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import multivariate_normal

from semshift.errors import InputError, NotFittedError
from semshift.metrics import gzsl
from semshift.training.zsl import evaluate_zsl
from semshift.training.zsl.gfzsl import GFZSL, class_gaussians

from .planted import planted


def _small(seed: int = 0, n_cls: int = 6, d: int = 7, a: int = 4, per: int = 9):
    rng = np.random.default_rng(seed)
    S = rng.standard_normal((n_cls, a)) / np.sqrt(a)
    y = np.repeat(np.arange(n_cls), per)
    X = S[y] @ rng.standard_normal((a, d)) + rng.uniform(0.1, 0.5, d) * rng.standard_normal(
        (y.size, d)
    )
    return X, y, S


def test_class_gaussians_are_the_sample_mean_and_unbiased_variance():
    X, y, S = _small(seed=1)
    # class 0 keeps a single image
    X1, y1 = np.vstack((X[y != 0], X[:1])), np.concatenate((y[y != 0], [0]))
    M, V = class_gaussians(X1, y1, S.shape[0])
    for c in range(1, S.shape[0]):
        np.testing.assert_allclose(M[c], X1[y1 == c].mean(axis=0), rtol=1e-12)
        np.testing.assert_allclose(V[c], X1[y1 == c].var(axis=0, ddof=1), rtol=1e-10)
    np.testing.assert_allclose(M[0], X[0], rtol=1e-12)
    np.testing.assert_array_equal(V[0], 0.0)  # one image: variance 0 (var_reg keeps it proper)


@pytest.mark.parametrize("kernel", ["poly", "linear"])
def test_scores_match_the_explicit_kernel_ridge_and_gaussian_formulas(kernel):
    X, y, S = _small(seed=2)
    lam_mu, lam_var, reg, eps = 0.05, 3.0, 0.02, 0.001
    m = GFZSL(
        lam_mu=lam_mu, lam_var=lam_var, kernel=kernel, var_reg=reg, var_eps=eps, seen="regressed"
    ).fit(X, y, S)
    C = S.shape[0]
    mu = np.array([X[y == c].mean(axis=0) for c in range(C)])
    var = np.array([X[y == c].var(axis=0, ddof=1) for c in range(C)])

    def k(A, B):
        return A @ B.T if kernel == "linear" else (1 + A @ B.T) ** 2

    W_mu = np.linalg.inv(k(S, S) + lam_mu * np.eye(C)) @ mu
    W_rho = np.linalg.inv(k(S, S) + lam_var * np.eye(C)) @ np.log(var + eps)
    new = np.random.default_rng(3).standard_normal((5, S.shape[1])) / 2
    Xt = np.random.default_rng(4).standard_normal((11, X.shape[1]))
    want = np.empty((11, 5))
    for j in range(5):
        mu_j = k(new[j : j + 1], S) @ W_mu
        var_j = np.exp(k(new[j : j + 1], S) @ W_rho) + reg
        want[:, j] = multivariate_normal(mu_j[0], np.diag(var_j[0])).logpdf(Xt)
    np.testing.assert_allclose(m.decision_function(Xt, new), want, rtol=1e-9, atol=1e-9)
    # seen classes scored with the regression (seen="regressed") are not their estimates
    assert not np.allclose(m.class_parameters(S)[0], mu, atol=1e-3)


def test_agrees_with_a_port_of_the_authors_matlab():
    """Literal port of github.com/vkverma01/Zero-Shot at commit
    4703d2d5c0a468443ea0d853c0fe0350f3e89e31: ``awa2.m`` (class statistics, kernel ridge with
    ``kernelPoly(., ., 2)``, lamda1 = 0.01, lamda2 = 1e8, reg = 0.05), ``Inductive_setting.m``
    and ``logmvnpdf.m`` (Cholesky log-determinant); MATLAB's column layout (d x N) kept."""
    X, y, S = _small(seed=5, n_cls=8, d=6, a=5)
    seen_ids = np.arange(6)
    keep = y < 6
    train_feat, train_labels = X[keep].T, y[keep]  # d x Ns
    classAttributes = S  # C x a, after the script's transpose
    trainClassLabels, testClassLabels = seen_ids, np.array([6, 7])

    def kernelPoly(X1, X2, d):
        return (1 + X1 @ X2.T) ** d

    def logmvnpdf(x, mu, Sigma):
        _N, D = x.shape
        const = -0.5 * D * np.log(2 * np.pi)
        xc = x - mu
        term1 = -0.5 * np.sum(np.linalg.solve(Sigma.T, xc.T).T * xc, axis=1)
        U = np.linalg.cholesky(Sigma).T
        term2 = const - 0.5 * 2 * np.sum(np.log(np.diag(U)))
        return term1 + term2

    A = classAttributes[trainClassLabels, :].T
    K_trtr = kernelPoly(A.T, A.T, 2)
    K_trte = kernelPoly(A.T, classAttributes[testClassLabels, :], 2)
    d, train_class = train_feat.shape[0], len(trainClassLabels)
    mu_cap, sigma_s = np.zeros((d, train_class)), np.zeros((d, train_class))
    for i in range(train_class):
        class_feat = train_feat[:, train_labels == trainClassLabels[i]]
        mu_cap[:, i] = class_feat.mean(axis=1)
        sigma_s[:, i] = np.var(class_feat.T, axis=0, ddof=1)  # MATLAB var: N - 1
    lamda1, lamda2, reg = 0.01, 100000000, 0.05
    alpha_mu = np.linalg.solve(K_trtr + lamda1 * np.eye(train_class), mu_cap.T)
    mu_unk = alpha_mu.T @ K_trte
    logsigmaS = np.log(sigma_s + 0.001)
    alpha = np.linalg.solve(K_trtr + lamda2 * np.eye(train_class), logsigmaS.T)
    sigma_unk = np.exp(alpha.T @ K_trte)
    test_feat = np.random.default_rng(6).standard_normal((d, 13))
    ref = np.column_stack(
        [
            logmvnpdf(test_feat.T, mu_unk[:, i].T, np.diag(sigma_unk[:, i] + reg))
            for i in range(mu_unk.shape[1])
        ]
    )

    m = GFZSL().fit(X[keep], y[keep], S[:6])  # the defaults are the script's values
    got = m.decision_function(test_feat.T, S[testClassLabels])
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10)
    assert np.array_equal(got.argmax(axis=1), ref.argmax(axis=1))


def test_seen_classes_use_their_estimates_matched_exactly():
    X, y, S = _small(seed=7)
    m = GFZSL().fit(X, y, S)
    new = np.random.default_rng(8).standard_normal((2, S.shape[1]))
    # seen rows in any order, one with a negative zero, next to two new classes
    S0 = S.copy()
    S0[3, 0] = 0.0
    m0 = GFZSL().fit(X, y, S0)
    shown = np.vstack((new[0], S0[3] * np.where(S0[3] == 0, -1.0, 1.0), S0[1], new[1]))
    rows, seen = m0.seen_rows(shown)
    assert rows.tolist() == [1, 2] and seen.tolist() == [3, 1]
    mu, var = m0.class_parameters(shown)
    np.testing.assert_array_equal(mu[1], m0.means_[3])
    np.testing.assert_array_equal(var[2], m0.variances_[1])
    Xt = X[:5]
    want = multivariate_normal(m0.means_[3], np.diag(m0.variances_[3] + 0.05)).logpdf(Xt)
    np.testing.assert_allclose(m0.decision_function(Xt, shown)[:, 1], want, rtol=1e-10)
    # a row off by 1e-12 is a new class: it gets the regression's parameters
    off = S[1:2] + 1e-12
    assert m.seen_rows(off)[0].size == 0
    reg = GFZSL(seen="regressed").fit(X, y, S)
    np.testing.assert_allclose(m.class_parameters(off)[0], reg.class_parameters(S[1:2])[0])
    assert not np.allclose(m.class_parameters(S[1:2])[0], reg.class_parameters(S[1:2])[0])


def test_recovers_planted_unseen_classes():
    for noise in (0.1, 0.2):
        out = evaluate_zsl(planted(noise=noise, seed=2), "gfzsl")
        r = gzsl(out.scores, out.labels, out.seen, out.unseen)
        assert r.zsl_top1 >= 0.95 and r.tr >= 0.95, (noise, r)


def test_bad_input_names_the_problem():
    X, y, S = _small()
    m = GFZSL()
    with pytest.raises(NotFittedError):
        m.decision_function(X, S)
    with pytest.raises(InputError, match="mismatched class counts"):
        m.fit(X, y, S[:-1])
    with pytest.raises(InputError, match="no image"):
        m.fit(X, y, np.vstack((S, S[:1])))
    with pytest.raises(InputError, match="kernel"):
        GFZSL(kernel="rbf").fit(X, y, S)
    with pytest.raises(InputError, match="var_reg"):
        GFZSL(var_reg=0.0).fit(X, y, S)
    m.fit(X, y, S)
    with pytest.raises(InputError, match=r"S must be \(C, 4\)"):
        m.decision_function(X, S[:, :3])
    with pytest.raises(InputError, match=r"X must be \(n, 7\)"):
        m.decision_function(X[:, :5], S)


def test_fit_is_deterministic_and_the_grid_shares_the_class_statistics():
    X, y, S = _small(seed=9)
    a = GFZSL().fit(X, y, S).decision_function(X, S)
    b = GFZSL().fit(X.copy(), y.copy(), S.copy()).decision_function(X, S)
    assert np.array_equal(a, b)
    cands = [{"lam_mu": 0.1}, {"kernel": "linear", "lam_var": 1.0}, {"seen": "regressed"}]
    models = list(GFZSL.fit_grid(X, y, S, cands))
    assert models[0].means_ is models[1].means_ is models[2].means_
    new = np.random.default_rng(10).standard_normal((3, S.shape[1]))
    for params, model in zip(cands, models, strict=True):
        alone = GFZSL(**params).fit(X, y, S)
        for T in (S, new):
            np.testing.assert_allclose(
                model.decision_function(X, T), alone.decision_function(X, T), rtol=1e-12
            )
