"""SSE (SSE-ReLU): the simplex coding against hand-solved and generic QP answers, the scores and
the batch gradient against explicit loops, planted recovery, bad input and determinism."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from semshift.errors import InputError, NotFittedError
from semshift.metrics import gzsl
from semshift.training.zsl import evaluate_zsl
from semshift.training.zsl.sse import SSE, project_simplex, relu_embedding, simplex_codes

from .planted import planted


def _small(seed: int = 0, n_cls: int = 5, d: int = 6, a: int = 4, per: int = 7):
    rng = np.random.default_rng(seed)
    S = rng.standard_normal((n_cls, a)) / np.sqrt(a)
    y = np.repeat(np.arange(n_cls), per)
    X = S[y] @ rng.standard_normal((a, d)) + 0.2 * rng.standard_normal((y.size, d))
    return X, y, S


def test_simplex_projection_known_answers():
    V = np.array([[0.5, 0.5, 0.0], [2.0, 0.0, -1.0], [0.2, 0.2, 0.2], [0.6, 0.6, -3.0]])
    want = np.array([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3], [0.5, 0.5, 0.0]])
    np.testing.assert_allclose(project_simplex(V), want, rtol=1e-14, atol=1e-15)
    # and it is the nearest point of the simplex: compare with a generic solver
    v = np.random.default_rng(0).standard_normal(6)
    ref = minimize(
        lambda p: 0.5 * np.sum((p - v) ** 2),
        np.full(6, 1 / 6),
        jac=lambda p: p - v,
        bounds=[(0, None)] * 6,
        constraints=[{"type": "eq", "fun": lambda p: p.sum() - 1, "jac": lambda p: np.ones(6)}],
        method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 500},
    ).x
    np.testing.assert_allclose(project_simplex(v[None])[0], ref, atol=1e-7)


@pytest.mark.parametrize("gamma", [0.5, 1.0, 4.0])
def test_simplex_code_of_an_orthonormal_dictionary_is_hand_solvable(gamma):
    """Z = I, z = e_0: minimise (1 + gamma)/2 ||alpha - e_0/(1 + gamma)||^2 on the simplex, so
    alpha = e_0/(1 + gamma) + t 1 with t = gamma / (3 (1 + gamma))."""
    t = gamma / (3 * (1 + gamma))
    want = np.array([1 / (1 + gamma) + t, t, t])
    np.testing.assert_allclose(simplex_codes(np.eye(3)[:1], np.eye(3), gamma)[0], want, atol=1e-12)


def test_simplex_codes_satisfy_the_kkt_conditions_of_the_qp():
    rng = np.random.default_rng(1)
    Z, T, gamma = rng.standard_normal((7, 5)), rng.standard_normal((9, 5)), 0.3
    A = simplex_codes(T, Z, gamma)
    np.testing.assert_allclose(A.sum(axis=1), 1.0, atol=1e-12)
    assert (A >= 0).all() and (A == 0).any()  # on the simplex, some codes sparse
    Q = Z @ Z.T + gamma * np.eye(7)
    for t, alpha in zip(T, A, strict=True):
        g = Q @ alpha - Z @ t  # gradient: equal (= -tau) on the support, >= -tau off it
        on = alpha > 1e-9
        tau = g[on].mean()
        np.testing.assert_allclose(g[on], tau, atol=1e-8)
        assert (g[~on] >= tau - 1e-8).all()
        ref = minimize(
            lambda p, b=Z @ t: 0.5 * p @ Q @ p - b @ p,
            np.full(7, 1 / 7),
            jac=lambda p, b=Z @ t: Q @ p - b,
            bounds=[(0, None)] * 7,
            constraints=[{"type": "eq", "fun": lambda p: p.sum() - 1}],
            method="SLSQP",
            options={"ftol": 1e-15, "maxiter": 1000},
        ).x
        np.testing.assert_allclose(alpha, ref, atol=1e-6)


def test_scores_are_the_histogram_compatibility_of_the_paper():
    """Score = <pi(x), psi(z)> with pi_s(x) = w^T max(0, x/scale - v_s), centred and scaled
    (psi - 1/S) / c: the per-image class ranking is the paper's."""
    X, y, S = _small(seed=2)
    m = SSE(gamma=0.7, steps=30).fit(X, y, S)
    Xt = np.random.default_rng(3).standard_normal((8, X.shape[1]))
    new = np.random.default_rng(4).standard_normal((4, S.shape[1]))
    C, d = S.shape[0], X.shape[1]
    xs = Xt / np.linalg.norm(X, axis=1).mean()
    v = np.array([X[y == c].mean(axis=0) for c in range(C)]) / np.linalg.norm(X, axis=1).mean()
    pi = np.array(
        [[sum(m.w_[j] * max(0.0, x[j] - v[s, j]) for j in range(d)) for s in range(C)] for x in xs]
    )
    psi = simplex_codes(new, S, 0.7)
    paper = pi @ psi.T
    got = m.decision_function(Xt, new)
    c = np.linalg.norm(simplex_codes(S, S, 0.7) - 1 / C, axis=1).mean()
    np.testing.assert_allclose(
        got, (paper - pi.mean(axis=1, keepdims=True)) / c, rtol=1e-9, atol=1e-12
    )
    assert np.array_equal(got.argmax(axis=1), paper.argmax(axis=1))
    np.testing.assert_allclose(relu_embedding(xs, v, m.w_), pi, rtol=1e-10, atol=1e-12)


