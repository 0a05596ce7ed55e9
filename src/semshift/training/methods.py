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
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from numbers import Integral, Real
from typing import Any, ClassVar, TypeVar

import torch
from torch import Tensor, nn

from semshift.errors import InputError, unknown_name
from semshift.features.models import ModelAdapter
from semshift.params import Constraint, Interval
from semshift.registry import Registry
from semshift.training.distributed import (
    BATCHNORMS,
    average_gradients,
    convert_batchnorm,
    global_count,
    global_mean,
    shard_slice,
)
from semshift.training.gan import Discriminator32, Generator32

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


@register_method
class CrossEntropy(TrainingMethod):
    """Cross-entropy with label smoothing: the closed-set baseline of the SSB recipe.

    ``L = -sum_c q_c log softmax(z)_c`` with ``q = (1 - eps) onehot(y) + eps / C``.

    Parameters
    ----------
    label_smoothing : float
        ``eps`` in [0, 1). Default 0.3, the value Vaze et al. (2022) use for the fine-grained
        SSB datasets; the optimiser, schedule and augmentation of their recipe are the loop's
        (:class:`semshift.training.recipe.Recipe`).

    References
    ----------
    .. [1] Vaze, Han, Vedaldi, Zisserman. "Open-Set Recognition: a Good Closed-Set Classifier
       is All You Need?" ICLR 2022.
    .. [2] Szegedy et al. "Rethinking the Inception Architecture for Computer Vision." CVPR 2016.
    """

    name = "ce"
    _parameter_constraints: ClassVar[dict[str, list[Constraint | None]]] = {
        "label_smoothing": [Interval(Real, 0, 1, closed="left")],
    }

    def __init__(self, label_smoothing: float = 0.3) -> None:
        super().__init__()
        self.label_smoothing = label_smoothing

    def loss(
        self, logits: Tensor, features: Tensor, labels: Tensor, outlier_logits: Tensor | None
    ) -> Tensor:
        return nn.functional.cross_entropy(
            logits.float(), labels, label_smoothing=float(self.label_smoothing)
        )


