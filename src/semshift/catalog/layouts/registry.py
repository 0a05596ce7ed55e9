"""The layout registry (:data:`LAYOUTS`, :func:`register_layout`, ``semshift.layouts`` entry
points) and :func:`open_layout`, which reads any registered layout, whole or sampled."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from semshift.errors import InputError
from semshift.features.data import ImageSource
from semshift.registry import Registry

from ._common import sample_positions
from .fine_grained import cub200, fgvc_aircraft, stanford_cars
from .imagenet import imagenet1k, imagenet21k
from .openimages import openimage_o
from .variants import imagenet_c, imagenet_o, imagenet_r, imagenet_sketch


def _adopt(name: str, reader: Any) -> None:
    """Register the reader a ``semshift.layouts`` entry point names, under that name."""
    if not callable(reader):
        raise TypeError(f"entry point {name!r} names {reader!r}, not a reader f(root, **params)")
    LAYOUTS.add(name, reader)


#: Layout name -> reader ``f(root, **params) -> ImageSource`` (a
#: :class:`semshift.registry.Registry`); other packages add readers through the
#: ``semshift.layouts`` entry-point group (a module applying :func:`register_layout`, or a reader).
def _load_benchmark_layouts() -> None:
    """Import the benchmarks, whose list selections are layouts too (``ssb_split``, ...)."""
    from semshift.catalog import import_benchmarks

    import_benchmarks()


LAYOUTS: Registry[Callable[..., ImageSource]] = Registry(
    "layout", entry_points="semshift.layouts", adopt=_adopt, loader=_load_benchmark_layouts
)


for _name, _reader in (
    ("imagenet1k", imagenet1k),
    ("imagenet21k", imagenet21k),
    ("cub200", cub200),
    ("fgvc_aircraft", fgvc_aircraft),
    ("stanford_cars", stanford_cars),
    ("imagenet_r", imagenet_r),
    ("imagenet_sketch", imagenet_sketch),
    ("imagenet_o", imagenet_o),
    ("imagenet_c", imagenet_c),
    ("openimage_o", openimage_o),
):
    LAYOUTS.add(_name, _reader)


def register_layout(
    name: str,
) -> Callable[[Callable[..., ImageSource]], Callable[..., ImageSource]]:
    """Decorator adding a reader ``f(root, **params) -> ImageSource`` under ``name``.

    Raises
    ------
    DuplicateNameError
        ``name`` is registered already (an InputError, so also a ValueError).
    """
    LAYOUTS.check_new(name)

    def deco(fn: Callable[..., ImageSource]) -> Callable[..., ImageSource]:
        LAYOUTS.add(name, fn)
        return fn

    return deco


def list_layouts() -> list[str]:
    """Names of the registered dataset layouts."""
    return LAYOUTS.names()


def layout_parameters(name: str) -> list[str]:
    """The parameters layout ``name`` accepts besides ``root`` (``sample`` is accepted by all)."""
    import inspect

    fn = LAYOUTS[name]
    accepted = [p for p in inspect.signature(fn).parameters if p != "root"]
    return accepted if "sample" in accepted else [*accepted, "sample"]


def check_sample(sample: object, where: str = "sample") -> int | None:
    """``sample`` as a positive int (or None); anything else raises a one-line ``InputError``."""
    if sample is None:
        return None
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 1:
        raise InputError(f"{where}={sample!r}: use a positive number of images per set")
    return sample


def open_layout(
    name: str, root: str | Path, *, sample: int | None = None, **params: Any
) -> ImageSource:
    """The images of a release read by the layout ``name`` from ``root``.

    ``sample`` keeps that many images, evenly spaced over the set's order
    (:func:`sample_positions`): a quick look, not the published set. Readers of fixed lists
    (those taking a ``sample`` parameter) select before reading, so only the sampled files need
    be present; the others read the whole set first.

    Raises
    ------
    UnknownNameError
        No layout has this name (close matches and every name are listed).
    InputError
        A parameter the reader does not take, or the reader's own one-line errors.
    """
    accepted = layout_parameters(name)
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise InputError(
            f"layout {name!r} takes no parameter {', '.join(unknown)}; accepted: "
            f"{', '.join(accepted)}"
        )
    import inspect

    n = check_sample(sample, f"layout {name!r}: sample")
    fn = LAYOUTS[name]
    if n is not None and "sample" in inspect.signature(fn).parameters:
        return fn(root, sample=n, **params)
    src = fn(root, **params)
    if n is None or n >= len(src):
        return src
    return src.take(sample_positions(len(src), n), kind=f"{src.kind}-sample{n}")
