"""The seed papers' published benchmark lists, shipped with semshift and read offline.

SSB class splits (ImageNet winter21 and fall11, CUB, Stanford Cars, FGVC-Aircraft) as split
manifests, SSB's ImageNet-21K-P validation files, the ImageNet-OOD images and the IS-OOD image
lists; sources, commits and licenses in ``semshift/catalog/data/README.md``. The benchmarks
built from them (:mod:`semshift.catalog.benchmarks`) are registered when this package is
imported, with the layouts they read.

>>> from semshift.catalog import imagenet_ood_images, list_hash
>>> imagenet_ood_images()[0].split("/")[0], list_hash("imagenet-ood")
('n02925009', '17328484cb864cac')
"""

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
