"""Training methods behind one registry: the loss (and any trainable parts of its own) of each.

A method is a small ``nn.Module`` whose keyword hyperparameters carry the paper's defaults in
the signature and whose accepted values are declared beside them in
``_parameter_constraints`` (checked by :func:`check_method_params` before any work starts).
The training loop (:mod:`semshift.training.loop`) owns the model, the optimiser, the schedule,
the data and the device; the method only says how one batch becomes a loss:

- :meth:`TrainingMethod.setup` creates the method's own parameters (ARPL's reciprocal points)
  once the head size and feature dimension are known; they are optimised with the model's;
- :meth:`TrainingMethod.forward` gives ``(logits (n, C), features (n, D))`` of a batch;
- :meth:`TrainingMethod.loss` turns them (and the outlier batch's logits, for a method that
  declares ``uses_outliers``) into the scalar to minimise;
- :meth:`TrainingMethod.export` writes what the method learnt into the model's linear head, so
  the saved weights load as a plain model of the registry;
- :meth:`TrainingMethod.data_parallel` tells the method that it is one of several
  data-parallel processes (:mod:`.distributed`); a loss that is not a mean of per-sample terms
  takes its batch means with :meth:`TrainingMethod.batch_mean`, over the global batch.

>>> list_methods()
['arpl', 'arpl_cs', 'ce', 'logitnorm', 'oe']
>>> method_defaults("ce")
{'label_smoothing': 0.3}

One module per method (:mod:`.ce`, :mod:`.logitnorm`, :mod:`.oe`, :mod:`.arpl`,
:mod:`.arpl_cs`) on the contract and registry of :mod:`._base`; every name is importable from
``semshift.training.methods``.
"""

from __future__ import annotations

from ._base import (  # noqa: F401
    METHODS,
    M,
    TrainingMethod,
    _adopt,
    _method_class,
    _uniform_cross_entropy,
    check_method_params,
    get_method,
    list_methods,
    method_defaults,
    register_method,
)
from .arpl import (  # noqa: F401
    ARPL,
    _running_stats_kept,
)
from .arpl_cs import (
    ARPLConfusingSamples,
)
from .ce import (
    CrossEntropy,
)
from .logitnorm import (
    LogitNorm,
)
from .oe import (
    OutlierExposure,
)

__all__ = [
    "ARPL",
    "METHODS",
    "ARPLConfusingSamples",
    "CrossEntropy",
    "LogitNorm",
    "OutlierExposure",
    "TrainingMethod",
    "check_method_params",
    "get_method",
    "list_methods",
    "method_defaults",
    "register_method",
]
