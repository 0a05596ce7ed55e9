"""The zero-shot methods: the registry contract (generated from the registry), known answers on
planted data, the closed forms, and the vectorised SGD against per-sample loops."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

from semshift.errors import InputError, NotFittedError, UnknownNameError
from semshift.metrics import gzsl, per_class_accuracy
from semshift.training.zsl import (
    ALE,
    CONSE,
    DEVISE,
    ESZSL,
    LATEM,
    SAE,
    SJE,
    SYNC,
    evaluate_zsl,
    get_zsl_method,
    grid_candidates,
    list_zsl_methods,
)
from semshift.training.zsl.conse import convex_embedding
from semshift.training.zsl.sync import phantom_weights
from tests.training.planted import linear_classes

METHODS = list_zsl_methods()


def _small(seed: int = 0, n_cls: int = 6, d: int = 10, a: int = 5, per: int = 8):
    return linear_classes(seed, n_cls, d, a, per)


# ---------------------------------------------------------------------- registry contract
def test_the_registry_holds_the_papers_thirteen_methods_in_table_order():
    """Tables 1 and 2's rows: DAP, IAP, CONSE, CMT, CMT* (Table 2's CMT with novelty
    detection), SSE, LATEM, ALE, DEVISE, SJE, ESZSL, SYNC, SAE, GFZSL."""
    assert METHODS == ["dap", "iap", "conse", "cmt", "cmt_star", "sse", "latem", "ale", "devise",
                       "sje", "eszsl", "sync", "sae", "gfzsl"]  # fmt: skip


def test_an_unknown_method_lists_the_known_ones():
    with pytest.raises(UnknownNameError, match=r"Did you mean 'eszsl'.*Known: ale, cmt, cmt_star"):
        get_zsl_method("eszl")


@pytest.mark.parametrize("name", METHODS)
def test_defaults_and_grid_satisfy_the_declared_constraints(name):
    cls = get_zsl_method(name)
    model = cls()
    assert model.get_params() == cls.defaults()
    model._validate()
    for params in grid_candidates(cls):
        cls(**params)._validate()
    assert set(cls.grid) <= set(cls.defaults())


@pytest.mark.parametrize("name", METHODS)
def test_constraints_reject_bad_values_and_unknown_names(name):
    cls = get_zsl_method(name)
    key, rule = next(iter(cls.constraints.items()))
    bad = "x" if not hasattr(rule, "values") else "no-such-choice"
    with pytest.raises(InputError, match=key):
        cls().set_params(**{key: bad})
    with pytest.raises(InputError, match="unknown hyperparameter 'nope'"):
        cls().set_params(nope=1)


@pytest.mark.parametrize("name", METHODS)
def test_fit_returns_self_and_scores_any_class_set(name):
    X, y, S = _small()
    model = get_zsl_method(name)()
    with pytest.raises(NotFittedError):
        model.decision_function(X, S)
    assert model.fit(X, y, S) is model
    other = np.random.default_rng(1).standard_normal((4, S.shape[1]))
    scores = model.decision_function(X, other)
    assert scores.shape == (X.shape[0], 4) and np.isfinite(scores).all()
    assert np.array_equal(model.predict(X, other), scores.argmax(axis=1))


@pytest.mark.parametrize("name", METHODS)
def test_fit_rejects_bad_input_naming_the_problem(name):
    X, y, S = _small()
    model = get_zsl_method(name)()
    with pytest.raises(InputError, match="mismatched class counts"):
        model.fit(X, y, S[:-1])
    S_nan = S.copy()
    S_nan[2, 1] = np.nan
    with pytest.raises(InputError, match="NaN"):
        model.fit(X, y, S_nan)
    with pytest.raises(InputError, match="X has"):
        model.fit(X[:-1], y, S)


@pytest.mark.parametrize("name", METHODS)
def test_fit_grid_equals_separate_fits(name):
    """The shared-work grids (Gram matrix, classifier) give the models separate fits give."""
    X, y, S = _small(seed=3)
    cls = get_zsl_method(name)
    cands = grid_candidates(cls)[:3]
    for params, model in zip(cands, cls.fit_grid(X, y, S, cands), strict=True):
        alone = cls(**params).fit(X, y, S)
        np.testing.assert_allclose(
            model.decision_function(X, S), alone.decision_function(X, S), rtol=1e-8, atol=1e-10
        )


# ---------------------------------------------------------------------- known answers
@pytest.mark.parametrize("name", METHODS)
def test_every_method_recovers_a_planted_linear_compatibility(name, planted_data):
    """x = s_y A + noise: the unseen classes are recognised from their embeddings alone."""
    out = evaluate_zsl(planted_data, name)
    r = gzsl(out.scores, out.labels, out.seen, out.unseen)
    assert r.zsl_top1 >= 0.95, (name, r)
    assert r.tr >= 0.9, (name, r)
    assert max(p.val_top1 for p in out.grid) >= 0.85


def test_eszsl_matches_its_closed_form():
    X, y, S = _small(seed=5)
    for targets, low in (("onehot", 0.0), ("signed", -1.0)):
        model = ESZSL(gamma=0.3, lam=2.0, targets=targets).fit(X, y, S)
        Y = np.full((y.size, S.shape[0]), low)
        Y[np.arange(y.size), y] = 1.0
        d, a = X.shape[1], S.shape[1]
        V = (
            np.linalg.inv(X.T @ X + 0.3 * np.eye(d))
            @ X.T
            @ Y
            @ S
            @ np.linalg.inv(S.T @ S + 2.0 * np.eye(a))
        )
        np.testing.assert_allclose(model.V_, V, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("lam", [0.2, 50.0])
def test_sae_matches_its_closed_form(lam):
    X, y, S = _small(seed=6)
    model = SAE(lam=lam).fit(X, y, S)
    Sy = S[y]
    W = sla.solve_sylvester(Sy.T @ Sy, lam * X.T @ X, (1 + lam) * Sy.T @ X)
    np.testing.assert_allclose(model.W_, W, rtol=1e-10, atol=1e-12)
    # and W is the minimiser: the gradient of the objective vanishes there
    grad = -2 * Sy.T @ (X - Sy @ W) + 2 * lam * (W @ X.T - Sy.T) @ X
    assert np.abs(grad).max() < 1e-8 * np.abs(Sy.T @ X).max()


def test_sae_spaces_compare_in_the_documented_space():
    X, y, S = _small(seed=7)
    m = SAE(lam=1.0, space="semantic").fit(X, y, S)
    enc = X @ m.W_.T
    cos = (enc / np.linalg.norm(enc, axis=1, keepdims=True)) @ (
        S / np.linalg.norm(S, axis=1, keepdims=True)
    ).T
    np.testing.assert_allclose(m.decision_function(X, S), cos, rtol=1e-12)
    m.set_params(space="feature")
    dec = S @ m.W_
    cos = (X / np.linalg.norm(X, axis=1, keepdims=True)) @ (
        dec / np.linalg.norm(dec, axis=1, keepdims=True)
    ).T
    np.testing.assert_allclose(m.decision_function(X, S), cos, rtol=1e-12)


def test_sae_row_normalised_known_answer():
    """A hand-set W with rows of norm 2 and 1: the released form (unit rows) flips both the
    F -> S and the S -> F prediction."""
    X, y, S = np.eye(2)[[0, 1, 0, 1]], np.array([0, 1, 0, 1]), np.eye(2)
    paper, released = SAE().fit(X, y, S), SAE(row_normalise=True).fit(X, y, S)
    W = np.array([[2.0, 0.0], [0.0, 1.0]])
    paper.W_, released.W_ = W, W.copy()
    x = np.array([[1.0, 1.2]])
    # F -> S, classes e0, e1: W x = (2, 1.2) against W_n x = (1, 1.2)
    np.testing.assert_allclose(paper.decision_function(x, S), [[2, 1.2]] / np.hypot(2, 1.2))
    np.testing.assert_allclose(released.decision_function(x, S), [[1, 1.2]] / np.hypot(1, 1.2))
    assert paper.predict(x, S)[0] == 0 and released.predict(x, S)[0] == 1
    # S -> F, classes (1, 1) and (1, 0): decoded (2, 1), (2, 0) against (1, 1), (1, 0)
    C, x = np.array([[1.0, 1.0], [1.0, 0.0]]), np.array([[1.0, 0.3]])
    paper.set_params(space="feature")
    released.set_params(space="feature")
    nx = np.hypot(1, 0.3)
    np.testing.assert_allclose(paper.decision_function(x, C), [[2.3 / nx / np.sqrt(5), 1 / nx]])
    np.testing.assert_allclose(released.decision_function(x, C), [[1.3 / nx / np.sqrt(2), 1 / nx]])
    assert paper.predict(x, C)[0] == 0 and released.predict(x, C)[0] == 1
    np.testing.assert_array_equal(released.W_, W)  # the fitted state is not normalised


def test_sae_row_normalised_agrees_with_the_released_scoring_lines():
    """mvp18/Popular-ZSL-Algorithms SAE/sae.py ``zsl_acc`` (and awa_demo.m's W side):
    F2S = X normalizeFeature(W)^T, S2F = S normalizeFeature(W), cosine scores."""
    from scipy.spatial.distance import cdist

    def normalize_feature(x):  # the port's normalizeFeature: rows to unit norm, 1e-10 added
        x = x + 1e-10
        return x / (np.sum(x**2, axis=1) ** 0.5)[:, np.newaxis]

    X, y, S = _small(seed=9)
    m = SAE(lam=0.5, row_normalise=True).fit(X, y, S)
    Xt = np.random.default_rng(10).standard_normal((12, X.shape[1]))
    f2s = 1 - cdist(Xt @ normalize_feature(m.W_).T, S, "cosine")
    np.testing.assert_allclose(m.decision_function(Xt, S), f2s, rtol=1e-8, atol=1e-9)
    s2f = 1 - cdist(Xt, normalize_feature(S @ normalize_feature(m.W_)), "cosine")
    m.set_params(space="feature")
    np.testing.assert_allclose(m.decision_function(Xt, S), s2f, rtol=1e-8, atol=1e-9)
    # and it is not the paper's form on these data
    paper = SAE(lam=0.5).fit(X, y, S)
    assert not np.allclose(paper.decision_function(Xt, S), f2s, atol=1e-3)


def test_conse_combines_the_top_classes_by_probability():
    proba = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]])
    S = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    got = convex_embedding(proba, S, top=2)
    np.testing.assert_allclose(got[0], (0.5 * S[0] + 0.3 * S[1]) / 0.8)
    np.testing.assert_allclose(got[1], (0.8 * S[2] + 0.1 * S[0]) / 0.9)
    np.testing.assert_allclose(convex_embedding(proba, S, top=10), proba @ S)


def test_sync_weights_are_a_softmax_over_phantom_distances():
    S = np.array([[0.0, 0.0], [1.0, 0.0]])
    B = np.array([[0.0, 0.0], [0.0, 2.0], [3.0, 0.0]])
    w = phantom_weights(S, B, 2.0)
    d2 = ((S[:, None] - B[None]) ** 2).sum(-1)
    ref = np.exp(-d2 / 2.0) / np.exp(-d2 / 2.0).sum(1, keepdims=True)
    np.testing.assert_allclose(w, ref, rtol=1e-12)


def test_sync_classifiers_of_the_seen_classes_fit_the_training_images():
    X, y, S = _small(seed=8)
    m = SYNC(lam=1e-4, sigma=0.5).fit(X, y, S)
    assert per_class_accuracy(m.predict(X, S), y) >= 0.9


# ---------------------------------------------------------------------- vectorised SGD
def _loop_gradient(method, W, X, y, S, draws):
    """The loss subgradient written per sample and per class with Python loops."""
    grad = np.zeros_like(W)
    C = S.shape[0]
    for i in range(y.size):
        x, t = X[i], y[i]
        if isinstance(method, LATEM):
            f = [[x @ W[k] @ S[c] for k in range(W.shape[0])] for c in range(C)]
            j = draws[i]
            if 1.0 + max(f[j]) - max(f[t]) > 0:
                grad[int(np.argmax(f[j]))] += np.outer(x, S[j])
                grad[int(np.argmax(f[t]))] -= np.outer(x, S[t])
            continue
        f = [x @ W @ S[c] for c in range(C)]
        margin = 0.1 if isinstance(method, DEVISE) else 1.0
        if isinstance(method, DEVISE):
            margin = method.margin
        viol = [c for c in range(C) if c != t and margin + f[c] - f[t] > 0]
        if isinstance(method, SJE):
            if viol:
                worst = max((c for c in range(C) if c != t), key=lambda c: f[c])
                if 1.0 + f[worst] - f[t] > 0:
                    grad += np.outer(x, S[worst] - S[t])
            continue
        weight = 1.0
        if isinstance(method, ALE) and viol:
            weight = sum(1.0 / k for k in range(1, len(viol) + 1)) / len(viol)
        for c in viol:
            grad += weight * np.outer(x, S[c] - S[t])
    return grad


@pytest.mark.parametrize("cls", [ALE, DEVISE, SJE, LATEM])
def test_the_vectorised_batch_gradient_equals_per_sample_loops(cls):
    X, y, S = _small(seed=9, n_cls=7)
    rng = np.random.default_rng(0)
    model = cls(margin=1.0) if cls is DEVISE else cls()
    W = model.init_weights(rng, X.shape[1], S.shape[1]) * 5.0
    draws = model.draws(rng, y, S.shape[0])
    got = model.batch_gradient(W, X / 3.0, y, S, draws)
    ref = _loop_gradient(model, W, X / 3.0, y, S, draws)
    assert np.abs(ref).max() > 0
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("cls", [ALE, DEVISE, SJE, LATEM])
def test_a_batch_of_one_is_the_papers_per_sample_sgd(cls):
    X, y, S = _small(seed=10)
    rng = np.random.default_rng(1)
    model = cls(batch_size=1, lr=0.05)
    W0 = model.init_weights(rng, X.shape[1], S.shape[1])
    order = rng.permutation(y.size)
    draws = model.draws(rng, y[order], S.shape[0])
    a = model.sgd_epoch(W0.copy(), X, y, S, order, draws)
    b = model.per_sample_epoch(W0.copy(), X, y, S, order, draws)
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    assert not np.allclose(a, W0)


def test_sgd_is_seeded():
    X, y, S = _small(seed=11)
    a = ALE(seed=3, epochs=3).fit(X, y, S).W_
    b = ALE(seed=3, epochs=3).fit(X, y, S).W_
    c = ALE(seed=4, epochs=3).fit(X, y, S).W_
    assert np.array_equal(a, b) and not np.allclose(a, c)


def test_conse_grid_shares_one_classifier_per_regulariser():
    X, y, S = _small(seed=12)
    models = list(CONSE.fit_grid(X, y, S, [{"top": 1}, {"top": 3}, {"C": 5.0}]))
    assert models[0].clf_ is models[1].clf_ and models[2].clf_ is not models[0].clf_


@pytest.mark.parametrize("cls", [ALE, DEVISE, SJE])
def test_the_in_place_blas_step_equals_the_plain_update(cls):
    X, y, S = _small(seed=13)
    model = cls()
    W = model.init_weights(np.random.default_rng(2), X.shape[1], S.shape[1])
    assert W.flags.f_contiguous
    want = W - 0.3 * model.batch_gradient(W, X, y, S, None)
    got = model.batch_step(W, X, y, S, None, 0.3)
    assert got is W  # updated in place
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    C_order = np.ascontiguousarray(model.init_weights(np.random.default_rng(2), 10, 5))
    np.testing.assert_allclose(model.batch_step(C_order, X, y, S, None, 0.3), want, rtol=1e-12)
