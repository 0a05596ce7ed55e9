"""Random open-set class samples: the SSB's "more classes" ablation.

The Semantic Shift Benchmark asks whether an open set of more classes is harder: its ImageNet
ablation draws random samples of 1K and 10K open-set classes from ImageNet-21K-P and reports
that the larger sample lowers AUROC by about 0.6 %. :func:`build_sample_split` draws such
samples, seeded: one permutation of the pool (the candidates outside the known set, in the
pool list's order), each bin ``random_<n>`` its first ``n`` classes, so a smaller sample is
contained in a larger one and the comparison changes only the number of classes.

>>> import tempfile, pathlib
>>> folder = tempfile.TemporaryDirectory()
>>> csv = pathlib.Path(folder.name) / "t.csv"
>>> _ = csv.write_text("id,parent,name\\nr,,r\\n" + "".join(f"{c},r,{c}\\n" for c in "abcde"))
>>> m = build_sample_split(["a"], list("abcde"), sizes=(2, 4), taxonomy=csv, seed=0)
>>> list(m.bins), m.bins["random_2"] == m.bins["random_4"][:2], sorted(m.bins["random_4"])
(['random_2', 'random_4'], True, ['b', 'c', 'd', 'e'])
>>> folder.cleanup()
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field, field_validator

from semshift.errors import InputError
from semshift.splits.manifest import SplitManifest
from semshift.splits.registry import BuildContext, BuilderParams, ClassSpec, register_builder
from semshift.taxonomy.core import Taxonomy
from semshift.taxonomy.custom import load_taxonomy

__all__ = ["SampleParams", "build_sample_split"]


def build_sample_split(
    known: str | Path | Sequence[str] = "imagenet1k",
    pool: str | Path | Sequence[str] | None = "imagenet21k-p",
    *,
    sizes: Sequence[int] = (1000, 10000),
    seed: int = 0,
    taxonomy: str | Path | Taxonomy = "wordnet",
) -> SplitManifest:
    """Random samples of ``sizes`` open-set classes from the pool, nested, seeded.

    Parameters
    ----------
    known, pool : str, path or sequence of ids
        Known classes and open-set candidates, as :func:`semshift.splits.build_ssb_split`
        takes them (a shipped list name, a file of ids or ids); candidates that are known are
        removed. ``pool=None``: every taxonomy leaf that is not known.
    sizes : sequence of int
        Classes per sample (bins ``random_<n>``, in increasing order); each at most the number
        of candidates.
    seed : int
        Seed of the one permutation every sample is a prefix of.
    taxonomy : "wordnet", a file or a Taxonomy

    Returns
    -------
    SplitManifest
        Method ``sample``; ``known`` the known classes; one bin per size, classes in the drawn
        order; ``extra`` the candidate count and the seed.
    """
    from semshift.splits.ssb import resolve_classes

    tax = taxonomy if isinstance(taxonomy, Taxonomy) else load_taxonomy(taxonomy)
    known_ids, known_src = resolve_classes(tax, known, "known")
    if pool is None:
        pool_ids, pool_src = [str(i) for i in tax.ids[tax.leaf_rows]], "taxonomy leaves"
    else:
        pool_ids, pool_src = resolve_classes(tax, pool, "pool")
    known_set = set(known_ids)
    cands = list(dict.fromkeys(c for c in pool_ids if c not in known_set))
    wanted = sorted({int(n) for n in sizes})
    if not wanted or wanted[0] < 1:
        raise InputError(f"sizes must be positive class counts, got {list(sizes)}")
    if wanted[-1] > len(cands):
        raise InputError(
            f"a sample of {wanted[-1]} classes, but the pool ({pool_src}) has {len(cands)} "
            "classes outside the known set"
        )
    order = np.random.default_rng(seed).permutation(len(cands))[: wanted[-1]]
    drawn = [cands[i] for i in order]
    params: dict[str, Any] = {"known": known_src, "pool": pool_src, "sizes": wanted, "seed": seed}
    return SplitManifest(
        method="sample",
        params=params,
        taxonomy=tax.name,
        known=list(known_ids),
        bins={f"random_{n}": drawn[:n] for n in wanted},
        extra={"counts": {"candidates": len(cands), "known": len(known_ids)}, "seed": seed},
    )


class SampleParams(BuilderParams):
    """Parameters of the ``sample`` builder (:func:`build_sample_split`), same defaults;
    ``pool`` None means ``imagenet21k-p`` under WordNet, else every leaf outside the known set."""

    known: ClassSpec = "imagenet1k"
    pool: ClassSpec | None = None
    sizes: tuple[int, ...] = Field(default=(1000, 10000), min_length=1)
    seed: int = 0

    @field_validator("sizes")
    @classmethod
    def _sizes(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if any(n < 1 for n in value):
            raise ValueError(f"class counts must be >= 1, got {list(value)}")
        if len(set(value)) != len(value):
            raise ValueError(f"a size is given twice: {list(value)}")
        return value


@register_builder(
    "sample",
    SampleParams,
    "Random open-set class samples of given sizes, nested and seeded (the SSB's more-classes "
    "ablation: 1K vs 10K classes).",
)
def _build_from_params(params: SampleParams, ctx: BuildContext) -> SplitManifest:
    pool = params.pool
    if pool is None and ctx.is_wordnet():
        pool = "imagenet21k-p"
    return build_sample_split(
        ctx.classes("known", params.known),
        ctx.classes("pool", pool),
        sizes=params.sizes,
        seed=params.seed,
        taxonomy=ctx.load_taxonomy(),
    )
