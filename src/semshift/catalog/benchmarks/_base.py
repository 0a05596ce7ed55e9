"""What a benchmark is: :class:`Benchmark` (its sets, roots, lists, protocols and options) and
:class:`BenchmarkSet` (one set: its layout, root, role and shift levels)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from semshift.catalog.lists import (
    PublishedList,
    list_hash,
    published_info,
    published_split,
)
from semshift.errors import InputError

Role = Literal["id_train", "id_test", "ood", "covariate"]


#: detectors a benchmark run uses unless told otherwise (cheap, no fitting beyond the head)
DEFAULT_DETECTORS = ("msp", "mls")


#: shown in error messages: how many missing paths are named
_SHOW = 3

#: ImageNet-1K's 50,000 validation images, as released (``ILSVRC2012_val_00000001`` ...)
IMAGENET1K_VAL_IMAGES = 50_000


def _bin_classes(benchmark: str, bin: str, medium_as_hard: bool) -> list[str]:
    """Class ids of one bin of a published SSB split; ``known`` is the known classes."""
    man = published_split(benchmark)
    if bin == "known":
        return list(man.known)
    bins = dict(man.bins)
    if medium_as_hard and "medium" in bins:
        bins["hard"] = [*bins.pop("medium"), *bins.get("hard", [])]
    if bin not in bins:
        raise InputError(
            f"{benchmark}: no bin {bin!r}; bins: known, {', '.join(bins)}"
            + (
                " (medium is merged into hard: pass medium_as_hard=false)"
                if bin == "medium"
                else ""
            )
        )
    return list(bins[bin])


@dataclass(frozen=True)
class BenchmarkSet:
    """One set of a benchmark: where its images come from and what it is.

    ``root`` is the key of the dataset root it is read from (``imagenet1k``, ``cub``, ...);
    ``layout`` and ``params`` are the reader of :mod:`semshift.catalog.layouts` that reads it.
    ``images`` and ``classes`` are the sizes the shipped lists fix (None: not fixed by a list,
    e.g. the CUB test images of a class). ``optional`` sets are read only when their root is
    given (the covariate sets of ImageNet-OOD). ``corruption`` (``{name, severity}``): semshift's
    own corruption applied to the images (:mod:`semshift.features.corruptions`).
    """

    name: str
    role: Role
    root: str
    layout: str
    params: Mapping[str, Any]
    images: int | None = None
    classes: int | None = None
    split: str | None = None
    semantic_level: int | None = None
    covariate_level: int | None = None
    optional: bool = False
    corruption: Mapping[str, Any] | None = None

    def source_config(self, root: Path) -> dict[str, Any]:
        """This set's entry in a run config's ``data`` section."""
        out: dict[str, Any] = {
            "layout": {"name": self.layout, "root": str(root), "params": dict(self.params)}
        }
        if self.corruption is not None:
            out["corruption"] = dict(self.corruption)
        if self.role in ("ood", "covariate"):
            out["role"] = self.role
            for key in ("split", "semantic_level", "covariate_level"):
                value = getattr(self, key)
                if value is not None:
                    out[key] = value
        return out


@dataclass(frozen=True)
class Benchmark:
    """A published benchmark: its sets, the roots they need, its lists and its protocols.

    ``build(**options)`` returns the sets; ``options`` are its keyword options with their
    defaults (``medium_as_hard``, ``train_per_class``, ...). Every benchmark also takes
    ``sample``: that many images of each set, evenly spaced over its list
    (:func:`~semshift.catalog.layouts.sample_positions`), for a quick look; a sampled run is
    labelled as such and is not comparable with the literature. ``num_classes`` is the size of
    the classifier's head the benchmark evaluates.
    """

    name: str
    description: str
    published: str
    num_classes: int
    protocols: Mapping[str, Mapping[str, Any]]
    options: Mapping[str, Any]
    build: Callable[..., tuple[BenchmarkSet, ...]]
    needs: str = ""  # what the user must have on disk, in words
    cite: str = ""
    #: the sets for the default options, built once (the sets are immutable)
    _default: list[tuple[BenchmarkSet, ...]] = field(
        default_factory=list, init=False, repr=False, compare=False
    )

    def sets(self, **options: Any) -> tuple[BenchmarkSet, ...]:
        """The benchmark's sets for these options (unknown options raise ``InputError``)."""
        if not options:
            if not self._default:
                self._default.append(self._sets({}))
            return self._default[0]
        return self._sets(options)

    def _sets(self, options: Mapping[str, Any]) -> tuple[BenchmarkSet, ...]:
        opts = self._options(options)
        sample = opts.pop("sample")
        if sample is not None:  # the layouts (NumPy) only where one is asked for
            from semshift.catalog.layouts import check_sample

            sample = check_sample(sample, "sample")
        sets = self.build(**opts)
        if sample is None:
            return sets
        return tuple(
            dataclasses.replace(
                s,
                params={**s.params, "sample": sample},
                images=None if s.images is None else min(s.images, sample),
            )
            for s in sets
        )

    def _options(self, given: Mapping[str, Any]) -> dict[str, Any]:
        known = {**self.options, "sample": None}
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise InputError(
                f"benchmark {self.name!r} takes no option {', '.join(unknown)}; options: "
                f"{', '.join(known)}"
            )
        return {**known, **given}

    @property
    def roots(self) -> tuple[str, ...]:
        """The root keys the benchmark cannot run without, in first-use order."""
        sets = self.sets()
        return tuple(dict.fromkeys(s.root for s in sets if not s.optional))

    @property
    def optional_roots(self) -> tuple[str, ...]:
        """Root keys of the optional sets (read when given)."""
        sets = self.sets()
        need = set(self.roots)
        return tuple(dict.fromkeys(s.root for s in sets if s.optional and s.root not in need))

    @property
    def info(self) -> PublishedList:
        """The published list the benchmark is built from."""
        return published_info(self.published)

    @property
    def list_hash(self) -> str:
        """:func:`~semshift.catalog.lists.list_hash` of its published list."""
        return list_hash(self.published)
