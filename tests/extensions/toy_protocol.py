"""A toy protocol in one module: the mean score gap between ID test and every other set.

Everything a protocol needs is here: its config model, its function, the result rows it writes
and its report section (a table), all in one :func:`register_protocol` call. :func:`register`
adds it (the test calls it; a package would register it on import, through the
``semshift.protocols`` entry-point group).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pydantic import Field

from semshift.protocols import ProtocolConfig, ProtocolInputs, register_protocol
from semshift.protocols.registry import ReportSection
from semshift.protocols.tidy import results_frame

NAME = "toy_gap"


class ToyGapConfig(ProtocolConfig):
    """``scale`` multiplies every gap."""

    scale: float = Field(default=1.0, gt=0)


def gap_table(rows: pd.DataFrame) -> pd.DataFrame | None:
    """Detectors x sets: the mean score gap (pure pandas over the protocol's rows)."""
    ok = rows[rows["error"].isna() & (rows["metric"] == "mean_gap")]
    if ok.empty:
        return None
    table = ok.pivot_table(index="detector", columns="set", values="value", sort=False)
    return table.rename_axis(index="Detector", columns=None)


def toy_gap(inputs: ProtocolInputs, config: ToyGapConfig) -> pd.DataFrame:
    """One row per detector and set: mean ID test score minus mean score of the set."""
    test = inputs.id_test
    rows = [
        {
            "protocol": NAME, "set": other.name, "detector": det, "metric": "mean_gap",
            "value": config.scale
            * float(np.mean(test.scores[det]) - np.mean(other.scores[det])),
            "n_id": len(test.labels), "n_ood": len(other.labels),
        }
        for other in inputs.others
        for det in test.scores
        if det in other.scores
    ]  # fmt: skip
    return results_frame(rows)


def register() -> None:
    """Register the toy protocol (undo with ``PROTOCOLS.remove(NAME)``)."""
    register_protocol(
        NAME,
        ToyGapConfig,
        "toy: mean score gap between ID test and each other set",
        order=90,
        on_stores=True,
        sections=[
            ReportSection(
                NAME,
                "Toy: mean score gap",
                table=gap_table,
                caption="Mean ID test score minus mean score of the set, per detector.",
                value_kind="score",
                best="max",
            )
        ],
    )(toy_gap)


def unregister() -> None:
    from semshift.protocols.registry import PROTOCOLS

    PROTOCOLS.remove(NAME)
