"""The shared paired bootstrap equals metrics.bootstrap_ci and explicit resamples."""

from __future__ import annotations

import numpy as np
import pytest

from semshift.metrics import auroc, bootstrap_ci, fpr_at_tpr, oscr
from semshift.protocols._bootstrap import ranked_bootstrap


def data(ties, seed=0):
    rng = np.random.default_rng(seed)
    ids, ood = rng.normal(1, 1, 150), rng.normal(0, 1, 60)
    if ties:
        ids, ood = np.round(ids, 1), np.round(ood, 1)
    return ids, ood, rng.random(150) < 0.7


@pytest.mark.parametrize("ties", [False, True])
def test_single_subset_equals_bootstrap_ci(ties):
    ids, ood, correct = data(ties)
    s = np.r_[ids, ood]
    y = np.r_[np.zeros(ids.size, bool), np.ones(ood.size, bool)]
    st = ranked_bootstrap(
        [ids], [[ood]], n_resamples=300, seed=7, stats=("auroc", "fpr95", "oscr"), correct=correct
    )
    for name in ("auroc", "fpr95"):
        ref = bootstrap_ci(name, s, y, n_resamples=300, seed=7)
        low, high = st.ci(name, 0.95)
        assert (low[0, 0], high[0, 0]) == (ref.low, ref.high)
    c = np.r_[correct, np.zeros(ood.size, bool)]
    ref = bootstrap_ci(oscr, s, y, c, n_resamples=300, seed=7, stratify=y)
    low, high = st.ci("oscr", 0.95)
    assert low[0, 0] == pytest.approx(ref.low, abs=1e-12)
    assert high[0, 0] == pytest.approx(ref.high, abs=1e-12)


def test_many_subsets_and_detectors_equal_explicit_resamples():
    rng = np.random.default_rng(1)
    ids = [np.round(rng.normal(1, 1, 40), 1), rng.normal(0, 1, 40)]
    sizes = (15, 25)
    subs = [[np.round(rng.normal(0, 1, n), 1) for n in sizes], [rng.normal(0, 1, n) for n in sizes]]
    subs[1][1] = None  # a detector without scores on one subset
    st = ranked_bootstrap(ids, subs, n_resamples=4, seed=3, stats=("auroc", "fpr95"))
    draws = np.random.default_rng(3)  # the documented stream: ref block, then each subset
    i = draws.integers(0, 40, size=(4, 40))
    j = [draws.integers(0, n, size=(4, n)) for n in sizes]
    for d in range(2):
        for c in range(2):
            for k in range(4):
                if subs[d][c] is None:
                    assert np.isnan(st.values["auroc"][d, c, k])
                    continue
                s = np.r_[ids[d][i[k]], subs[d][c][j[c][k]]]
                y = np.r_[np.zeros(40, bool), np.ones(sizes[c], bool)]
                assert st.values["auroc"][d, c, k] == pytest.approx(auroc(s, y), abs=1e-15)
                assert st.values["fpr95"][d, c, k] == pytest.approx(fpr_at_tpr(s, y), abs=1e-15)


def test_threads_and_blocks_do_not_change_values():
    rng = np.random.default_rng(2)
    ids = [rng.normal(1, 1, 200) for _ in range(5)]
    subs = [[rng.normal(0, 1, n) for n in (30, 70, 50)] for _ in range(5)]
    kw = {"n_resamples": 77, "seed": 9, "stats": ("auroc", "fpr95")}
    one = ranked_bootstrap(ids, subs, threads=1, **kw)
    many = ranked_bootstrap(ids, subs, threads=3, **kw)
    for m in ("auroc", "fpr95"):
        np.testing.assert_array_equal(one.values[m], many.values[m])
    # detector 2 alone gives the same resamples (draws are shared, not per detector)
    alone = ranked_bootstrap(ids[2:3], subs[2:3], threads=1, **kw)
    np.testing.assert_array_equal(alone.values["auroc"][0], one.values["auroc"][2])
