"""semshift.features: stored logits and features of a model over an image set.

The store (:mod:`semshift.features.store`) needs only NumPy, pandas and pyarrow. Model adapters,
datasets, extraction and corruptions need the ``vision`` extra (torch, torchvision, timm,
open_clip, safetensors) and are imported from their modules::

    from semshift.features.models import load_model
    from semshift.features.extract import extract
"""

from __future__ import annotations

from semshift.features.store import (
    FeatureStore,
    Selection,
    StoreWriter,
    concat_stores,
    open_store,
    write_store,
)

__all__ = [
    "FeatureStore",
    "Selection",
    "StoreWriter",
    "concat_stores",
    "open_store",
    "write_store",
]
