"""The entries of a study file: a model, a zoo reference and a dataset (pydantic models that
refuse unknown keys); :mod:`semshift.study.config` reads the whole file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DatasetEntry", "ModelEntry", "ZooEntry"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelEntry(_Strict):
    """One model: a run configuration's ``model:`` block, plus the label its cells go by."""

    name: str
    weights: str | None = None
    label: str | None = None
    num_classes: int | None = Field(default=None, ge=1)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    preset: str | None = None
    batch_size: int | None = Field(default=None, ge=1)
    device: str | None = None

    def model_block(self) -> dict[str, Any]:
        """The run configuration's ``model:`` block (unset keys left to the run's defaults)."""
        return self.model_dump(exclude={"label"}, exclude_none=True, exclude_defaults=True) | {
            "name": self.name
        }

    @property
    def key(self) -> str:
        """The label, else ``name`` (with ``@weights`` when weights are named)."""
        if self.label:
            return self.label
        if self.weights is None:
            return self.name.replace("/", "_")
        return f"{self.name}@{Path(self.weights).stem if os.sep in self.weights else self.weights}"


class ZooEntry(_Strict):
    """Every member of a named zoo (:mod:`semshift.study.zoos`)."""

    zoo: str
    only: list[str] | None = None  # members kept (by label), in the zoo's order
    weights: dict[str, str] = Field(default_factory=dict)  # label -> weights replacing the zoo's
    batch_size: int | None = Field(default=None, ge=1)
    device: str | None = None


class DatasetEntry(_Strict):
    """One dataset: a catalog benchmark on the user's roots, or a ``data:`` block."""

    benchmark: str | None = None
    roots: dict[str, str] = Field(default_factory=dict)
    options: dict[str, Any] = Field(default_factory=dict)
    data: dict[str, Any] | None = None
    splits: dict[str, Any] | None = None
    taxonomy: str | None = None
    classes: str | None = None
    protocols: dict[str, Any] | None = None
    num_classes: int | None = Field(default=None, ge=1)  # the models' head on this dataset
    published: str | None = None  # "paper:dataset" of published numbers it reproduces
