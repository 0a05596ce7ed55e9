"""A toy split builder in one module: known = the first classes of a list, the rest unknown,
binned by their tree distance to the nearest known class (1 = sister leaves: the hardest).

Its params model declares each parameter once (names, types, defaults, bounds);
:func:`register` adds it (a package would apply ``register_builder`` on import, through the
``semshift.split_builders`` entry-point group).
"""

from __future__ import annotations

from pydantic import Field

from semshift.splits.manifest import SplitManifest
from semshift.splits.registry import BUILDERS, BuildContext, BuilderParams, register_builder

NAME = "toy_nearest"


class ToyNearestParams(BuilderParams):
    """``classes``: the candidate classes in order; the first ``n_known`` are known."""

    classes: list[str] = Field(min_length=2)
    n_known: int = Field(default=1, ge=1)


def build(params: ToyNearestParams, ctx: BuildContext) -> SplitManifest:
    """Known = ``classes[:n_known]``; every other class in bin ``d<k>``, k its path distance to
    the nearest known class."""
    tax = ctx.load_taxonomy()
    known, rest = params.classes[: params.n_known], params.classes[params.n_known :]
    dist = tax.distance_matrix(rest, known).min(axis=1) if rest else []
    bins: dict[str, list[str]] = {}
    for cls, d in zip(rest, dist, strict=True):
        bins.setdefault(f"d{int(d)}", []).append(cls)
    return SplitManifest(
        method=NAME, params=params.model_dump(), taxonomy=ctx.taxonomy_spec(), known=known,
        bins=dict(sorted(bins.items())),
    )  # fmt: skip


def register() -> None:
    register_builder(NAME, ToyNearestParams, "toy: known first, the rest by tree distance")(build)


def unregister() -> None:
    BUILDERS.remove(NAME)
