"""CF-OOD: hand-computed neighbourhoods, agreement with OpenOOD's released code, bad inputs."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
import scipy.stats

import semshift.detectors.cfood
from semshift import detectors
from semshift.errors import InputError

E1, E2 = np.array([1.0, 0.0]), np.array([0.0, 1.0])


def first_fraction_of_rank(n_ref: int, rank: int) -> float:
    """The smallest grid fraction kappa with neighbour rank int(kappa n_ref - 1) >= rank."""
    grid = np.r_[np.linspace(0.001, 0.1, 100), np.linspace(0.105, 0.5, 81),
                 np.linspace(0.51, 0.99, 49)]  # fmt: skip
    return float(grid[np.argmax((grid * n_ref - 1).astype(int) >= rank)])


def test_hand_computed_square() -> None:
    # References e1, e2, -e1, -e2 (normalised from other lengths). Squared distances between
    # them: 2 (neighbours) and 4 (opposite), so every reference's sorted distances to the
    # others are 2, 2, 4: radius 2 for ranks 0 and 1 (kappa = 0.001 and 0.5), 4 for rank 2.
    h_train = np.array([2 * E1, 3 * E2, -E1, -0.5 * E2])
    q45, q0 = np.array([1.0, 1.0]), 5 * E1
    # q45 is at squared distance 2 - sqrt 2 from e1 and e2, 2 + sqrt 2 from -e1 and -e2: two
    # references cover it at radius 2, all four at radius 4. q0 is at 0, 2, 4, 2: three at
    # radius 2, four at radius 4.
    kappa_rank2 = first_fraction_of_rank(4, 2)
    expected = {0.5: [0.001, 0.001], 0.75: [kappa_rank2, 0.001], 1.0: [kappa_rank2, kappa_rank2]}
    for k, kappas in expected.items():
        det = detectors.get("cfood", alpha=1.0, k=k).fit(features=h_train)
        np.testing.assert_array_equal(det.score(features=np.array([q45, q0])), -np.array(kappas))
    np.testing.assert_allclose(det.radii_, [[2.0] * 4, [2.0] * 4, [4.0] * 4])


def test_hand_computed_subsample() -> None:
    # alpha = 0.5 of 4 rows keeps rows 0 and 2 (evenly spaced): references e1 and e2, each the
    # other's nearest neighbour at squared distance 2 (a one-value grid, kappa = 0.001).
    # -e1 lies at 4 and 2: only e2 covers it, so with k = 1 no fraction qualifies (kappa 1).
    h_train = np.array([E1, -E1, E2, -E2])
    det = detectors.get("cfood", alpha=0.5, k=1.0).fit(features=h_train)
    assert det.n_ref_ == 2
    np.testing.assert_array_equal(det.score(features=np.array([[1.0, 1.0], -E1])), [-0.001, -1.0])
    det = detectors.get("cfood", alpha=0.5, k=0.5).fit(features=h_train)
    np.testing.assert_array_equal(det.score(features=np.array([[1.0, 1.0], -E1])), [-0.001, -0.001])


def reference_cfood(h_train: np.ndarray, h: np.ndarray, alpha: float, k: float) -> np.ndarray:
    """OpenOOD's CF-OOD score, ported from
    Jingkang50/OpenOOD@openood/postprocessors/cfood_postprocessor.py (setup, postprocess) in
    float32 torch on the CPU. The one change: for alpha < 1 the random ``torch.randperm``
    subset is replaced by the evenly spaced rows semshift takes."""
    torch = pytest.importorskip("torch")
    feats = torch.from_numpy(h_train.astype(np.float32))  # setup
    feats = feats / (torch.norm(feats, dim=1, keepdim=True) + 1e-10)
    N = feats.size(0)
    n = int(alpha * N) if alpha < 1.0 else N
    if alpha < 1.0:
        perm = torch.from_numpy((np.arange(n) * N) // n)  # was torch.randperm(N)[:n]
        ref = feats[perm].contiguous()
    else:
        ref = feats.contiguous()
    kval = np.concatenate(
        (np.linspace(0.001, 0.1, 100), np.linspace(0.105, 0.5, 81), np.linspace(0.51, 0.99, 49))
    )
    kpos = np.array(kval * n - 1, dtype=int)
    keep = np.concatenate(([True], kpos[:-1] < kpos[1:]))
    kval, kpos = kval[keep], kpos[keep]
    klen = len(kpos)
    knndst = torch.zeros((n, klen), dtype=torch.float32)
    for i in range(n):
        dst = torch.sum((ref[i] - ref) ** 2, dim=1)
        dst_sorted = torch.sort(dst, dim=0).values
        knndst[i, :] = dst_sorted[kpos + 1]
    feat = torch.from_numpy(h.astype(np.float32))  # postprocess
    feat = feat / (torch.norm(feat, dim=1, keepdim=True) + 1e-10)
    kval_t = torch.from_numpy(kval)
    scores = []
    for v in feat:
        dst = torch.sum((v - ref) ** 2, dim=1)
        count = (knndst >= dst.view(n, 1)).sum(dim=0).float() / float(n)
        pos = torch.nonzero(count >= k, as_tuple=False)
        kappa = kval_t[pos[0, 0]] if pos.numel() > 0 else torch.tensor(1.0)
        scores.append(kappa)
    return -torch.stack(scores, dim=0).double().numpy()


@pytest.mark.parametrize(("alpha", "k"), [(1.0, 0.01), (0.3, 0.01), (1.0, 0.2), (0.5, 0.05)])
def test_agrees_with_released_code(alpha: float, k: float) -> None:
    rng = np.random.default_rng(7)
    d, c = 12, 5
    means = 2.0 * (rng.random((2 * c, d)) < 0.4)
    h_train = np.maximum(means[rng.integers(0, c, 500)] + rng.standard_normal((500, d)), 0)
    h = np.maximum(means[rng.integers(0, 2 * c, 200)] + rng.standard_normal((200, d)), 0)
    ours = detectors.get("cfood", alpha=alpha, k=k).fit(features=h_train).score(features=h)
    ref = reference_cfood(h_train, h, alpha, k)
    # distances from float32 inner products vs float32 differences: a distance within
    # rounding of a radius may fall on the other side (none does here)
    np.testing.assert_array_equal(ours, ref)
    assert scipy.stats.spearmanr(ours, ref).statistic >= 0.999


def test_too_few_references() -> None:
    h = np.random.default_rng(0).random((15, 3))
    with pytest.raises(InputError, match=r"^cfood.fit: alpha = 0.1 of n = 15 training features "
                       r"gives int\(alpha \* n\) = 1 references, fewer than 2; give more training "
                       r"features or a larger alpha$"):  # fmt: skip
        detectors.get("cfood").fit(features=h)


def test_doctests() -> None:
    result = doctest.testmod(semshift.detectors.cfood, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
