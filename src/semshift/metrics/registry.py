"""The one metric registry: name -> function, direction and required inputs.

Reports, the CLI and the contract tests are generated from it. Entries are added where each
metric is defined, with the :func:`register_metric` decorator.

Input vocabulary (the ``inputs`` tuple of a :class:`MetricSpec`, in call order):

``scores``
    float array (n,), higher = more in-distribution.
``is_ood``
    bool array (n,), True = OOD / unknown / negative.
``correct``
    bool array (n,), True = known sample classified correctly (False for every OOD sample).
``error``
    bool array (n,), True = the sample counts as an error (misclassified ID or OOD).
``pred``, ``labels``
    int arrays (n,) of predicted and true class ids.
``confusion``
    int array (C, C), rows = target class, columns = predicted class.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

from semshift.registry import Registry

__all__ = ["INPUT_NAMES", "METRICS", "MetricSpec", "get_metric", "list_metrics", "register_metric"]

INPUT_NAMES = ("scores", "is_ood", "correct", "error", "pred", "labels", "confusion")

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class MetricSpec:
    """A registered scalar metric.

    Attributes
    ----------
    name : str
        Registry name (what reports print and the CLI accepts).
    function : callable
        The pure NumPy function; called as ``function(*arrays, **kwargs)``.
    higher_is_better : bool
        Direction of the metric.
    inputs : tuple of str
        Positional inputs, in order, from the module's input vocabulary.
    description : str
        One line for reports and ``--help``; states conventions (e.g. the FPR convention).
    kwargs : mapping
        Fixed keyword arguments bound to ``function`` (e.g. ``convention="ood_recall"``).
    """

    name: str
    function: Callable[..., float]
    higher_is_better: bool
    inputs: tuple[str, ...]
    description: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __call__(self, *arrays: Any, **kwargs: Any) -> float:
        """Evaluate the metric: ``function(*arrays, **self.kwargs, **kwargs)``."""
        return float(self.function(*arrays, **{**self.kwargs, **kwargs}))


def _adopt(name: str, spec: Any) -> None:
    """Register the :class:`MetricSpec` a ``semshift.metrics`` entry point names."""
    if not isinstance(spec, MetricSpec):
        raise TypeError(f"entry point {name!r} names {spec!r}, not a MetricSpec")
    METRICS.add(spec.name, spec)


#: Every metric, by name; other packages add theirs through the ``semshift.metrics`` entry-point
#: group (a module applying :func:`register_metric`, or a :class:`MetricSpec`).
METRICS: Registry[MetricSpec] = Registry("metric", entry_points="semshift.metrics", adopt=_adopt)


def register_metric(
    name: str,
    *,
    higher_is_better: bool,
    inputs: Sequence[str],
    description: str,
    **kwargs: Any,
) -> Callable[[F], F]:
    """Decorator registering ``function`` under ``name`` (stack it for several bindings).

    Parameters
    ----------
    name : str
        Unique registry name.
    higher_is_better : bool
        Direction of the metric.
    inputs : sequence of str
        Positional inputs from :data:`INPUT_NAMES`.
    description : str
        One-line description.
    **kwargs
        Keyword arguments bound to the function for this entry.

    Returns
    -------
    callable
        The decorator; it returns the function unchanged.
    """
    unknown = [i for i in inputs if i not in INPUT_NAMES]
    if unknown:
        raise ValueError(f"metric {name!r}: unknown input name(s) {unknown}; use {INPUT_NAMES}")

    def decorator(function: F) -> F:
        METRICS.add(name, MetricSpec(
            name=name,
            function=function,
            higher_is_better=higher_is_better,
            inputs=tuple(inputs),
            description=description,
            kwargs=MappingProxyType(dict(kwargs)),
        ))  # fmt: skip
        return function

    return decorator


def get_metric(name: str) -> MetricSpec:
    """Return the registered metric ``name``.

    Parameters
    ----------
    name : str
        Registry name, e.g. ``"auroc"`` or ``"fpr95"``.

    Returns
    -------
    MetricSpec

    Raises
    ------
    UnknownNameError
        If no metric has that name; the message lists close matches and every known name.

    Examples
    --------
    >>> from semshift.metrics import get_metric
    >>> spec = get_metric("auroc")
    >>> spec.higher_is_better, spec.inputs
    (True, ('scores', 'is_ood'))
    """
    return METRICS[name]


def list_metrics(inputs: Sequence[str] | None = None) -> list[str]:
    """Names of the registered metrics, sorted.

    Parameters
    ----------
    inputs : sequence of str, optional
        Keep only metrics whose inputs are exactly these (e.g. ``("scores", "is_ood")`` for
        the metrics :func:`semshift.metrics.evaluate_many` accepts).

    Returns
    -------
    list of str

    Examples
    --------
    >>> from semshift.metrics import list_metrics
    >>> "auroc" in list_metrics(inputs=("scores", "is_ood"))
    True
    """
    if inputs is None:
        return METRICS.names()
    want = tuple(inputs)
    return METRICS.names(where=lambda name, spec: spec.inputs == want)
