"""``newclass_failure`` with ``pairs``: each (reference, ood) pair evaluated on its own, as
ImageNet-OOD's Table 1 does, equal to the pooled evaluation of that ood set alone."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from semshift.errors import InputError
from semshift.protocols import Bootstrap, ScoredSet, newclass_failure


def _sets():
    rng = np.random.default_rng(0)

    def make(name, role, n, shift, acc):
        labels = np.full(n, -1) if role == "ood" else rng.integers(0, 3, n)
        preds = np.where(rng.uniform(size=n) < acc, labels, (labels + 1) % 3)
        preds = np.where(labels < 0, rng.integers(0, 3, n), preds)
        score = rng.normal(shift, 1.0, n)
        return ScoredSet(name, role, labels, preds, {"msp": score, "energy": score * 2 + 0.1})

    idt = make("id_test", "id_test", 60, 2.0, 0.8)
    cov = make("sketch", "covariate", 40, 1.0, 0.5)
    a = make("far", "ood", 50, -1.0, 0)
    b = make("near", "ood", 30, 0.5, 0)
    return idt, [cov, a, b]


def _rows(frame, protocol, set_name):
    got = frame[(frame["protocol"] == protocol) & (frame["set"] == set_name)]
    return got.drop(columns=["set"]).reset_index(drop=True)


@pytest.mark.parametrize("n_resamples", [0, 50])
def test_each_pair_equals_its_ood_set_alone(n_resamples):
    idt, sets = _sets()
    boot = Bootstrap(n_resamples=n_resamples, seed=3)
    pairs = [("id_test", "near"), ("sketch", "far"), ("id_test", "far")]
    got = newclass_failure(idt, sets, bootstrap=boot, pairs=pairs)
    pooled = newclass_failure(idt, sets, bootstrap=boot)
    pd.testing.assert_frame_equal(got.iloc[: len(pooled)].reset_index(drop=True), pooled)
    for ood in ("near", "far"):
        alone = newclass_failure(idt, [sets[0], *[s for s in sets if s.name == ood]],
                                 bootstrap=boot)  # fmt: skip
        for ref in ("id_test", "sketch"):
            if (ref, ood) not in pairs:
                assert _rows(got, "newclass", f"{ref} vs {ood}").empty
                continue
            for protocol in ("newclass", "failure"):
                mine = _rows(got, protocol, f"{ref} vs {ood}")
                ref_rows = _rows(alone, protocol, ref)
                assert len(mine) == 2  # two detectors
                np.testing.assert_array_equal(mine["value"], ref_rows["value"])
                np.testing.assert_array_equal(mine["n_ood"], ref_rows["n_ood"])


def test_all_pairs_and_bad_pairs():
    idt, sets = _sets()
    got = newclass_failure(idt, sets, bootstrap=Bootstrap(0), pairs="all")
    names = set(got.loc[got["set"].str.contains(" vs "), "set"])
    assert names == {"id_test vs far", "sketch vs far", "id_test vs near", "sketch vs near"}
    with pytest.raises(InputError, match=r"pairs\[0\]: reference 'far' is not id_test"):
        newclass_failure(idt, sets, bootstrap=Bootstrap(0), pairs=[("far", "near")])
    with pytest.raises(InputError, match=r"pairs\[0\]: 'sketch' is not an ood set"):
        newclass_failure(idt, sets, bootstrap=Bootstrap(0), pairs=[("id_test", "sketch")])
    with pytest.raises(InputError, match="named twice"):
        newclass_failure(idt, sets, bootstrap=Bootstrap(0),
                         pairs=[("id_test", "far"), ("id_test", "far")])  # fmt: skip
