"""Store selections feed detectors as they are (``sel.inputs(...)``): same scores as arrays."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from semshift import detectors
from semshift.features import write_store


@pytest.mark.parametrize("name", ["energy", "mahalanobis", "vim", "knn", "react"])
def test_detectors_fit_and_score_from_a_store(tmp_path, name):
    rng = np.random.default_rng(0)
    n, c, d = 300, 4, 16
    labels = rng.integers(0, c, n)
    means = rng.normal(size=(c, d)) * 2
    feats = np.abs(means[labels] + rng.normal(size=(n, d))).astype(np.float32)
    w = means.astype(np.float32)
    b = np.zeros(c, np.float32)
    logits = feats @ w.T + b
    split = np.where(np.arange(n) < 200, "id_train", "id_test")
    st = write_store(
        tmp_path / "s",
        index=pd.DataFrame(
            {"path": [f"{i}.png" for i in range(n)], "label": labels, "split": split}
        ),
        arrays={"logits": logits, "features": feats},
        head=(w, b),
        shard_size=64,
        fsync=False,
    )
    kw = {"k": 5} if name == "knn" else {"dim": 8} if name == "vim" else {}
    from_store = detectors.get(name, **kw).fit(
        **st.select(split="id_train").inputs("logits", "features", "head", "labels")
    )
    got = from_store.score(**st.select(split="id_test").inputs("logits", "features"))
    tr, te = split == "id_train", split == "id_test"
    plain = detectors.get(name, **kw).fit(
        logits=logits[tr], features=feats[tr], head=(w, b), labels=labels[tr]
    )
    want = plain.score(logits=logits[te], features=feats[te])
    np.testing.assert_array_equal(got, want)
