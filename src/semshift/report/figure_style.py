"""Styling shared by the report figures: the highlighted few, the shift-axis order, legends.

With many detectors a line plot cannot give each its own colour: the figures colour a few
(the reference MSP and the best and worst by the figure's metric, :func:`pick_highlights`)
over every other detector in light grey, and name the coloured ones in a legend under the
panels. Every shift axis runs from the smaller to the larger shift, left to right
(:func:`shift_order`): semshift's convention is that a higher ``semantic_level`` /
``covariate_level`` is a larger shift, and SSB's Hard bin is the smallest semantic shift, so
its splits read hard < medium < easy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from semshift.report._load import level_sort_key

__all__ = [
    "BASELINE_DETECTOR",
    "GREY",
    "HIGHLIGHT_COLORS",
    "highlight_colors",
    "pick_highlights",
    "shift_order",
]

#: Colour of the detectors that are not highlighted.
GREY = "#c8c8c8"
#: Distinct colours of highlighted detectors (tab10 without its grey), in order of use.
HIGHLIGHT_COLORS = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
)
#: The reference detector, always highlighted when present.
BASELINE_DETECTOR = "msp"
_SSB_BINS = {"hard": 0, "medium": 1, "easy": 2}


def pick_highlights(
    summary: Mapping[str, float],
    direction: str = "max",
    *,
    reference: str = BASELINE_DETECTOR,
    n_best: int = 2,
    n_worst: int = 2,
) -> dict[str, str]:
    """The highlighted detectors and their role: the reference, the best and the worst.

    Parameters
    ----------
    summary : mapping of str to float
        One number per detector (e.g. its mean AUROC over the figure's points); NaN values
        take no best / worst place.
    direction : {"max", "min"}
        Whether a higher (``"max"``) or lower summary is better.
    reference : str
        Highlighted whenever present, whatever its value.
    n_best, n_worst : int
        How many best and worst detectors to highlight (fewer when there are fewer).

    Returns
    -------
    dict of str to str
        Detector -> ``"reference"``, ``"best"`` or ``"worst"``, in that order; ties keep the
        order of ``summary``.

    Examples
    --------
    >>> pick_highlights({"a": 0.9, "msp": 0.7, "b": 0.5, "c": 0.8}, n_best=1, n_worst=1)
    {'msp': 'reference', 'a': 'best', 'b': 'worst'}
    """
    if direction not in ("max", "min"):
        raise ValueError(f"direction must be 'max' or 'min', got {direction!r}")
    out: dict[str, str] = {}
    if reference in summary:
        out[reference] = "reference"
    sign = -1.0 if direction == "max" else 1.0
    ranked = [d for d, v in summary.items() if math.isfinite(float(v))]
    ranked.sort(key=lambda d: sign * float(summary[d]))  # stable: ties keep their order
    for d in [d for d in ranked if d not in out][:n_best]:
        out[d] = "best"
    for d in [d for d in reversed(ranked) if d not in out][:n_worst]:
        out[d] = "worst"
    return out


def highlight_colors(detectors: Sequence[str]) -> dict[str, str]:
    """A distinct colour per detector from :data:`HIGHLIGHT_COLORS` (cycled past nine)."""
    return {d: HIGHLIGHT_COLORS[k % len(HIGHLIGHT_COLORS)] for k, d in enumerate(detectors)}


def shift_order(labels: Iterable[object]) -> list[str]:
    """Level or split labels from the smallest to the largest shift (unique, as strings).

    Numeric levels ascend (a higher level is a larger shift); SSB bins read
    hard < medium < easy (Hard holds the unknown classes nearest the known ones); other
    labels follow :func:`~semshift.report._load.level_sort_key`.

    Examples
    --------
    >>> shift_order(["easy", "hard", "medium"])
    ['hard', 'medium', 'easy']
    >>> shift_order(["10", "2", "1"])
    ['1', '2', '10']
    """

    def key(label: str) -> tuple[int, float, tuple[int, str, float, str]]:
        low = label.lower()
        if low in _SSB_BINS:
            return (0, float(_SSB_BINS[low]), level_sort_key(label))
        return (1, 0.0, level_sort_key(label))

    unique = dict.fromkeys(str(v) for v in labels if v is not None)
    return sorted(unique, key=key)