def test_intersection_and_relu_variants_rank_alike_with_opposite_weights():
    """SSE-INT's min(x, v) = x - max(0, x - v) and psi sums to 1: INT with w ranks classes as
    ReLU with -w (the reason only ReLU is implemented)."""
    rng = np.random.default_rng(5)
    X, V, w = rng.uniform(0, 1, (10, 6)), rng.uniform(0, 1, (4, 6)), rng.standard_normal(6)
    psi = project_simplex(rng.standard_normal((3, 4)))
    inter = np.einsum("nsd,d->ns", np.minimum(X[:, None], V[None]), w) @ psi.T
    relu = relu_embedding(X, V, -w) @ psi.T
    np.testing.assert_allclose(inter - relu, np.repeat((X @ w)[:, None], 3, axis=1), atol=1e-12)


def _loop_gradient(w, X, y, V, Psi):
    grad, loss = np.zeros_like(w), 0.0
    for x, t in zip(X, y, strict=True):
        phi = [np.maximum(0.0, x - V[s]) for s in range(V.shape[0])]
        f = [sum(Psi[c, s] * (w @ phi[s]) for s in range(V.shape[0])) for c in range(Psi.shape[0])]
        for c in range(Psi.shape[0]):
            if c != t and 1 + f[c] - f[t] > 0:
                loss += 1 + f[c] - f[t]
                for s in range(V.shape[0]):
                    grad += (Psi[c, s] - Psi[t, s]) * phi[s]
    return grad, loss


def test_the_vectorised_batch_gradient_equals_per_sample_loops():
    rng = np.random.default_rng(6)
    X, V = rng.standard_normal((9, 5)), rng.standard_normal((4, 5))
    y, w = rng.integers(0, 4, 9), rng.standard_normal(5)
    Psi = project_simplex(rng.standard_normal((4, 4)))
    grad, loss = SSE.batch_gradient(w, X, y, V, Psi)
    ref_grad, ref_loss = _loop_gradient(w, X, y, V, Psi)
    assert ref_loss > 0 and np.abs(ref_grad).max() > 0
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-12, atol=1e-12)
    assert loss == pytest.approx(ref_loss, rel=1e-12)
    # the fit's float32 path agrees to float32 precision
    g32, _ = SSE.batch_gradient(w, X.astype(np.float32), y, V.astype(np.float32), Psi)
    np.testing.assert_allclose(g32, ref_grad, rtol=1e-5, atol=1e-5)


def test_recovers_planted_unseen_classes():
    out = evaluate_zsl(planted(), "sse")
    r = gzsl(out.scores, out.labels, out.seen, out.unseen)
    assert r.zsl_top1 >= 0.95 and r.tr >= 0.9, r
    assert max(p.val_top1 for p in out.grid) >= 0.85


def test_bad_input_names_the_problem():
    X, y, S = _small()
    m = SSE(steps=5)
    with pytest.raises(NotFittedError):
        m.decision_function(X, S)
    with pytest.raises(InputError, match="mismatched class counts"):
        m.fit(X, y, S[:-1])
    X_inf = X.copy()
    X_inf[0, 0] = np.inf
    with pytest.raises(InputError, match="features X contain NaN or inf"):
        m.fit(X_inf, y, S)
    with pytest.raises(InputError, match="gamma"):
        SSE(gamma=0.0).fit(X, y, S)
    with pytest.raises(InputError, match="steps"):
        SSE(steps=0).fit(X, y, S)
    m.fit(X, y, S)
    with pytest.raises(InputError, match=r"S must be \(C, 4\)"):
        m.decision_function(X, S[:, :2])


def test_fit_is_seeded():
    X, y, S = _small(seed=7)
    a = SSE(seed=1, steps=40, batch_size=8).fit(X, y, S).w_
    b = SSE(seed=1, steps=40, batch_size=8).fit(X.copy(), y.copy(), S.copy()).w_
    c = SSE(seed=2, steps=40, batch_size=8).fit(X, y, S).w_
    assert np.array_equal(a, b) and not np.allclose(a, c)
