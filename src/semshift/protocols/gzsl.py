"""GZSL protocol (Xian et al., proposed splits): ts, tr, H and ZSL top-1 as result rows.

``gzsl`` (the function and the protocol) evaluates a zero-shot model's predictions;
:func:`zsl_results` turns fitted zero-shot methods (:func:`semshift.training.zsl.evaluate_zsl`)
into the same rows, one block per dataset, split version and method; the ``zsl`` protocol
trains the eight methods of the proposed-splits paper from a ``res101.mat`` /
``att_splits.mat`` pair inside a run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from semshift.errors import InputError
from semshift.metrics import gzsl as gzsl_metric
from semshift.protocols.registry import (
    ProtocolConfig,
    ProtocolInputs,
    ReportSection,
    register_protocol,
)
from semshift.protocols.tidy import error_row, results_frame

if TYPE_CHECKING:
    from semshift.training.zsl import ZSLOutcome

__all__ = ["ZslConfig", "ZslDataset", "gzsl", "zsl_results"]


def gzsl(
    labels: ArrayLike,
    preds: ArrayLike,
    seen_classes: Sequence[int] | ArrayLike,
    unseen_classes: Sequence[int] | ArrayLike,
    *,
    zsl_preds: ArrayLike | None = None,
    set_name: str | None = None,
    detector: str | None = None,
    split: str | None = None,
    calibration: float = 0.0,
) -> pd.DataFrame:
    """GZSL accuracies as result rows (protocol ``gzsl``; detector, split null unless given).

    Computed by :func:`semshift.metrics.gzsl` (per-class top-1 averaged over classes):
    ``ts`` (unseen-class test images, predictions over all classes), ``tr`` (seen-class test
    images), ``h`` = 2 ts tr / (ts + tr), and ``zsl_top1`` (unseen-class test images,
    predictions over the unseen classes only). ``zsl_top1`` needs predictions restricted to the
    unseen classes: a score matrix ``preds`` (n, C) gives them (argmax over the unseen
    columns), or pass ``zsl_preds``; with class-id ``preds`` and no ``zsl_preds`` its row is an
    error row (``"n/a: ..."``). ``n_id`` = seen-class and ``n_ood`` = unseen-class test images
    on every row; no CIs (NaN bounds).

    Parameters
    ----------
    labels : array_like of int, shape (n,)
        True class ids, each in ``seen_classes`` or ``unseen_classes``.
    preds : array_like, shape (n,) of int or (n, C) of float
        GZSL predictions (class ids) or a class score matrix.
    seen_classes, unseen_classes : sequence of int
        Disjoint class id sets.
    zsl_preds : array_like of int, shape (n,), optional
        Predictions over the unseen classes (used at unseen-class images only).
    set_name : str, optional
        Value of the ``set`` column (the dataset).
    detector : str, optional
        Value of the ``detector`` column (the zero-shot method).
    split : str, optional
        Value of the ``split`` column (the split version, ``v1`` / ``v2``).
    calibration : float, default 0
        Calibrated stacking: subtracted from the seen classes' scores before the GZSL argmax
        (needs a score matrix; see :func:`semshift.metrics.gzsl`).

    Returns
    -------
    pandas.DataFrame
        The tidy table (:data:`semshift.protocols.tidy.RESULT_COLUMNS`).

    Raises
    ------
    InputError
        As :func:`semshift.metrics.gzsl`: overlapping class sets, a label in neither set, no
        seen or no unseen test image, shape mismatches.

    References
    ----------
    .. [1] Xian et al., "Zero-Shot Learning - A Comprehensive Evaluation of the Good, the Bad
       and the Ugly", TPAMI 2019.

    Examples
    --------
    >>> from semshift.protocols import gzsl
    >>> df = gzsl([0, 1, 2, 2], [0, 1, 1, 2], seen_classes=[0, 1], unseen_classes=[2],
    ...           zsl_preds=[2, 2, 2, 2])
    >>> df[["metric", "value"]].round(4).values.tolist()
    [['ts', 0.5], ['tr', 1.0], ['h', 0.6667], ['zsl_top1', 1.0]]
    """
    r = gzsl_metric(
        preds, labels, seen_classes, unseen_classes, zsl_pred=zsl_preds, calibration=calibration
    )
    y = np.asarray(labels)
    n_unseen = int(np.isin(y, np.asarray(unseen_classes)).sum())
    base: dict[str, Any] = {
        "protocol": "gzsl",
        "set": set_name,
        "split": split,
        "detector": detector,
        "n_id": y.size - n_unseen,
        "n_ood": n_unseen,
    }
    rows: list[dict[str, Any]] = []
    for m in ("ts", "tr", "h", "zsl_top1"):
        v = float(getattr(r, m))
        if np.isnan(v):
            rows.append(
                error_row(
                    error="n/a: zsl_top1 needs predictions over the unseen classes (a score "
                    "matrix preds, or zsl_preds)",
                    metric=m,
                    **base,
                )
            )
        else:
            rows.append({**base, "metric": m, "value": v})
    return results_frame(rows)


class GzslConfig(ProtocolConfig):
    """``protocols.gzsl``: a zero-shot model's predictions, a CSV with columns label, pred,
    seen (bool)."""

    predictions: Path


def read_gzsl_predictions(
    path: Path,
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Labels, predictions, seen and unseen class ids from a predictions CSV.

    Raises
    ------
    InputError
        The file is unreadable or lacks a column (one line naming the file).
    """
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as err:
        raise InputError(f"gzsl predictions {path}: unreadable ({err})") from None
    missing = [c for c in ("label", "pred", "seen") if c not in frame.columns]
    if missing:
        raise InputError(f"gzsl predictions {path}: missing column(s) {', '.join(missing)}")
    seen_col = frame["seen"]
    if seen_col.dtype != bool:
        seen_col = seen_col.astype(str).str.lower().isin(["true", "1", "yes"])
    labels = frame["label"].to_numpy(np.int64)
    seen = np.unique(labels[seen_col.to_numpy(bool)])
    unseen = np.unique(labels[~seen_col.to_numpy(bool)])
    return labels, frame["pred"].to_numpy(np.int64), seen, unseen


