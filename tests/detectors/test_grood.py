"""GrOOD: hand-computed gradients, direction, bad inputs, agreement with OpenOOD's released code."""

from __future__ import annotations

import doctest
import math
from typing import Any

import numpy as np
import pytest
import scipy.stats
from sklearn.metrics import roc_auc_score

import semshift.detectors.grood
from semshift import detectors
from semshift.detectors import _common
from semshift.errors import InputError, NotFittedError


def make_problem(**kwargs: Any) -> Any:
    """conftest's mixture, imported when called: benchmarks/bench_detectors2_openood.py loads
    this module by file (outside the tests package) for its reference port."""
    from .conftest import make_problem as make

    return make(**kwargs)


def p_noise(h: float, prototypes: tuple[float, ...], m: float) -> float:
    """softmax(-|h - mu_1|, ..., -|h - mu_C|, -|h - m|) at the last entry, in scalar math."""
    terms = [math.exp(-abs(h - mu)) for mu in prototypes]
    last = math.exp(-abs(h - m))
    return last / (sum(terms) + last)


def line_problem() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """1-D features: class 0 at -1.5, -0.5, -1.2, -0.8 (the last misclassified), class 1 at
    0.5, 1.5.

    Prototypes -1 and 1, m = 0; logits (-h, h) predict the sign of h, and the row -0.8 is made
    wrong by its logits: it is kept out of the bank but still counts in its class prototype.
    """
    h = np.array([[-1.5], [-0.5], [-1.2], [-0.8], [0.5], [1.5]])
    y = np.array([0, 0, 0, 0, 1, 1])
    z = np.stack([-h[:, 0], h[:, 0]], axis=1)
    z[3] = [0.0, 1.0]
    return h, z, y


def test_hand_computed_line() -> None:
    h, z, y = line_problem()
    det = detectors.get("grood").fit(features=h, logits=z, labels=y)
    np.testing.assert_allclose(det.prototypes_, [[-1.0], [1.0]])
    np.testing.assert_allclose(det.noise_prototype_, [0.0], atol=1e-15)
    assert det.n_bank_ == 5
    # g(h) = p_m(h) sign(h - m). Beyond a prototype (|h| >= 1) the three distances are
    # |h| - 1, |h|, |h| + 1 whatever h, so p_m = a; the bank is -a, -b, -a, b, a.
    a = p_noise(1.5, (-1.0, 1.0), 0.0)
    b = p_noise(0.5, (-1.0, 1.0), 0.0)
    c = p_noise(-0.8, (-1.0, 1.0), 0.0)
    e = p_noise(0.25, (-1.0, 1.0), 0.0)
    assert a == pytest.approx(1 / (math.e + 1 / math.e + 1))
    assert b == pytest.approx(1 / (2 + 1 / math.e))
    # float32 products of the centred vectors: within float32 rounding of the exact values
    np.testing.assert_allclose(det.gradients(h), [[-a], [-b], [-a], [-c], [b], [a]], rtol=1e-6)
    q = np.array([[0.0], [3.0], [0.5], [0.25], [-0.8]])
    expected = [
        -(a**2),  # g = 0 at m: the nearest bank gradients are +-a
        0.0,  # g(3) = a
        0.0,  # a training row
        -min((e - a) ** 2, (e - b) ** 2),
        -min((c - a) ** 2, (c - b) ** 2),  # the misclassified row's own gradient is absent
    ]
    assert min(abs(c - a), abs(c - b)) > 0.01
    # the bank is stored in float32: gradients match to its rounding
    np.testing.assert_allclose(det.score(features=q), expected, rtol=1e-6, atol=1e-12)
    # the k-th neighbour: from g = 0 the bank lies at a, a, a, b, b
    for k, want in [(2, -(a**2)), (3, -(a**2)), (4, -(b**2)), (5, -(b**2))]:
        got = detectors.get("grood", k=k).fit(features=h, logits=z, labels=y)
        np.testing.assert_allclose(got.score(features=q[:1]), [want], rtol=1e-6)


