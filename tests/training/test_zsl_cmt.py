"""CMT and CMT* (Socher et al., NIPS 2013): the mapping's objective and gradient, Adam's first
step, the hand-set network and novelty gate, recovery on planted data, CMT*'s GZSL gain where
CMT is biased towards the seen classes, input errors and determinism."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from semshift.errors import InputError, NotFittedError
from semshift.metrics import gzsl
from semshift.training.zsl import ZSLData, evaluate_zsl, get_zsl_method
from semshift.training.zsl.cmt import (
    CMT,
    CMTStar,
    gaussian_log_likelihood,
    mapping_loss,
    seen_columns,
)

from .planted import linear_classes, planted


def _small(seed: int = 0, n_cls: int = 5, d: int = 7, a: int = 4, per: int = 6):
    return linear_classes(seed, n_cls, d, a, per)


def _params(rng: np.random.Generator, d: int, h: int, a: int) -> dict[str, np.ndarray]:
    return {
        "W1": rng.standard_normal((d, h)),
        "b1": rng.standard_normal(h),
        "W2": rng.standard_normal((h, a)),
        "b2": rng.standard_normal(a),
    }


# ---------------------------------------------------------------------- the objective
def test_mapping_loss_is_eq1_with_the_weight_penalty():
    """Per image: 0.5 ||W2^T tanh(W1^T x + b1) + b2 - t||^2, averaged, + lam/2 (|W1|^2 + |W2|^2)."""
    rng = np.random.default_rng(0)
    p = _params(rng, 5, 3, 2)
    X, T = rng.standard_normal((4, 5)), rng.standard_normal((4, 2))
    lam = 0.3
    want = 0.0
    for x, t in zip(X, T, strict=True):
        f = [
            sum(p["W2"][j, k] * np.tanh(x @ p["W1"][:, j] + p["b1"][j]) for j in range(3))
            + p["b2"][k]
            for k in range(2)
        ]
        want += 0.5 * sum((f[k] - t[k]) ** 2 for k in range(2)) / 4
    want += 0.5 * lam * ((p["W1"] ** 2).sum() + (p["W2"] ** 2).sum())
    loss, _ = mapping_loss(p, X, T, lam)
    assert loss == pytest.approx(want, rel=1e-12)


def test_mapping_gradient_matches_central_differences():
    rng = np.random.default_rng(1)
    p = _params(rng, 5, 3, 2)
    X, T = rng.standard_normal((6, 5)), rng.standard_normal((6, 2))
    _, grad = mapping_loss(p, X, T, 0.1)
    eps = 1e-6
    for key, value in p.items():
        num = np.zeros_like(value)
        for idx in np.ndindex(value.shape):
            up = {k: v.copy() for k, v in p.items()}
            dn = {k: v.copy() for k, v in p.items()}
            up[key][idx] += eps
            dn[key][idx] -= eps
            num[idx] = (mapping_loss(up, X, T, 0.1)[0] - mapping_loss(dn, X, T, 0.1)[0]) / (2 * eps)
        np.testing.assert_allclose(grad[key], num, rtol=1e-6, atol=1e-8, err_msg=key)


def test_one_full_batch_epoch_is_one_adam_step():
    """Adam's first step: m_hat = g, v_hat = g^2, so theta_1 = theta_0 - lr g / (|g| + 1e-8)."""
    X, y, S = _small(seed=2)
    model = CMT(
        hidden=5, lam=0.01, lr=0.05, epochs=1, batch_size=y.size, seed=4, precision="float64"
    ).fit(X, y, S)
    p0 = model.init_params(np.random.default_rng(4), X.shape[1], S.shape[1])
    Xs = (X - X.mean(0)) / X.std(0)
    _, g = mapping_loss(p0, Xs, S[y], 0.01)
    for key in p0:
        want = p0[key] - 0.05 * g[key] / (np.abs(g[key]) + 1e-8)
        np.testing.assert_allclose(model.params_[key], want, rtol=1e-9, atol=1e-12, err_msg=key)


def test_training_lowers_the_objective_and_fits_a_planted_map():
    X, y, S = _small(seed=3, n_cls=6, per=20)
    model = CMT(epochs=200, batch_size=32).fit(X, y, S)
    curve = model.loss_curve_
    assert curve[-1] < 0.05 * curve[0]
    assert (model.predict(X, S) == y).mean() >= 0.95


