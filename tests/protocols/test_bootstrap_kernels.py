"""The bootstrap's narrow-integer fast paths give the values of the wide ones, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from semshift.metrics.stats import resample_counts
from semshift.protocols import _bootstrap as B
from semshift.protocols.sets import _row_levels, level_str


def test_counts_into_equals_resample_counts():
    rng = np.random.default_rng(0)
    idx = rng.integers(0, 37, size=(5, 37))
    out = np.full((5, 37), -1, dtype=np.int32)
    B._counts_into(out, idx)
    np.testing.assert_array_equal(out, resample_counts(idx, 37))
    wide = np.full((5, 50), -1, dtype=np.int32)  # a column slice of a wider block
    B._counts_into(wide[:, 3:40], idx)
    np.testing.assert_array_equal(wide[:, 3:40], resample_counts(idx, 37))
    assert (wide[:, :3] == -1).all() and (wide[:, 40:] == -1).all()


@pytest.mark.parametrize("n", [1, 2, 3, 50, 400])
@pytest.mark.parametrize("limit", [0, 1, 7, 30, 1000])
def test_count_prefix_equals_the_full_running_sum(n, limit):
    rng = np.random.default_rng(n * 1000 + limit)
    v = rng.poisson(1.0, size=(6, n)).astype(np.int32)
    v[0] = 0  # a row that never passes the limit
    full = np.count_nonzero(np.cumsum(v, axis=1)[:, :-1] <= limit, axis=1)
    np.testing.assert_array_equal(B._count_prefix(v, limit), full)


def _pool_data(separated):
    rng = np.random.default_rng(4)
    shift = 6.0 if separated else 1.0  # far apart: a few long segments of the ranked pool
    pools = [rng.normal(0, 1, 900), np.round(rng.normal(0, 1, 900), 1)]
    sets = [[rng.normal(shift, 1, 120), rng.normal(shift / 2, 1, 40)] for _ in pools]
    sets[1] = [np.round(x, 1) for x in sets[1]]  # ties
    corrects = [rng.random(120) < 0.7, rng.random(40) < 0.5]
    return pools, sets, corrects


@pytest.mark.parametrize("separated", [False, True])
def test_pool_bootstrap_int16_segments_equal_int32(monkeypatch, separated):
    pools, sets, corrects = _pool_data(separated)
    kw = {"n_resamples": 40, "seed": 5, "fpr95": True, "threads": 1}
    fast = B.pool_bootstrap(pools, sets, corrects, **kw)
    monkeypatch.setattr(B, "_INT16_MAX", 0)  # every block in int32
    wide = B.pool_bootstrap(pools, sets, corrects, **kw)
    assert set(fast) == set(wide)
    for k in fast:
        np.testing.assert_array_equal(fast[k].view(np.int64), wide[k].view(np.int64))


def test_pool_bootstrap_uses_int32_where_int16_could_overflow(monkeypatch):
    pools, sets, corrects = _pool_data(True)
    seen = []
    of = B._PoolRef.of

    def spy(w, longest):
        ref = of(w, longest)
        seen.append(ref.t32 is not None)
        return ref

    monkeypatch.setattr(B._PoolRef, "of", staticmethod(spy))
    monkeypatch.setattr(B, "_INT16_MAX", 3)  # any segment of 2+ images with a 2 passes it
    B.pool_bootstrap(pools, sets, corrects, n_resamples=8, seed=1, threads=1)
    assert seen and all(seen)


@pytest.mark.parametrize("ties", [False, True])
def test_ranked_bootstrap_int32_sums_equal_int64(monkeypatch, ties):
    rng = np.random.default_rng(8)
    ref = [rng.normal(1, 1, 300), rng.normal(0.5, 1, 300)]
    subs = [[rng.normal(0, 1, n) for n in (50, 80, 20)] for _ in ref]
    if ties:
        ref = [np.round(r, 1) for r in ref]
        subs = [[np.round(x, 1) for x in s] for s in subs]
    correct = rng.random(300) < 0.6
    kw = {"n_resamples": 30, "seed": 2, "threads": 1, "correct": correct}
    stats = ("auroc", "fpr95", "oscr", "auroc_correct", "auroc_incorrect", "acc")
    fast = B.ranked_bootstrap(ref, subs, stats=stats, **kw)
    monkeypatch.setattr(B, "_INT32_LIMIT", 0)  # every sum in int64
    sums64 = B.ranked_bootstrap(ref, subs, stats=stats, **kw)
    monkeypatch.setattr(B, "_UINT16_MAX", 0)  # and every gather in int32
    wide = B.ranked_bootstrap(ref, subs, stats=stats, **kw)
    for s in stats:
        for other in (sums64, wide):
            np.testing.assert_array_equal(
                fast.values[s].view(np.int64), other.values[s].view(np.int64)
            )


def test_row_levels_equal_level_str_of_every_value():
    values = [1, 2.0, 0.5, "high", float("nan"), None, True, np.int64(3), np.float64(2.5),
              -0.0, np.nan, 1, True, 1.0, False, 0, np.str_("x"), [1, 2]]  # fmt: skip
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    got = _row_levels(arr, len(values), "levels")
    assert got is not None
    assert list(got) == [level_str(v) for v in values]
    assert list(got[[6, 0, 14, 15]]) == ["True", "1", "False", "0"]  # True is not 1
