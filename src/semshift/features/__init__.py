"""semshift.features: stored logits and features of a model over an image set.

Modules (a reader finds each thing by its file name):

- :mod:`~semshift.features.store`: the feature store (Parquet index, memory-mapped float32 shards,
  head, ``meta.json`` with checksums, skipped-image manifest), selections, blocks,
  concatenation. Needs only NumPy, pandas and pyarrow; its names below are imported from here
  on first use (so ``semshift.features.data`` alone imports no pandas).
- :mod:`~semshift.features.models`: model adapters (torchvision, timm, open_clip, forward hook),
  the model registry, safe weight loading, seeded Kaiming initialisation.
- :mod:`~semshift.features.data`: image sources (folder tree, file list) and presets.
- :mod:`~semshift.features.extract`: resumable extraction into a store (``semshift extract``);
  ``extract_many`` extracts several models over the same images in one pass.
- :mod:`~semshift.features.model_detectors`: runs the registry's model-level detectors
  (``semshift.detectors.list_detectors(level="model")``) during extraction and stores their
  scores as columns.
- :mod:`~semshift.features.ensemble`: deep ensembles, several models' stores of the same images
  (checked row by row) -> one score per image. Needs only the store.
- :mod:`~semshift.features.corruptions`: ImageNet-C corruptions (covariate shift).
- :mod:`~semshift.features.ray_executor`: extraction on a Ray cluster (``--executor ray``).

All but the store need the ``vision`` extra (torch, torchvision, timm, open_clip, safetensors);
import them from their modules::

    from semshift.features.models import load_model
    from semshift.features.extract import extract

Detectors and metrics take plain arrays; a store selection gives them::

    store = open_store("runs/resnet50")
    logits, features = store.select(split="id_test").arrays("logits", "features")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from semshift.lazy import lazy_names

if TYPE_CHECKING:
    from semshift.features.store import (
        FeatureStore,
        Selection,
        StoreWriter,
        concat_stores,
        open_store,
        write_store,
    )

#: the store's names, imported from :mod:`semshift.features.store` on first use
_LAZY = ("FeatureStore", "Selection", "StoreWriter", "concat_stores", "open_store", "write_store")


__getattr__, __dir__ = lazy_names(__name__, dict.fromkeys(_LAZY, "semshift.features.store"))

__all__ = [
    "FeatureStore",
    "Selection",
    "StoreWriter",
    "concat_stores",
    "open_store",
    "write_store",
]