def test_float32_training_follows_float64_training():
    X, y, S = _small(seed=4, n_cls=6, per=20)
    C = np.random.default_rng(5).standard_normal((4, S.shape[1]))
    f32 = CMT(epochs=30, batch_size=32).fit(X, y, S)
    f64 = CMT(epochs=30, batch_size=32, precision="float64").fit(X, y, S)
    assert all(w.dtype == np.float64 for w in f32.params_.values())
    a, b = f32.decision_function(X, C), f64.decision_function(X, C)
    assert not np.array_equal(a, b)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    assert f32.loss_curve_[-1] == pytest.approx(f64.loss_curve_[-1], rel=1e-4)


# ---------------------------------------------------------------------- hand-set weights
def _hand_set(model: CMT) -> CMT:
    """f(x) = tanh(x): standardisation off, W1 = W2 = I, biases 0 (a, d = 2)."""
    model.mean_, model.std_ = np.zeros(2), np.ones(2)
    model.params_ = {"W1": np.eye(2), "b1": np.zeros(2), "W2": np.eye(2), "b2": np.zeros(2)}
    return model


def _tiny_fit(cls):
    X = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    S = np.array([[0.5, 0.0], [0.0, 0.5]])
    return cls(epochs=1).fit(X, np.array([0, 0, 1, 1]), S)


def test_a_hand_set_network_maps_and_scores_by_distance():
    model = _hand_set(_tiny_fit(CMT))
    x = np.arctanh(np.array([[0.3, -0.4], [0.1, 0.2]]))
    np.testing.assert_allclose(model.transform(x), [[0.3, -0.4], [0.1, 0.2]], rtol=1e-12)
    C = np.array([[0.3, 0.0], [1.0, 1.0]])
    want = -np.array([[0.4, np.hypot(0.7, 1.4)], [np.hypot(0.2, 0.2), np.hypot(0.9, 0.8)]])
    np.testing.assert_allclose(model.decision_function(x, C), want, rtol=1e-12)


def test_cmt_star_gate_sends_near_images_to_seen_and_far_ones_to_unseen():
    """Seen s0 = (0.5, 0), s1 = (0, 0.5) with variance 0.01; unseen u = (-0.5, -0.5). An image
    mapped to (0.45, 0) is familiar (seen s0); one mapped to (0.1, -0.2) is nearest to s0 (CMT
    says s0) but 0.45 away from it, so novel: CMT* says u."""
    star, plain = _hand_set(_tiny_fit(CMTStar)), _hand_set(_tiny_fit(CMT))
    seen = star.seen_embeddings_
    star.variances_, star.priors_ = np.full(2, 0.01), np.full(2, 0.5)
    # threshold: the likelihood 0.2 away from a seen class (farther is novel)
    star.threshold_ = float(
        gaussian_log_likelihood(np.array([[0.7, 0.0]]), seen, star.variances_, star.priors_)[0]
    )
    u = np.array([-0.5, -0.5])
    C = np.vstack((u, seen[1], seen[0]))  # any order: seen rows are found by value
    x = np.arctanh(np.array([[0.45, 0.0], [0.1, -0.2]]))
    np.testing.assert_array_equal(star.novelty(x), [False, True])
    np.testing.assert_array_equal(plain.predict(x, C), [2, 2])
    np.testing.assert_array_equal(star.predict(x, C), [2, 0])
    got, cmt = star.decision_function(x, C), plain.decision_function(x, C)
    assert np.isfinite(got).all()
    # familiar image: the unseen column is pushed below both seen ones, seen ones unchanged
    np.testing.assert_array_equal(got[0, 1:], cmt[0, 1:])
    assert got[0, 0] < got[0, 1:].min()
    # novel image: both seen columns below the unseen one, their order kept
    assert got[1, 0] == cmt[1, 0] and got[1, 1:].max() < got[1, 0]
    assert (got[1, 1] < got[1, 2]) == (cmt[1, 1] < cmt[1, 2])
    # no seen class among the columns (the ZSL task): exactly CMT's scores
    U = np.vstack((u, [0.4, -0.4]))
    np.testing.assert_array_equal(star.decision_function(x, U), plain.decision_function(x, U))


