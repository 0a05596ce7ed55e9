"""New-class vs failure detection (ImageNet-OOD Table 1) and the AUROC decomposition (Table 4)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

from semshift.errors import InputError, SemshiftError
from semshift.metrics import auroc_decomposition
from semshift.protocols._bootstrap import (
    Side,
    check_id_test,
    check_sets,
    detector_names,
    percentile_ci,
    pool,
    pool_bootstrap,
)
from semshift.protocols.registry import (
    ProtocolConfig,
    ProtocolInputs,
    ReportSection,
    register_protocol,
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
    pairs: Sequence[tuple[str, str]] | str | None = None,
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
    test size and null). CIs: one paired percentile bootstrap for all three protocols, the OOD
    pool and each set (id_test, covariate sets) resampled separately, a set as a whole (so its
    correct / misclassified counts vary from resample to resample, as the classifier's accuracy
    would); every term of a row, decomposition included, comes from the same resamples. The
    pool is ranked once per detector and resample and every set is read off it, so the cost is
    about one pass over the pool. A term that is undefined (no misclassified ID image, say) is
    an error row, as is a detector without scores on a set.

    Parameters
    ----------
    id_test : ScoredSet
        The ID test set.
    sets : sequence of ScoredSet
        Evaluation sets: the ``ood`` ones form the pool (at least one is needed); the
        ``covariate`` ones are evaluated against it.
    bootstrap : Bootstrap, default Bootstrap()
        CI settings; ``Bootstrap(n_resamples=0)`` turns CIs off.
    pairs : sequence of (reference, ood) or "all", optional
        Also each pair on its own, as ImageNet-OOD's Table 1 (:func:`_with_pairs`): rows
        ``newclass`` / ``failure`` with ``set`` = ``"<reference> vs <ood>"``, after the pooled
        rows (unchanged). ``"all"``: every reference with every ood set.

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
    if pairs is not None:
        return _with_pairs(id_test, sets, bootstrap, pairs)
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
    members = [id_test, *cov]
    n_p = negatives.n
    # point values (or the error) per detector and member set
    points: dict[tuple[int, int], dict[str, float] | str] = {}
    for d, det in enumerate(detectors):
        for k, m in enumerate(members):
            points[(d, k)] = _points(m, negatives, det)
    n_det, n_sets = len(detectors), len(members)
    lows = {name: np.full((n_det, n_sets), np.nan) for name in _STATS}
    highs = {name: np.full((n_det, n_sets), np.nan) for name in _STATS}
    if bootstrap.enabled:
        ok = [[isinstance(points[(d, k)], dict) for k in range(n_sets)] for d in range(n_det)]
        boot = pool_bootstrap(
            [negatives.scores.get(det) if any(ok[d]) else None for d, det in enumerate(detectors)],
            [
                [m.scores[det] if ok[d][k] else None for k, m in enumerate(members)]
                for d, det in enumerate(detectors)
            ],
            [m.correct for m in members],
            n_resamples=bootstrap.n_resamples,
            seed=bootstrap.seed,
        )
        for name in _STATS:
            lows[name], highs[name] = percentile_ci(boot[name], bootstrap.level)
    rows: list[dict[str, Any]] = []
    for protocol in ("newclass", "failure", "decomposition"):
        for d, det in enumerate(detectors):
            for k, m in enumerate(members):
                if protocol == "decomposition" and m is not id_test:
                    continue
                n_c = int(m.correct.sum())
                counts = {
                    "newclass": (m.n, n_p),
                    "failure": (n_c, m.n - n_c + n_p),
                    "acc": (m.n, None),
                    "auroc": (m.n, n_p),
                    "auroc_correct": (n_c, n_p),
                    "auroc_incorrect": (m.n - n_c, n_p),
                    "auroc_correct_vs_incorrect": (n_c, m.n - n_c),
                }
                metrics = _DECOMPOSITION if protocol == "decomposition" else (protocol,)
                for metric in metrics:
                    stat = "newclass" if metric == "auroc" else metric
                    n_id, n_neg = counts[metric]
                    base: dict[str, Any] = {
                        "protocol": protocol,
                        "set": m.name,
                        "split": m.split,
                        "detector": det,
                        "metric": "auroc" if protocol != "decomposition" else metric,
                        "n_id": n_id,
                        "n_ood": n_neg,
                    }
                    p = points[(d, k)]
                    if isinstance(p, str):
                        rows.append(error_row(error=p, **base))
                        continue
                    value = p[stat]
                    if np.isnan(value):
                        rows.append(error_row(error=_UNDEFINED[stat], **base))
                        continue
                    ci = {"ci_low": lows[stat][d, k], "ci_high": highs[stat][d, k]}
                    rows.append({**base, "value": value, **ci})
    return results_frame(rows)


def _with_pairs(
    id_test: ScoredSet,
    sets: Sequence[ScoredSet],
    bootstrap: Bootstrap,
    pairs: Sequence[tuple[str, str]] | str,
) -> pd.DataFrame:
    """The pooled rows, then each (reference, ood) pair's new-class and failure rows:
    ``reference`` is id_test's name or a covariate set, ``ood`` one ood set, which alone forms
    the negatives (as ImageNet-R vs ImageNet-OOD, ImageNet-1K vs OpenImage-O)."""
    pooled = newclass_failure(id_test, sets, bootstrap=bootstrap)
    by_name = {s.name: s for s in sets}
    refs = [id_test.name, *(s.name for s in sets if s.role == "covariate")]
    oods = [s.name for s in sets if s.role == "ood"]
    if pairs == "all":
        wanted = [(r, o) for o in oods for r in refs]
    elif isinstance(pairs, str):
        raise InputError(f"newclass_failure: pairs must be 'all' or a list of pairs, got {pairs!r}")
    else:
        wanted = [(str(r), str(o)) for r, o in pairs]
    for k, (ref, ood) in enumerate(wanted):
        if ref not in refs:
            raise InputError(
                f"newclass_failure: pairs[{k}]: reference {ref!r} is not id_test or a covariate "
                f"set; references: {', '.join(refs)}"
            )
        if ood not in oods:
            raise InputError(
                f"newclass_failure: pairs[{k}]: {ood!r} is not an ood set; ood sets: "
                f"{', '.join(oods)}"
            )
    if len(set(wanted)) != len(wanted):
        raise InputError("newclass_failure: a pair is named twice")
    frames = [pooled]
    for ood in dict.fromkeys(o for _, o in wanted):
        mine = [r for r, o in wanted if o == ood]
        covs = [by_name[r] for r in mine if r != id_test.name]
        sub = newclass_failure(id_test, [by_name[ood], *covs], bootstrap=bootstrap)
        sub = sub[sub["protocol"].isin(["newclass", "failure"]) & sub["set"].isin(mine)].copy()
        sub["set"] = sub["set"] + f" vs {ood}"
        frames.append(sub)
    return pd.concat(frames, ignore_index=True)


_STATS = (
    "newclass",
    "failure",
    "acc",
    "auroc_correct",
    "auroc_incorrect",
    "auroc_correct_vs_incorrect",
)
_UNDEFINED = {
    "newclass": "n/a: undefined",
    "acc": "n/a: undefined",
    "failure": "n/a: no correctly classified image in the set",
    "auroc_correct": "n/a: no correctly classified ID test image",
    "auroc_incorrect": "n/a: no misclassified ID test image",
    "auroc_correct_vs_incorrect": "n/a: needs correct and misclassified ID test images",
}


def _points(m: ScoredSet, negatives: Side, det: str) -> dict[str, float] | str:
    """Point values of one member set vs the pool, or the error that prevents them."""
    if det not in m.scores:
        return f"set {m.name!r}: {m.missing(det)}"
    if det not in negatives.scores:
        return negatives.errors[det]
    s, o = m.scores[det], negatives.scores[det]
    both = np.concatenate((s, o))
    is_ood = np.zeros(both.size, dtype=bool)
    is_ood[s.size :] = True
    correct = np.concatenate((m.correct, np.zeros(o.size, dtype=bool)))
    try:
        d = auroc_decomposition(both, is_ood, correct)
    except SemshiftError as err:
        return str(err)
    n_c, n_w, n_p = d.n_correct, d.n_incorrect, d.n_ood
    # failure: correct vs (misclassified + pool) = pairs against the pool and within the set
    u_fail = d.auroc_correct * n_c * n_p if n_c else 0.0
    if n_c and n_w:
        u_fail += d.auroc_correct_vs_incorrect * n_c * n_w
    return {
        "newclass": d.auroc,
        "failure": u_fail / (n_c * (n_w + n_p)) if n_c else float("nan"),
        "acc": d.acc,
        "auroc_correct": d.auroc_correct,
        "auroc_incorrect": d.auroc_incorrect,
        "auroc_correct_vs_incorrect": d.auroc_correct_vs_incorrect,
    }


class NewclassConfig(ProtocolConfig):
    """``protocols.newclass_failure``: ``pairs``, the (reference, ood) pairs also evaluated
    separately (``[[imagenet-r, imagenet-ood], ...]`` or ``all``; default none: the pooled
    figures alone)."""

    pairs: Literal["all"] | list[tuple[str, str]] | None = None


@register_protocol(
    "newclass_failure", NewclassConfig,
    "new-class vs failure detection and the AUROC decomposition (ImageNet-OOD)",
    order=20, on_stores=True, rows=("newclass", "failure", "decomposition"),
    sections=[
        ReportSection("newclass_failure", "New-class vs failure detection",
                      show_for=("newclass", "failure"), builder="newclass_failure_section"),
        ReportSection("decomposition", "AUROC decomposition", show_for=("decomposition",),
                      builder="decomposition_section"),
    ],
)  # fmt: skip
def _run_newclass(inputs: ProtocolInputs, config: NewclassConfig) -> pd.DataFrame:
    return newclass_failure(
        inputs.id_test, inputs.others, bootstrap=inputs.bootstrap, pairs=config.pairs
    )
