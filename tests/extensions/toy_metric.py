"""A toy ranking metric in one module: the fraction of OOD samples scored below every ID sample.

``ood_below_min_id = mean(score[ood] < min(score[id]))``: 1 when the lowest ID score is above
every OOD score (a perfect detector), higher is better. :func:`register` adds it (a package
would call ``register_metric`` on import, through the ``semshift.metrics`` entry-point group).
"""

from __future__ import annotations

import numpy as np

from semshift.metrics import METRICS, register_metric

NAME = "ood_below_min_id"


def ood_below_min_id(scores: np.ndarray, is_ood: np.ndarray) -> float:
    """Fraction of OOD scores strictly below the lowest ID score."""
    s = np.asarray(scores, dtype=np.float64)
    ood = np.asarray(is_ood, dtype=bool)
    return float(np.mean(s[ood] < s[~ood].min()))


def register() -> None:
    register_metric(
        NAME, higher_is_better=True, inputs=("scores", "is_ood"),
        description="fraction of OOD scores below the lowest ID score",
    )(ood_below_min_id)  # fmt: skip


def unregister() -> None:
    METRICS.remove(NAME)
