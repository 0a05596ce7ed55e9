"""The seed papers' published benchmark lists, shipped with semshift and read offline.

SSB class splits (ImageNet winter21 and fall11, CUB, Stanford Cars, FGVC-Aircraft) as split
manifests, SSB's ImageNet-21K-P validation files, the ImageNet-OOD images and the IS-OOD image
lists; sources, commits and licenses in ``semshift/catalog/data/README.md``. The benchmarks
built from them (:mod:`semshift.catalog.benchmarks`) are registered when that module is imported
(by the benchmark or the layout registry's first lookup: :func:`import_benchmarks`), with the
layouts they read. The names below are imported on first use.

>>> from semshift.catalog import imagenet_ood_images, list_hash
>>> imagenet_ood_images()[0].split("/")[0], list_hash("imagenet-ood")
('n02925009', '17328484cb864cac')
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from semshift.lazy import lazy_names

if TYPE_CHECKING:
    from semshift.catalog.benchmarks import (
        BENCHMARKS,
        Benchmark,
        BenchmarkSet,
        CheckResult,
        benchmark_config,
        benchmark_record,
        check_benchmark,
        get_benchmark,
        list_benchmarks,
        register_benchmark,
    )
    from semshift.catalog.lists import (
        PREFIX,
        PUBLISHED,
        PublishedList,
        imagenet_ood_images,
        isood_cells,
        isood_imagenet1k,
        list_hash,
        list_published,
        openimage_o_images,
        published_info,
        published_split,
        read_tar_members,
        resolve_manifest,
        ssb_imagenet21k_val_files,
    )

_BENCHMARK_NAMES = (
    "BENCHMARKS", "Benchmark", "BenchmarkSet", "CheckResult", "benchmark_config",
    "benchmark_record", "check_benchmark", "get_benchmark", "list_benchmarks",
    "register_benchmark",
)  # fmt: skip
_LIST_NAMES = (
    "PREFIX", "PUBLISHED", "PublishedList", "imagenet_ood_images", "isood_cells",
    "isood_imagenet1k", "list_hash", "list_published", "openimage_o_images", "published_info",
    "published_split", "read_tar_members", "resolve_manifest", "ssb_imagenet21k_val_files",
)  # fmt: skip
#: public name -> the module that defines it, imported on first use: the published lists
#: alone (``semshift splits compare published:...``) import neither NumPy nor the layouts
_LAZY = {
    **{n: "semshift.catalog.benchmarks" for n in _BENCHMARK_NAMES},
    **{n: "semshift.catalog.lists" for n in _LIST_NAMES},
}


def import_benchmarks() -> None:
    """Import the shipped benchmarks (registering them, and the layouts they read)."""
    importlib.import_module("semshift.catalog.benchmarks").register_layouts()


__getattr__, __dir__ = lazy_names(__name__, _LAZY)

__all__ = [
    "BENCHMARKS",
    "PREFIX",
    "PUBLISHED",
    "Benchmark",
    "BenchmarkSet",
    "CheckResult",
    "PublishedList",
    "benchmark_config",
    "benchmark_record",
    "check_benchmark",
    "get_benchmark",
    "imagenet_ood_images",
    "import_benchmarks",
    "isood_cells",
    "isood_imagenet1k",
    "list_benchmarks",
    "list_hash",
    "list_published",
    "openimage_o_images",
    "published_info",
    "published_split",
    "read_tar_members",
    "register_benchmark",
    "resolve_manifest",
    "ssb_imagenet21k_val_files",
]
