"""A toy post-hoc detector in one module: the top-two logit margin, scaled.

``score = scale * (z_(1) - z_(2))`` (largest minus second-largest logit): a confident
prediction has a wide margin, so higher = more in-distribution. :func:`register` adds it (a
package would apply ``register_detector`` on import, through the ``semshift.detectors``
entry-point group: see ``toy_detector_plugin``).
"""

from __future__ import annotations

from numbers import Real
from typing import ClassVar

import numpy as np

from semshift.detectors import DETECTORS, register_detector
from semshift.detectors.logit import LogitDetector
from semshift.params import Interval, ParamConstraints, SearchSpace

NAME = "toy_margin"


class ToyMargin(LogitDetector):
    """``scale * (largest logit - second largest)``; higher = more in-distribution."""

    name = NAME
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "scale": [Interval(Real, 0, None, closed="neither")]
    }
    search_space: ClassVar[SearchSpace] = {"scale": (0.5, 1.0)}

    def __init__(self, *, scale: float = 1.0) -> None:
        self.scale = scale

    def _score_block(self, z: np.ndarray) -> np.ndarray:
        top2 = np.partition(z, -2, axis=1)[:, -2:]
        return self.scale * (top2[:, 1] - top2[:, 0])


def register() -> None:
    """Register the toy (undo with :func:`unregister`)."""
    register_detector(ToyMargin)


def unregister() -> None:
    DETECTORS.remove(NAME)
