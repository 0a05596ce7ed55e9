"""Running a benchmark: its run configuration (:func:`benchmark_config`), its record and
:func:`check_benchmark` (every listed image on disk)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semshift.catalog.layouts import (
    MissingImagesError,
    check_sample,
    open_layout,
)
from semshift.errors import InputError

from ._base import DEFAULT_DETECTORS
from .registry import get_benchmark
from .selections import _COMPLETE, _count_21k_list

if TYPE_CHECKING:
    from ._base import Benchmark, BenchmarkSet


def _roots(bench: Benchmark, roots: Mapping[str, str | Path]) -> dict[str, Path]:
    """The given roots, checked against what the benchmark reads."""
    need, extra = bench.roots, bench.optional_roots
    unknown = sorted(set(roots) - set(need) - set(extra))
    if unknown:
        raise InputError(
            f"benchmark {bench.name}: unknown root {unknown[0]!r}; it reads "
            f"{', '.join((*need, *extra))}"
        )
    lost = [k for k in need if k not in roots]
    if lost:
        raise InputError(f"benchmark {bench.name} needs --root {lost[0]}=PATH ({bench.needs})")
    out: dict[str, Path] = {}
    for key, value in roots.items():
        path = Path(value).expanduser()
        if not path.is_dir():
            raise InputError(f"benchmark {bench.name}: root {key}={path} is not a folder")
        out[key] = path.resolve()
    return out


def _used(
    bench: Benchmark, roots: Mapping[str, Path], options: Mapping[str, Any]
) -> list[BenchmarkSet]:
    return [s for s in bench.sets(**options) if s.root in roots]


def benchmark_record(
    name: str, conventions: str = "exact", sample: int | None = None
) -> dict[str, Any]:
    """What a run records of its benchmark: ``{name, list_hash, fpr_convention}``, and
    ``sample`` (images per set) when the run measured a sample, not the published sets."""
    bench = get_benchmark(name)
    if conventions not in ("exact", "openood"):
        raise InputError(f"conventions={conventions!r}: use exact or openood")
    out: dict[str, Any] = {
        "name": bench.name, "list_hash": bench.list_hash, "fpr_convention": conventions,
    }  # fmt: skip
    if check_sample(sample, "sample") is not None:
        out["sample"] = sample
    return out


def benchmark_config(
    name: str,
    *,
    roots: Mapping[str, str | Path],
    model: Mapping[str, Any],
    out: str | Path,
    detectors: Sequence[str | Mapping[str, Any]] = DEFAULT_DETECTORS,
    conventions: str = "exact",
    **options: Any,
) -> dict[str, Any]:
    """A ``semshift run`` configuration (a dict) running benchmark ``name``.

    Parameters
    ----------
    name : str
        A registered benchmark (:func:`list_benchmarks`).
    roots : mapping of root key to folder
        The releases on disk, by the keys the benchmark reads (``Benchmark.roots``, plus
        ``optional_roots`` when present); made absolute.
    model : mapping
        The config's ``model:`` section (``name``, ``weights``, ...); ``num_classes`` defaults
        to the benchmark's.
    out : path
        The run's output folder.
    detectors : sequence
        Detector names or ``{name, params}`` entries.
    conventions : {"exact", "openood"}
    **options
        The benchmark's options (``medium_as_hard``, ``train_per_class``, ``sample``, ...).

    Returns
    -------
    dict
        Its ``name`` records the benchmark, its list hash, the FPR convention and the sample
        size when sampled (:func:`benchmark_record` gives them as a mapping).
    """
    bench = get_benchmark(name)
    rec = benchmark_record(name, conventions, options.get("sample"))
    paths = _roots(bench, roots)
    data: dict[str, Any] = {"sets": {}}
    for s in _used(bench, paths, options):
        entry = s.source_config(paths[s.root])
        if s.role in ("id_train", "id_test"):
            data[s.role] = entry
        else:
            data["sets"][s.name] = entry
    m = dict(model)
    m.setdefault("num_classes", bench.num_classes)
    return {
        "name": f"{rec['name']} (lists {rec['list_hash']}, fpr {rec['fpr_convention']})"
        + (
            f" SAMPLE of {rec['sample']} images per set: not the published benchmark"
            if "sample" in rec
            else ""
        ),
        "output": str(Path(out).expanduser().resolve()),
        "model": m,
        "data": data,
        "detectors": [d if isinstance(d, str) else dict(d) for d in detectors],
        "protocols": {k: dict(v) for k, v in bench.protocols.items()},
        "conventions": conventions,
        "report": {"formats": ["html", "md"]},
    }


@dataclass(frozen=True)
class CheckResult:
    """What :func:`check_benchmark` found: images per set, in the benchmark's order."""

    name: str
    list_hash: str
    counts: dict[str, int] = field(default_factory=dict)
    expected: dict[str, int | None] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def check_benchmark(name: str, roots: Mapping[str, str | Path], **options: Any) -> CheckResult:
    """Verify that every image benchmark ``name`` lists is present under ``roots``.

    Each set is read by the layout its run would use (one ``os.scandir`` per folder, no
    ``stat`` per file), except the ImageNet-21K lists, whose files are verified against one
    scan per folder without building the image source the run builds; optional sets are
    checked when their root is given.

    Raises
    ------
    InputError
        A root missing, unknown or not a folder; or missing files: one line with the set, the
        number missing and the first few paths.
    """
    bench = get_benchmark(name)
    t0 = time.perf_counter()
    paths = _roots(bench, roots)
    counts: dict[str, int] = {}
    expected: dict[str, int | None] = {}
    for s in _used(bench, paths, options):
        try:
            if s.layout == "imagenet21k_list":
                n = _count_21k_list(paths[s.root], **s.params)
            else:
                n = len(open_layout(s.layout, paths[s.root], **s.params))
        except MissingImagesError as err:  # a benchmark reads every listed image
            raise InputError(f"benchmark {name}, set {s.name}: {err.fact}; {_COMPLETE}") from None
        except InputError as err:
            raise InputError(f"benchmark {name}, set {s.name}: {err}") from None
        counts[s.name] = n
        expected[s.name] = s.images
        if s.images is not None and n != s.images:
            raise InputError(
                f"benchmark {name}, set {s.name}: {n} images read, the list has {s.images}"
            )
    return CheckResult(name, bench.list_hash, counts, expected, time.perf_counter() - t0)
