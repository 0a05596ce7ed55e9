"""Deep ensembles over feature stores: several models' stores of the same images -> one score.

Each member is a store (or a selection of one) extracted by a different model from the same
images; a store given by its path is opened verified (every file hashed again,
:func:`semshift.features.store.open_verified`). :func:`check_members` makes sure they line up
row for row (same row count, the same ``sample_id`` and ``path`` in the same order, the same
dataset fingerprint where the stores record one, the same class count) and hold different
models; :func:`ensemble_scores` then combines the members' logits block by block with a rule of
:data:`semshift.detectors.ensemble.ENSEMBLE_RULES` (``"msp"``: max of the mean softmax, as
OpenOOD's ``EnsemblePostprocessor``), and :func:`ensemble_detector_scores` averages one
post-hoc detector's scores, each member's detector fitted on that member's own training store.
Scores are higher = more in-distribution; see docs/methods.md#deep-ensemble.

>>> import numpy as np, pandas as pd, tempfile
>>> from semshift.features import write_store
>>> from semshift.features.ensemble import ensemble_scores
>>> idx = pd.DataFrame({"path": ["a.png", "b.png"], "label": [0, 1]})
>>> za = np.array([[2.0, 0.0], [0.0, 0.0]], np.float32)
>>> zb = np.array([[0.0, 2.0], [0.0, 0.0]], np.float32)
>>> tmp = tempfile.TemporaryDirectory()
>>> a = write_store(f"{tmp.name}/a", index=idx, arrays={"logits": za}, meta={"model": "a"})
>>> b = write_store(f"{tmp.name}/b", index=idx, arrays={"logits": zb}, meta={"model": "b"})
>>> ensemble_scores([a, b]).scores
array([0.5, 0.5])
>>> tmp.cleanup()
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from semshift.errors import InputError
from semshift.features.store import (
    FeatureStore,
    Selection,
    model_identity,
    model_mismatch,
    open_verified,
)

__all__ = [
    "EnsembleScores",
    "Member",
    "check_members",
    "ensemble_detector_scores",
    "ensemble_scores",
]

#: A member as given: a store path, an opened store or a selection of one.
Member = str | Path | FeatureStore | Selection
#: Rows read from every member at a time.
BLOCK_ROWS = 16_384


@dataclass
class EnsembleScores:
    """One score per image of the members' common rows.

    Attributes
    ----------
    scores : float64 array (n,)
        Higher = more in-distribution.
    index : DataFrame
        The rows scored (``sample_id``, ``path``, ``label`` and the group columns of the first
        member), in order.
    rule : str
        The rule (``"msp"``, ``"energy"``) or ``"mean:<detector>"``.
    members : list of str
        Where each member came from.
    """

    scores: NDArray[np.float64]
    index: pd.DataFrame
    rule: str
    members: list[str]


def _selection(member: Member, name: str) -> Selection:
    """The member as a selection; a store path is opened verified (``name`` in messages)."""
    if isinstance(member, Selection):
        return member
    if isinstance(member, FeatureStore):
        return member.all()
    return open_verified({name: member}, same_model=False)[name].all()


def _where(sel: Selection) -> str:
    path = sel.store.path
    return str(path) if path is not None else "a concatenated store"


def _fingerprint(meta: Mapping[str, Any]) -> Any:
    dataset = meta.get("dataset")
    return dataset.get("fingerprint") if isinstance(dataset, Mapping) else None


def check_members(members: Sequence[Member], owner: str = "ensemble") -> list[Selection]:
    """The members as selections that hold the same images in the same order.

    Parameters
    ----------
    members : sequence of store path, store or selection
        M >= 2 members, each extracted by a different model from the same images.
    owner : str
        Prefix of error messages.

    Returns
    -------
    list of Selection

    Raises
    ------
    InputError
        Fewer than two members; a store given twice; members of different row counts, dataset
        fingerprints, sample ids or paths (the first differing row is named) or class counts;
        two members holding the same model; a member without logits.
    """
    if len(members) < 2:
        raise InputError(
            f"{owner}: an ensemble needs at least two members (stores of the same images "
            f"extracted by different models), got {len(members)}"
        )
    sels = [_selection(m, f"{owner}: member {k}") for k, m in enumerate(members)]
    first = sels[0]
    seen: dict[str, int] = {}
    identities: dict[tuple[Any, ...], int] = {}
    for k, sel in enumerate(sels):
        where = _where(sel)
        if "logits" not in sel.store.array_names:
            raise InputError(f"{owner}: member {k} ({where}) has no logits")
        if sel.store.path is not None:
            key = str(Path(sel.store.path).resolve())
            if key in seen and len(sel) == len(sels[seen[key]]):
                raise InputError(
                    f"{owner}: members {seen[key]} and {k} are the same store {where}; give "
                    "each network's store once"
                )
            seen.setdefault(key, k)
        found = model_identity(sel.store.meta)
        ident = tuple(found.values()) if any(v is not None for v in found.values()) else None
        if ident is not None and ident in identities:
            j = identities[ident]
            raise InputError(
                f"{owner}: members {j} ({_where(sels[j])}) and {k} ({where}) hold the same "
                f"model ({ident[0]}); an ensemble combines different networks"
            )
        if ident is not None:
            identities[ident] = k
        if k == 0:
            continue
        if len(sel) != len(first):
            raise InputError(
                f"{owner}: member {k} ({where}) has {len(sel)} rows but member 0 "
                f"({_where(first)}) has {len(first)}; the members must hold the same images"
            )
        fp0, fp = _fingerprint(first.store.meta), _fingerprint(sel.store.meta)
        if fp0 is not None and fp is not None and fp0 != fp:
            raise InputError(
                f"{owner}: member {k} ({where}) was extracted from another image set than "
                f"member 0 ({_where(first)}): dataset fingerprints {fp} and {fp0}"
            )
        c0 = first.store.array_specs["logits"]["shape"]
        c = sel.store.array_specs["logits"]["shape"]
        if list(c) != list(c0):
            raise InputError(
                f"{owner}: member {k} ({where}) has {c[0]} classes but member 0 "
                f"({_where(first)}) has {c0[0]}; the members must share one class list"
            )
        for col in ("sample_id", "path"):
            a = first.index[col].to_numpy()
            b = sel.index[col].to_numpy()
            bad = np.flatnonzero(a != b)
            if bad.size:
                r = int(bad[0])
                raise InputError(
                    f"{owner}: member {k} ({where}) holds other images than member 0: row {r} "
                    f"has {col} {b[r]!r}, member 0 {a[r]!r} ({bad.size} row(s) differ); the "
                    "members must hold the same images in the same order"
                )
    return sels


def ensemble_scores(
    members: Sequence[Member], rule: str = "msp", *, rows: int = BLOCK_ROWS
) -> EnsembleScores:
    """Combine the members' logits into one score per image (read block by block).

    Parameters
    ----------
    members : sequence of store path, store or selection
        M >= 2 stores of the same images from different models (see :func:`check_members`).
    rule : str, default "msp"
        A name of :data:`semshift.detectors.ensemble.ENSEMBLE_RULES`: ``"msp"`` (max of the
        mean softmax, OpenOOD) or ``"energy"`` (logsumexp of the mean logits).
    rows : int
        Rows read from every member at a time.

    Returns
    -------
    EnsembleScores
    """
    from semshift.detectors.ensemble import ENSEMBLE_RULES, ensemble_score

    if rule not in ENSEMBLE_RULES:
        raise InputError(
            f"ensemble: unknown rule {rule!r}; known rules: {', '.join(ENSEMBLE_RULES)}"
        )
    sels = check_members(members)
    parts = []
    streams = [sel.blocks("logits", rows=rows) for sel in sels]
    for blocks in zip(*streams, strict=True):
        parts.append(ensemble_score([b["logits"] for b in blocks], rule))
    return EnsembleScores(
        np.concatenate(parts), sels[0].index.reset_index(drop=True), rule, [_where(s) for s in sels]
    )


def ensemble_detector_scores(
    train: Sequence[Member],
    test: Sequence[Member],
    detector: str,
    params: Mapping[str, Any] | None = None,
) -> EnsembleScores:
    """Mean over the members of one post-hoc detector's scores.

    Member m's detector is fitted on ``train[m]`` (its logits, features, head and labels, as
    the detector needs) and scores ``test[m]``; the test members must hold the same images
    (:func:`check_members`), the training members need not, but each must come from its test
    member's model (:func:`semshift.features.store.model_mismatch`).

    Parameters
    ----------
    train, test : sequences of store path, store or selection
        One training and one test store per member, in the same member order.
    detector : str
        A post-hoc detector of :func:`semshift.detectors.list_detectors` whose inputs a store
        holds (detectors needing validation logits are refused).
    params : mapping, optional
        Its hyperparameters.

    Returns
    -------
    EnsembleScores
        ``rule`` is ``"mean:<detector>"``.

    Raises
    ------
    InputError
        A model-level detector or one needing validation logits; test members that do not
        line up (:func:`check_members`); not one training store per member; a training
        store of another model or class count than its member.
    """
    from semshift import detectors
    from semshift.detectors.ensemble import mean_scores

    det0 = detectors.get(detector, **dict(params or {}))
    if det0.level != "post_hoc":
        raise InputError(
            f"ensemble: {detector} is a model-level detector; average its stored score "
            "columns instead, or pick a post-hoc detector"
        )
    need_val = sorted(det0.requires & {"val_logits", "val_labels"})
    if need_val:
        raise InputError(
            f"ensemble: {detector} needs {', '.join(need_val)}, which the ensemble does not "
            "give; pick a detector fitted on training data alone"
        )
    tests = check_members(test, "ensemble (test)")
    if len(train) != len(tests):
        raise InputError(
            f"ensemble: {len(train)} training store(s) for {len(tests)} test store(s); give "
            "one training store per member, in the same order"
        )
    member_scores = []
    for k, (tr, te) in enumerate(zip(train, tests, strict=True)):
        trs = _selection(tr, f"ensemble: training store {k}")
        diff = model_mismatch(te.store.meta, trs.store.meta)
        if diff:
            raise InputError(
                f"ensemble: member {k}: training store {_where(trs)} comes from another model "
                f"than test store {_where(te)} ({', '.join(diff)} differ); give each member's "
                "training store in the members' order"
            )
        if te.store.array_specs["logits"]["shape"] != trs.store.array_specs.get("logits", {}).get(
            "shape"
        ):
            raise InputError(
                f"ensemble: member {k}: training store {_where(trs)} and test store "
                f"{_where(te)} have different class counts"
            )
        det = detectors.get(detector, **dict(params or {}))
        fit_names = [n for n in ("logits", "features", "head", "labels") if n in det.fit_requires]
        score_names = sorted(det.score_requires)
        det.fit(**(trs.inputs(*fit_names) if fit_names else {}))
        member_scores.append(det.score(**te.inputs(*score_names)))
    return EnsembleScores(
        mean_scores(member_scores),
        tests[0].index.reset_index(drop=True),
        f"mean:{detector}",
        [_where(s) for s in tests],
    )
