"""Deep-ensemble combiners: several networks' outputs on the same images -> one score per image.

A combiner is not a registered detector: a detector consumes one model's inputs
(:data:`~semshift.detectors.INPUT_NAMES`), a combiner the logits (or scores) of M >= 2 models
on the same images in the same order. The store-level entry point, which checks that the stores
hold the same images, is :func:`semshift.features.ensemble.ensemble_scores`; these are the pure
NumPy cores. Every score is higher = more in-distribution.

>>> import numpy as np
>>> from semshift.detectors.ensemble import ensemble_score
>>> a = np.array([[2.0, 0.0], [0.0, 0.0]])
>>> b = np.array([[0.0, 2.0], [0.0, 0.0]])
>>> ensemble_score([a, b], rule="msp")  # members disagree on row 0: mean softmax (0.5, 0.5)
array([0.5, 0.5])

References
----------
.. [1] B. Lakshminarayanan, A. Pritzel and C. Blundell, "Simple and Scalable Predictive
   Uncertainty Estimation using Deep Ensembles", NeurIPS 2017.
.. [2] J. Yang et al., "OpenOOD v1.5: Enhanced Benchmark for Out-of-Distribution Detection",
   2023 (``EnsemblePostprocessor``: max of the mean softmax of the members).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from semshift.errors import InputError

from ._base import check_finite
from ._common import F64, logsumexp, row_blocks, softmax

__all__ = [
    "ENSEMBLE_RULES",
    "EnsembleRule",
    "check_member_arrays",
    "ensemble_score",
    "mean_logit_energy",
    "mean_scores",
    "mean_softmax_msp",
]


def check_member_arrays(
    members: Sequence[object], what: str, ndim: int, owner: str
) -> list[np.ndarray]:
    """The members as arrays of one shape; a one-line :class:`InputError` otherwise.

    Parameters
    ----------
    members : sequence of array
        One array per ensemble member.
    what : str
        What each member holds, for messages (``"logits"``, ``"scores"``).
    ndim : int
        Expected dimensions (2 for logits (n, C), 1 for scores (n,)).
    owner : str
        Prefix of error messages.
    """
    arrays = [np.asarray(m) for m in members]
    if len(arrays) < 2:
        raise InputError(
            f"{owner}: an ensemble needs at least two members, got {len(arrays)}; give the "
            f"{what} of every network"
        )
    for k, arr in enumerate(arrays):
        if arr.dtype.kind not in "fiu" or arr.ndim != ndim or arr.size == 0:
            shape = "(n, C)" if ndim == 2 else "(n,)"
            raise InputError(
                f"{owner}: member {k} must be a non-empty real array {shape} of {what}, got "
                f"dtype {arr.dtype} and shape {arr.shape}"
            )
        first = arrays[0]
        if arr.shape[0] != first.shape[0]:
            raise InputError(
                f"{owner}: member {k} has {arr.shape[0]} rows but member 0 has "
                f"{first.shape[0]}; every member must score the same images in the same order"
            )
        if ndim == 2 and arr.shape[1] != first.shape[1]:
            raise InputError(
                f"{owner}: member {k} has {arr.shape[1]} classes but member 0 has "
                f"{first.shape[1]}; the members must share one class list"
            )
        check_finite(f"member {k} {what}", arr, owner)
    return arrays


def mean_softmax_msp(member_logits: Sequence[np.ndarray]) -> F64:
    """Maximum of the members' mean softmax, ``max_c (1/M) sum_m softmax(z_m)_c``; higher = ID.

    Parameters
    ----------
    member_logits : sequence of M >= 2 arrays (n, C)
        Each member's logits on the same images, in the same order.

    Returns
    -------
    float64 array (n,)
        In [1/C, 1]. Computed in float64 row blocks.
    """
    arrays = check_member_arrays(member_logits, "logits", 2, "ensemble msp")
    n, c = arrays[0].shape
    out = np.empty(n, dtype=np.float64)
    for sl in row_blocks(n, 24 * c):
        total = np.zeros((sl.stop - sl.start, c), dtype=np.float64)
        for z in arrays:
            total += softmax(np.asarray(z[sl], dtype=np.float64))
        out[sl] = total.max(axis=1) / len(arrays)
    return out


def mean_logit_energy(member_logits: Sequence[np.ndarray]) -> F64:
    """Energy of the members' mean logits, ``logsumexp((1/M) sum_m z_m)``; higher = ID.

    Parameters
    ----------
    member_logits : sequence of M >= 2 arrays (n, C)
        Each member's logits on the same images, in the same order.

    Returns
    -------
    float64 array (n,)
    """
    arrays = check_member_arrays(member_logits, "logits", 2, "ensemble energy")
    n, c = arrays[0].shape
    out = np.empty(n, dtype=np.float64)
    for sl in row_blocks(n, 16 * c):
        total = np.zeros((sl.stop - sl.start, c), dtype=np.float64)
        for z in arrays:
            total += np.asarray(z[sl], dtype=np.float64)
        out[sl] = logsumexp(total / len(arrays))
    return out


def mean_scores(member_scores: Sequence[np.ndarray]) -> F64:
    """Mean of the members' scores of one detector, ``(1/M) sum_m s_m``; higher = ID.

    The members' scores are averaged as they are: a detector whose scale differs between
    networks (energy, a residual norm) weighs the networks unequally.

    Parameters
    ----------
    member_scores : sequence of M >= 2 arrays (n,)
        Each member's scores (higher = more in-distribution) on the same images.

    Returns
    -------
    float64 array (n,)
    """
    arrays = check_member_arrays(member_scores, "scores", 1, "ensemble mean")
    total = np.zeros(arrays[0].shape[0], dtype=np.float64)
    for s in arrays:
        total += s
    return total / len(arrays)


@dataclass(frozen=True)
class EnsembleRule:
    """A rule combining the members' logits into one score.

    Attributes
    ----------
    name : str
    combine : callable
        Sequence of M arrays (n, C) -> float64 (n,), higher = more in-distribution.
    summary : str
        One line for listings and help texts.
    """

    name: str
    combine: Callable[[Sequence[np.ndarray]], F64]
    summary: str


#: The logit rules by name; ``"msp"`` (OpenOOD's EnsemblePostprocessor) is the default.
ENSEMBLE_RULES: dict[str, EnsembleRule] = {
    r.name: r
    for r in (
        EnsembleRule("msp", mean_softmax_msp, "max of the mean softmax (OpenOOD, the default)"),
        EnsembleRule("energy", mean_logit_energy, "logsumexp of the mean logits"),
    )
}


def ensemble_score(member_logits: Sequence[np.ndarray], rule: str = "msp") -> F64:
    """One score per image from the members' logits by ``rule`` (:data:`ENSEMBLE_RULES`).

    Parameters
    ----------
    member_logits : sequence of M >= 2 arrays (n, C)
        Each member's logits on the same images, in the same order.
    rule : str, default "msp"
        A name of :data:`ENSEMBLE_RULES`.

    Returns
    -------
    float64 array (n,)
        Higher = more in-distribution.

    Raises
    ------
    InputError
        Unknown rule, fewer than two members, members of different shapes, or NaN/inf logits.
    """
    if rule not in ENSEMBLE_RULES:
        raise InputError(
            f"ensemble: unknown rule {rule!r}; known rules: {', '.join(ENSEMBLE_RULES)}"
        )
    return ENSEMBLE_RULES[rule].combine(member_logits)