def test_cmt_star_variances_priors_and_threshold_follow_their_definitions():
    X, y, S = _small(seed=5)
    y = np.concatenate((y, [0, 0, 0]))
    X = np.vstack((X, X[:3] + 0.1))
    m = CMTStar(novelty_quantile=0.2, epochs=5).fit(X, y, S)
    M = m.transform(X)
    for c in range(S.shape[0]):
        dev = ((M[y == c] - S[c]) ** 2).mean()
        assert m.variances_[c] == pytest.approx(dev, rel=1e-12)
    np.testing.assert_allclose(m.priors_, np.bincount(y) / y.size)
    ll = np.log(
        sum(
            m.priors_[c]
            * np.exp(-((M - S[c]) ** 2).sum(1) / (2 * m.variances_[c]))
            / (2 * np.pi * m.variances_[c]) ** (S.shape[1] / 2)
            for c in range(S.shape[0])
        )
    )
    np.testing.assert_allclose(
        gaussian_log_likelihood(M, S, m.variances_, m.priors_), ll, rtol=1e-10
    )
    assert m.threshold_ == pytest.approx(np.quantile(ll, 0.2), rel=1e-10)
    assert m.novelty(X).mean() == pytest.approx(0.2, abs=1.0 / y.size)


def test_seen_rows_are_matched_within_float32_precision_only():
    seen = np.random.default_rng(6).standard_normal((3, 5))
    S = np.vstack((seen[2].astype(np.float32).astype(np.float64), seen[0] + 1e-4, seen[1]))
    np.testing.assert_array_equal(seen_columns(S, seen), [True, False, True])


# ---------------------------------------------------------------------- planted data
def _seen_biased(seed: int = 0) -> ZSLData:
    """The planted split with new embeddings: 12 attributes every class has (random unit
    vectors) and 4 only the unseen classes have (norm 1.5), features a linear image of them.
    Trained on seen classes only, the mapping puts unseen images near their first 12
    attributes and near 0 on the last 4, so CMT's nearest class is a seen one; they are far from
    every seen class's Gaussian, so CMT*'s gate sends them to the unseen classes."""
    d = planted(seed=seed)
    rng = np.random.default_rng(seed + 100)
    n_cls, n_seen = d.embeddings.shape[0], 24
    P = rng.standard_normal((n_cls, 12))
    P /= np.linalg.norm(P, axis=1, keepdims=True)
    Q = np.zeros((n_cls, 4))
    q = rng.standard_normal((n_cls - n_seen, 4))
    Q[n_seen:] = 1.5 * q / np.linalg.norm(q, axis=1, keepdims=True)
    S = np.hstack((P, Q))
    A = np.linalg.qr(rng.standard_normal((32, 16)))[0].T
    X = S[d.labels] @ A + 0.1 * rng.standard_normal((d.labels.size, 32))
    return dataclasses.replace(d, features=X, embeddings=S)


@pytest.mark.parametrize("name", ["cmt", "cmt_star"])
def test_cmt_recovers_the_planted_unseen_classes(name, planted_data):
    out = evaluate_zsl(planted_data, name)
    r = gzsl(out.scores, out.labels, out.seen, out.unseen)
    assert r.zsl_top1 >= 0.95 and r.tr >= 0.9, r
    assert get_zsl_method(name) is {"cmt": CMT, "cmt_star": CMTStar}[name]


def test_cmt_star_beats_cmt_on_gzsl_where_cmt_is_seen_biased():
    data = _seen_biased()
    res = {}
    for name in ("cmt", "cmt_star"):
        out = evaluate_zsl(data, name)
        res[name] = gzsl(out.scores, out.labels, out.seen, out.unseen)
    plain, star = res["cmt"], res["cmt_star"]
    assert plain.ts <= 0.1 and plain.tr >= 0.95, plain  # seen bias: unseen images go to seen
    assert star.h >= plain.h + 0.4 and star.ts >= 0.4 and star.tr >= 0.9, star
    # the gate leaves the ZSL task alone
    assert star.zsl_top1 == plain.zsl_top1


# ---------------------------------------------------------------------- errors, determinism
@pytest.mark.parametrize("cls", [CMT, CMTStar])
def test_bad_input_raises_input_error_naming_the_problem(cls):
    X, y, S = _small(seed=7)
    with pytest.raises(InputError, match="mismatched class counts"):
        cls(epochs=1).fit(X, y, S[:-1])
    X_nan = X.copy()
    X_nan[3, 2] = np.inf
    with pytest.raises(InputError, match="NaN or inf"):
        cls(epochs=1).fit(X_nan, y, S)
    with pytest.raises(NotFittedError):
        cls().transform(X)
    m = cls(epochs=1).fit(X, y, S)
    with pytest.raises(InputError, match=r"X must be \(n, 7\)"):
        m.decision_function(X[:, :-1], S)
    with pytest.raises(InputError, match=r"S must be \(C, 4\)"):
        m.decision_function(X, S[:, :2])
    with pytest.raises(InputError, match="hidden"):
        cls(hidden=0).fit(X, y, S)
    with pytest.raises(InputError, match="lr"):
        cls().set_params(lr=0.0)


