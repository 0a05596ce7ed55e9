"""The auxiliary outlier set of Outlier Exposure, checked against the test splits.

Outlier Exposure teaches a model that the outlier images are not any known class; an outlier
class that is also a test class (known, or in any bin of an open-set split) makes the test
number wrong. :func:`check_outlier_classes` puts the outlier classes beside every class set of
the given split manifests and runs the leak checker (:func:`semshift.splits.check.check_split`)
with the outliers declared disjoint from each; any overlap is an error.

The outlier images must sit in class folders named by class id (wnid), or carry class labels
in a file list with a class list, so the check can see their classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from semshift.errors import InputError
from semshift.features.data import ImageSource
from semshift.splits.check import check_split
from semshift.splits.manifest import SplitManifest

__all__ = ["check_outlier_classes", "outlier_classes"]


def outlier_classes(source: ImageSource, where: str) -> list[str]:
    """The class ids of an outlier image source (every image must have one).

    Raises
    ------
    InputError
        Images without a class, which the leak check could not see.
    """
    labels = np.asarray(source.labels)
    if source.classes is None or (labels < 0).any():
        n = int((labels < 0).sum()) if source.classes is not None else len(labels)
        raise InputError(
            f"outlier images {where}: {n} images have no class, so they cannot be checked "
            "against the test splits; put them in class folders named by class id"
        )
    return sorted({source.classes.ids[int(k)] for k in np.unique(labels)})


def check_outlier_classes(
    source: ImageSource, manifests: Sequence[str | Path], where: str
) -> dict[str, int]:
    """Refuse outlier classes that are in any class set of the test split ``manifests``.

    Returns
    -------
    dict
        What was checked: ``outlier_classes`` and ``test_class_sets``.

    Raises
    ------
    InputError
        No manifest was given, or an outlier class is a test class (the message names the
        class, the manifest and its set, and how many overlaps there are).
    """
    if not manifests:
        raise InputError(
            f"outlier images {where}: give the test splits (split.json) they must not overlap"
        )
    classes = outlier_classes(source, where)
    sets: dict[str, list[str]] = {}
    for path in manifests:
        m = SplitManifest.read(path)
        sets[f"{path}:known"] = list(m.known)
        sets |= {f"{path}:{name}": list(ids) for name, ids in m.bins.items()}
    combined = SplitManifest(
        method="outlier-check",
        params={},
        taxonomy="any",
        known=classes,
        bins=sets,
        extra={"disjoint": [["known", name] for name in sets]},
    )
    report = check_split(combined, hash_content=False)
    if not report.ok:
        first = report.violations.iloc[0]
        raise InputError(
            f"outlier images {where}: {len(report.violations)} outlier classes leak into a test "
            f"split, e.g. {first['item']} is in {first['set_b']}; remove them from the outliers"
        )
    return {"outlier_classes": len(classes), "test_class_sets": len(sets)}
