"""New-class vs failure detection (ImageNet-OOD Table 1) and the AUROC decomposition (Table 4)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from semshift.errors import InputError, SemshiftError
from semshift.metrics import auroc_decomposition
from semshift.protocols._bootstrap import (
    FloatArray,
    check_id_test,
    check_sets,
    compare_rows,
    detector_names,
    pool,
    ranked_bootstrap,
)
from semshift.protocols.sets import DEFAULT_BOOTSTRAP, Bootstrap, ScoredSet
from semshift.protocols.tidy import error_row, results_frame

__all__ = ["newclass_failure"]

_DECOMPOSITION = ("acc", "auroc", "auroc_correct", "auroc_incorrect", "auroc_correct_vs_incorrect")


def newclass_failure(
    id_test: ScoredSet,
    sets: Sequence[ScoredSet],
    *,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> pd.DataFrame:
    """AUROC under new-class and failure detection, and the AUROC decomposition.

    The negatives of new-class detection are the pool of every ``ood`` set (semantic shift;
    ``set`` names joined by ``+`` in messages). For each detector:

    - protocol ``newclass``, metric ``auroc``: ``id_test`` vs the pool (``set`` = id_test's
      name) and each ``covariate`` set vs the pool (``set`` = that set): positives = every
      image of a known class, whatever the prediction;
    - protocol ``failure``, metric ``auroc``, same sets: positives = the set's correctly
      classified images, negatives = its misclassified images plus the pool;
    - protocol ``decomposition`` (``set`` = id_test's name): ``acc``, ``auroc``,
      ``auroc_correct``, ``auroc_incorrect`` and ``auroc_correct_vs_incorrect`` of id_test vs
      the pool, with ``auroc = acc auroc_correct + (1 - acc) auroc_incorrect`` exactly
      (:func:`semshift.metrics.auroc_decomposition`).

    ``n_id`` / ``n_ood`` are the positive / negative counts of each value (for ``acc``: the ID
    test size and null). CIs are percentile bootstrap intervals with positives and negatives
    resampled separately (paired across detectors). The decomposition terms share one set of
    resamples of (ID test, pool), so their CIs are consistent with each other;
    ``auroc_correct_vs_incorrect`` resamples correct and misclassified ID images separately. A
    term that is undefined (no misclassified ID image, say) is an error row, as is a detector
    without scores on a set.

    Parameters
    ----------
    id_test : ScoredSet
        The ID test set.
    sets : sequence of ScoredSet
        Evaluation sets: the ``ood`` ones form the pool (at least one is needed); the
        ``covariate`` ones are evaluated against it.
    bootstrap : Bootstrap, default Bootstrap()
        CI settings; ``Bootstrap(n_resamples=0)`` turns CIs off.

    Returns
    -------
    pandas.DataFrame
        The tidy table (:data:`semshift.protocols.tidy.RESULT_COLUMNS`).

    Raises
    ------
    InputError
        No ``ood`` set, ``id_test`` without role ``id_test``, duplicate set names.

    References
    ----------
    .. [1] Yang et al., "ImageNet-OOD: Deciphering Modern Out-of-Distribution Detection
       Algorithms", ICLR 2024: Table 1 (new-class vs failure detection), eq. 2 and Table 4
       (decomposition).

    Examples
    --------
    >>> import numpy as np
    >>> from semshift.protocols import Bootstrap, ScoredSet, newclass_failure
    >>> idt = ScoredSet("id_test", "id_test", [0, 1, 1], [0, 1, 0],
    ...                 {"msp": np.array([0.9, 0.8, 0.4])})
    >>> ood = ScoredSet("ood", "ood", [-1, -1], [0, 0], {"msp": np.array([0.5, 0.1])})
    >>> df = newclass_failure(idt, [ood], bootstrap=Bootstrap(0))
    >>> df[["protocol", "metric", "value"]].round(4).values.tolist()[:3]
    [['newclass', 'auroc', 0.8333], ['failure', 'auroc', 1.0], ['decomposition', 'acc', 0.6667]]
    """
    check_id_test(id_test, "newclass_failure")
    all_sets = check_sets(sets, "newclass_failure")
    ood = [s for s in all_sets if s.role == "ood"]
    cov = [s for s in all_sets if s.role == "covariate"]
    if not ood:
        raise InputError(
            "newclass_failure needs at least one ood (semantic-shift) set as negatives; "
            f"got roles {[s.role for s in all_sets]}"
        )
    detectors = detector_names([id_test], ood, cov)
    pool_name = "+".join(s.name for s in ood)
    negatives = pool(ood, detectors, {"set": pool_name})
    newclass = _newclass_decomposition(id_test, negatives, detectors, bootstrap)
    rows = [r for r in newclass if r["protocol"] == "newclass"]
    if cov:
        sides = [pool([s], detectors, {"set": s.name, "split": s.split}) for s in cov]
        # the pool is the reference (ranked by -score): AUROC(positives vs pool) is unchanged
        flipped = compare_rows(
            "newclass", detectors, negatives, sides, ["auroc"], bootstrap, negate=True
        )
        for r in flipped:
            r["n_id"], r["n_ood"] = r["n_ood"], r["n_id"]
        rows += flipped
    for s in [id_test, *cov]:
        ok = s.correct
        keys = {"set": s.name, "split": s.split}
        pos = pool([s], detectors, keys, mask=[ok])
        neg = pool([s, *ood], detectors, keys, mask=[~ok] + [np.ones(o.n, bool) for o in ood])
        rows += compare_rows("failure", detectors, pos, [neg], ["auroc"], bootstrap)
    rows += [r for r in newclass if r["protocol"] == "decomposition"]
    return results_frame(rows)


def _newclass_decomposition(
    id_test: ScoredSet, negatives: Any, detectors: list[str], bootstrap: Bootstrap
) -> list[dict[str, Any]]:
    """``newclass`` rows of id_test vs the pool and the ``decomposition`` rows."""
    correct = id_test.correct
    n_c = int(correct.sum())
    n_w = id_test.n - n_c
    n_ood = negatives.n
    points: dict[str, Any] = {}
    for det in detectors:
        r, o = id_test.scores.get(det), negatives.scores.get(det)
        if r is None:
            points[det] = f"set {id_test.name!r}: {id_test.missing(det)}"
        elif o is None:
            points[det] = negatives.errors[det]
        else:
            s = np.concatenate((r, o))
            is_ood = np.zeros(s.size, dtype=bool)
            is_ood[r.size :] = True
            try:
                points[det] = auroc_decomposition(
                    s, is_ood, np.concatenate((correct, np.zeros(o.size, dtype=bool)))
                )
            except SemshiftError as err:
                points[det] = str(err)
    ok = [d for d in detectors if not isinstance(points[d], str)]
    nan = np.full((len(detectors), 1), np.nan)
    lows = dict.fromkeys(_DECOMPOSITION, nan)
    highs = dict.fromkeys(_DECOMPOSITION, nan)
    if bootstrap.enabled and ok:
        ref: list[FloatArray | None] = [id_test.scores[d] if d in ok else None for d in detectors]
        sub: list[list[FloatArray | None]] = [
            [negatives.scores[d] if d in ok else None] for d in detectors
        ]
        stats = ("auroc", "acc", "auroc_correct", "auroc_incorrect")
        st = ranked_bootstrap(
            ref,
            sub,
            n_resamples=bootstrap.n_resamples,
            seed=bootstrap.seed,
            stats=stats,
            correct=correct,
        )
        for m in stats:
            lows[m], highs[m] = st.ci(m, bootstrap.level)
        if n_c and n_w:
            cw = ranked_bootstrap(
                [id_test.scores[d][correct] if d in ok else None for d in detectors],
                [[id_test.scores[d][~correct] if d in ok else None] for d in detectors],
                n_resamples=bootstrap.n_resamples,
                seed=bootstrap.seed,
            )
            m = "auroc_correct_vs_incorrect"
            lows[m], highs[m] = cw.ci("auroc", bootstrap.level)
    counts = {
        "acc": (id_test.n, None),
        "auroc": (id_test.n, n_ood),
        "auroc_correct": (n_c, n_ood),
        "auroc_incorrect": (n_w, n_ood),
        "auroc_correct_vs_incorrect": (n_c, n_w),
    }
    undefined = {
        "auroc_correct": "n/a: no correctly classified ID test image",
        "auroc_incorrect": "n/a: no misclassified ID test image",
        "auroc_correct_vs_incorrect": "n/a: needs correct and misclassified ID test images",
    }
    rows: list[dict[str, Any]] = []
    for d, det in enumerate(detectors):
        p = points[det]
        for protocol, metrics in (("newclass", ("auroc",)), ("decomposition", _DECOMPOSITION)):
            for m in metrics:
                n_id, n_neg = counts[m]
                base: dict[str, Any] = {
                    "protocol": protocol,
                    "set": id_test.name,
                    "detector": det,
                    "metric": m,
                    "n_id": n_id,
                    "n_ood": n_neg,
                }
                if isinstance(p, str):
                    rows.append(error_row(error=p, **base))
                    continue
                value = float(getattr(p, m))
                if np.isnan(value):
                    rows.append(error_row(error=undefined[m], **base))
                    continue
                rows.append(
                    {**base, "value": value, "ci_low": lows[m][d, 0], "ci_high": highs[m][d, 0]}
                )
    return rows
