"""The seed papers' benchmarks as recipes: which sets, read from which releases, by which lists.

One registry, :data:`BENCHMARKS`, declares each benchmark: its sets (name, role, size from the
shipped lists where they give one), the dataset roots it needs, the published list it is built
from (:func:`~semshift.catalog.lists.published_info`) and that list's
:func:`~semshift.catalog.lists.list_hash`. :func:`benchmark_config` turns a benchmark and the
user's roots into a ``semshift run`` configuration (a dict: this layer does not import the
runner); :func:`check_benchmark` verifies that every file the benchmark lists is on disk.

The configs name a layout and a list *name*, never the images: the selections the release
readers of :mod:`semshift.catalog.layouts` cannot express by parameters are registered here as
layouts (``ssb_split``, ``imagenet21k_list``, ``imagenet1k_subset``, ``imagenet1k_list``), so a
config written today re-runs with ``semshift run``.

>>> from semshift.catalog.benchmarks import get_benchmark, list_benchmarks
>>> list_benchmarks()[:3]
['imagenet-ood', 'isood-imagenet', 'ssb-aircraft']
>>> b = get_benchmark("ssb-imagenet")
>>> [(s.name, s.images) for s in b.sets() if s.role == "ood"]
[('easy', 50000), ('hard', 49000)]
>>> b.roots, b.list_hash
(('imagenet1k', 'imagenet21k'), '59aa5a7f0d817f1a')

The package's modules: :mod:`._base` (the types), :mod:`.selections` (layouts of list
selections), :mod:`.sets` (each benchmark's sets), :mod:`.registry` (the registry and the
shipped benchmarks) and :mod:`.run` (configs and checks). Every name is importable from
``semshift.catalog.benchmarks``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from semshift.lazy import lazy_names

from ._base import (  # noqa: F401
    _SHOW,
    DEFAULT_DETECTORS,
    Benchmark,
    BenchmarkSet,
    Role,
)
from .registry import (  # noqa: F401
    _IN_NEEDS,
    BENCHMARKS,
    _adopt,
    get_benchmark,
    list_benchmarks,
    register_benchmark,
)
from .sets import (  # noqa: F401
    _FINE_ROOT,
    _corruption_sets,
    _fine_sets,
    _imagenet_ood,
    _in1k_id,
    _isood,
    _ssb_imagenet,
)

if TYPE_CHECKING:
    from .run import (  # noqa: F401
        CheckResult,
        _roots,
        _used,
        benchmark_config,
        benchmark_record,
        check_benchmark,
    )
    from .selections import (  # noqa: F401
        _COMPLETE,
        _FINE,
        IMAGENET1K_VAL_IMAGES,
        _bin_classes,
        _count_21k_list,
        _in1k_listing,
        _list_items,
        _list_selection,
        _relabel,
        imagenet1k_list,
        imagenet1k_subset,
        imagenet21k_list,
        ssb_split,
    )

#: names of the modules that read images (NumPy, the layouts), imported on first use:
#: ``semshift benchmark list`` needs the registry and the sets alone. :func:`register_layouts`
#: imports them (the list selections are layouts: ``ssb_split``, ``imagenet21k_list``, ...).
_LAZY = {
    **dict.fromkeys(
        ("CheckResult", "_roots", "_used", "benchmark_config", "benchmark_record",
         "check_benchmark"),
        ".run",
    ),
    **dict.fromkeys(
        ("_COMPLETE", "_FINE", "IMAGENET1K_VAL_IMAGES", "_bin_classes", "_count_21k_list",
         "_in1k_listing", "_list_items", "_list_selection", "_relabel", "imagenet1k_list",
         "imagenet1k_subset", "imagenet21k_list", "ssb_split"),
        ".selections",
    ),
}  # fmt: skip


def register_layouts() -> None:
    """Register the benchmarks' list selections as layouts (import :mod:`.selections`)."""
    importlib.import_module(".selections", __name__)


__getattr__, __dir__ = lazy_names(__name__, _LAZY)

__all__ = [
    "BENCHMARKS",
    "Benchmark",
    "BenchmarkSet",
    "CheckResult",
    "benchmark_config",
    "benchmark_record",
    "check_benchmark",
    "get_benchmark",
    "list_benchmarks",
    "register_benchmark",
]