def test_val_ood_prototype_is_the_mean_validation_ood_feature() -> None:
    # OpenOOD's configuration: m = mean of the validation OOD features, here 0.25; the class
    # prototypes stay -1 and 1, and g(h) = p_m(h) sign(h - m)
    h, z, y = line_problem()
    val_ood = np.array([[0.5], [-0.25], [0.5]])
    det = detectors.get("grood", noise="val_ood").fit(
        features=h, logits=z, labels=y, val_ood_features=val_ood
    )
    np.testing.assert_allclose(det.prototypes_, [[-1.0], [1.0]])
    np.testing.assert_allclose(det.noise_prototype_, [0.25])
    q = np.array([[-2.0], [0.0], [0.75], [3.0]])
    expected = [p_noise(v, (-1.0, 1.0), 0.25) * np.sign(v - 0.25) for v in q[:, 0]]
    np.testing.assert_allclose(det.gradients(q)[:, 0], expected, rtol=1e-6)
    bank = det.gradients(h[[0, 1, 2, 4, 5]])[:, 0]  # the correctly classified rows
    want = [-np.min((g - bank) ** 2) for g in expected]
    np.testing.assert_allclose(det.score(features=q), want, rtol=1e-5, atol=1e-12)
    # proto_mean ignores validation OOD features given to it
    plain = detectors.get("grood").fit(features=h, logits=z, labels=y, val_ood_features=val_ood)
    np.testing.assert_allclose(plain.noise_prototype_, [0.0], atol=1e-15)