@register_protocol(
    "gzsl",
    GzslConfig,
    "generalised zero-shot accuracy: ts, tr, H and ZSL top-1 (Xian et al.)",
    order=60,
    sections=[
        ReportSection(
            "gzsl",
            "Generalised zero-shot learning",
            builder="gzsl_section",
        )
    ],
)
def _run_gzsl(inputs: ProtocolInputs, config: GzslConfig) -> pd.DataFrame:
    labels, preds, seen, unseen = read_gzsl_predictions(config.predictions)
    return gzsl(labels, preds, seen, unseen)


def zsl_results(outcomes: Sequence[ZSLOutcome], *, calibration: float = 0.0) -> pd.DataFrame:
    """The ``gzsl`` rows of fitted zero-shot methods: ts, tr, H and ZSL top-1 per outcome.

    Each outcome's score matrix (test_seen and test_unseen images against every class) gives
    all four values (:func:`gzsl`); rows carry ``set`` = dataset, ``split`` = split version,
    ``detector`` = method. The paper's Table 1 is ``zsl_top1`` by method, dataset and split
    version; Table 2 is ts / tr / H on V2 (:func:`semshift.report.zsl_table`,
    :func:`semshift.report.gzsl_table`).

    Parameters
    ----------
    outcomes : sequence of ZSLOutcome
        From :func:`semshift.training.zsl.evaluate_zsl`.
    calibration : float, default 0
        Calibrated stacking constant for the GZSL predictions.
    """
    frames = [
        gzsl(
            o.labels,
            o.scores,
            o.seen,
            o.unseen,
            set_name=o.dataset,
            detector=o.method,
            split=o.split,
            calibration=calibration,
        )
        for o in outcomes
    ]
    return results_frame(r for f in frames for r in f.to_dict("records"))


class ZslDataset(BaseModel):
    """One dataset of ``protocols.zsl.datasets``: a ``res101.mat`` / ``att_splits.mat`` pair."""

    model_config = ConfigDict(extra="forbid")

    features: Path
    splits: Path
    name: str | None = None


class ZslConfig(ProtocolConfig):
    """``protocols.zsl``: train and evaluate zero-shot methods on ``res101.mat`` /
    ``att_splits.mat`` pairs (hyperparameters on the split's val classes).

    One dataset by ``features`` and ``splits`` (and ``name``), or several by ``datasets`` (a
    list of such entries; the paper's Tables 1 and 2 put SUN, CUB, AWA1, AWA2 and aPY side by
    side). ``methods`` defaults to every registered method (the paper's thirteen);
    ``versions`` to V2 (add ``v1`` for the V1 vs V2 comparison of its Table 1);
    ``calibration`` is the calibrated stacking constant of the GZSL predictions (0 = plain
    argmax, the paper's protocol).
    """

    features: Path | None = None
    splits: Path | None = None
    name: str | None = None
    datasets: list[ZslDataset] | None = Field(default=None, min_length=1)
    methods: list[str] | None = None
    versions: list[Literal["v1", "v2"]] = Field(default=["v2"], min_length=1)
    calibration: float = 0.0

    @field_validator("methods")
    @classmethod
    def _known_methods(cls, value: list[str] | None) -> list[str] | None:
        from semshift.training.zsl import get_zsl_method

        if value is not None:
            for m in value:
                get_zsl_method(m)
        return value

    @model_validator(mode="after")
    def _one_form(self) -> ZslConfig:
        single = self.features is not None or self.splits is not None
        if single and self.datasets is not None:
            raise ValueError("give either 'features' and 'splits' or 'datasets', not both")
        if self.datasets is None and (self.features is None or self.splits is None):
            raise ValueError("give 'features' and 'splits' (one dataset) or 'datasets' (a list)")
        if self.datasets is not None and self.name is not None:
            raise ValueError("'name' names the one dataset of 'features'; in 'datasets' each "
                             "entry has its own")  # fmt: skip
        names = [e.name or e.features.parent.name for e in self.entries()]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"two datasets named {twice[0]!r} (a dataset's name defaults to "
                             "its folder's); give each a distinct 'name'")  # fmt: skip
        return self

    def entries(self) -> list[ZslDataset]:
        """The configured datasets, in order."""
        if self.datasets is not None:
            return list(self.datasets)
        assert self.features is not None and self.splits is not None
        return [ZslDataset(features=self.features, splits=self.splits, name=self.name)]


@register_protocol(
    "zsl",
    ZslConfig,
    "zero-shot methods trained on res101.mat / att_splits.mat: ZSL top-1 (V1 / V2), ts, tr, H "
    "(Xian et al.)",
    order=61,
    rows=("gzsl",),
)
def _run_zsl(inputs: ProtocolInputs, config: ZslConfig) -> pd.DataFrame:
    from semshift.training.zsl import evaluate_zsl, list_zsl_methods, read_xlsa

    methods = config.methods or list_zsl_methods()
    outcomes = []
    for entry in config.entries():  # distinct names (checked with the config)
        data = read_xlsa(
            entry.features.parent,
            features=entry.features.name,
            splits=str(entry.splits),
            name=entry.name,
        )
        outcomes += [evaluate_zsl(data, m, split=v) for v in config.versions for m in methods]
    return zsl_results(outcomes, calibration=config.calibration)
