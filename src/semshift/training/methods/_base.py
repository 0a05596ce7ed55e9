"""The contract of a training method (:class:`TrainingMethod`) and the registry
(:data:`METHODS`, :func:`register_method`, ``semshift.training_methods`` entry points)."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

import torch
from torch import Tensor, nn

from semshift.errors import InputError, unknown_name
from semshift.features.models import ModelAdapter
from semshift.params import Constraint
from semshift.registry import Registry
from semshift.training.distributed import (
    convert_batchnorm,
    global_mean,
)


class TrainingMethod(nn.Module):
    """Base class of every registered training method.

    Subclasses set ``name``, take their hyperparameters as explicit keyword arguments (stored
    unchanged as attributes of the same name), declare the values each accepts in
    ``_parameter_constraints`` and implement :meth:`loss`.

    Attributes
    ----------
    name : str
        Registry name.
    uses_outliers : bool
        Whether each step also needs a batch of auxiliary outlier images (Outlier Exposure).
    supports_ddp : bool
        Whether the method trains under data parallelism (:mod:`semshift.training.distributed`;
        every registered method does).
    _parameter_constraints : dict of str to list of Constraint or None
        Accepted values of each keyword hyperparameter (:mod:`semshift.detectors` constraints).
    """

    name: ClassVar[str] = ""
    uses_outliers: ClassVar[bool] = False
    supports_ddp: ClassVar[bool] = True
    _parameter_constraints: ClassVar[dict[str, list[Constraint | None]]] = {}
    #: the process group of a data-parallel run (:meth:`data_parallel`); None in one process
    _group: Any = None

    @classmethod
    def param_names(cls) -> list[str]:
        """The keyword hyperparameters of ``__init__``, in order."""
        sig = inspect.signature(cls.__init__)
        return [p for p in sig.parameters if p != "self"]

    def get_params(self) -> dict[str, Any]:
        """The hyperparameters as given (JSON-able)."""
        return {p: getattr(self, p) for p in self.param_names()}

    def setup(self, num_classes: int, feature_dim: int) -> None:
        """Create the method's own parameters for a head of ``num_classes`` over ``feature_dim``."""

    def forward(self, adapter: ModelAdapter, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(logits (n, C), features (n, D))`` of images ``x`` (n, 3, H, W)."""
        return adapter(x)

    def loss(
        self, logits: Tensor, features: Tensor, labels: Tensor, outlier_logits: Tensor | None
    ) -> Tensor:
        """The scalar loss of a batch (``outlier_logits`` only for ``uses_outliers``)."""
        raise NotImplementedError

    def batch_loss(
        self, adapter: ModelAdapter, x: Tensor, labels: Tensor, outliers: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        """``(loss, logits (n, C))`` of one training step on images ``x`` (n, 3, H, W).

        The default runs :meth:`forward` once (over ``x`` and the ``outliers`` together) and
        :meth:`loss`; a method with trainable parts of its own that take their own steps
        (ARPL+CS's generator and discriminator) overrides it.
        """
        if outliers is None:
            logits, feats = self(adapter, x)
            return self.loss(logits, feats, labels, None), logits
        both, feats = self(adapter, torch.cat([x, outliers]))
        logits, o_logits = both[: len(x)], both[len(x) :]
        return self.loss(logits, feats[: len(x)], labels, o_logits), logits

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """Optimisers the method steps itself (by name; checkpointed with the run)."""
        return {}

    def data_parallel(self, group: Any, device: torch.device) -> None:
        """Train as one process of a data-parallel run over ``group`` (called after :meth:`setup`).

        Every BatchNorm layer of the method's own parts then normalises over the global batch
        (:func:`~semshift.training.distributed.convert_batchnorm`; the state-dict keys do not
        change) and :meth:`batch_mean` reduces over ``group``. A method whose own optimisers
        step parts outside the model must average their gradients over ``group`` before each
        step (:func:`~semshift.training.distributed.average_gradients`).
        """
        self._group = group
        convert_batchnorm(self, device, group)

    def batch_mean(self, values: Tensor) -> Tensor:
        """The mean of ``values`` (n, ...) over the batch: this process's in one process, the
        global batch's (differentiable all-reduce, the same value in every process) in a
        data-parallel run. Per-sample means need it only inside a nonlinear term."""
        if self._group is None:
            return values.mean(0)
        return global_mean(values, self._group)

    @torch.no_grad()
    def export(self, adapter: ModelAdapter) -> None:
        """Write what the method learnt beyond the model into ``adapter``'s linear head."""


M = TypeVar("M", bound=type[TrainingMethod])


def _adopt(name: str, cls: Any) -> None:
    """Register the class a ``semshift.training_methods`` entry point names."""
    if not (isinstance(cls, type) and issubclass(cls, TrainingMethod)):
        raise TypeError(f"entry point {name!r} names {cls!r}, not a TrainingMethod subclass")
    register_method(cls)


#: Method name -> class (a :class:`semshift.registry.Registry`); other packages add methods
#: through the ``semshift.training_methods`` entry-point group.
METHODS: Registry[type[TrainingMethod]] = Registry(
    "training method", entry_points="semshift.training_methods", adopt=_adopt
)


def register_method(cls: M) -> M:
    """Class decorator adding a :class:`TrainingMethod` subclass to :data:`METHODS`.

    Raises
    ------
    InputError
        The name is empty.
    DuplicateNameError
        The name is already registered (an InputError, so also a ValueError).
    TypeError
        ``_parameter_constraints`` does not declare exactly the keyword hyperparameters.
    """
    METHODS.check_new(cls.name)
    params, declared = cls.param_names(), cls._parameter_constraints
    if sorted(params) != sorted(declared):
        raise TypeError(
            f"{cls.__name__}: _parameter_constraints must declare exactly {params}, "
            f"got {sorted(declared)}"
        )
    for p in params:
        if inspect.signature(cls.__init__).parameters[p].default is inspect.Parameter.empty:
            raise TypeError(f"{cls.__name__}: hyperparameter {p!r} needs a default")
    METHODS.add(cls.name, cls)
    return cls


def list_methods() -> list[str]:
    """The registered method names, sorted."""
    return METHODS.names()


def _method_class(name: str) -> type[TrainingMethod]:
    return METHODS[name]


def method_defaults(name: str) -> dict[str, Any]:
    """The default hyperparameters of method ``name`` (from its signature)."""
    sig = inspect.signature(_method_class(name).__init__)
    return {p: v.default for p, v in sig.parameters.items() if p != "self"}


def check_method_params(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The full hyperparameters of ``name`` (defaults, then ``params``), checked.

    Raises
    ------
    UnknownNameError
        Unknown method, or a hyperparameter the method does not take.
    InputError
        A value outside what the method accepts (one line: method, parameter, accepted values).
    """
    cls = _method_class(name)
    full = method_defaults(name)
    for key, value in params.items():
        if key not in full:
            raise unknown_name(f"hyperparameter of training method {name!r}", key, full)
        full[key] = value
    for key, value in full.items():
        accepted = cls._parameter_constraints[key]
        ok = any(value is None if c is None else c.is_satisfied_by(value) for c in accepted)
        if not ok:
            words = " or ".join("None" if c is None else str(c) for c in accepted)
            raise InputError(f"training method {name}: {key} must be {words}, got {value!r}")
    return full


def get_method(name: str, **params: Any) -> TrainingMethod:
    """A method by name, its hyperparameters checked (see :func:`check_method_params`)."""
    return _method_class(name)(**check_method_params(name, params))


def _uniform_cross_entropy(logits: Tensor) -> Tensor:
    """Mean cross-entropy from the uniform distribution: ``mean(logsumexp(z) - mean(z))``."""
    return (torch.logsumexp(logits, dim=1) - logits.mean(dim=1)).mean()