def test_gradient_is_the_autograd_gradient() -> None:
    """g(h) is d CE(softmax(-||h - mu_j||), argmax z) / d m, whatever the target class."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    h_train = rng.normal(size=(40, 6))
    y = np.arange(40) % 4
    z = rng.normal(size=(40, 4))
    det = detectors.get("grood").fit(features=h_train, logits=z, labels=y)
    h = rng.normal(size=(7, 6)) * 3
    protos = torch.tensor(det.prototypes_)
    for i, target in enumerate([0, 1, 2, 3, 0, 1, 2]):
        m = torch.tensor(det.noise_prototype_, requires_grad=True)
        p = torch.cat([protos, m[None]])
        s = -torch.linalg.vector_norm(torch.tensor(h[i]) - p, dim=1)
        loss = torch.nn.functional.cross_entropy(s[None], torch.tensor([target]))
        (grad,) = torch.autograd.grad(loss, [m])
        np.testing.assert_allclose(det.gradients(h[i : i + 1])[0], grad.numpy(), rtol=1e-6)


def test_sampling_ratio_takes_evenly_spaced_rows() -> None:
    problem = make_problem(seed=2)
    fit = {"features": problem.h_train, "logits": problem.z_train, "labels": problem.y_train}
    det = detectors.get("grood", sampling_ratio=0.5).fit(**fit)
    rows = (np.arange(120) * 240) // 120
    sub = {key: value[rows] for key, value in fit.items()}
    full = detectors.get("grood").fit(**sub)
    np.testing.assert_allclose(det.prototypes_, full.prototypes_)
    assert det.n_bank_ == full.n_bank_
    # the shared scan centres every training row on the mean of all of them (the subset's
    # detector on the subset's): float32 rounding apart, the same scores
    np.testing.assert_allclose(
        det.score(features=problem.h_test), full.score(features=problem.h_test), rtol=1e-6
    )


@pytest.mark.parametrize("noise", ["proto_mean", "val_ood"])
def test_id_scores_higher_than_ood(noise: str) -> None:
    problem = make_problem(seed=1, dim=64, n_classes=8, n_per_class=80, n_test_id=150,
                           n_test_ood=150)  # fmt: skip
    # validation OOD features from another mixture (never the test rows)
    val_ood = make_problem(seed=11, dim=64, n_classes=8, n_per_class=10, n_test_ood=100)
    extra = {"val_ood_features": val_ood.h_test[val_ood.is_ood]} if noise == "val_ood" else {}
    det = detectors.get("grood", noise=noise).fit(**problem.fit_inputs(), **extra)
    scores = det.score(features=problem.h_test)
    assert roc_auc_score(~problem.is_ood, scores) > 0.9
    # the training rows of the bank score 0, the maximum
    correct = np.argmax(problem.z_train, axis=1) == problem.y_train
    np.testing.assert_allclose(det.score(features=problem.h_train[correct]), 0.0, atol=1e-12)
    assert scores.max() <= 0.0


@pytest.mark.parametrize("backend", ["numpy", "faiss"])
def test_backends_and_blocks_agree(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if backend == "faiss" and not detectors.faiss_available():
        pytest.skip("faiss not installed")
    problem = make_problem(seed=4)
    fit = problem.fit_inputs()
    ref = detectors.get("grood", k=3, backend="numpy").fit(**fit).score(features=problem.h_test)
    monkeypatch.setattr(_common, "BLOCK_BYTES", 4096)  # many row blocks
    got = detectors.get("grood", k=3, backend=backend).fit(**fit).score(features=problem.h_test)
    # float32 products round differently for other block shapes: 1e-6 of the scale
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6 * np.abs(ref).max())


def test_bad_inputs() -> None:
    h, z, y = line_problem()
    with pytest.raises(NotFittedError):
        detectors.get("grood").score(features=h)
    with pytest.raises(InputError, match=r"^grood.fit\(\) needs `logits`"):
        detectors.get("grood").fit(features=h, labels=y)
    with pytest.raises(InputError, match=r"^grood.fit: 1 class\(es\) have no training row to build "
                       r"their prototype from \(among the 3 rows used, sampling_ratio = 1.0\): "
                       r"class id\(s\) 1; give rows of every class in \[0, 2\) or a larger "
                       r"sampling_ratio$"):  # fmt: skip
        detectors.get("grood").fit(features=h[:3], logits=z[:3], labels=y[:3])
    with pytest.raises(InputError, match=r"^grood.fit: k = 6 neighbours requested but only 5 of "
                       r"the 6 training rows used are correctly classified \(the bank\); lower k "
                       r"or give more training rows$"):  # fmt: skip
        detectors.get("grood", k=6).fit(features=h, logits=z, labels=y)
    with pytest.raises(InputError, match=r"^grood.fit: sampling_ratio = 0.1 of n = 6 training "
                       r"rows keeps int\(sampling_ratio \* n\) = 0 rows"):  # fmt: skip
        detectors.get("grood", sampling_ratio=0.1).fit(features=h, logits=z, labels=y)
    with pytest.raises(InputError, match=r"^grood: noise must be one of 'proto_mean', "
                       r"'val_ood', got 'noise'$"):  # fmt: skip
        detectors.get("grood", noise="noise")
    with pytest.raises(InputError, match=r"^grood.fit: noise='val_ood' needs `val_ood_features` "
                       r"\(penultimate features of validation OOD samples, never test OOD; in "
                       r"a run, the set search.val_ood names\), which was not given; give them "
                       r"or use noise='proto_mean'$"):  # fmt: skip
        detectors.get("grood", noise="val_ood").fit(features=h, logits=z, labels=y)
    with pytest.raises(InputError, match=r"^grood.fit: `val_ood_features` have dimension 2 but "
                       r"the features have 1$"):  # fmt: skip
        detectors.get("grood", noise="val_ood").fit(
            features=h, logits=z, labels=y, val_ood_features=np.zeros((3, 2))
        )
    with pytest.raises(InputError, match=r"^grood.fit: `val_ood_features` contains 1 NaN"):
        detectors.get("grood", noise="val_ood").fit(
            features=h, logits=z, labels=y, val_ood_features=np.array([[0.0], [np.nan]])
        )
    det = detectors.get("grood").fit(features=h, logits=z, labels=y)
    with pytest.raises(InputError, match=r"grood.score: feature dimension 2 does not match"):
        det.score(features=np.zeros((3, 2)))
    bad = np.array([[0.0], [np.nan]])
    with pytest.raises(InputError, match=r"grood.score: `features` contains 1 NaN .* \[1, 0\]"):
        det.score(features=bad)


# -- OpenOOD v1.5's released code --------------------------------------------------------------
# Ported from Jingkang50/OpenOOD@openood/postprocessors/grood.py with ``use_proto_mean``, in
# float32 torch on the CPU, the network replaced by the stored features and logits. The one
# change: the nearest bank gradient is found exactly (squared L2) instead of by faiss
# ``IndexIVFFlat`` with nprobe 4 (benchmarks/bench_detectors2_openood.py runs that search).
def reference_prototypes(h_train: np.ndarray, y_train: np.ndarray, n_classes: int,
                         batch_size: int = 32) -> tuple[Any, Any]:  # fmt: skip
    """``update_prototype`` batch by batch (running class means), then ``get_prototype_mean``."""
    torch = pytest.importorskip("torch")
    protos = torch.zeros((n_classes, h_train.shape[1]))
    counts = torch.zeros(n_classes, dtype=torch.long)
    for start in range(0, h_train.shape[0], batch_size):
        feats = torch.from_numpy(h_train[start : start + batch_size].astype(np.float32))
        target = torch.from_numpy(y_train[start : start + batch_size].astype(np.int64))
        for cl in target.unique():
            mask = target == cl
            n_feat = mask.sum()
            protos[cl] = (feats[mask].sum(0) + counts[cl] * protos[cl]) / (counts[cl] + n_feat)
            counts[cl] += n_feat
    return protos, protos.clone().mean(0).view(-1)


def reference_gradients(protos: Any, noise: Any, h: np.ndarray, z: np.ndarray,
                        labels: np.ndarray | None, batch_size: int = 32) -> Any:  # fmt: skip
    """``compute_ncc_loss`` and ``_compute_grad`` batch by batch: one backward pass per sample;
    with labels (``index_grads``) only the correctly classified rows are kept."""
    torch = pytest.importorskip("torch")
    n_classes = protos.shape[0]
    out = []
    for start in range(0, h.shape[0], batch_size):
        feats = torch.from_numpy(h[start : start + batch_size].astype(np.float32))
        logits = torch.from_numpy(z[start : start + batch_size].astype(np.float32))
        with torch.enable_grad():
            bsz = feats.shape[0]
            protos.requires_grad = True
            noise.requires_grad = True
            pseudo = logits.argmax(1).view(-1).long()
            prototypes = torch.cat([protos.view(n_classes, -1), noise.view(1, -1)], dim=0)
            vectors = (feats.reshape(bsz, 1, -1).detach() - prototypes).reshape(
                bsz, n_classes + 1, -1
            )
            ncc_scores = -1 * torch.norm(vectors, dim=2)
            loss = torch.nn.functional.cross_entropy(ncc_scores, pseudo, reduction="none")
            for i in range(bsz):
                if labels is not None and labels[start + i] != pseudo[i]:
                    continue
                g = torch.autograd.grad(loss[i], [noise, protos], retain_graph=True)
                out.append(g[0].data.view(1, -1))
            protos.requires_grad = False
            noise.requires_grad = False
    return torch.cat(out, dim=0) if out else torch.zeros((0, h.shape[1]))


def reference_grood(h_train: np.ndarray, z_train: np.ndarray, y_train: np.ndarray,
                    h: np.ndarray, val_ood: np.ndarray | None = None,
                    ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The scores (``postprocess``, exact search) and the bank of gradients (``index_grads``);
    with ``val_ood`` (``use_val_ood``) the OOD prototype is the mean of those features."""
    torch = pytest.importorskip("torch")
    n_classes = z_train.shape[1]
    protos, noise = reference_prototypes(h_train, y_train, n_classes)
    if val_ood is not None:
        noise = torch.from_numpy(val_ood.astype(np.float32)).mean(0).view(-1)
    bank = reference_gradients(protos, noise, h_train, z_train, y_train)
    # postprocess scores every row (data_alone); its pseudo labels do not enter the gradient
    test_grads = reference_gradients(protos, noise, h, np.zeros((h.shape[0], n_classes)), None)
    dists = torch.cdist(test_grads.double(), bank.double()) ** 2
    return -dists.min(dim=1).values.numpy(), bank.numpy()


