"""The benchmark registry (:data:`BENCHMARKS`, :func:`register_benchmark`,
``semshift.benchmarks`` entry points) and the seed papers' benchmarks registered in it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from semshift.catalog.lists import (
    published_info,
    published_split,
)
from semshift.errors import InputError
from semshift.registry import Registry

from ._base import Benchmark
from .sets import _fine_sets, _imagenet_ood, _isood, _ssb_imagenet

_IN_NEEDS = (
    "ImageNet-1K (ILSVRC2012) train/ and val/ (val as class folders, or flat with Kaggle's "
    "LOC_val_solution.csv or the devkit)"
)


def _adopt(name: str, benchmark: Any) -> None:
    """Register the :class:`Benchmark` a ``semshift.benchmarks`` entry point names."""
    register_benchmark(benchmark)


#: name -> benchmark (a :class:`semshift.registry.Registry`), filled by
#: :func:`register_benchmark`; other packages add benchmarks through the ``semshift.benchmarks``
#: entry-point group (a module calling :func:`register_benchmark`, or a :class:`Benchmark`).
BENCHMARKS: Registry[Benchmark] = Registry(
    "benchmark", entry_points="semshift.benchmarks", adopt=_adopt
)


def register_benchmark(benchmark: Benchmark) -> Benchmark:
    """Add ``benchmark`` to :data:`BENCHMARKS` under its name and return it.

    Checks what can be checked without the data: a :class:`Benchmark`, a lower-case name
    without spaces, a positive class count, protocols and options as mappings, a callable
    ``build``, and a published list semshift ships (``published``).

    Raises
    ------
    DuplicateNameError
        The name is registered already.
    InputError
        Any of the checks above fails (the message names the benchmark and the field).
    """
    if not isinstance(benchmark, Benchmark):
        raise InputError(f"register_benchmark takes a Benchmark, got {type(benchmark).__name__}")
    name = benchmark.name
    BENCHMARKS.check_new(name)
    if name != name.strip().lower() or " " in name:
        raise InputError(f"benchmark {name!r}: use a lower-case name without spaces")
    n = benchmark.num_classes
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError(f"benchmark {name!r}: num_classes must be a positive integer, got {n!r}")
    for field_name in ("protocols", "options"):
        if not isinstance(getattr(benchmark, field_name), Mapping):
            raise InputError(f"benchmark {name!r}: {field_name} must be a mapping")
    if not benchmark.protocols:
        raise InputError(f"benchmark {name!r}: name at least one protocol")
    if not callable(benchmark.build):
        raise InputError(f"benchmark {name!r}: build must be callable")
    if "sample" in benchmark.options:
        raise InputError(f"benchmark {name!r}: 'sample' is every benchmark's option already")
    published_info(benchmark.published)  # UnknownNameError for a list semshift does not ship
    return BENCHMARKS.add(name, benchmark)


for _benchmark in (
    *(
        Benchmark(
            bench,
            f"SSB {title}: known classes train/test, unknown Easy / Hard from test",
            bench,
            len(published_split(bench).known),
            {"osr": {}},
            {"medium_as_hard": True},
            _fine_sets(bench),
            needs=needs,
            cite="Vaze et al., Open-Set Recognition: a Good Closed-Set "
            "Classifier is All You Need?, ICLR 2022 (Table 1)",
        )
        for bench, title, needs in (
            ("ssb-cub", "CUB-200-2011", "cub: CUB_200_2011/ (images.txt, images/, ...)"),
            (
                "ssb-scars",
                "Stanford Cars",
                "scars: the folder release car_data/car_data/{train,test}/<class>/",
            ),
            ("ssb-aircraft", "FGVC-Aircraft", "aircraft: fgvc-aircraft-2013b/"),
        )
    ),
    Benchmark(
        "ssb-imagenet",
        "SSB ImageNet: ImageNet-1K train subset / val; unknown Easy / Hard = "
        "SSB's ImageNet-21K-P winter21 val files",
        "ssb-imagenet",
        1000,
        {"osr": {}},
        {"train_per_class": 50},
        _ssb_imagenet("ssb-imagenet", "winter21"),
        needs=f"imagenet1k: {_IN_NEEDS}; imagenet21k: ImageNet-21K-P winter21 "
        "(imagenet21k_val/<wnid>/)",
        cite="Vaze et al., ICLR 2022 (Table 1)",
    ),
    Benchmark(
        "ssb-imagenet-fall11",
        "SSB ImageNet, fall11 lists: every 21K-P fall11 val image of the Easy / Hard classes; "
        "known = all 1,000 ImageNet-1K classes, as the released loader used them",
        "ssb-imagenet-fall11",
        1000,
        {"osr": {}},
        {"train_per_class": 50},
        _ssb_imagenet("ssb-imagenet-fall11", "fall11"),
        needs=f"imagenet1k: {_IN_NEEDS}; imagenet21k: ImageNet-21K-P fall11 "
        "(imagenet21k_val/<wnid>/)",
        cite="Vaze et al., ICLR 2022",
    ),
    Benchmark(
        "imagenet-ood",
        "ImageNet-OOD: ImageNet-1K val vs 31,802 ImageNet-21K images; "
        "ImageNet-R / Sketch / C as covariate sets and OpenImage-O as a second OOD set when "
        "given; new-class / failure detection per (reference, OOD) pair as in Table 1",
        "imagenet-ood",
        1000,
        {"newclass_failure": {"pairs": "all"}, "osr": {}},
        {"train_per_class": 50, "c_by_severity": False, "corruptions": ()},
        _imagenet_ood,
        needs=f"imagenet1k: {_IN_NEEDS}; imagenet21k: the whole ImageNet-21K release "
        "(<wnid>/<wnid>_N.JPEG, fall11_whole or winter21_whole); optional imagenet_r, "
        "imagenet_sketch, imagenet_c, openimage_o (the <id>.jpg files of OpenImage-O)",
        cite="Yang et al., ImageNet-OOD: Deciphering Modern "
        "Out-of-Distribution Detection Algorithms, ICLR 2024 (Table 1)",
    ),
    Benchmark(
        "isood-imagenet",
        "IS-OOD: ImageNet-1K test list vs the 61 non-empty cells cov_i_sem_j of ImageNet-21K val",
        "isood-imagenet",
        1000,
        {"graded": {}},
        {"train_per_class": 50},
        _isood,
        needs=f"imagenet1k: {_IN_NEEDS}; imagenet21k: ImageNet-21K-P winter21 "
        "(imagenet21k_val/<wnid>/)",
        cite="Long et al., Rethinking the Evaluation of "
        "Out-of-Distribution Detection: A Sorites Paradox, NeurIPS 2024 (IS-OOD)",
    ),
):
    register_benchmark(_benchmark)


def list_benchmarks() -> list[str]:
    """Names of the registered benchmarks, sorted."""
    return BENCHMARKS.names()


def get_benchmark(name: str) -> Benchmark:
    """The registry entry of a benchmark; unknown names raise ``UnknownNameError``."""
    return BENCHMARKS[name]
