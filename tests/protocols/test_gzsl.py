"""GZSL rows equal semshift.metrics.gzsl."""

from __future__ import annotations

import numpy as np
import pytest

from semshift.metrics import gzsl as gzsl_metric
from semshift.protocols import gzsl


def test_rows_equal_metric_with_score_matrix():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 6, 80)
    scores = rng.normal(0, 1, (80, 6))
    scores[np.arange(80), labels] += 1.0
    df = gzsl(labels, scores, [0, 1, 2, 3], [4, 5], set_name="gzsl_test")
    ref = gzsl_metric(scores, labels, [0, 1, 2, 3], [4, 5])
    v = df.set_index("metric")["value"]
    for m in ("ts", "tr", "h", "zsl_top1"):
        assert v[m] == pytest.approx(getattr(ref, m))
    n_unseen = int(np.isin(labels, [4, 5]).sum())
    assert (df["n_ood"] == n_unseen).all() and (df["n_id"] == 80 - n_unseen).all()
    assert df["set"].eq("gzsl_test").all() and df["detector"].isna().all()


def test_zsl_top1_without_restricted_predictions_is_an_error_row():
    df = gzsl([0, 1, 2, 2], [0, 1, 1, 2], [0, 1], [2])
    row = df.set_index("metric").loc["zsl_top1"]
    assert np.isnan(row["value"]) and row["error"].startswith("n/a: zsl_top1 needs")
    assert df.set_index("metric").loc["h", "value"] == pytest.approx(2 * 0.5 / 1.5)
