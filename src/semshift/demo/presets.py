"""Named sizes of the demo: ``full`` (the default, what the README reports) and ``small``.

``small`` is the same pipeline on 12 ID characters with fewer images, one random model for the
sanity check and 200 bootstrap resamples: it runs in well under a minute and is what the test
suite runs end to end. Its numbers rest on a few dozen images per set, so read them as a smoke
test, not as findings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from semshift.demo.build import DemoParams
from semshift.errors import InputError

__all__ = ["PRESETS", "DemoPreset", "get_preset"]


@dataclass(frozen=True)
class DemoPreset:
    """Data sizes (:class:`DemoParams`) and run settings (keywords of ``DemoData.config``)."""

    params: DemoParams
    run: dict[str, Any] = field(default_factory=dict)


PRESETS: dict[str, DemoPreset] = {
    "full": DemoPreset(DemoParams()),
    "small": DemoPreset(
        DemoParams(
            id_groups=(("latin-capital", 4), ("greek-small", 4), ("arrows", 4)),
            n_train=30,
            n_val=6,
            n_test=12,
            ood_classes=8,
            n_ood=6,
            n_font=6,
            epochs=6,
            batch_size=32,
        ),
        {"n_models": 1, "n_resamples": 200, "severities": (1, 5)},
    ),
}


def get_preset(name: str) -> DemoPreset:
    """The preset ``name``; an unknown name raises :class:`InputError` listing the known ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise InputError(f"unknown demo size {name!r}; known sizes: {', '.join(PRESETS)}") from None