def test_novelty_quantile_must_be_a_fraction():
    with pytest.raises(InputError, match=r"novelty_quantile must be a number in \[0, 1\)"):
        CMTStar().set_params(novelty_quantile=1.0)
    assert CMTStar().get_params()["novelty_quantile"] == 0.01


@pytest.mark.parametrize("cls", [CMT, CMTStar])
def test_fits_are_bitwise_repeatable_and_seeded(cls):
    X, y, S = _small(seed=8, per=30)
    other = np.random.default_rng(9).standard_normal((3, S.shape[1]))
    C = np.vstack((S, other))
    a = cls(epochs=3, batch_size=16, seed=1).fit(X, y, S).decision_function(X, C)
    b = cls(epochs=3, batch_size=16, seed=1).fit(X, y, S).decision_function(X, C)
    c = cls(epochs=3, batch_size=16, seed=2).fit(X, y, S).decision_function(X, C)
    assert np.array_equal(a, b)
    assert not np.allclose(a, c)


def _released_map_training_cost(W, b, imgs, targets, lam, beta=0.0, sparsity_param=0.05):
    """A literal port of the released CMT cost, github.com/mganjoo/zslearning
    ``costFunctions/mapTrainingCost.m`` at commit ea66712433cbd8788558607c8672e4b4be5aff0c
    (MATLAB layout: columns are images; W{1} (h, d), W{2} (a, h); params.f = tanh)."""
    num_images = imgs.shape[1]
    a2 = np.tanh(W[0] @ imgs + b[0][:, None])
    h = W[1] @ a2 + b[1][:, None]
    w = targets
    rho = (a2.sum(axis=1) / num_images + 1) / 2
    reg = (
        0.5 * lam * ((W[0] ** 2).sum() + (W[1] ** 2).sum() + (b[0] ** 2).sum() + (b[1] ** 2).sum())
    )
    kl = sparsity_param * np.log(sparsity_param / rho)
    kl = kl + (1 - sparsity_param) * np.log((1 - sparsity_param) / (1 - rho))
    sparsity = beta * np.sum(kl)
    cost = 0.5 * (1 / num_images * ((w - h) ** 2).sum()) + sparsity + reg
    del3 = h - w
    mult = beta * (-(sparsity_param / rho) + (1 - sparsity_param) / (1 - rho))
    del2 = (W[1].T @ del3 + (mult * 0.5)[:, None]) * (1 - a2**2)
    grad_w2 = del3 @ a2.T / num_images + lam * W[1]
    grad_w1 = del2 @ imgs.T / num_images + lam * W[0]
    return cost, grad_w1, grad_w2


def test_mapping_loss_agrees_with_the_released_cost_function():
    """Without the released code's sparsity term (beta = 0; the paper has none) and with zero
    biases (the released code also penalises the biases, semshift does not), the objective and
    the weight gradients are the released mapTrainingCost.m's, to 1e-12."""
    from semshift.training.zsl.cmt import mapping_loss

    rng = np.random.default_rng(0)
    n, d, h, a = 30, 7, 5, 4
    X, T = rng.normal(size=(n, d)), rng.normal(size=(n, a))
    W1, W2 = rng.normal(size=(d, h)) * 0.3, rng.normal(size=(h, a)) * 0.3
    zeros = {"b1": np.zeros(h), "b2": np.zeros(a)}
    loss, grad = mapping_loss({"W1": W1, "W2": W2, **zeros}, X, T, lam=1e-2)
    cost, g1, g2 = _released_map_training_cost(
        [W1.T, W2.T], [np.zeros(h), np.zeros(a)], X.T, T.T, lam=1e-2
    )
    assert loss == pytest.approx(cost, rel=1e-12)
    np.testing.assert_allclose(grad["W1"], g1.T, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(grad["W2"], g2.T, rtol=1e-12, atol=1e-14)