@pytest.mark.parametrize("seed", [0, 1])
def test_agrees_with_released_code(seed: int) -> None:
    problem = make_problem(seed=seed, dim=16, n_classes=5, n_per_class=50)
    fit = {"features": problem.h_train, "logits": problem.z_train, "labels": problem.y_train}
    det = detectors.get("grood").fit(**fit)
    ours = det.score(features=problem.h_test)
    ref, bank = reference_grood(problem.h_train, problem.z_train, problem.y_train, problem.h_test)
    correct = np.argmax(problem.z_train, axis=1) == problem.y_train
    np.testing.assert_allclose(det.gradients(problem.h_train[correct]), bank, atol=2e-6)
    np.testing.assert_allclose(ours, ref, rtol=1e-3, atol=1e-8)
    assert scipy.stats.spearmanr(ours, ref).statistic >= 0.999


def test_val_ood_agrees_with_released_code() -> None:
    problem = make_problem(seed=2, dim=16, n_classes=5, n_per_class=50)
    val_ood = make_problem(seed=12, dim=16, n_classes=5, n_per_class=10).h_test[-40:]
    fit = {"features": problem.h_train, "logits": problem.z_train, "labels": problem.y_train}
    det = detectors.get("grood", noise="val_ood").fit(**fit, val_ood_features=val_ood)
    ours = det.score(features=problem.h_test)
    ref, _ = reference_grood(
        problem.h_train, problem.z_train, problem.y_train, problem.h_test, val_ood=val_ood
    )
    np.testing.assert_allclose(ours, ref, rtol=1e-3, atol=1e-8)
    assert scipy.stats.spearmanr(ours, ref).statistic >= 0.999


def test_doctests() -> None:
    result = doctest.testmod(semshift.detectors.grood, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