@register_method
class LogitNorm(TrainingMethod):
    """Logit normalisation: cross-entropy of ``z / (tau ||z||)``.

    ``L = CE(z / (tau (||z||_2 + 1e-7)), y)``; the norm constraint stops the logits from
    growing to make the loss small, so confidence stays informative on unseen classes. Only
    training changes: the model's logits are used unnormalised at test time.

    Parameters
    ----------
    temperature : float
        ``tau`` > 0; default 0.04, the paper's value for CIFAR-10 (and OpenOOD v1.5's).

    References
    ----------
    .. [1] Wei, Xie, Cheng, Feng, An, Li. "Mitigating Neural Network Overconfidence with Logit
       Normalization." ICML 2022.
    """

    name = "logitnorm"
    _parameter_constraints: ClassVar[dict[str, list[Constraint | None]]] = {
        "temperature": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(self, temperature: float = 0.04) -> None:
        super().__init__()
        self.temperature = temperature

    def loss(
        self, logits: Tensor, features: Tensor, labels: Tensor, outlier_logits: Tensor | None
    ) -> Tensor:
        z = logits.float()
        norms = torch.linalg.vector_norm(z, dim=1, keepdim=True) + 1e-7
        return nn.functional.cross_entropy(z / (norms * float(self.temperature)), labels)


@register_method
class OutlierExposure(TrainingMethod):
    """Outlier Exposure: cross-entropy on the ID batch plus uniform targets on outliers.

    ``L = CE(z, y) + lambda * mean_outliers(logsumexp(z_o) - mean_c z_o,c)``, the second term
    being the cross-entropy from the outlier's softmax to the uniform distribution. Each step
    draws a batch of auxiliary outlier images (classes disjoint from every test set; the loop
    checks it against the split manifests).

    Parameters
    ----------
    weight : float
        ``lambda`` >= 0; default 0.5, the paper's value for vision (and OpenOOD v1.5's).
    outlier_batch_ratio : float
        Outlier images per ID image of a batch; default 2, OpenOOD v1.5's (batch 128 ID, 256
        outliers). The paper's fine-tuning used the same ratio.

    References
    ----------
    .. [1] Hendrycks, Mazeika, Dietterich. "Deep Anomaly Detection with Outlier Exposure."
       ICLR 2019.
    """

    name = "oe"
    uses_outliers = True
    _parameter_constraints: ClassVar[dict[str, list[Constraint | None]]] = {
        "weight": [Interval(Real, 0, None, closed="left")],
        "outlier_batch_ratio": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(self, weight: float = 0.5, outlier_batch_ratio: float = 2.0) -> None:
        super().__init__()
        self.weight = weight
        self.outlier_batch_ratio = outlier_batch_ratio

    def loss(
        self, logits: Tensor, features: Tensor, labels: Tensor, outlier_logits: Tensor | None
    ) -> Tensor:
        if outlier_logits is None:
            raise InputError("training method oe needs an outlier batch at every step")
        ce = nn.functional.cross_entropy(logits.float(), labels)
        return ce + float(self.weight) * _uniform_cross_entropy(outlier_logits.float())


@register_method
class ARPL(TrainingMethod):
    """Adversarial Reciprocal Points Learning: distance logits to one reciprocal point per class.

    With features h (n, D) and reciprocal points P (C, D), the logits are
    ``z_k = ||h - P_k||^2 / D - h . P_k`` (far from class k's reciprocal point = class k), and
    the loss is ``CE(z / T, y) + lambda * mean(max(0, ||h - P_y||^2 / D - R + 1))``, the margin
    term keeping each sample's distance to its own reciprocal point near a learnable radius R
    (the reference code's ``MarginRankingLoss(margin=1)``), which bounds the open space.

    :meth:`export` writes the distance logits into the model's linear head: since
    ``z_k = ||h||^2 / D + h . (-(1 + 2/D) P_k) + ||P_k||^2 / D``, the head ``W_k = -(1 + 2/D)
    P_k``, ``b_k = ||P_k||^2 / D`` gives ``z - ||h||^2 / D``; the same softmax and prediction,
    and the ``arpl`` detector adds the ``||h||^2 / D`` back to score ``max_k z_k``.

    Parameters
    ----------
    weight_pl : float
        ``lambda`` >= 0 of the margin term; default 0.1 (the reference code and OpenOOD v1.5).
    temperature : float
        ``T`` > 0; default 1.

    Notes
    -----
    Departures: one reciprocal point per class (the reference code's default
    ``num_centers=1``); the points are initialised as ``0.1 * N(0, 1)`` from the run's seeded
    generator, as in the reference code. The confusing-sample generator of ARPL+CS is not part
    of this method.

    References
    ----------
    .. [1] Chen, Peng, Wang, Tian. "Adversarial Reciprocal Points Learning for Open Set
       Recognition." IEEE TPAMI 2021.
    """

    name = "arpl"
    _parameter_constraints: ClassVar[dict[str, list[Constraint | None]]] = {
        "weight_pl": [Interval(Real, 0, None, closed="left")],
        "temperature": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(self, weight_pl: float = 0.1, temperature: float = 1.0) -> None:
        super().__init__()
        self.weight_pl = weight_pl
        self.temperature = temperature

    def setup(self, num_classes: int, feature_dim: int) -> None:
        self.points = nn.Parameter(0.1 * torch.randn(num_classes, feature_dim))
        self.radius = nn.Parameter(torch.zeros(1))

    @staticmethod
    def distance_logits(h: Tensor, points: Tensor) -> Tensor:
        """``||h - P_k||^2 / D - h . P_k`` (n, C) of features h (n, D) and points P (C, D)."""
        dot = h @ points.T
        sq = (h * h).sum(1, keepdim=True) - 2 * dot + (points * points).sum(1)[None, :]
        return sq / h.shape[1] - dot

    def forward(self, adapter: ModelAdapter, x: Tensor) -> tuple[Tensor, Tensor]:
        h = adapter.features(x).float()
        return self.distance_logits(h, self.points.float()), h

    def loss(
        self, logits: Tensor, features: Tensor, labels: Tensor, outlier_logits: Tensor | None
    ) -> Tensor:
        ce = nn.functional.cross_entropy(logits / float(self.temperature), labels)
        own = (features - self.points[labels]).pow(2).mean(1)
        margin = torch.clamp(own - self.radius + 1.0, min=0).mean()
        return ce + float(self.weight_pl) * margin

    @torch.no_grad()
    def export(self, adapter: ModelAdapter) -> None:
        lin = adapter.head_module()
        if lin.bias is None:
            raise InputError(f"training method arpl: the head of {adapter.name} has no bias")
        p = self.points.detach().to(lin.weight)
        d = p.shape[1]
        lin.weight.copy_(-(1.0 + 2.0 / d) * p)
        lin.bias.copy_((p * p).sum(1) / d)


@contextmanager
def _running_stats_kept(module: nn.Module) -> Iterator[None]:
    """Train-mode BatchNorm that normalises with the batch's statistics but keeps the running
    ones (momentum 0 for the duration; the batch counters are restored afterwards). The
    global-batch layers of a data-parallel run included."""
    bns: list[Any] = [m for m in module.modules() if isinstance(m, BATCHNORMS)]
    saved = [(m.momentum, None if m.num_batches_tracked is None else m.num_batches_tracked.clone())
             for m in bns]  # fmt: skip
    try:
        for m in bns:
            m.momentum = 0.0
        yield
    finally:
        for m, (momentum, count) in zip(bns, saved, strict=True):
            m.momentum = momentum
            if count is not None and m.num_batches_tracked is not None:
                m.num_batches_tracked.copy_(count)


@register_method
class ARPLConfusingSamples(ARPL):
    """ARPL+CS: ARPL with confusing samples from a small GAN trained alongside the classifier.

    Each step, with images x (n), noise z ~ N(0, 1) (n, nz, 1, 1) and G, D a DCGAN generator
    and discriminator (:mod:`semshift.training.gan`):

    1. D takes an Adam step on ``BCE(D(x), 1) + BCE(D(G(z)), 0)``;
    2. G takes an Adam step on ``BCE(D(G(z)), 1) + beta * S(h(G(z)))``;
    3. the classifier and the reciprocal points take the loop's step on
       ``ARPL(x, y) + beta * S(h(G(z')))`` with fresh noise z',

    where h is the classifier's feature and the confusion ``S(h) = exp(mean_i sum_k p_ik log
    p_ik)``, ``p_i = softmax_k(||h_i - P_k||^2 / D)``, is smallest (1 / C) when a sample is
    equally far from every reciprocal point: the generator learns to make samples near the
    known classes' boundary that the classifier is taught not to claim.

    Data parallelism (:mod:`.distributed`): every process draws the noise of the whole global
    batch and generates its slice; G's and D's BatchNorm layers normalise over the global
    batch; the BCE means and the mean inside ``S`` are global-batch means
    (:meth:`~TrainingMethod.batch_mean`); G's and D's gradients are averaged over the processes
    before their Adam steps (they are not in DistributedDataParallel, whose one backward per
    forward does not fit three updates per step). The updates, the random state and the
    checkpoint are then those of one process, within floating-point tolerance.

    Parameters
    ----------
    weight_pl, temperature : float
        As :class:`ARPL` (0.1, 1).
    beta : float
        ``beta`` >= 0, weight of the confusion term in both G's and the classifier's loss;
        default 0.1 (OpenOOD v1.5's ``loss.beta``, the reference code's).
    gan_lr : float
        Adam learning rate of G and D (betas 0.5, 0.999); default 0.0002 (OpenOOD v1.5).
    nz : int
        Noise dimension; default 100.
    ngf, ndf : int
        Width units of G and D; default 64 (OpenOOD v1.5's ``arpl_gan`` network). They cost
        about ``2e4 * ngf^2`` and ``2e4 * ndf^2`` multiply-adds per image (70 M each at 64):
        small beside a ResNet, not beside the 4 M of the demo's GlyphNet, whose runs use 8.

    Notes
    -----
    Departures from the reference code (OpenOOD v1.5 ``ARPLGANTrainer``):

    - The reference classifier has two BatchNorm sets (ResNet-ABN), one for real and one for
      generated images. Here the model is a plain registry model: generated images pass the
      same BatchNorm layers, normalised with their own batch statistics (as the second set
      would be in training) but without updating the running statistics, so the exported model
      is the model plain ARPL gives; the BatchNorm scales and shifts are shared.
    - G's step computes only G's gradients and the classifier's step does not backpropagate
      into G (the reference accumulates gradients there that the next step discards): the same
      updates, less work.
    - The classifier, the points and the radius follow the loop's recipe (SGD, cosine
      schedule), not OpenOOD's Nesterov SGD with a per-step cosine; G and D use the reference's
      Adam. Generated 32 x 32 images are resized (bilinear) to a larger model input.
    - The noise is drawn from the run's seeded CPU generator, so a run is reproducible and
      resumable.

    The trained model exports like :class:`ARPL` (points in the head; score with the ``arpl``
    detector); G and D are kept in the checkpoint, not in ``model.safetensors``.

    References
    ----------
    .. [1] Chen, Peng, Wang, Tian. "Adversarial Reciprocal Points Learning for Open Set
       Recognition." IEEE TPAMI 2021.
    .. [2] Radford, Metz, Chintala. "Unsupervised Representation Learning with Deep
       Convolutional Generative Adversarial Networks." ICLR 2016.
    """

    name = "arpl_cs"
    _parameter_constraints: ClassVar[dict[str, list[Constraint | None]]] = {
        "weight_pl": [Interval(Real, 0, None, closed="left")],
        "temperature": [Interval(Real, 0, None, closed="neither")],
        "beta": [Interval(Real, 0, None, closed="left")],
        "gan_lr": [Interval(Real, 0, None, closed="neither")],
        "nz": [Interval(Integral, 1, None, closed="left")],
        "ngf": [Interval(Integral, 1, None, closed="left")],
        "ndf": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(
        self,
        weight_pl: float = 0.1,
        temperature: float = 1.0,
        beta: float = 0.1,
        gan_lr: float = 0.0002,
        nz: int = 100,
        ngf: int = 64,
        ndf: int = 64,
    ) -> None:
        super().__init__(weight_pl=weight_pl, temperature=temperature)
        self.beta, self.gan_lr = beta, gan_lr
        self.nz, self.ngf, self.ndf = nz, ngf, ndf

    def setup(self, num_classes: int, feature_dim: int) -> None:
        super().setup(num_classes, feature_dim)
        self.generator = Generator32(int(self.nz), int(self.ngf))
        self.discriminator = Discriminator32(3, int(self.ndf))
        betas = (0.5, 0.999)
        self._opts = {
            "generator": torch.optim.Adam(self.generator.parameters(), self.gan_lr, betas=betas),
            "discriminator": torch.optim.Adam(
                self.discriminator.parameters(), self.gan_lr, betas=betas
            ),
        }

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return dict(self._opts)

    @staticmethod
    def neg_entropy(h: Tensor, points: Tensor) -> Tensor:
        """``sum_k p_ik log p_ik`` (n,), ``p_i = softmax(||h_i - P_k||^2 / D)``, of features h
        (n, D) and points P (C, D): minus the entropy of each sample's distance softmax."""
        d2 = (h[:, None, :] - points[None, :, :]).pow(2).mean(2)
        logp = torch.log_softmax(d2, dim=1)
        return (logp.exp() * logp).sum(1)

    @classmethod
    def confusion(cls, h: Tensor, points: Tensor) -> Tensor:
        """``exp(mean_i sum_k p_ik log p_ik)``, ``p_i = softmax(||h_i - P_k||^2 / D)``.

        In ``[1 / C, 1]``; ``1 / C`` when each sample is equally far from all C points.
        """
        return cls.neg_entropy(h, points).mean().exp()

    def _confusion(self, h: Tensor) -> Tensor:
        """:meth:`confusion` with the mean over the global batch."""
        return self.batch_mean(self.neg_entropy(h, self.points.float())).exp()

    def _noise(self, n: int, like: Tensor) -> Tensor:
        """Noise (n, nz, 1, 1) for this process's n images: the whole global batch's is drawn
        (the same random state in every process) and this process's slice kept."""
        if self._group is None:
            return torch.randn(n, int(self.nz), 1, 1).to(like.device)
        dist = torch.distributed
        n_all = global_count(n, self._group, like.device)
        rows = shard_slice(n_all, dist.get_rank(self._group), dist.get_world_size(self._group))
        if rows.stop - rows.start != n:
            raise RuntimeError(f"a slice of {n} images is not this process's share of {n_all}")
        return torch.randn(n_all, int(self.nz), 1, 1)[rows].to(like.device)

    def _step_own(self, name: str, loss: Tensor, part: nn.Module) -> None:
        """Backpropagate ``loss`` into ``part`` only and take ``part``'s own Adam step."""
        opt = self._opts[name]
        opt.zero_grad(set_to_none=True)
        params = list(part.parameters())
        loss.backward(inputs=params)
        if self._group is not None:
            average_gradients(params, self._group)
        opt.step()

    def _fake_features(self, adapter: ModelAdapter, fake: Tensor, size: tuple[int, int]) -> Tensor:
        if tuple(fake.shape[-2:]) != size:
            fake = nn.functional.interpolate(fake, size=size, mode="bilinear", align_corners=False)
        with _running_stats_kept(adapter.module):
            return adapter.features(fake).float()

    def batch_loss(
        self, adapter: ModelAdapter, x: Tensor, labels: Tensor, outliers: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        n, size = len(x), (int(x.shape[-2]), int(x.shape[-1]))
        g, d = self.generator, self.discriminator
        ones, zeros = torch.ones(n, device=x.device), torch.zeros(n, device=x.device)

        def bce(logits: Tensor, target: Tensor) -> Tensor:
            each = nn.functional.binary_cross_entropy_with_logits(logits, target, reduction="none")
            return self.batch_mean(each)

        with torch.autocast(x.device.type, enabled=False):
            fake = g(self._noise(n, x))
            # (1) the discriminator: real vs generated
            real_in = x.float()
            if tuple(real_in.shape[-2:]) != (32, 32):
                real_in = nn.functional.interpolate(real_in, size=(32, 32), mode="bilinear")
            err_d = bce(d(real_in), ones) + bce(d(fake.detach()), zeros)
            self._step_own("discriminator", err_d, d)
            # (2) the generator: fool D, and confuse the classifier
            err_g = bce(d(fake), ones)
            err_g = err_g + float(self.beta) * self._confusion(
                self._fake_features(adapter, fake, size)
            )
            self._step_own("generator", err_g, g)
            with torch.no_grad():
                fake2 = g(self._noise(n, x))
        # (3) the classifier: ARPL on x, confusion on fresh generated samples (a global-batch
        # mean inside S; the loop's share scaling keeps the averaged gradient that of the
        # global batch's loss, since the all-reduce's backward sums the processes' shares)
        logits, feats = self(adapter, x)
        loss = self.loss(logits, feats, labels, None)
        cs = self._confusion(self._fake_features(adapter, fake2, size))
        return loss + float(self.beta) * cs, logits
