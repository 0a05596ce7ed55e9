"""A toy benchmark in one module: the toy layout's release, train split as ID train, test split
as ID test, and its ``ood.csv`` list as one OOD set (semantic level 1).

It names a list semshift ships (``published="ssb-cub"``) because a benchmark states where its
lists come from; a package's own benchmark would ship its lists the same way.
:func:`register` adds it (and the toy layout it reads).
"""

from __future__ import annotations

from semshift.catalog.benchmarks import BENCHMARKS, Benchmark, BenchmarkSet, register_benchmark
from tests.extensions import toy_layout

NAME = "toy-release"


def sets(**options: object) -> tuple[BenchmarkSet, ...]:
    layout, root = toy_layout.NAME, "release"
    return (
        BenchmarkSet("id_train", "id_train", root, layout, {"split": "train"}),
        BenchmarkSet("id_test", "id_test", root, layout, {"split": "test"}, images=4),
        BenchmarkSet("new", "ood", root, layout, {"split": "ood"}, images=2, split="new",
                     semantic_level=1),
    )  # fmt: skip


BENCHMARK = Benchmark(
    NAME, "toy: a release of two classes and two new ones", "ssb-cub", 2, {"osr": {}}, {}, sets,
    needs="release: classes.txt, train.csv, test.csv, ood.csv and images/",
)  # fmt: skip


def register() -> None:
    if toy_layout.NAME not in toy_layout.LAYOUTS:
        toy_layout.register()
    register_benchmark(BENCHMARK)


def unregister() -> None:
    BENCHMARKS.remove(NAME)
    if toy_layout.NAME in toy_layout.LAYOUTS:
        toy_layout.unregister()
